"""The commit transaction: requirements under the lock, a result value, one caller of the
timeline's transitions, no ``last_*`` state."""

from __future__ import annotations

import dataclasses
import json
import os
import posixpath
import re
import threading
from pathlib import Path

import pyarrow as pa
import pytest

import streamer
import streamer.read
from streamer.config.policies import CleanPolicy, CompactionPolicy
from streamer.errors import CommitConflictError, ConfigError
from streamer.fs import FileSystem
from streamer.services.clean import CleanOutcome, run_clean
from streamer.services.compaction import CompactionConflict, schedule_compaction
from streamer.table.identity import IndexConfig, IndexType
from streamer.table.instant import Action
from streamer.table.metadata import RollbackPlan, RollbackRequest
from streamer.table.metadata_table import has_metadata_table
from streamer.table.properties import METAFOLDER
from streamer.table.snapshot import TableSnapshot
from streamer.write import HudiWriter, TableConfig
from streamer.write.lock import WriterLock
from streamer.write.requirements import ExpectCheckpoint
from streamer.write.result import CommitResult
from streamer.write.tagging import EngineStats
from streamer.write.transaction import Transaction
from tests.support import block_tables as tg
from tests.support.failed_write import fail_before_complete
from tests.support.hudi_actions import metadata_table

CFG = TableConfig(name="t", record_key_fields=["id"], partition_fields=["city"], ordering_field="ts")


def _rows(ids, ts=1) -> pa.Table:
    ids = list(ids)
    return pa.table({"id": [str(i) for i in ids], "city": ["sf"] * len(ids), "ts": [ts] * len(ids)})


def _writer(tmp_path) -> HudiWriter:
    return HudiWriter.create(str(tmp_path / "t"), CFG)


def _timeline_files(w: HudiWriter) -> list[str]:
    return sorted(st.name for st in w.fs.list_dir(posixpath.join(w.base_path, METAFOLDER)) if not st.is_dir
                  and st.name[:1].isdigit())


class _Probe:
    """A requirement that records whether the writers' lock was held when it was checked."""

    def __init__(self, fs: FileSystem, base_path: str, refuse: bool = False) -> None:
        self.fs, self.base_path, self.refuse = fs, base_path, refuse
        self.held: list[bool] = []

    def check(self, snapshot: TableSnapshot) -> None:
        rival = WriterLock(self.fs, self.base_path, purpose="probe")
        got = rival.try_acquire()
        if got:
            rival.release()
        self.held.append(not got)
        if self.refuse:
            raise CommitConflictError("refused by the probe")


def test_requirements_are_checked_holding_the_writers_lock(tmp_path, monkeypatch):
    w = _writer(tmp_path)
    probe = _Probe(w.fs, w.base_path)
    real = Transaction.require

    def with_probe(snapshot, requirements):
        real(snapshot, (*requirements, probe))

    monkeypatch.setattr(Transaction, "require", staticmethod(with_probe))
    w.upsert(_rows(range(3)))
    assert probe.held == [True]


def test_a_failed_requirement_leaves_no_instant(tmp_path):
    w = _writer(tmp_path)
    first = w.upsert(_rows(range(3)))
    # another run committed a checkpoint after the one this run started from
    w.upsert(_rows(range(3, 5)), extra_metadata={"ckpt": "2"})
    before = _timeline_files(w)
    stale = ExpectCheckpoint(first.instant, ("ckpt",), owner="p")
    with pytest.raises(CommitConflictError, match="newer checkpoint"):
        w.upsert(_rows(range(5, 8)), expect_checkpoint=stale)
    assert _timeline_files(w) == before  # no requested (or any) instant of the refused commit
    # and the lock was released: the next commit goes in
    assert w.upsert(_rows(range(5, 8))).instant


def test_a_refusing_requirement_writes_nothing_and_frees_the_lock(tmp_path, monkeypatch):
    w = _writer(tmp_path)
    w.upsert(_rows(range(3)))
    before = _timeline_files(w)
    probe = _Probe(w.fs, w.base_path, refuse=True)
    monkeypatch.setattr(Transaction, "require", staticmethod(lambda s, r: probe.check(s)))
    with pytest.raises(CommitConflictError, match="refused by the probe"):
        w.upsert(_rows(range(3, 6)))
    assert _timeline_files(w) == before
    assert not [n for n in _timeline_files(w) if n.endswith(".requested") and n not in before]
    assert WriterLock(w.fs, w.base_path).try_acquire()


