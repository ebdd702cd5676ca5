"""The global bloom index: a record key is unique across partitions, so a row whose
partition value changes moves (its old row deleted there), a delete finds its key in
any partition, and a replayed older change cannot move a row back."""

from __future__ import annotations

import pyarrow as pa
import pytest

from streamer.config.policies import CompactionPolicy
from streamer.errors import ConfigError
from streamer.read import Table
from streamer.services.compaction import schedule_compaction_safely
from streamer.services.executor import execute
from streamer.table.identity import IndexConfig, IndexType, table_index
from streamer.write import HudiWriter, TableConfig
from tests.support import block_tables as tg

SCHEMA = pa.schema([("id", pa.int64()), ("status", pa.string()), ("ts", pa.int64()), ("v", pa.string())])
GLOBAL = IndexConfig(IndexType.GLOBAL_BLOOM)


def _rows(*rows: tuple) -> pa.Table:
    return pa.Table.from_pylist([dict(zip(SCHEMA.names, r, strict=True)) for r in rows], SCHEMA)


def _writer(path: str, index: IndexConfig = GLOBAL, version: int = 6) -> HudiWriter:
    cfg = TableConfig("orders", ("id",), ("status",), "ts", index=index, table_version=version)
    return HudiWriter.create(path, cfg, schema=SCHEMA, options=tg.SMALL)


def _read(path: str) -> list[tuple]:
    t = Table.open(path).read(columns=["id", "status", "ts", "v", "_hoodie_partition_path"])
    return sorted(zip(*(t.column(c).to_pylist() for c in t.column_names), strict=True))


@pytest.mark.parametrize("version", [6, 9])
def test_a_row_whose_partition_changes_ends_in_its_new_partition_only(tmp_path, version):
    path = str(tmp_path / "t")
    w = _writer(path, version=version)
    w.upsert(_rows((1, "new", 1, "a"), (2, "new", 1, "b"), (3, "paid", 1, "c")))
    r = w.upsert(_rows((1, "paid", 2, "a2"), (2, "new", 2, "b2")))
    assert (r.moved, r.stale) == (1, 0)
    assert _read(path) == [(1, "paid", 2, "a2", "paid"), (2, "new", 2, "b2", "new"), (3, "paid", 1, "c", "paid")]
    # it moves again, and back; compaction keeps one row per key
    w.upsert(_rows((1, "shipped", 3, "a3")))
    w.upsert(_rows((1, "new", 4, "a4")))
    assert [row for row in _read(path) if row[0] == 1] == [(1, "new", 4, "a4", "new")]
    plan = schedule_compaction_safely(Table.open(path), CompactionPolicy(), force=True)
    assert plan is not None and execute(Table.open(path), plan).status == "completed"
    assert [row for row in _read(path) if row[0] == 1] == [(1, "new", 4, "a4", "new")]


def test_a_delete_finds_its_key_in_any_partition(tmp_path):
    path = str(tmp_path / "t")
    w = _writer(path)
    w.upsert(_rows((1, "new", 1, "a"), (2, "paid", 1, "b")))
    # a CDC delete often carries the key alone: its partition value is missing
    w.delete(_rows((1, None, 2, None)))
    assert _read(path) == [(2, "paid", 1, "b", "paid")]


def test_an_older_change_never_moves_a_row_back(tmp_path):
    path = str(tmp_path / "t")
    w = _writer(path)
    w.upsert(_rows((1, "new", 1, "a")))
    w.upsert(_rows((1, "paid", 5, "b")))
    r = w.upsert(_rows((1, "new", 3, "replayed")))
    assert (r.moved, r.stale) == (0, 1)
    assert _read(path) == [(1, "paid", 5, "b", "paid")]


def test_one_batch_with_a_key_in_two_partitions_keeps_its_latest(tmp_path):
    path = str(tmp_path / "t")
    w = _writer(path)
    w.upsert(_rows((1, "new", 1, "a"), (1, "paid", 2, "b"), (2, "paid", 3, "c"), (2, "new", 1, "d")))
    assert _read(path) == [(1, "paid", 2, "b", "paid"), (2, "paid", 3, "c", "paid")]


def test_without_update_partition_path_the_row_stays_where_it_is(tmp_path):
    path = str(tmp_path / "t")
    w = _writer(path, IndexConfig(IndexType.GLOBAL_BLOOM, update_partition_path=False))
    w.upsert(_rows((1, "new", 1, "a")))
    r = w.upsert(_rows((1, "paid", 2, "b")))
    assert r.moved == 0
    assert _read(path) == [(1, "paid", 2, "b", "new")]


def test_the_index_is_recorded_and_a_bloom_writer_is_refused(tmp_path):
    path = str(tmp_path / "t")
    _writer(path).upsert(_rows((1, "new", 1, "a")))
    props = Table.open(path).properties
    assert table_index(props) == GLOBAL
    assert props.raw["mor_streamer.index.type"] == "global_bloom"
    with pytest.raises(ConfigError, match="global_bloom"):
        HudiWriter.open(path, index=IndexConfig())
    with pytest.raises(ConfigError, match="engine local or auto"):
        HudiWriter.open(path).upsert(_rows((2, "new", 1, "b")), engine="spark")
