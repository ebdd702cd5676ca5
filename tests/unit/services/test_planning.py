"""Planning rules: runs of small blocks, busy groups skipped, strategies, triggers."""

from __future__ import annotations

import datetime as dt
import json

from streamer.config.policies import CompactionPolicy, CompactionTrigger, LogCompactionPolicy
from streamer.read import Table
from streamer.services.compaction import (
    delta_commits_since_compaction,
    plan_compaction,
    schedule_compaction,
    trigger_fires,
)
from streamer.services.log_compaction import (
    EXECUTOR_CLASS,
    RUNS_KEY,
    find_runs,
    plan_log_compaction,
    schedule_log_compaction,
)
from streamer.services.slices import Unit
from streamer.services.strategies import Candidate, order_and_bound, partition_day
from streamer.table.fsview import BaseFile, FileSlice, LogFile
from streamer.table.instant import Action, State, parse_instant_time
from streamer.table.metadata import CompactionPlan
from tests.support import block_tables as tg


class _B:
    def __init__(self, size):
        self.size = size


def units(*sizes):
    return [Unit(f"t{i}", [_B(s)]) for i, s in enumerate(sizes)]


def test_runs_need_min_blocks_and_stop_at_large_blocks():
    pol = LogCompactionPolicy(min_blocks=3, small_block_bytes=100, max_block_bytes=1000)
    runs = find_runs(units(10, 10, 10, 500, 10, 10, 900, 10, 10, 10, 10), pol)
    assert [[u.instant for u in r] for r in runs] == [["t0", "t1", "t2"], ["t7", "t8", "t9", "t10"]]
    assert find_runs(units(10, 10), pol) == []


def test_log_compaction_plan_shape(tmp_path):
    p = str(tmp_path / "t")
    tg.build(p, 6, deletes_every=0)
    t = Table.open(p)
    inst = schedule_log_compaction(t, LogCompactionPolicy(min_blocks=3))
    assert inst is not None and inst.action == Action.LOG_COMPACTION and inst.state is State.REQUESTED
    assert (tmp_path / "t" / ".hoodie" / f"{inst.timestamp}.logcompaction.requested").exists()
    plan = CompactionPlan.from_bytes(t.timeline.read_plan(inst))
    assert plan.extra_metadata["operationType"] == "LOG_COMPACT"
    assert plan.strategy["compactorClassName"] == EXECUTOR_CLASS
    runs = json.loads(plan.extra_metadata[RUNS_KEY])
    assert runs and all(len(r) >= 3 for rs in runs.values() for r in rs)
    for op in plan.operations:
        assert op.delta_file_paths and op.base_instant_time
    # the same groups are busy now: a second plan must not take them
    assert plan_log_compaction(Table.open(p), LogCompactionPolicy(min_blocks=3)) is None


def test_pending_compaction_group_gets_log_compaction_on_new_slice_only(tmp_path):
    p = str(tmp_path / "t")
    w, gen, model = tg.build(p, 5, deletes_every=0)
    t = Table.open(p)
    comp = schedule_compaction(t, CompactionPolicy(), force=True)
    assert comp is not None
    # nothing in the new slices yet: no log compaction may touch the old slices
    assert plan_log_compaction(Table.open(p), LogCompactionPolicy(min_blocks=2)) is None
    lc_plan = plan_log_compaction(Table.open(p), LogCompactionPolicy(min_blocks=2))
    assert lc_plan is None
    # compaction plans never take a group already under compaction
    assert plan_compaction(Table.open(p), CompactionPolicy()) is None


def _slice(part, fid, base, logs):
    return FileSlice(part, fid, "1", BaseFile(f"/{fid}", fid, "1", "0-0-0", base),
                     tuple(LogFile(f"/.{fid}_{i}", fid, "1", i, "0-0-0", s) for i, s in enumerate(logs)))


def test_strategies_order_and_bound():
    cands = [Candidate(_slice("2024/01/01", "a", 100, [50])), Candidate(_slice("2024/01/03", "b", 100, [10, 10])),
             Candidate(_slice("2024/01/02", "c", 100, [500]))]
    by_size = order_and_bound(cands, CompactionPolicy(strategy="log_file_size"))
    assert [c.fslice.file_id for c in by_size] == ["c", "a", "b"]
    bounded = order_and_bound(cands, CompactionPolicy(strategy="bounded_io", io_budget_bytes=600))
    assert [c.fslice.file_id for c in bounded] == ["a", "b"]  # c would exceed the budget
    assert len(order_and_bound(cands, CompactionPolicy(strategy="bounded_io", io_budget_bytes=1))) == 1
    day = order_and_bound(cands, CompactionPolicy(strategy="day_based", day_partitions=2))
    assert [c.fslice.file_id for c in day] == ["b", "c"]
    assert partition_day("day=2024-02-29") == dt.date(2024, 2, 29) and partition_day("sf") is None


def test_triggers(tmp_path):
    p = str(tmp_path / "t")
    tg.build(p, 3, deletes_every=0)  # 4 delta commits
    t = Table.open(p)
    assert trigger_fires(t, CompactionTrigger(delta_commits=4))
    assert not trigger_fires(t, CompactionTrigger(delta_commits=5))
    # an hour after the first delta commit, from the table's own times, not the wall clock
    later = parse_instant_time(delta_commits_since_compaction(t)[1]) + dt.timedelta(hours=1)
    assert trigger_fires(t, CompactionTrigger(delta_commits=50, seconds=60), now=later)
    assert not trigger_fires(t, CompactionTrigger(delta_commits=50, seconds=60, combine="all"), now=later)
    assert trigger_fires(t, CompactionTrigger(delta_commits=2, seconds=60, combine="all"), now=later)
    assert schedule_compaction(t, CompactionPolicy(trigger=CompactionTrigger(delta_commits=50))) is None
    assert schedule_compaction(t, CompactionPolicy(trigger=CompactionTrigger(delta_commits=2))) is not None
    # max_pending=1: no second plan while one is pending
    assert schedule_compaction(t, CompactionPolicy(), force=True) is None
