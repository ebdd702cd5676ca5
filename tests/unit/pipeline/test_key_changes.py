"""The row a primary-key change deleted in an earlier commit, found by the delete's position
and read as it was before: table versions 6 (log files appended to) and 9 (one per commit)."""

from __future__ import annotations

import pyarrow as pa
import pytest

from streamer.config.policies import CleanPolicy, CompactionPolicy
from streamer.errors import VersionsCleanedError
from streamer.pipeline.key_changes import DELETED_AT, rows_before_deletes
from streamer.read import Table
from streamer.services.clean import run_clean
from streamer.services.compaction import schedule_compaction
from streamer.services.executor import execute
from streamer.write import HudiWriter, TableConfig

SCHEMA = pa.schema([("id", pa.string()), ("note", pa.string()), ("_event_lsn", pa.int64())])


def _rows(*rows: tuple[str, str | None, int]) -> pa.Table:
    return pa.Table.from_pylist([dict(zip(SCHEMA.names, r, strict=True)) for r in rows], schema=SCHEMA)


@pytest.mark.parametrize("version", [6, 9])
def test_the_deleted_row_is_found_by_the_deletes_position_as_it_stood_before(tmp_path, version):
    path = str(tmp_path / "t")
    w = HudiWriter.create(path, TableConfig("t", ("id",), ordering_field="_event_lsn", table_version=version))
    w.upsert(_rows(("e", "e first", 10), ("g", "g text", 11), ("h", "h text", 12)))
    w.upsert(_rows(("e", "e latest", 20)))
    w.delete(_rows(("e", None, 40), ("h", None, 41)))  # e -> (a new key) at 40; h deleted at 41
    w.upsert(_rows(("x", "x text", 50)))  # a commit after the delete: searched past

    table = Table.open(path)
    found = rows_before_deletes(table, pa.array([40, 41, 99]), ["note"])
    assert found is not None
    got = sorted(zip(found.column("_hoodie_record_key").to_pylist(), found.column("note").to_pylist(),
                     found.column(DELETED_AT).to_pylist(), strict=True))
    assert got == [("e", "e latest", 40), ("h", "h text", 41)]
    # the snapshot no longer has them; only the two newest commits searched: the delete is
    # the second newest, so it is found; with one only it is not
    assert table.lookup(["e", "h"]).rows.num_rows == 0
    assert rows_before_deletes(table, pa.array([40]), ["note"], searched_commits=2) is not None
    assert rows_before_deletes(table, pa.array([40]), ["note"], searched_commits=1) is None
    assert rows_before_deletes(table, pa.array([99]), ["note"]) is None


def test_a_delete_whose_earlier_versions_a_clean_removed_is_not_found_rather_than_an_error(tmp_path):
    """A clean that retains fewer commits than are searched forbids the time travel to
    before the delete (Hudi's rule: the versions before its retained commit may be gone):
    that create is not completed (the error table names it); the batch is not failed."""
    path = str(tmp_path / "t")
    w = HudiWriter.create(path, TableConfig("t", ("id",), ordering_field="_event_lsn"))
    w.upsert(_rows(("e", "e text", 10), ("g", "g text", 11)))
    w.upsert(_rows(("g", "g 0", 12)))
    plan = schedule_compaction(Table.open(path), CompactionPolicy(), force=True)
    assert execute(Table.open(path), plan).status == "completed"
    w.delete(_rows(("e", None, 40)))  # into the compacted slice's log, which the clean keeps
    for i in range(3):
        w.upsert(_rows(("g", f"g {i}", 50 + i)))
    assert run_clean(Table.open(path), CleanPolicy(retain_commits=1)).files_deleted
    table = Table.open(path)
    deleting = table.timeline.completed_writes()[-4]
    before = table.timeline.completed_writes()[-5]
    assert deleting.action == "deltacommit" and before.action == "commit"  # the delete, and the compaction
    with pytest.raises(VersionsCleanedError):
        table.read(as_of=before.timestamp)
    assert rows_before_deletes(table, pa.array([40]), ["note"]) is None