def test_another_index_is_refused_under_the_lock(tmp_path):
    w = _writer(tmp_path)
    w.upsert(_rows(range(3)))
    before = _timeline_files(w)
    other = HudiWriter(w.fs, w.base_path, CFG.with_changes(index=IndexConfig(IndexType.BUCKET, num_buckets=4)),
                       w.options)
    with pytest.raises(ConfigError):
        other.upsert(_rows(range(3, 6)))
    assert _timeline_files(w) == before


def test_the_commit_returns_a_frozen_result(tmp_path):
    w = _writer(tmp_path)
    res = w.upsert(_rows(range(5)))
    again = w.upsert(_rows(range(3, 8), ts=2))
    assert isinstance(again, CommitResult) and dataclasses.is_dataclass(again)
    with pytest.raises(dataclasses.FrozenInstanceError):
        again.instant = "x"  # type: ignore[misc]
    assert again.instant > res.instant and again.operation == "UPSERT" and again.stats
    assert again.snapshot is not None and again.snapshot.timeline.get(again.instant).is_completed
    assert again.lookup is not None  # the bloom index looked the keys up
    assert again.engine_stats == EngineStats("local", again.engine_stats.driver_keys, 0)
    assert again.engine_stats.driver_keys == 5
    assert not [a for a in vars(w) if a.startswith("last_")]


def test_a_service_transaction_with_a_plan_lock_takes_no_writers_lock(tmp_path):
    from streamer.write.lock import PlanLock

    w = _writer(tmp_path)
    w.upsert(_rows(range(3)))
    plan_lock = PlanLock(w.fs, w.base_path, "x")
    assert plan_lock.try_acquire()
    try:
        with Transaction(w.fs, w.base_path, lock=plan_lock) as tx:
            assert WriterLock(w.fs, w.base_path).try_acquire()  # free: writers go on
            tl = TableSnapshot.load(w.fs, w.base_path).timeline
            inst = tx.request(tl, Action.CLEAN, plan=b"")
            assert tl.get(inst.timestamp).is_requested
        assert plan_lock.still_owner()  # handed in, so not released by the transaction
    finally:
        plan_lock.release()


# ------------------------------------------------------- rollbacks of a completed commit
def _hudi_style_rollback_requested(w: HudiWriter, target: str) -> list[str]:
    """What a rollback of the completed ``target`` that Apache Hudi was asked for (its CLI)
    leaves when it dies right after its plan: a requested rollback listing the files the
    commit wrote, the target still completed. Returns those files."""
    tl = TableSnapshot.load(w.fs, w.base_path).timeline
    meta = json.loads(tl.read_details(tl.get(target)))
    files = {part: [posixpath.join(w.base_path, s["path"]) for s in stats]
             for part, stats in meta["partitionToWriteStats"].items()}
    plan = RollbackPlan(target, "deltacommit", [RollbackRequest(part, files_to_be_deleted=paths)
                                                for part, paths in files.items()])
    with Transaction(w.fs, w.base_path) as tx:
        tx.request(tl, Action.ROLLBACK, plan=plan.to_avro_bytes())
    return [f for paths in files.values() for f in paths]


def test_a_pending_rollback_of_a_completed_commit_unpublishes_it_before_its_files_go(tmp_path):
    """Resumed, the rollback first takes the commit off the completed timeline (as Hudi
    does), then deletes its files: the table never holds a completed commit without them,
    and afterwards reads exactly what it held before that commit."""
    w = _writer(tmp_path)
    w.upsert(_rows(range(3)))
    second = w.upsert(pa.table({"id": ["x", "y"], "city": ["la", "la"], "ts": [1, 1]}))
    files = _hudi_style_rollback_requested(w, second.instant)
    assert files and all(w.fs.exists(f) for f in files)

    order: list[str] = []
    real_delete = w.fs.delete_file

    def watch(path: str, missing_ok: bool = True) -> None:
        if path.endswith(f"{second.instant}.deltacommit"):
            order.append("unpublished")
        elif path in files:
            order.append("file")
        real_delete(path, missing_ok)

    w.fs.delete_file = watch  # type: ignore[method-assign]
    try:
        outcomes = _resume(w)
    finally:
        w.fs.delete_file = real_delete  # type: ignore[method-assign]
    assert [o.target for o in outcomes] == [second.instant]
    assert order and order[0] == "unpublished" and "file" in order, order
    tl = TableSnapshot.load(w.fs, w.base_path).timeline
    assert tl.get(second.instant) is None
    assert [i.action for i in tl.completed()][-1] == Action.ROLLBACK and not tl.pending()
    assert not any(w.fs.exists(f) for f in files)
    assert sorted(streamer.read.Table.open(w.base_path).read().column("id").to_pylist()) == ["0", "1", "2"]


