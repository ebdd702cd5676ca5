"""Running pending plans beside Apache Hudi: a plan Hudi is running keeps Hudi's heartbeat,
not our plan lock; a rollback Hudi makes of it is Hudi's; its metadata table holds a plan back."""

from __future__ import annotations

import errno
import os
import time
from pathlib import Path

import pytest

from streamer import faults
from streamer.config.policies import CompactionPolicy
from streamer.errors import ServiceError
from streamer.read import Table
from streamer.services import executor as executor_module
from streamer.services import rollback_services
from streamer.services.compaction import schedule_compaction
from streamer.services.executor import execute
from streamer.table.instant import Action, Instant
from streamer.table.properties import METAFOLDER
from streamer.write.markers import list_markers
from streamer.write.rollback import build_plan
from streamer.write.transaction import Transaction
from tests.support import block_tables as tg
from tests.support.failed_write import fail_before_complete
from tests.support.heartbeat_lapse import hudi_takes_over_at
from tests.support.hudi_actions import metadata_table


def _planned(path: str) -> tuple[tg.Gen, tg.Model, Instant, Path]:
    """A table of three commits with a compaction planned over it: its generator and
    model, the plan, and where the plan's heartbeat goes."""
    _, gen, model = tg.build(path, 3)
    comp = schedule_compaction(Table.open(path), CompactionPolicy(), force=True)
    assert comp is not None
    return gen, model, comp, Path(path, METAFOLDER, ".heartbeat", comp.timestamp)


@pytest.mark.parametrize("version", [6, 9])
def test_a_compaction_hudi_is_running_is_left_to_it(tmp_path, version):
    """Hudi's multi-writer compaction keeps ``.hoodie/.heartbeat/<instant>`` fresh while it
    runs (``BaseHoodieTableServiceClient.compact``, read in the 1.2 bundle's bytecode) and
    takes no lock of ours. Our executor ran such a plan a second time beside it, or, once
    Hudi had made it inflight, took it for a dead run and undid it, rolling back the files
    Hudi was about to commit. Now a fresh Hudi heartbeat leaves the plan to Hudi, requested
    or inflight; once it is past Hudi's expiry the run is a dead one, undone and run as
    before."""
    path = str(tmp_path / "t")
    with tg.at_version(version):
        _, model, comp, beat = _planned(path)
        beat.parent.mkdir(exist_ok=True)
        beat.write_bytes(b"")  # Hudi's form, just refreshed
        assert execute(Table.open(path), comp).status == "busy"  # not run a second time
        t = Table.open(path)
        with Transaction(t.fs, path) as tx:  # Hudi's run goes inflight
            tx.start(t.timeline, t.timeline.get(comp.timestamp))
        assert execute(Table.open(path), comp).status == "busy"  # not undone as dead
        assert Table.open(path).timeline.get(comp.timestamp).is_inflight
        stopped = beat.stat().st_mtime - 121
        os.utime(beat, (stopped, stopped))
        assert execute(Table.open(path), comp).status == "completed"
        assert tg.read_ours(path) == tg.read_hudi_rs(path) == model.snapshot()


def _hudi_reruns(path: str, comp_ts: str) -> tuple[Path, str]:
    """What Hudi's ``compact`` of a plan whose earlier run died inflight leaves midway:
    the plan's heartbeat started (fresh, empty), then its rollback of the inflight run
    requested. The heartbeat and the rollback's instant."""
    t = Table.open(path)
    with Transaction(t.fs, path) as tx:  # the earlier run, dead inflight
        tx.start(t.timeline, t.timeline.get(comp_ts))
    beat = Path(path, METAFOLDER, ".heartbeat", comp_ts)
    beat.parent.mkdir(exist_ok=True)
    beat.write_bytes(b"")
    t = Table.open(path)
    plan = build_plan(t.fs, path, t.timeline.get(comp_ts), delete_logs=t.timeline.layout_version >= 2)
    return beat, t.timeline.create_requested(Action.ROLLBACK, None, plan.to_avro_bytes()).timestamp


@pytest.mark.parametrize("version", [6, 9])
def test_a_rollback_hudi_is_making_of_a_plan_it_reruns_is_left_to_it(tmp_path, version):
    """Re-running a compaction whose earlier run died inflight, Hudi starts the plan's
    heartbeat and then rolls the inflight run back; meanwhile that rollback is pending.
    Our writer's commit and our executor (running another plan) finish every pending
    rollback as a dead one: they reverted the plan Hudi was running, deleted its
    heartbeat, and the plan then ran a second time beside Hudi. Now such a rollback
    is left to Hudi; once the heartbeat is past Hudi's expiry it is finished as before."""
    path = str(tmp_path / "t")
    with tg.at_version(version):
        gen, model, comp, _ = _planned(path)
        beat, rollback = _hudi_reruns(path, comp.timestamp)
        tg.step(tg.open_writer(path), gen, model)  # our commit goes on beside it
        # what the executor does first when it runs any plan
        assert rollback_services.finish_dead_rollbacks(Table.open(path)) == 0
        tl = Table.open(path).timeline
        assert tl.get(comp.timestamp).is_inflight and tl.get(rollback).is_requested and beat.exists()
        assert execute(Table.open(path), comp).status == "busy"
        stopped = beat.stat().st_mtime - 121
        os.utime(beat, (stopped, stopped))
        assert execute(Table.open(path), comp).status == "completed"
        assert not Table.open(path).timeline.pending()
        assert tg.read_ours(path) == tg.read_hudi_rs(path) == model.snapshot()


