"""Log-only file slices of version 8 and 9 tables, named as Hudi 1.x names them.

Hudi 1.x's ``HoodieFileGroup`` files a log under the newest slice (a committed base file,
a pending compaction) started at or before its delta commit's completion time; logs that
completed before any such slice make a slice named by the first one's delta commit. A
compaction plan names its slice so (``baseInstantTime``), and Hudi's compactor and both
cleaners match slices by it. Ours called such a slice ``""``, so a compaction Hudi had
planned on it was neither run by us nor protected from our cleaner.

Judged on a table Apache Hudi 1.2 wrote (the ``table_log_only`` fixture: one file group,
three delta commits, no base file) and by that fixture's expected rows, read by hudi-rs too.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pyarrow as pa
import pytest

from streamer.config.policies import CleanPolicy, CompactionPolicy
from streamer.read import Table
from streamer.services.clean import run_clean
from streamer.services.common import ServiceError
from streamer.services.compaction import schedule_compaction_safely
from streamer.services.executor import execute
from streamer.table.instant import Action
from streamer.table.metadata import CompactionOperation, CompactionPlan
from streamer.write import HudiWriter
from tests.support.fixture_tables import FIXTURES, table_path
from tests.support.write_model import read_hudi_rs

NAME = "quickstart_trips_table__mor__avro__table_log_only"
#: the delta commits of the fixture's three logs, oldest first
WRITES = ("20260409030525348", "20260409030527298", "20260409030528554")
SCHEMA = pa.schema([("key", pa.string()), ("ts", pa.int64()), ("level", pa.string()),
                    ("severity", pa.int32()), ("partition", pa.string()), ("round", pa.int32())])


@pytest.fixture
def table(hudi_fixtures_dir, tmp_path) -> str:
    dst = tmp_path / "t"
    shutil.copytree(table_path(hudi_fixtures_dir, NAME), dst)
    return str(dst)


def _expected() -> dict[str, int]:
    """key -> round, as the fixture's expected snapshot (Hudi's answer) has it."""
    lines = (Path(FIXTURES) / "expected" / f"{NAME}.snapshot.jsonl").read_text().splitlines()
    return {r["key"]: r["round"] for r in map(json.loads, lines)}


def _rounds(rows: pa.Table) -> dict[str, int]:
    return dict(zip(rows.column("key").to_pylist(), rows.column("round").to_pylist(), strict=True))


def test_a_log_only_slice_is_named_by_its_first_logs_delta_commit(table):
    [[s]] = Table.open(table).fsview.all_slices().values()
    assert s.base_file is None and s.base_instant == WRITES[0]
    assert [lf.base_instant for lf in s.log_files] == list(WRITES)
    view = Table.open(table).fsview
    assert {view.written_slice_key("", lf.file_id, lf.name) for lf in s.log_files} == {WRITES[0]}
    # the first log lost: the slice is named by the next, and the lost log is still
    # attributed to it (so `check` reports it missing from the slice it was read with)
    Path(s.log_files[0].path).unlink()
    view = Table.open(table).fsview
    [[left]] = view.all_slices().values()
    assert left.base_instant == WRITES[1]
    assert view.written_slice_key("", s.file_id, s.log_files[0].name) == WRITES[1]
    # and our plan names the slice as Hudi's planner does
    schedule_compaction_safely(Table.open(table), CompactionPolicy(), force=True)
    [inst] = Table.open(table).timeline.pending_compactions()
    [op] = Table.open(table).fsview.compaction_plan(inst).operations
    assert op.base_instant_time == WRITES[1]


def _plan_as(table: str, base_instant_time: str) -> str:
    """A compaction requested on the fixture's slice, its plan naming the slice
    ``base_instant_time`` (Hudi 1.x's name, or the ``""`` our plans used to carry)."""
    t = Table.open(table)
    [[s]] = t.fsview.all_slices().values()
    op = CompactionOperation(file_id=s.file_id, partition_path="", base_instant_time=base_instant_time,
                             delta_file_paths=[lf.name for lf in s.log_files])
    return t.timeline.create_requested(Action.COMPACTION, content=CompactionPlan([op]).to_avro_bytes()).timestamp


@pytest.mark.parametrize("named", [WRITES[0], ""], ids=["hudi-plan", "our-older-plan"])
def test_a_planned_log_only_slice_survives_writes_and_clean_then_compacts(table, named):
    planned = _plan_as(table, named)
    w = HudiWriter.open(table)
    for r in (3, 4):
        w.upsert(pa.Table.from_pylist([{"key": "k3", "ts": 200 + r, "level": "NEW", "severity": 3,
                                        "partition": "", "round": r}], schema=SCHEMA))
    logs = sorted(Path(table).glob(".*.log.*"))
    assert len(logs) == 5  # the three the plan reads, and one per write since
    run_clean(Table.open(table), CleanPolicy(retain_commits=1))
    lost = [p.name for p in logs if not p.exists()]
    assert not lost, f"the clean deleted logs the pending compaction {planned} reads: {lost}"
    assert execute(Table.open(table), Table.open(table).timeline.get(planned)).status == "completed"
    want = {**_expected(), "k3": 4}
    assert _rounds(Table.open(table).read()) == want
    assert _rounds(read_hudi_rs(table)) == want


def test_an_older_plan_whose_log_only_slice_is_lost_is_not_run_on_the_new_slice(table):
    """A plan naming its slice ``""`` finds the group's first slice only if that began
    before the plan: with every planned log lost, the first slice is the compaction's own
    new one, and compacting it would commit the loss of the planned rows."""
    [[s]] = Table.open(table).fsview.all_slices().values()
    planned = _plan_as(table, "")
    w = HudiWriter.open(table)
    w.upsert(pa.Table.from_pylist([{"key": "k3", "ts": 203, "level": "NEW", "severity": 3,
                                    "partition": "", "round": 3}], schema=SCHEMA))
    for lf in s.log_files:
        Path(lf.path).unlink()
    with pytest.raises(ServiceError, match=r"of the plan is gone"):
        execute(Table.open(table), Table.open(table).timeline.get(planned))
    assert not Table.open(table).timeline.get(planned).is_completed
