"""Meta columns in ``DELTA_BYTE_ARRAY`` read identically in Apache Hudi 0.15, 1.0 and hudi-rs.

Issue 13 writes ``_hoodie_commit_seqno`` and ``_hoodie_record_key`` of base files and
Parquet log blocks with Parquet's prefix/suffix encoding instead of dictionary/plain
(``streamer.table.base_file.parquet_bytes``): a 100k upsert writes ~1.1 MB less. Hudi's
readers (parquet-mr through Spark's vectorized and parquet-avro readers), hudi-rs
(arrow-rs) and ours must decode it, including values that span several data pages (long
keys: a page's prefix state restarts at its boundary, the case readers got wrong before).
Every column is compared, the two encoded ones included, and a data column of unique
values that ``plain_columns`` writes PLAIN where Arrow would have used a dictionary.

Issue 30 changed two more things these readers must take: log blocks carry no column
statistics, and a simple key generator's string partition field (``city`` here) is
written as its file group's one value, a one-entry dictionary.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from streamer.read import Table
from streamer.table.log_format import BlockType, read_log_file
from streamer.write import HudiWriter, TableConfig, WriteOptions
from tests.hudi_jvm.compare import Expected, Query, assert_readers_match
from tests.support.write_model import History

pytestmark = [pytest.mark.hudi_jvm, pytest.mark.conformance]

SCHEMA = pa.schema([("id", pa.string()), ("city", pa.string()), ("ts", pa.int64()), ("v", pa.float64())])
ENCODED = ("_hoodie_commit_seqno", "_hoodie_record_key")


def _rows(ids: list[str], ts: int, rng: np.random.Generator) -> pa.Table:
    return pa.table({"id": ids, "city": ["sf" if i % 2 else "nyc" for i in range(len(ids))],
                     "ts": [ts] * len(ids), "v": rng.random(len(ids))}, schema=SCHEMA)


def _encodings(md: pq.FileMetaData) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for rg in range(md.num_row_groups):
        for c in range(md.num_columns):
            col = md.row_group(rg).column(c)
            out.setdefault(col.path_in_schema, set()).update(col.encodings)
    return out


def test_delta_encoded_meta_columns_read_identically(tmp_path, hudi_sessions):
    rng = np.random.default_rng(13)
    path = str(tmp_path / "t")
    # ~150-byte keys sharing a prefix and a 96-byte random suffix: each partition's encoded
    # key column (~2 MB of suffixes) is larger than pyarrow's 1 MB data page, so it spans pages
    keys = [f"customer/{'x' * 40}/{i:08d}-{rng.bytes(48).hex()}" for i in range(40_000)]
    w = HudiWriter.create(path, TableConfig("enc", ("id",), ("city",), "ts"), schema=SCHEMA,
                          options=WriteOptions(engine="local"))
    model = History()
    first = _rows(keys, 1, rng)
    model.upsert(w.bulk_insert(first).instant, first)
    second = _rows(keys[::3] + [f"new-{i:05d}" for i in range(500)], 2, rng)
    model.upsert(w.upsert(second).instant, second)  # updates + inserts: log blocks

    t = Table.open(path)
    slices = t.fsview.latest_merged_slices()
    base = pq.read_metadata(slices[0].base_file.path)
    blocks = [b for s in slices for lf in s.log_files for b in read_log_file(t.fs, lf.path, lazy=False)
              if b.block_type == BlockType.PARQUET_DATA]
    assert blocks, "precondition: the upsert wrote Parquet log blocks"
    for md in (base, blocks[0]._parquet_file().metadata):
        enc = _encodings(md)
        assert all("DELTA_BYTE_ARRAY" in enc[c] for c in ENCODED), enc
        # a column of unique doubles is written PLAIN, a repeating one with a dictionary
        # (``plain_columns``, parquet-mr's rule): the readers below decode both
        assert "RLE_DICTIONARY" not in enc["v"] and "PLAIN" in enc["v"], enc
        assert "RLE_DICTIONARY" in enc["city"], enc
    block_md = blocks[0]._parquet_file().metadata
    assert not any(block_md.row_group(0).column(c).is_stats_set for c in range(block_md.num_columns))
    city = base.schema.names.index("city")
    assert base.row_group(0).column(city).is_stats_set, "base files keep their statistics"
    key_col = base.schema.names.index("_hoodie_record_key")
    encoded = sum(base.row_group(rg).column(key_col).total_uncompressed_size for rg in range(base.num_row_groups))
    assert encoded > 1024 * 1024 * 1.2, "precondition: the keys span data pages"

    assert_readers_match(path, hudi_sessions, Expected.of(model), [Query("snapshot"), Query("read_optimized")])
