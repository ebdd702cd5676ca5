"""What a Hudi user passes to continue a table our pipeline wrote.

The table's own properties supply keys, partitioning, key generator and precombine field;
these are the write options on top (``tests/hudi_jvm``). ``V6`` makes Hudi 1.0 write
table version 6 without upgrading.
"""

from __future__ import annotations

HUDI_WRITE = {
    "hoodie.table.name": "svc",
    "hoodie.datasource.write.table.type": "MERGE_ON_READ",
    "hoodie.datasource.write.recordkey.field": "id",
    "hoodie.datasource.write.partitionpath.field": "city",
    "hoodie.datasource.write.precombine.field": "ts",
    "hoodie.datasource.write.payload.class": "org.apache.hudi.common.model.DefaultHoodieRecordPayload",
    "hoodie.datasource.write.operation": "upsert",
}
V6 = {"hoodie.write.table.version": "6", "hoodie.write.auto.upgrade": "false"}
