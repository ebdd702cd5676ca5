"""A failed compaction is rolled back to *requested*, never deleted: writers already
append to the slices its plan opened. Whether the rollback is run by a compactor or
resumed by the next writer after a crash, the plan stays and executes once."""

from __future__ import annotations

import os

from streamer.config.policies import CompactionPolicy
from streamer.read import Table
from streamer.read.slice_reader import SliceReadSpec
from streamer.services.common import read_plan
from streamer.services.compaction import compact_slice, old_slice, schedule_compaction_safely
from streamer.services.executor import execute
from streamer.table.instant import Action
from streamer.table.metadata import RollbackMetadata
from streamer.table.naming import parse_base_file_name
from streamer.write.rollback import build_plan
from tests.support import block_tables as tg


def _half_run(p: str):
    """Schedule a compaction and leave it as a killed run: inflight, one partial base file."""
    comp = schedule_compaction_safely(Table.open(p), CompactionPolicy(), force=True)
    t = Table.open(p)
    inflight = t.timeline.transition_to_inflight(t.timeline.get(comp.timestamp))
    op = read_plan(t, inflight).operations[0]
    spec = SliceReadSpec(merge=t.merge_spec(), completed=t.timeline.completed_timestamps())
    st = compact_slice(t, comp.timestamp, old_slice(t, op, comp.timestamp), spec, 0)
    partial = os.path.join(p, st.path)
    assert os.path.exists(partial)
    return comp, inflight, partial


def _base_files_at(p: str, instant: str) -> dict[str, int]:
    out: dict[str, int] = {}
    for _root, _, files in os.walk(p):
        for f in files:
            b = parse_base_file_name(f)
            if b is not None and b.instant_time == instant:
                out[b.file_id] = out.get(b.file_id, 0) + 1
    return out


def _rollbacks_of(p: str, instant: str) -> list:
    t = Table.open(p)
    out = []
    for i in t.timeline.completed():
        if i.action == Action.ROLLBACK:
            meta = RollbackMetadata.from_bytes(t.timeline.read_details(i))
            if instant in meta.commits_rollback:
                out.append(i)
    return out


def test_writer_resuming_an_interrupted_compaction_rollback_keeps_the_plan(tmp_path):
    p = str(tmp_path / "t")
    w, gen, model = tg.build(p, 5)
    comp, inflight, partial = _half_run(p)
    plan_ops = len(read_plan(Table.open(p), inflight).operations)
    # a compactor started rolling the dead run back and died after the rollback.requested
    t = Table.open(p)
    t.timeline.create_requested(Action.ROLLBACK, content=build_plan(t.fs, p, inflight).to_avro_bytes())

    tg.step(w, gen, model)  # the next writer resumes that rollback
    t = Table.open(p)
    cur = t.timeline.get(comp.timestamp)
    assert cur is not None and cur.is_requested, "the compaction plan must survive its rollback"
    assert len(read_plan(t, cur).operations) == plan_ops
    assert not os.path.exists(partial)
    assert _rollbacks_of(p, comp.timestamp)
    assert tg.read_ours(p) == model.snapshot()

    assert execute(Table.open(p), cur).status == "completed"
    assert set(_base_files_at(p, comp.timestamp).values()) == {1}
    assert tg.read_ours(p) == model.snapshot() == tg.read_hudi_rs(p)


def test_compactor_rolls_a_dead_run_back_with_a_rollback_instant(tmp_path):
    p = str(tmp_path / "t")
    w, gen, model = tg.build(p, 5, seed=2)
    comp, inflight, partial = _half_run(p)
    out = execute(Table.open(p), Table.open(p).timeline.get(comp.timestamp))  # takes over, reverts, runs
    assert out.status == "completed"
    [rb] = _rollbacks_of(p, comp.timestamp)
    meta = RollbackMetadata.from_bytes(Table.open(p).timeline.read_details(rb))
    assert meta.instants_rollback == [(comp.timestamp, Action.COMPACTION)]
    assert partial in [f for pm in meta.partition_metadata.values() for f in pm.success_delete_files]
    assert Table.open(p).timeline.get(comp.timestamp).is_completed
    assert set(_base_files_at(p, comp.timestamp).values()) == {1}
    assert tg.read_ours(p) == model.snapshot() == tg.read_hudi_rs(p)