def _resume(w: HudiWriter):
    with Transaction(w.fs, w.base_path) as tx:
        return tx.rollback_failed_writes(TableSnapshot.load(w.fs, w.base_path).timeline)


# ---------------------------------------------------------------------- structure (grep)
ROOT = Path(streamer.__file__).parent
TRANSITIONS = ("create_requested", "transition_to_inflight", "complete", "revert_to_requested",
               "delete_pending", "unpublish")


def _sources():
    for path in sorted(ROOT.rglob("*.py")):
        yield path.relative_to(ROOT.parent).as_posix(), path.read_text()


def test_only_the_transaction_moves_instants():
    call = re.compile(r"\.(" + "|".join(TRANSITIONS) + r")\(")
    callers = {name for name, text in _sources() if call.search(text)}
    assert callers == {"streamer/write/transaction.py"}


def test_no_last_attributes_are_assigned():
    """Results come back as values the call returns, never as state left on an object."""
    assign = re.compile(r"\.last_\w+\s*(?::[^=\n]*)?=(?!=)")
    found = [f"{name}: {m.group(0)}" for name, text in _sources() for m in assign.finditer(text)]
    assert found == []


@pytest.mark.parametrize("version", [6, 9])
def test_a_write_a_live_hudi_writer_is_making_is_refused_not_rolled_back(tmp_path, version):
    """An Apache Hudi writer takes no lock of ours; its pending write has a heartbeat Hudi
    refreshes, an empty ``.hoodie/.heartbeat/<instant>``. Our commit used to roll every
    pending write back as a dead writer's, deleting the files a live writer was about to
    commit. Now it is refused (retryable) while the heartbeat is younger than Hudi's
    expiry, and rolled back once it is older; a write of ours a crash left (its heartbeat
    holds a time) is rolled back at once, as before."""
    path = str(tmp_path / "t")
    with tg.at_version(version):
        w, gen, model = tg.build(path, 2)
        fail_before_complete(lambda: w.upsert(gen.upserts(30, tag="inflight")))  # not in the model
        [pending] = streamer.read.Table.open(path).timeline.pending()
        beat = Path(path, METAFOLDER, ".heartbeat", pending.timestamp)
        assert beat.read_bytes(), "precondition: our writer's heartbeat holds a time"
        beat.write_bytes(b"")  # Hudi's form, just refreshed
        impatient = HudiWriter.open(path, options=dataclasses.replace(tg.SMALL, lock_timeout_s=0.2))
        with pytest.raises(CommitConflictError, match=rf"Apache Hudi writer is writing instant {pending.timestamp}"):
            tg.step(impatient, gen, model)
        with pytest.raises(CommitConflictError, match="Apache Hudi writer"):
            impatient.rollback_failed_writes()
        tl = streamer.read.Table.open(path).timeline
        assert [i.timestamp for i in tl.pending()] == [pending.timestamp]
        assert [i.timestamp for i in tl.completed_writes()][-1] < pending.timestamp, "nothing was committed"
        # a commit waits for it as for our own lock: here the Hudi writer stops beating
        # (its heartbeat ages past Hudi's expiry) while our commit waits
        stopped = beat.stat().st_mtime - 121
        stops = threading.Timer(0.5, os.utime, (beat, (stopped, stopped)))
        stops.start()
        try:
            tg.step(HudiWriter.open(path, options=dataclasses.replace(tg.SMALL, lock_timeout_s=30.0)), gen, model)
        finally:
            stops.cancel()
        assert not streamer.read.Table.open(path).timeline.pending()
        assert tg.read_ours(path) == tg.read_hudi_rs(path) == model.snapshot()
        # ours, crashed with a fresh heartbeat (and the temp file of a beat a kill cut
        # short): rolled back by the next commit, the temp file swept with it
        fail_before_complete(lambda: w.upsert(gen.upserts(30, tag="crashed")))
        [crashed] = streamer.read.Table.open(path).timeline.pending()
        cut = beat.parent / f"_mor_tmp.{crashed.timestamp}.0123abcd.tmp"
        cut.write_bytes(b"")
        tg.step(tg.open_writer(path), gen, model)
        assert not streamer.read.Table.open(path).timeline.pending()
        assert not cut.exists(), "a cut beat's temp file outlived its rolled-back write"
        assert tg.read_ours(path) == model.snapshot()