@pytest.mark.parametrize("version", [6, 9])
def test_a_plan_waits_unmerged_while_hudi_commits_to_its_metadata_table(tmp_path, version):
    """On a table with Hudi's metadata table, a service's commit is refused while Hudi
    makes an instant (its commit updates that table). The executor used to merge the
    whole plan first, then find its commit refused and leave the written files for the
    next round to undo. Now it is busy before it writes anything."""
    path = str(tmp_path / "t")
    with tg.at_version(version):
        gen, _, comp, _ = _planned(path)
        w = tg.open_writer(path)
        fail_before_complete(lambda: w.upsert(gen.upserts(10, tag="hudi")))  # not in the model
        metadata_table(path, None)  # the Hudi writer's, (re)built as its write began
        [write] = [i for i in Table.open(path).timeline.pending() if i.timestamp != comp.timestamp]
        beat = Path(path, METAFOLDER, ".heartbeat", write.timestamp)
        beat.write_bytes(b"")  # a Hudi writer's, just refreshed
        assert execute(Table.open(path), comp).status == "busy"
        assert Table.open(path).timeline.get(comp.timestamp).is_requested
        assert not list_markers(Table.open(path).fs, path, comp.timestamp), "merged files were written"


@pytest.mark.parametrize("version", [6, 9])
def test_our_run_of_a_plan_keeps_its_heartbeat_for_hudi(tmp_path, version, monkeypatch):
    """Apache Hudi's compactor (multi-writer) cannot see our plan lock; it judges a plan
    by its heartbeat's age alone, and one without a heartbeat counts as a dead run to roll
    back. Our runs kept none, so Hudi could roll back the files of a run of ours in
    progress. Now the run keeps one from before the plan goes inflight to its end - ours,
    holding a time, so our own checks never take it for Hudi's - and deletes it after."""
    path = str(tmp_path / "t")
    with tg.at_version(version):
        _, model, comp, beat = _planned(path)
        seen: dict[str, tuple[bool, float]] = {}
        step = faults.step

        def spy(label: str) -> None:
            if label.startswith("compaction"):
                seen.setdefault(label.split()[1], (beat.is_file() and bool(beat.read_bytes()),
                                                   time.time() - beat.stat().st_mtime if beat.is_file() else -1))
            step(label)

        monkeypatch.setattr(faults, "step", spy)
        assert execute(Table.open(path), comp).status == "completed"
        assert seen and all(ours and 0 <= age < 120 for ours, age in seen.values()), seen
        assert not beat.exists()
        assert tg.read_ours(path) == model.snapshot()


@pytest.mark.parametrize("version", [6, 9])
def test_a_dead_run_hudi_starts_again_while_we_wait_is_left_to_it(tmp_path, version, monkeypatch):
    """The executor looks for Hudi's heartbeat of a plan before it recovers a dead run of
    it, then waits for the writers' lock (up to 120 s) to undo that run. Hudi may start
    the plan meanwhile: its heartbeat first, then its own rollback of the dead run. The
    executor used to undo the run a second time, run the plan beside Hudi and delete
    Hudi's heartbeat, leaving Hudi's rollback pending against a completed compaction. Now
    the undo checks again under the writers' lock and the plan is left to Hudi."""
    path = str(tmp_path / "t")
    with tg.at_version(version):
        _, model, comp, beat = _planned(path)
        t = Table.open(path)
        with Transaction(t.fs, path) as tx:  # an earlier run, dead inflight
            tx.start(t.timeline, t.timeline.get(comp.timestamp))
        made: list[str] = []
        finish = rollback_services.finish_dead_rollbacks

        def hudi_starts_meanwhile(table: Table, **kw: float) -> int:
            beat.parent.mkdir(exist_ok=True)
            beat.write_bytes(b"")
            tl = Table.open(path).timeline
            plan = build_plan(tl.fs, path, tl.get(comp.timestamp), delete_logs=tl.layout_version >= 2)
            made.append(tl.create_requested(Action.ROLLBACK, None, plan.to_avro_bytes()).timestamp)
            return finish(table, **kw)

        monkeypatch.setattr(rollback_services, "finish_dead_rollbacks", hudi_starts_meanwhile)
        assert execute(Table.open(path), comp).status == "retry"
        tl = Table.open(path).timeline
        assert tl.get(comp.timestamp).is_inflight and tl.get(made[0]).is_requested
        assert [i.timestamp for i in tl.instants if i.action == Action.ROLLBACK] == made
        assert beat.exists() and not beat.read_bytes(), "Hudi's heartbeat was deleted"
        assert tg.read_ours(path) == model.snapshot()


