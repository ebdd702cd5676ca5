"""A MOR table written in two commits (partitions sf+la; then an update, partition ny and a
new column ``tip``), Hive-synced after each, and the model of its snapshot: shared by the
Spark SQL tests of the project's source and of Apache Hudi's bundle."""

from __future__ import annotations

import pyarrow as pa

from streamer.catalog.sync import HiveSync
from streamer.config.target import HiveCatalogConfig
from streamer.fs import resolve
from streamer.table.identity import KeyGenType, TableConfig
from streamer.table.snapshot import TableSnapshot
from streamer.write.writer import HudiWriter

FIRST = [
    {"id": "a", "city": "sf", "ts": 1, "fare": 1.5},
    {"id": "b", "city": "la", "ts": 2, "fare": 2.5},
    {"id": "c", "city": "sf", "ts": 3, "fare": 3.5},
]
# an update of "a", a new partition, a new column
SECOND = [
    {"id": "a", "city": "sf", "ts": 4, "fare": 9.5, "tip": 1.0},
    {"id": "d", "city": "ny", "ts": 5, "fare": 4.5, "tip": 0.5},
]
SECOND_SCHEMA = pa.schema([("id", pa.string()), ("city", pa.string()), ("ts", pa.int64()),
                           ("fare", pa.float64()), ("tip", pa.float64())])


def model() -> dict[str, dict]:
    """The snapshot: the latest version of each key, ``tip`` null where never written."""
    rows = {r["id"]: {**r, "tip": None} for r in FIRST}
    rows.update({r["id"]: dict(r) for r in SECOND})
    return rows


def write_synced_table(path: str, uri: str, db: str) -> None:
    """Two commits (partitions sf+la, then ny and a column), synced after each."""
    fs, p = resolve(path)
    cfg = TableConfig(name="trips", record_key_fields=("id",), partition_fields=("city",), ordering_field="ts",
                      keygen=KeyGenType.parse("simple"))
    sync = HiveSync(HiveCatalogConfig(type="hive", uri=uri, database=db), "trips", path)
    first = pa.Table.from_pylist(FIRST)
    HudiWriter.create(p, cfg, schema=first.schema, fs=fs).upsert(first)
    sync.sync(TableSnapshot.load(fs, p))
    HudiWriter.open(p, fs=fs).upsert(pa.Table.from_pylist(SECOND, schema=SECOND_SCHEMA))
    result = sync.sync(TableSnapshot.load(fs, p))
    assert result.partitions_added == 3 and set(result.altered) == {"trips", "trips_ro", "trips_rt"}
