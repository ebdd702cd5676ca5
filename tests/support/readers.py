"""Tables as another engine reads them, for tests that check a reader other than ours."""

from __future__ import annotations

import pyarrow as pa


def hudi_rs_table(path: str, *, read_optimized: bool = False) -> pa.Table | None:
    """hudi-rs's snapshot read (or read-optimized: base files only) of the table at ``path``;
    None when it returns no batch (hudi-rs returns no schema for a table without rows)."""
    import hudi

    table = hudi.HudiTableBuilder.from_base_uri(path).build()
    if read_optimized:
        batches = table.read(hudi.HudiReadOptions().with_hudi_option("hoodie.read.use.read_optimized.mode", "true"))
    else:
        batches = table.read()
    return pa.Table.from_batches(batches) if batches else None
