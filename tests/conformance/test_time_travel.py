"""Time travel and incremental reads of multi-commit fixtures, checked against hudi-rs.

Expectations come from the independent reader (`hudi` 0.5.0: `HudiReadOptions`
with an as-of timestamp / an incremental start-end range), per completed write instant.
"""

from __future__ import annotations

import hudi  # hudi-rs, a pinned test dependency: missing means `make setup` was not run
import pytest

from tests.support.fixture_tables import FIXTURE_NAMES, canonical_lines, table_path

pytestmark = pytest.mark.conformance


def _multi_commit(fixtures_dir) -> list[str]:
    from streamer.read import Table

    return [
        n for n in FIXTURE_NAMES
        if len(Table.open(table_path(fixtures_dir, n)).timeline.completed_writes()) >= 2
    ]


def _hudi_rows(path: str, options) -> list[str]:
    batches = hudi.HudiTable(path).read(options)
    return canonical_lines([r for b in batches for r in b.to_pylist()])


@pytest.fixture(scope="module")
def multi_commit(hudi_fixtures_dir) -> list[str]:
    names = _multi_commit(hudi_fixtures_dir)
    assert len(names) >= 8
    return names


def test_as_of_each_completed_instant(hudi_fixtures_dir, multi_commit):
    from streamer.read import Table

    for name in multi_commit:
        path = table_path(hudi_fixtures_dir, name)
        t = Table.open(path)
        for inst in t.timeline.completed_writes():
            mine = canonical_lines(t.read(as_of=inst.timestamp).to_pylist())
            theirs = _hudi_rows(path, hudi.HudiReadOptions().with_as_of_timestamp(inst.timestamp))
            assert mine == theirs, f"{name} as of {inst.timestamp}"


def test_incremental_rows_of_each_commit(hudi_fixtures_dir, multi_commit):
    from streamer.read import Table

    for name in multi_commit:
        path = table_path(hudi_fixtures_dir, name)
        t = Table.open(path)
        begin = "0"
        for inst in t.timeline.completed_writes():
            mine = canonical_lines(t.read("incremental", begin=begin, end=inst.timestamp).to_pylist())
            opts = (
                hudi.HudiReadOptions()
                .with_query_type(hudi.HudiQueryType.Incremental)
                .with_start_timestamp(begin)
                .with_end_timestamp(inst.timestamp)
            )
            assert mine == _hudi_rows(path, opts), f"{name} ({begin}, {inst.timestamp}]"
            begin = inst.timestamp


def test_as_of_latest_equals_snapshot_and_first_commit_rows(hudi_fixtures_dir):
    """Independent of hudi-rs: as of the first commit, every row carries that commit time."""
    from streamer.read import Table

    t = Table.open(table_path(hudi_fixtures_dir, "quickstart_trips_table__mor__avro__v6_trips_8i3d"))
    writes = t.timeline.completed_writes()
    first = t.read(as_of=writes[0].timestamp)
    assert set(first.column("_hoodie_commit_time").to_pylist()) == {writes[0].timestamp}
    assert first.num_rows == sum(s.num_inserts for s in t.fsview.commit_metadata(writes[0]).write_stats())
    assert canonical_lines(t.read(as_of=writes[-1].timestamp).to_pylist()) == canonical_lines(t.read().to_pylist())
    # The second commit deleted three trips: they are in the first snapshot, not the last.
    assert first.num_rows - t.read().num_rows == 3


def test_incremental_on_v6_uses_requested_times(hudi_fixtures_dir):
    from streamer.read import Table

    t = Table.open(table_path(hudi_fixtures_dir, "quickstart_trips_table__mor__avro__v6_trips_8i1u"))
    w1, w2 = (i.timestamp for i in t.timeline.completed_writes())
    second = t.read("incremental", begin=w1, end=w2)
    assert second.num_rows >= 1
    assert set(second.column("_hoodie_commit_time").to_pylist()) == {w2}
    assert t.read("incremental", begin=w2).num_rows == 0
