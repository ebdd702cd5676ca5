"""Async compaction as designed: while a plan is pending, writes append to the plan's new
slice (log files named with base instant = the plan's instant); the index still finds
keys in the old slice; readers (ours and hudi-rs) merge old base + old logs + new logs;
the compactor merges a slice nobody writes to, so it never has to merge again."""

from __future__ import annotations

import logging

import pytest

from streamer.config.policies import CompactionPolicy
from streamer.read import Table
from streamer.services.compaction import execute_compaction, schedule_compaction_safely
from streamer.services.executor import execute
from streamer.table.naming import parse_log_file_name
from tests.support import block_tables as tg
from tests.support.gaps import HUDI_RS_PENDING_COMPACTION_SLICE as GAP


def _logs(path: str) -> dict[tuple[str, str], set[tuple[str, str]]]:
    """(partition, file id) -> {(log file name, base instant)} on storage."""
    t = Table.open(path)
    out: dict[tuple[str, str], set[tuple[str, str]]] = {}
    for g in t.fsview.file_groups():
        out[(g.partition_path, g.file_id)] = {(lf.name, lf.base_instant) for lf in g.log_files}
    return out


#: Each scenario runs twice: hudi-rs asked wherever no compaction is pending, and - in the
#: strict-xfail variant - also where one is (the registered hudi-rs gap). Our reader is
#: asserted first at every step of both, outside the gap's narrowed ``raises``.
AT_GAP = [pytest.param(False, id="outside-gaps"), GAP.param(True)]


def _check(path: str, model: tg.Model, step: str, *, pending: bool = False, at_gap: bool = False) -> None:
    """Ours always; hudi-rs when no compaction is pending, or at the gap when ``at_gap``."""
    expected = model.snapshot()
    assert tg.read_ours(path) == expected, f"our reader differs after {step}"
    if not pending:
        assert tg.read_hudi_rs(path) == expected, f"hudi-rs differs after {step}"
    elif at_gap:
        GAP.check(tg.read_hudi_rs(path) == expected, f"snapshot after {step}")


@pytest.mark.parametrize("at_gap", AT_GAP)
def test_writes_during_pending_compaction_go_to_the_new_slice(tmp_path, caplog, at_gap):
    p = str(tmp_path / "t")
    w, gen, model = tg.build(p, 6)
    comp = schedule_compaction_safely(Table.open(p), CompactionPolicy(), force=True)
    assert comp is not None
    planned = {(op.partition_path, op.file_id): op.base_instant_time
               for op in Table.open(p).fsview.compaction_plan(comp).operations}
    before = _logs(p)

    results = []
    for i in range(4):  # updates, a delete batch, and inserts of new keys
        if i == 2:
            d = gen.deletes(model, 10)
            results.append(w.delete(d))
            model.apply(deletes=d)
        else:
            u = gen.upserts(15)
            results.append(w.upsert(u))
            model.apply(u)
        _check(p, model, f"write {i} with the compaction pending", pending=True, at_gap=at_gap)

    after = _logs(p)
    touched_planned = 0
    for gid, files in after.items():
        new = files - before.get(gid, set())
        if gid in planned:
            touched_planned += bool(new)
            # every block written since scheduling is in the new slice
            assert all(base == comp.timestamp for _, base in new), (gid, new)
        else:
            assert all(base != comp.timestamp for _, base in new)
    assert touched_planned, "the batches should have touched a planned file group"
    # keys of the old slices were found (updates), not re-inserted into other groups
    stats = [s for r in results for s in r.stats if (s.partition_path, s.file_id) in planned]
    assert sum(s.num_update_writes for s in stats) > 0
    for s in stats:
        assert parse_log_file_name(s.path.rsplit("/", 1)[-1]).base_instant == comp.timestamp
        assert s.prev_commit == comp.timestamp

    # the compactor's merge is not invalidated by those writes: no second merge
    t = Table.open(p)
    run = execute_compaction(t, t.timeline.transition_to_inflight(t.timeline.get(comp.timestamp)))
    caplog.set_level(logging.INFO, logger="streamer.services.compaction")
    u = gen.upserts(15)  # a write between the merge and completion, also to new slices
    w.upsert(u)
    model.apply(u)
    t = Table.open(p)
    run.finish(t, lambda meta: t.timeline.complete(t.timeline.get(comp.timestamp), meta.to_json_bytes()))
    assert "again" not in caplog.text
    _check(p, model, "compaction")
    # after the commit the new slice is base file (the plan's instant) + the new logs
    for s in Table.open(p).fsview.latest_file_slices():
        if (s.partition_path, s.file_id) in planned:
            assert s.base_instant == comp.timestamp and s.base_file is not None
    tg.step(w, gen, model)
    _check(p, model, "write after compaction")


@pytest.mark.parametrize("at_gap", AT_GAP)
def test_compaction_through_executor_with_concurrent_pending_writes(tmp_path, at_gap):
    p = str(tmp_path / "t")
    w, gen, model = tg.build(p, 5, seed=3)
    comp = schedule_compaction_safely(Table.open(p), CompactionPolicy(), force=True)
    for _ in range(3):
        tg.step(w, gen, model)
    assert execute(Table.open(p), comp).status == "completed"
    _check(p, model, "executor compaction")
    comp2 = schedule_compaction_safely(Table.open(p), CompactionPolicy(), force=True)
    assert comp2 is not None
    tg.step(w, gen, model, delete=True)
    tg.step(w, gen, model)
    _check(p, model, "writes over the second plan", pending=True, at_gap=at_gap)
    assert execute(Table.open(p), comp2).status == "completed"
    _check(p, model, "second compaction")


@GAP.xfail()
def test_hudi_rs_reads_new_slice_logs_while_compaction_pending(tmp_path):
    """The gap in its smallest form; our reader asserted plainly (a failure of ours is not
    the gap's error, so the narrowed xfail reports it as the failure it is)."""
    p = str(tmp_path / "t")
    w, gen, model = tg.build(p, 4, seed=5)
    assert schedule_compaction_safely(Table.open(p), CompactionPolicy(), force=True) is not None
    tg.step(w, gen, model)
    assert tg.read_ours(p) == model.snapshot()
    GAP.check(tg.read_hudi_rs(p) == model.snapshot(), "snapshot with a write after the plan")