@pytest.mark.parametrize("stalled", ["refused", "held"])
@pytest.mark.parametrize("version", [6, 9])
def test_a_run_whose_heartbeat_lapsed_leaves_the_plan_to_hudi(tmp_path, version, stalled):
    """Apache Hudi judges a run of a plan by its heartbeat's age alone. A run of ours
    whose heartbeat went unrefreshed long enough (storage refusing or holding its writes,
    a stall) may have been taken for dead: Hudi rolls it back and runs the plan itself.
    Our run then went on as if nothing had happened: its next beat overwrote the
    heartbeat Hudi's run keeps, and it completed the plan over the files Hudi was rolling
    back. Now a lapsed heartbeat is neither refreshed nor deleted (a write held past the
    lapse lands, on a store without conditional writes), and the run does not complete."""
    path = str(tmp_path / "t")
    with tg.at_version(version):
        _, model, comp, beat = _planned(path)
        table = Table.open(path)
        lapsed = f"heartbeat of compaction {comp.timestamp} went unrefreshed"
        with (hudi_takes_over_at(table.fs, "compaction inflight", path, stalled=stalled) as taken,
              pytest.raises(ServiceError, match=lapsed)):
            execute(table, comp)
        assert taken == [beat]
        assert stalled == "held" or beat.read_bytes() == b"", "the heartbeat of Hudi's run was overwritten"
        assert Table.open(path).timeline.get(comp.timestamp).is_inflight  # not completed, nor undone
        merged = [p for p in Path(path).rglob(f"*_{comp.timestamp}.parquet") if METAFOLDER not in p.parts]
        assert not merged, f"the run went on merging after its heartbeat lapsed: {merged}"
        stopped = beat.stat().st_mtime - 121  # Hudi's run died too: ours undoes both, reruns
        os.utime(beat, (stopped, stopped))
        assert execute(Table.open(path), comp).status == "completed"
        assert tg.read_ours(path) == tg.read_hudi_rs(path) == model.snapshot()


@pytest.mark.parametrize("version", [6, 9])
def test_a_run_whose_heartbeat_lapsed_is_not_undone_when_storage_then_fails(tmp_path, version, monkeypatch):
    """A storage error stops a run and the run is undone at once - back to requested, or
    its files rolled back. After its heartbeat lapsed, Hudi may be running the plan
    itself (a lapse and a failing store come together): the undo changed the state of
    Hudi's run. Now such a run is left inflight for the next run to judge."""
    path = str(tmp_path / "t")
    with tg.at_version(version):
        _, _, comp, beat = _planned(path)
        table = Table.open(path)
        step = faults.step

        def disk_full(name: str) -> None:
            if name == "compaction inflight":
                raise OSError(errno.ENOSPC, "No space left on device", "a base file")
            step(name)

        monkeypatch.setattr(faults, "step", disk_full)
        with (hudi_takes_over_at(table.fs, "compaction inflight", path, stalled="refused"),
              pytest.raises(ServiceError, match="left inflight: its heartbeat went unrefreshed")):
            execute(table, comp)
        assert Table.open(path).timeline.get(comp.timestamp).is_inflight
        assert beat.read_bytes() == b"", "the heartbeat of Hudi's run was overwritten or deleted"


@pytest.mark.parametrize("version", [6, 9])
def test_hudi_starting_the_plan_while_we_check_it_for_damage_is_left_to_it(tmp_path, version, monkeypatch):
    """Between the executor's look for Hudi's heartbeat of the plan and its own heartbeat's
    first write lies the check of the plan's slices for damage (reads of every file). Hudi
    starting the plan meanwhile had its heartbeat overwritten by ours, and the plan ran
    beside Hudi. Now the look comes last, just before our heartbeat."""
    path = str(tmp_path / "t")
    with tg.at_version(version):
        _, model, comp, beat = _planned(path)
        check = executor_module.refuse_plan_damage

        def hudi_starts_meanwhile(*args: object, **kw: object) -> None:
            check(*args, **kw)
            beat.parent.mkdir(exist_ok=True)
            beat.write_bytes(b"")

        monkeypatch.setattr(executor_module, "refuse_plan_damage", hudi_starts_meanwhile)
        assert execute(Table.open(path), comp).status == "busy"
        assert beat.read_bytes() == b"" and Table.open(path).timeline.get(comp.timestamp).is_requested
