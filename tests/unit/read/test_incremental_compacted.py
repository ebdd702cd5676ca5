"""An incremental range in which a compaction completed still returns the range's writes.

The compaction rewrote them into the latest slice's base file, keeping their commit
times, so the range reads that file too (as Hudi's range view holds the compaction's
files), not only the logs the writes made (which now sit in a superseded slice). The
expected rows are a model of the writes; hudi-rs's incremental read is checked too.

A range that ends before the compaction reads the logs its writes made; once a clean
has removed them with their superseded slice, it reads today's slices by commit time,
as Hudi 1.x falls back to a full-table scan (before, it returned no row at all)."""

from __future__ import annotations

import pyarrow as pa
import pytest

from streamer.config.policies import CleanPolicy, CompactionPolicy
from streamer.read import Table
from streamer.services.clean import run_clean
from streamer.services.compaction import schedule_compaction
from streamer.services.executor import execute
from streamer.write import HudiWriter, TableConfig, WriteOptions

SCHEMA = pa.schema([("id", pa.int64()), ("city", pa.string()), ("ts", pa.int64()), ("v", pa.string())])


def _rows(ids: range, ts: int, tag: str) -> list[dict]:
    return [{"id": i, "city": ("sf", "ny")[i % 2], "ts": ts, "v": f"{tag}{i}"} for i in ids]


def _bound(path: str, instant: str) -> str:
    """The range bound that stands for ``instant``: its completion time on a layout-2
    timeline (Hudi 1.x), the instant itself on layout 1."""
    [done] = [i for i in Table.open(path).timeline.completed() if i.timestamp == instant]
    return done.completion_time or done.timestamp


def _picked(table: pa.Table | None) -> list[tuple]:
    rows = [] if table is None else table.select(SCHEMA.names).to_pylist()
    return sorted((r["id"], r["city"], r["ts"], r["v"]) for r in rows)


def _hudi_rs_incremental(path: str, begin: str) -> pa.Table | None:
    import hudi

    table = hudi.HudiTableBuilder.from_base_uri(path).build()
    batches = table.read(hudi.HudiReadOptions().with_query_type(hudi.HudiQueryType.Incremental)
                         .with_start_timestamp(begin))
    return pa.Table.from_batches(batches) if batches else None


@pytest.mark.parametrize("version", [6, 8, 9])
def test_a_range_over_a_compaction_keeps_the_writes_it_compacted(tmp_path, version):
    path = str(tmp_path / "t")
    cfg = TableConfig("t", ("id",), ("city",), "ts").with_changes(table_version=version)
    w = HudiWriter.create(path, cfg, schema=SCHEMA, options=WriteOptions(engine="local"))
    first = w.upsert(pa.Table.from_pylist(_rows(range(40), 1, "a"), schema=SCHEMA)).instant
    updated = _rows(range(0, 20, 2), 2, "b")  # into log blocks of the base files
    second = w.upsert(pa.Table.from_pylist(updated, schema=SCHEMA)).instant
    plan = schedule_compaction(Table.open(path), CompactionPolicy(), force=True)
    assert plan is not None and execute(Table.open(path), plan).status == "completed"
    added = _rows(range(40, 45), 3, "c")  # after the compaction: the new slices' logs
    w.upsert(pa.Table.from_pylist(added, schema=SCHEMA))
    begin = _bound(path, first)

    table = Table.open(path)
    assert _picked(table.read("incremental", begin=begin)) == _picked(pa.Table.from_pylist(updated + added))
    assert _picked(table.read("incremental", begin=begin, end=_bound(path, second))) == _picked(
        pa.Table.from_pylist(updated))  # the range ends before the compaction
    assert _picked(_hudi_rs_incremental(path, begin)) == _picked(pa.Table.from_pylist(updated + added))


@pytest.mark.parametrize("version", [6, 8, 9])
@pytest.mark.parametrize("policy", [CleanPolicy(retain_commits=1), CleanPolicy(retain_file_versions=1)],
                         ids=["commits", "file-versions"])
def test_a_range_whose_files_a_clean_removed_reads_the_rows_still_readable(tmp_path, version, policy):
    path = str(tmp_path / "t")
    cfg = TableConfig("t", ("id",), ("city",), "ts").with_changes(table_version=version)
    w = HudiWriter.create(path, cfg, schema=SCHEMA, options=WriteOptions(engine="local"))
    first = w.upsert(pa.Table.from_pylist(_rows(range(40), 1, "a"), schema=SCHEMA)).instant
    updated = _rows(range(0, 20, 2), 2, "b")
    second = w.upsert(pa.Table.from_pylist(updated, schema=SCHEMA)).instant
    plan = schedule_compaction(Table.open(path), CompactionPolicy(), force=True)
    assert plan is not None and execute(Table.open(path), plan).status == "completed"
    for i in range(3):  # later writes of other keys, so the clean has commits to retain
        w.upsert(pa.Table.from_pylist(_rows(range(40 + i, 41 + i), 3 + i, "c"), schema=SCHEMA))
    begin, end = _bound(path, first), _bound(path, second)
    assert _picked(Table.open(path).read("incremental", begin=begin, end=end)) == _picked(
        pa.Table.from_pylist(updated))
    assert run_clean(Table.open(path), policy).files_deleted > 0  # the range's logs are gone
    assert _picked(Table.open(path).read("incremental", begin=begin, end=end)) == _picked(
        pa.Table.from_pylist(updated))
