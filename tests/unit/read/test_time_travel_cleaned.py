"""A time travel whose file versions a clean removed is refused naming the clean, for a
read-optimized query as for a snapshot. A clean that keeps file versions names no commit
to retain, so only the files tell: before, a read-optimized time travel returned an empty
table (0 rows of 40) and the snapshot one a bare missing-file error."""

from __future__ import annotations

import pyarrow as pa
import pytest

from streamer.config.policies import CleanPolicy, CompactionPolicy
from streamer.errors import VersionsCleanedError
from streamer.read import Table
from streamer.services.clean import run_clean
from streamer.services.compaction import schedule_compaction
from streamer.services.executor import execute
from streamer.write import HudiWriter, TableConfig, WriteOptions

SCHEMA = pa.schema([("id", pa.int64()), ("city", pa.string()), ("ts", pa.int64()), ("v", pa.string())])


def _batch(ids: range, ts: int) -> pa.Table:
    return pa.Table.from_pylist([{"id": i, "city": ("sf", "ny")[i % 2], "ts": ts, "v": f"v{ts}"} for i in ids],
                                schema=SCHEMA)


@pytest.mark.parametrize("version", [6, 9])
def test_a_time_travel_to_cleaned_file_versions_is_refused_naming_the_clean(tmp_path, version):
    path = str(tmp_path / "t")
    cfg = TableConfig("t", ("id",), ("city",), "ts").with_changes(table_version=version)
    w = HudiWriter.create(path, cfg, schema=SCHEMA, options=WriteOptions(engine="local"))
    first = w.upsert(_batch(range(40), 1)).instant
    for ts in (2, 3):
        w.upsert(_batch(range(0, 40, 3), ts))
        plan = schedule_compaction(Table.open(path), CompactionPolicy(), force=True)
        assert plan is not None and execute(Table.open(path), plan).status == "completed"
    last = w.upsert(_batch(range(40, 42), 4)).instant
    clean = run_clean(Table.open(path), CleanPolicy(retain_file_versions=1))
    assert clean.files_deleted > 0 and clean.earliest_commit_to_retain is None
    table = Table.open(path)
    for query in ("snapshot", "read_optimized"):
        with pytest.raises(VersionsCleanedError, match=f"time travel to {first}: clean {clean.instant} removed"):
            table.read(query, as_of=first)
    # the versions kept stay readable: the 40 keys compacted, and the 2 the last write added
    assert sorted(table.read("snapshot", as_of=last).column("id").to_pylist()) == list(range(42))
    assert set(table.read("read_optimized", as_of=last).column("id").to_pylist()) >= set(range(40))


@pytest.mark.parametrize("version", [6, 9])
def test_a_time_travel_to_a_slice_whose_writes_were_archived_is_refused_too(tmp_path, version):
    """The slice's writes archived, only the clean's record of what it removed tells:
    before, a time travel to a later, active instant lacked the group's rows (40 of them)."""
    from streamer.config.policies import ArchivePolicy
    from streamer.services.archive import run_archive

    path = str(tmp_path / "t")
    cfg = TableConfig("t", ("id",), ("city",), "ts").with_changes(table_version=version)
    w = HudiWriter.create(path, cfg, schema=SCHEMA, options=WriteOptions(engine="local"))
    first = w.upsert(_batch(range(40), 1)).instant
    w.upsert(_batch(range(0, 40, 3), 2))  # into the logs of both groups, which the compaction rewrites
    later = [w.upsert(pa.Table.from_pylist([{"id": 100 + i, "city": f"p{i}", "ts": 3, "v": "d"}],
                                           schema=SCHEMA)).instant for i in range(6)]
    plan = schedule_compaction(Table.open(path), CompactionPolicy(), force=True)
    assert plan is not None and execute(Table.open(path), plan).status == "completed"
    for i in range(2):
        w.upsert(pa.Table.from_pylist([{"id": 200 + i, "city": f"q{i}", "ts": 4, "v": "e"}], schema=SCHEMA))
    clean = run_clean(Table.open(path), CleanPolicy(retain_file_versions=1))
    archived = run_archive(Table.open(path), ArchivePolicy(min_commits=5, max_commits=6)).archived
    assert first in archived and later[0] not in archived
    table = Table.open(path)
    # as of later[0] the table held the 40 keys and one more: their versions are gone
    with pytest.raises(VersionsCleanedError, match=f"time travel to {later[0]}: clean {clean.instant} removed"):
        table.read(as_of=later[0])
    assert table.read().num_rows == 40 + 6 + 2
