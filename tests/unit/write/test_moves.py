"""A per-partition index (``bloom`` or ``bucket``) and a delete that carries no partition value (a
Debezium delete's ``before`` holds the primary key alone unless the table has ``REPLICA
IDENTITY FULL``): it goes to every partition that holds its key, instead of deleting
nothing in the default partition without a word (streamer/write/moves.py). Rows are read
by hudi-rs and compared with what the database would hold."""

from __future__ import annotations

import pyarrow as pa
import pytest

from streamer.table.identity import IndexConfig, IndexType
from streamer.write import HudiWriter, TableConfig
from tests.support import block_tables as tg
from tests.support.write_model import read_hudi_rs

SCHEMA = pa.schema([("id", pa.int64()), ("status", pa.string()), ("ts", pa.int64()), ("v", pa.string())])


def _rows(*rows: tuple) -> pa.Table:
    return pa.Table.from_pylist([dict(zip(SCHEMA.names, r, strict=True)) for r in rows], SCHEMA)


INDEXES = {"bloom": IndexConfig(IndexType.BLOOM), "bucket": IndexConfig(IndexType.BUCKET, 2)}


def _writer(path: str, version: int = 6, index: str = "bloom") -> HudiWriter:
    cfg = TableConfig("orders", ("id",), ("status",), "ts", index=INDEXES[index], table_version=version)
    return HudiWriter.create(path, cfg, schema=SCHEMA, options=tg.SMALL)


def _hudi_rs(path: str) -> list[tuple]:
    t = read_hudi_rs(path).select(["id", "status", "v", "_hoodie_partition_path"])
    return sorted(zip(*(t.column(c).to_pylist() for c in t.column_names), strict=True))


@pytest.mark.parametrize(("version", "index"), [(6, "bloom"), (9, "bloom"), (6, "bucket")])
def test_a_delete_without_its_partition_value_deletes_the_row_where_it_is(tmp_path, version, index):
    path = str(tmp_path / "t")
    w = _writer(path, version=version, index=index)
    w.upsert(_rows((1, "new", 1, "a"), (2, "paid", 1, "b"), (3, None, 1, "c"), (4, "new", 1, "d")))
    # 1: stored in 'new'; 3: stored in the default partition (its status is null);
    # 9: stored nowhere (a replayed delete): nothing to do
    w.delete(_rows((1, None, 2, None), (3, None, 2, None), (9, None, 2, None)))
    assert _hudi_rs(path) == [(2, "paid", "b", "paid"), (4, "new", "d", "new")]


def test_a_key_stored_in_two_partitions_is_deleted_in_both(tmp_path):
    """A per-partition index keeps a key once per partition: a row whose partition value
    changed left its old copy behind. The database deleted the key: no copy stays."""
    path = str(tmp_path / "t")
    w = _writer(path)
    w.upsert(_rows((1, "new", 1, "a"), (2, "new", 1, "b")))
    w.upsert(_rows((1, "paid", 2, "a2")))
    assert [r[0] for r in _hudi_rs(path)] == [1, 1, 2]
    w.upsert(_rows((1, None, 3, None), (2, "new", 3, "b3")).append_column(
        "_hoodie_is_deleted", pa.array([True, False])))
    assert _hudi_rs(path) == [(2, "new", "b3", "new")]


def test_a_delete_with_its_partition_value_stays_in_that_partition(tmp_path):
    """Only a delete naming the default partition is looked for elsewhere: one naming a
    partition that does not hold its key deletes nothing there, as before."""
    path = str(tmp_path / "t")
    w = _writer(path)
    w.upsert(_rows((1, "new", 1, "a")))
    w.delete(_rows((1, "paid", 2, None)))
    assert _hudi_rs(path) == [(1, "new", "a", "new")]


def test_an_update_then_a_delete_without_its_partition_in_one_batch_leaves_no_row(tmp_path):
    """The database updated the row, then deleted it; the delete (its partition value missing)
    meets the update in the update's partition: the later one, the delete, stands."""
    path = str(tmp_path / "t")
    w = _writer(path)
    w.upsert(_rows((1, "new", 1, "a"), (2, "new", 1, "b")))
    batch = _rows((1, "new", 2, "a2"), (1, None, 3, None), (2, "new", 2, "b2"))
    w.upsert(batch.append_column("_hoodie_is_deleted", pa.array([False, True, False])))
    assert _hudi_rs(path) == [(2, "new", "b2", "new")]
    # and the other way round: a delete, then the key written again, later
    w.upsert(_rows((3, "paid", 1, "c")))
    batch = _rows((3, None, 2, None), (3, "paid", 3, "c3"))
    w.upsert(batch.append_column("_hoodie_is_deleted", pa.array([True, False])))
    assert _hudi_rs(path) == [(2, "new", "b2", "new"), (3, "paid", "c3", "paid")]