@pytest.mark.parametrize("version", [6, 9])
def test_a_service_keeps_the_metadata_table_a_live_hudi_writer_commits_to(tmp_path, version):
    """A table service drops Hudi's metadata table on entry: it commits, and does not
    maintain one. A live Apache Hudi writer updates that metadata table when it commits,
    and one deleted under it fails that commit or loses its update. The service used to
    drop it anyway; now it reports itself busy at once, leaving the metadata table alone
    (a compaction's schedule raises its conflict, a clean returns having done nothing,
    each runs again on its next round). Once the writer has stopped (its heartbeat past
    Hudi's expiry) the metadata table goes as before."""
    path = str(tmp_path / "t")
    with tg.at_version(version):
        w, gen, _ = tg.build(path, 2)
        fail_before_complete(lambda: w.upsert(gen.upserts(30, tag="inflight")))
        metadata_table(path, None)  # the Hudi writer's, (re)built as its write began
        [pending] = streamer.read.Table.open(path).timeline.pending()
        beat = Path(path, METAFOLDER, ".heartbeat", pending.timestamp)
        beat.write_bytes(b"")  # Hudi's form, just refreshed
        mdt = Path(path, METAFOLDER, "metadata")
        with pytest.raises(CompactionConflict, match=rf"Apache Hudi writer is writing instant {pending.timestamp}"):
            schedule_compaction(streamer.read.Table.open(path), CompactionPolicy(), force=True, lock_timeout_s=30)
        assert run_clean(streamer.read.Table.open(path), CleanPolicy(retain_commits=1)) == CleanOutcome(None, 0, None)
        assert has_metadata_table(streamer.read.Table.open(path).properties) and mdt.is_dir()
        assert [i.timestamp for i in streamer.read.Table.open(path).timeline.pending()] == [pending.timestamp]
        stopped = beat.stat().st_mtime - 121
        os.utime(beat, (stopped, stopped))
        schedule_compaction(streamer.read.Table.open(path), CompactionPolicy(), force=True, lock_timeout_s=0.2)
        assert not has_metadata_table(streamer.read.Table.open(path).properties) and not mdt.exists()


@pytest.mark.parametrize("version", [6, 9])
def test_the_metadata_table_stays_while_hudi_runs_a_compaction(tmp_path, version):
    """Apache Hudi's multi-writer compaction keeps a heartbeat for the plan it runs, and
    its commit updates Hudi's metadata table. A service step and our writer's commit both
    drop that metadata table; they used to while Hudi ran such a compaction. Now a service
    step is busy at once, and a commit waits for it as for a Hudi write (refused after
    its lock timeout, nothing written). Once the heartbeat is past Hudi's expiry the
    metadata table goes as before."""
    path = str(tmp_path / "t")
    with tg.at_version(version):
        w, gen, model = tg.build(path, 3)
        plan = schedule_compaction(streamer.read.Table.open(path), CompactionPolicy(), force=True, lock_timeout_s=30)
        assert plan is not None
        metadata_table(path, None)
        beat = Path(path, METAFOLDER, ".heartbeat", plan.timestamp)
        beat.parent.mkdir(exist_ok=True)
        beat.write_bytes(b"")  # Hudi's, just refreshed: Hudi runs the plan
        mdt = Path(path, METAFOLDER, "metadata")
        running = rf"Apache Hudi is running compaction {plan.timestamp}"
        assert run_clean(streamer.read.Table.open(path), CleanPolicy(retain_commits=1)) == CleanOutcome(None, 0, None)
        assert mdt.is_dir(), "a clean dropped the metadata table under Hudi's compaction"
        impatient = HudiWriter.open(path, options=dataclasses.replace(tg.SMALL, lock_timeout_s=0.2))
        with pytest.raises(CommitConflictError, match=running):
            tg.step(impatient, gen, model)
        assert has_metadata_table(streamer.read.Table.open(path).properties) and mdt.is_dir()
        assert [i.timestamp for i in streamer.read.Table.open(path).timeline.pending()] == [plan.timestamp]
        stopped = beat.stat().st_mtime - 121
        os.utime(beat, (stopped, stopped))
        tg.step(tg.open_writer(path), gen, model)
        assert not has_metadata_table(streamer.read.Table.open(path).properties) and not mdt.exists()
        assert tg.read_ours(path) == model.snapshot()
