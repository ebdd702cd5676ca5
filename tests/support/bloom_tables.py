"""A table with base files and indexed log blocks, and the file group of every key.

Built for the bloom index tests: a bulk insert into two partitions, then upserts whose
inserts go to log blocks (Parquet blocks with per-block and cumulative footers) and
whose updates hit the base files. Id ranges are disjoint per batch, so file groups and
blocks have narrow key ranges.
"""

from __future__ import annotations

import pyarrow as pa

from streamer.read.table import Table
from streamer.write import HudiWriter, TableConfig, WriteOptions

OPTS = WriteOptions(small_file_limit=60_000, max_file_size=80_000, default_record_size=300,
                    slice_bloom_num_entries=1_000, engine="local")


def rows(ids, city, ts) -> pa.Table:
    return pa.table({"id": ids, "city": [city] * len(ids), "ts": [ts] * len(ids),
                     "v": [f"v{ts}-{i}" for i in ids]})


def file_group_truth(path: str) -> dict[tuple[str, str], str]:
    """``{(partition path, record key): file id}`` as our reader sees the table."""
    t = Table.open(path).read(columns=["_hoodie_record_key", "_hoodie_partition_path", "_hoodie_file_name"])
    out = {}
    for r in t.to_pylist():
        fid = r["_hoodie_file_name"].split("_")[0]
        out[(r["_hoodie_partition_path"], r["_hoodie_record_key"])] = fid
    return out


def build_indexed_table(tmp_path) -> str:
    """Writes the table under ``tmp_path / "t"`` and returns its path."""
    path = str(tmp_path / "t")
    w = HudiWriter.create(path, TableConfig("idx", ("id",), ("city",), "ts"), options=OPTS)
    # disjoint id ranges per batch so file groups and blocks have narrow key ranges
    w.bulk_insert(pa.concat_tables([rows(list(range(1000, 1400)), "sf", 1),
                                    rows(list(range(5000, 5400)), "nyc", 1)]))
    for ts, lo in enumerate([2000, 3000, 4000], start=2):
        w.upsert(pa.concat_tables([rows(list(range(lo, lo + 60)), "sf", ts),  # inserts → logs
                                   rows(list(range(1000 + ts, 1400, 37)), "sf", ts)]))  # updates
    return path
