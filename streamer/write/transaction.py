"""Every commit to a table, the writer's and the table services', goes through a :class:`Transaction`.

Why one object: the commit protocol is what keeps a table whole against a second writer
and against a crash at any point, and each step's place in it matters:

1. take the writers' lock, waiting up to a timeout [a second live writer must wait or
   fail, not interleave];
2. check the caller's requirements on the table as read *under* that lock - the
   checkpoint its batch starts from, the index, the schema [checked before the lock,
   two runs could both pass and both commit];
3. roll back failed writes [their files must not leak into this commit's view];
4. plan [on the state the requirements were checked on];
5. ``requested`` -> ``inflight`` -> completed, the completed instant written atomically
   after every data file is durable [readers trust completed instants only], and only
   while the lock is still ours [a successor may be rolling a stalled holder back];
6. drop the markers [they only serve a rollback of a write that did not complete].

Spread over the writer and every table service, each copy had to get this order right on
its own; here it is written once, and the timeline's transition methods have no other
caller. Two ways in:

* :meth:`Transaction.commit` runs a writer's delta commit whole (a :class:`DeltaWork`
  supplies its plan and its data files) and returns a :class:`CommitResult` - the caller
  reads what it committed from the value returned, never from state left on an object;
* table services, whose plans stay on the timeline between runs, take the steps one by
  one (:meth:`request`, :meth:`start`, :meth:`publish`, :meth:`revert`,
  :meth:`rollback`). A service running a plan under the plan's own lock hands that lock
  in (``lock=``), so ownership is checked on the lock the run really holds.

The crash-test fault points (:mod:`streamer.faults`) sit at the same logical steps
as before this object existed: kill campaigns steer by their labels and step counts.
"""

from __future__ import annotations

import logging
import posixpath
import time
from collections.abc import Callable, Sequence
from typing import Protocol

from streamer import faults
from streamer.errors import CommitConflictError, CommitError, StreamerError
from streamer.fs import FileSystem
from streamer.table import lsm_history
from streamer.table.instant import Action, Instant, State
from streamer.table.metadata import CommitMetadata, RollbackMetadata, RollbackPlan, WriteStat
from streamer.table.metadata_table import drop_metadata_table, has_metadata_table
from streamer.table.properties import METAFOLDER, load_properties
from streamer.table.snapshot import TableSnapshot
from streamer.table.timeline import HEARTBEAT_FOLDER, HUDI_HEARTBEAT_EXPIRY_S, Timeline, hudi_run
from streamer.write.lock import FileLock, InstantHeartbeat, WriterLock
from streamer.write.markers import delete_markers
from streamer.write.result import CommitResult
from streamer.write.rollback import (
    RollbackOutcome,
    build_plan,
    execute_plan,
    sweep_completed,
    sweep_temp_for_markers,
)
from streamer.write.state import TableState
from streamer.write.tagging import EngineStats, Planned

log = logging.getLogger(__name__)


class Requirement(Protocol):
    """What must still hold on the table, read under the lock, for a commit to go in."""

    def check(self, snapshot: TableSnapshot) -> None: ...


class DeltaWork(Protocol):
    """What a writer's delta commit brings to :meth:`Transaction.commit`: its requirements
    and the steps only the writer knows (preparing, planning and writing its rows)."""

    operation: str  # Hudi's operation type (UPSERT, INSERT...)
    engine_name: str
    input_rows: int

    @property
    def requirements(self) -> Sequence[Requirement]: ...

    def prepare(self, state: TableState) -> TableState: ...

    def plan(self, state: TableState, instant: str) -> Planned: ...

    def write(self, state: TableState, instant: str, planned: Planned) -> list[WriteStat]: ...

    def metadata(self, stats: list[WriteStat]) -> CommitMetadata: ...

    def release(self) -> None: ...


class Transaction:
    """One commit (or one service step) to the table at ``base_path``; a context manager.

    Without ``lock`` it takes the writers' lock on enter, waiting up to ``timeout_s``; a
    lock still busy then raises :class:`CommitConflictError`, or what ``busy`` makes of
    its message (a table service's own conflict type). ``drop_metadata``: delete Hudi's
    metadata table right after locking - this project does not maintain it, and Hudi
    readers trust it over the timeline, so a commit must not leave one stale behind.
    """

    def __init__(self, fs: FileSystem, base_path: str, *, timeout_s: float = 0.0, expiry_s: float = 60.0,
                 purpose: str = "writer", busy: Callable[[str], StreamerError] | None = None,
                 lock: FileLock | None = None, drop_metadata: bool = False) -> None:
        self.fs = fs
        self.base_path = base_path
        self.timeout_s = timeout_s
        self._owns_lock = lock is None
        self.lock: FileLock = lock or WriterLock(fs, base_path, expiry_s, timeout_s=timeout_s, purpose=purpose)
        self._busy = busy
        self._drop_metadata = drop_metadata

    def __enter__(self) -> Transaction:
        if self._owns_lock:
            try:
                self.lock.acquire(self.timeout_s)
            except CommitConflictError as e:
                if self._busy is None:
                    raise
                raise self._busy(f"{self.base_path}: writer lock busy for {self.timeout_s:.0f}s ({e})") from e
        try:
            if self._drop_metadata:
                self._drop_metadata_table()
        except CommitConflictError as e:
            self.__exit__()
            if self._busy is None:
                raise
            raise self._busy(str(e)) from e
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        if self._owns_lock:
            self.lock.release()

    def _drop_metadata_table(self) -> None:
        """Drop Hudi's metadata table - unless Apache Hudi is making an instant of the
        table (a write, or a compaction or clustering of its multi-writer services, see
        :meth:`Timeline.live_hudi_instants`): its commit updates that metadata table, and
        one deleted under it fails or loses that commit (:class:`CommitConflictError`).
        Not waited for, as a commit waits: a service step holding the writers' lock that
        long would stall our own writer, and the next round runs it. A table without a
        metadata table costs one read of its properties, as before."""
        props = load_properties(self.fs, self.base_path)
        if has_metadata_table(props):
            live = Timeline.load(self.fs, self.base_path, props).live_hudi_instants()
            if live:
                raise self._hudi_writing(*live[0])
            drop_metadata_table(self.fs, self.base_path, props)

    def still_owner(self) -> bool:
        """Whether the lock is still ours (a stall past its expiry lets a successor take it)."""
        return self.lock.still_owner()

    def heartbeat_lapse(self) -> float | None:
        """Seconds Hudi's heartbeat of the instant being made went unrefreshed, when that
        was long enough for Apache Hudi to judge the run dead (it takes no lock of ours:
        it may be rolling the instant back, or running the plan itself); ``None`` while it
        is kept (:meth:`InstantHeartbeat.lapsed_for`)."""
        return self.lock.lapsed_for() if isinstance(self.lock, InstantHeartbeat) else None

    # ------------------------------------------------------------------ a delta commit
    def commit(self, work: DeltaWork, base: TableSnapshot | None = None, *,
               started: float | None = None) -> CommitResult:
        """Run ``work`` as one delta commit, steps 2-6 of the module doc (the lock is held).

        ``base``: the snapshot of the caller's last commit, refreshed with one listing
        instead of read whole. ``started``: when the caller began (``time.monotonic``),
        so the result's duration counts the wait for the lock too."""
        started = time.monotonic() if started is None else started
        state = TableState(base.refresh() if base is not None else TableSnapshot.load(self.fs, self.base_path))
        state = self._after_live_hudi(state)
        if drop_metadata_table(self.fs, self.base_path, state.props):
            state = TableState.load(self.fs, self.base_path)
        self.require(state.snapshot, work.requirements)
        rollbacks = self.rollback_failed_writes(state.timeline)
        if rollbacks:
            state = TableState.load(self.fs, self.base_path)
            self.require(state.snapshot, work.requirements)
        try:
            state = work.prepare(state)
            instant = state.timeline.new_instant_time()
            planned = work.plan(state, instant)
            inflight = self._open(state.timeline, instant, work.operation)
            stats = work.write(state, instant, planned)
            # after the write: an engine that plans on executors counts what it received then
            engine_stats = EngineStats(work.engine_name, planned.driver_keys, planned.driver_summary_rows)
        finally:
            work.release()
        self._refuse_clustered(state, instant, stats)
        self._close(state.timeline, inflight, work.metadata(stats))
        return CommitResult(
            # the timeline object now holds our completed instant: the next batch re-lists
            # from here, and services read this without touching storage
            snapshot=state.snapshot.after_commit(),
            instant=instant, operation=work.operation, engine=work.engine_name, stats=stats,
            input_rows=work.input_rows, duration_s=time.monotonic() - started, rollbacks=rollbacks,
            lookup=planned.lookup, engine_stats=engine_stats, moved=planned.moved, stale=planned.stale,
        )

    @staticmethod
    def _refuse_clustered(state: TableState, instant: str, stats: Sequence[WriteStat]) -> None:
        """Fail the commit if it wrote into a file group a pending clustering will rewrite -
        Hudi's default (``SparkRejectUpdateStrategy``): the clustering replaces the group
        with what its plan read, so these rows would be lost. Asked of the commit's own
        listing (a steady commit lists the timeline once): a clustering Hudi schedules,
        without our lock, while this commit writes is not seen."""
        busy = state.fsview.pending_clustering_file_groups()
        if not busy:
            return
        hit = sorted({(s.partition_path or "", s.file_id) for s in stats} & set(busy))
        if hit:
            p, f = hit[0]
            raise CommitConflictError(
                f"instant {instant} of {state.base_path} wrote into file group {p}/{f}, which the pending "
                f"clustering {busy[hit[0]]} will rewrite ({len(hit)} group(s) in all); not committed: the "
                "next run rolls it back, and the batch goes through once the clustering completed")

    @staticmethod
    def require(snapshot: TableSnapshot, requirements: Sequence[Requirement]) -> None:
        """Check each requirement on ``snapshot``; the first that fails raises its own error."""
        for r in requirements:
            r.check(snapshot)

    def _open(self, timeline: Timeline, instant: str, operation: str) -> Instant:
        """``deltacommit.requested`` -> ``.inflight``, with Hudi's heartbeat of the instant
        begun first, as Hudi's writers begin theirs: a Hudi writer's lazy clean counts a
        pending instant without a heartbeat as a dead one to roll back. A heartbeat whose
        instant never reached the timeline (a crash in between) is swept by the next
        commit (:func:`~streamer.write.rollback.sweep_completed`)."""
        self._writer_lock().start_instant(instant)
        requested = self.request(timeline, Action.DELTA_COMMIT, instant)
        faults.step("requested")
        inflight = self.start(timeline, requested, timeline.commit_bytes(CommitMetadata(operation_type=operation)))
        faults.step("inflight")
        return inflight

    def _close(self, timeline: Timeline, inflight: Instant, meta: CommitMetadata) -> None:
        """Publish ``inflight`` with ``meta`` - only while the lock is ours - then drop its
        markers and heartbeat."""
        instant = inflight.timestamp
        faults.step("before complete")
        if not self.still_owner():  # stalled past the expiry (or a skewed clock judged
            # us dead): a successor may be rolling this instant back - never publish it
            raise CommitConflictError(
                f"lost the writer lock of {self.base_path} while writing instant {instant}; "
                "the batch is not committed and its next run rolls the instant back")
        if (lapse := self.heartbeat_lapse()) is not None:  # likewise, for Apache Hudi
            raise CommitConflictError(
                f"the heartbeat of instant {instant} of {self.base_path} went unrefreshed for {lapse:.0f}s "
                "(the process stalled, or storage refused or held its writes), so Apache Hudi may be rolling it "
                "back; the batch is not committed and its next run rolls the instant back")
        try:
            self.publish(timeline, inflight, timeline.commit_bytes(meta))
        except OSError as e:
            raise CommitError(f"could not complete instant {instant} of {self.base_path}: {e}") from e
        faults.step("completed")
        delete_markers(self.fs, self.base_path, instant)
        self._writer_lock().end_instant(instant)

    def _writer_lock(self) -> WriterLock:
        if not isinstance(self.lock, WriterLock):
            raise CommitError(f"{self.base_path}: a delta commit needs the writers' lock, not {self.lock.path}")
        return self.lock

    # ------------------------------------------------------------------ the transitions
    def request(self, timeline: Timeline, action: str, timestamp: str | None = None,
                plan: bytes = b"") -> Instant:
        """Write ``<ts>.<action>.requested`` holding ``plan``. Without ``timestamp`` the
        time is later than the timeline as stored: the writers' lock is held, so no instant
        is made between that listing and this file."""
        return timeline.create_requested(action, timestamp, plan)

    def start(self, timeline: Timeline, requested: Instant, content: bytes = b"") -> Instant:
        """``requested`` -> ``inflight``."""
        return timeline.transition_to_inflight(requested, content)

    def publish(self, timeline: Timeline, inflight: Instant, metadata: bytes) -> Instant:
        """Publish ``inflight``: its completed file appears atomically with ``metadata``."""
        return timeline.complete(inflight, metadata)

    def revert(self, timeline: Timeline, instant: Instant) -> Instant:
        """``inflight`` -> ``requested``, the plan kept (a table service run that wrote nothing)."""
        return timeline.revert_to_requested(instant)

    def archive(self, timeline: Timeline, instants: Sequence[Instant], path: str, data: bytes) -> None:
        """Move completed ``instants`` to the archived timeline: the archive file ``path``
        holding them all (``data``) is durable before anything leaves the active timeline,
        and each instant's requested/inflight files go before its completed one, so no
        reader sees a half-removed instant as pending."""
        self.fs.write_atomic(path, data)
        faults.step("archive written")
        for inst in instants:
            for state in (State.REQUESTED, State.INFLIGHT, State.COMPLETED):
                self.fs.delete_file(timeline.path_of(inst, state))
            faults.step(f"archive removed {inst.timestamp}")

    def archive_history(self, timeline: Timeline, instants: Sequence[Instant], folder: str, name: str,
                        data: bytes) -> str:
        """Move completed ``instants`` to the LSM history in ``folder`` (table versions 8 and
        9, :mod:`streamer.table.lsm_history`): the data file ``name`` (``data``), then the
        next manifest listing it with the snapshot's files, then ``_version_`` naming that
        manifest - only then is the move published, and only then do the instants leave the
        active timeline (:meth:`finish_archive`). Returns the data file's path.

        A manifest past ``_version_`` is a crashed run's, never published: removed first
        (Hudi 1.0.2's archiver cannot write over it). Old manifests and files go in
        :meth:`merge_history`, which the archive runs next."""
        snap = lsm_history.read_snapshot(self.fs, folder)
        for v in lsm_history.manifest_versions(self.fs, folder):
            if v > snap.version:
                self.fs.delete_file(posixpath.join(folder, f"{lsm_history.MANIFEST_PREFIX}{v}"))
        if any(f.name == name for f in snap.files):
            raise CommitError(f"the LSM history already lists {name}", folder)
        path = self._publish_history(snap, (), name, data)
        self.finish_archive(timeline, instants)
        return path

    def merge_history(self, folder: str, *, batch: int = lsm_history.MERGE_BATCH) -> list[str]:
        """Merge the LSM history's layers as Hudi 1.x's archiver does after each run
        (:func:`~streamer.table.lsm_history.merge_candidates`): the oldest files of layer
        0 into one of layer 1 once ``batch`` wait, then layer 1 likewise, and so on; then
        clean. Each merge is published as any snapshot (file, manifest, ``_version_``), so
        a stop at any step reads as before. Returns the merged files' names.

        The clean keeps the newest three manifests plus one per merge, and removes the
        older ones and every data file none of the kept manifests lists (the merged
        sources, a stopped run's file): a reader that loaded an older snapshot a moment ago
        still finds its files."""
        merged: list[str] = []
        layer = 0
        while True:
            snap = lsm_history.read_snapshot(self.fs, folder)
            sources = lsm_history.merge_candidates(snap, layer, batch)
            if not sources:
                break
            name = lsm_history.merged_name(sources)
            self._publish_history(snap, sources, name, lsm_history.merged_file(self.fs, folder, sources))
            merged.append(name)
            layer += 1
        self._clean_history(folder, lsm_history.MANIFESTS_KEPT + len(merged))
        return merged

    def _publish_history(self, snap: lsm_history.Snapshot, removed: Sequence[lsm_history.HistoryFile],
                         name: str, data: bytes) -> str:
        """A new snapshot of the history: ``snap``'s files without ``removed``, with the data
        file ``name`` added last; written as the data file, the next manifest, then
        ``_version_`` naming it. Returns the data file's path."""
        path = posixpath.join(snap.folder, name)
        self.fs.write_atomic(path, data)
        faults.step("history file written")
        version = snap.version + 1 if snap.version >= 0 else 1
        gone = {f.name for f in removed}
        files = (*(f for f in snap.files if f.name not in gone), lsm_history.HistoryFile(name, len(data)))
        self.fs.write_atomic(posixpath.join(snap.folder, f"{lsm_history.MANIFEST_PREFIX}{version}"),
                             lsm_history.manifest_bytes(files))
        faults.step("history manifest written")
        self.fs.write_atomic(posixpath.join(snap.folder, lsm_history.VERSION_FILE), str(version).encode())
        faults.step("history version written")
        return path

    def _clean_history(self, folder: str, keep: int) -> None:
        manifests, data = lsm_history.unreferenced(self.fs, folder, keep)
        for name in manifests:  # the manifests first: no kept snapshot lists a file removed next
            self.fs.delete_file(posixpath.join(folder, name))
        faults.step("history manifests cleaned")
        for name in data:
            self.fs.delete_file(posixpath.join(folder, name))

    def finish_archive(self, timeline: Timeline, instants: Sequence[Instant]) -> None:
        """Remove archived ``instants`` from the active timeline as Hudi 1.x's archiver
        does: every requested and inflight file first, then the completed files oldest
        first, so a reader never sees a gap or a completed instant still pending."""
        for inst in instants:
            for state in (State.REQUESTED, State.INFLIGHT):
                self.fs.delete_file(timeline.path_of(inst, state))
        faults.step("archive removed pending files")
        for inst in sorted(instants, key=lambda i: i.timestamp):
            self.fs.delete_file(timeline.path_of(inst, State.COMPLETED))
            faults.step(f"archive removed {inst.timestamp}")

    # ------------------------------------------------------------------ rollback
    def rollback(self, timeline: Timeline, target: Instant) -> RollbackOutcome:
        """Roll back one failed pending write or service run (see :mod:`streamer.write.rollback`)."""
        plan = build_plan(self.fs, self.base_path, target, delete_logs=timeline.layout_version >= 2)
        rb = self.request(timeline, Action.ROLLBACK, plan=plan.to_avro_bytes())
        faults.step("rollback requested")
        rb = self.start(timeline, rb)
        meta = execute_plan(self.fs, self.base_path, plan, rb.timestamp)
        self._finish_rollback(timeline, target, rb, meta)
        return RollbackOutcome(rb.timestamp, target.timestamp, meta.total_files_deleted, len(meta.partition_metadata))

    def resume_rollbacks(self, timeline: Timeline) -> list[RollbackOutcome]:
        """Finish rollbacks a crash interrupted, from their saved plans. Holding the writers'
        lock, every pending rollback is a dead one: rollbacks run only holding it.

        A plan may target a *completed* instant: Apache Hudi rolls back a commit a user asks
        it to (its CLI, a restore), and a crash between the plan and Hudi's first step
        leaves the target completed. That step is taken here as Hudi takes it - the target
        unpublished before any of its files is deleted - so no reader ever sees a completed
        instant whose files are gone.

        One exception: a rollback whose target has a live Apache Hudi heartbeat is Hudi's,
        running now. Hudi takes no lock of ours; re-running a compaction, it starts the
        plan's heartbeat and then rolls back its earlier inflight run. Finishing that
        rollback here would revert the plan Hudi is running and delete its heartbeat, so
        the plan would run a second time beside Hudi. It is left to Hudi."""
        out = []
        for rb in [i for i in timeline.pending() if i.action == Action.ROLLBACK]:
            plan = RollbackPlan.from_bytes(timeline.read_plan(rb), timeline.path_of(rb, State.REQUESTED))
            target = timeline.get(plan.instant_time) or Instant(plan.instant_time, plan.action, State.INFLIGHT)
            age = timeline.hudi_heartbeat_age(target)
            if age is not None:
                log.info("%s: rollback %s left to Apache Hudi: %s", self.base_path, rb.timestamp,
                         hudi_run(target, age))
                continue
            if rb.is_requested:
                rb = self.start(timeline, rb)
            if target.is_completed:
                target = timeline.unpublish(target)
                faults.step("rollback unpublished target")
            meta = execute_plan(self.fs, self.base_path, plan, rb.timestamp)
            self._finish_rollback(timeline, target, rb, meta)
            out.append(RollbackOutcome(rb.timestamp, plan.instant_time, meta.total_files_deleted, 0))
        return out

    def refuse_live_hudi_writes(self, timeline: Timeline) -> None:
        """Raise :class:`CommitConflictError` when an Apache Hudi writer is writing the
        table now (a pending write with a live Hudi heartbeat): one writer at a time, and
        rolling its write back would destroy it. Nothing is changed; it is retryable."""
        live = timeline.live_hudi_writes()
        if live:
            raise self._hudi_writing(*live[0])

    def _hudi_writing(self, inst: Instant, age: float) -> CommitConflictError:
        why = "" if inst.action in Action.WRITE_ACTIONS else ", whose commit updates Hudi's metadata table"
        return CommitConflictError(
            f"{self.base_path}: {hudi_run(inst, age)}{why}; "
            f"one writer at a time - retry once it has committed, or once its heartbeat is "
            f"{HUDI_HEARTBEAT_EXPIRY_S:.0f}s old (a stopped writer's); nothing was written")

    def _after_live_hudi(self, state: TableState) -> TableState:
        """``state``, or - while an Apache Hudi writer is writing the table - the table's
        state once it is done, waited for as long as for our own lock (``timeout_s``,
        re-read every second); still writing then: :class:`CommitConflictError`. On a
        table with Hudi's metadata table, which the commit drops, a compaction or
        clustering Hudi is running is waited for too: its commit updates that table."""
        deadline = time.monotonic() + self.timeout_s
        while live := (state.timeline.live_hudi_instants() if has_metadata_table(state.props)
                       else state.timeline.live_hudi_writes()):
            left = deadline - time.monotonic()
            if left <= 0:
                raise self._hudi_writing(*live[0])
            time.sleep(min(1.0, left))
            state = TableState.load(self.fs, self.base_path)
        return state

    def rollback_failed_writes(self, timeline: Timeline) -> list[RollbackOutcome]:
        """Resume interrupted rollbacks, then roll back every failed write (oldest first).
        The writers' lock is held, so a pending write is a dead writer's - unless an Apache
        Hudi writer, which takes no lock of ours, is making it (refused, see
        :meth:`refuse_live_hudi_writes`)."""
        self.refuse_live_hudi_writes(timeline)
        outcomes = self.resume_rollbacks(timeline)
        for target in timeline.failed_writes():
            outcomes.append(self.rollback(timeline, target))
        sweep_completed(self.fs, self.base_path, timeline)
        return outcomes

    def _finish_rollback(self, timeline: Timeline, target: Instant, rb: Instant, meta: RollbackMetadata) -> None:
        sweep_temp_for_markers(self.fs, self.base_path, target.timestamp)
        cur = timeline.get(target.timestamp)
        if cur is not None and not cur.is_completed:
            if cur.action == Action.COMPACTION:
                # a compaction plan is never deleted: writers already append to the slices it
                # opened; back to requested, any compactor executes it again (as Hudi does)
                self.revert(timeline, cur)
            else:
                timeline.delete_pending(cur)
        faults.step("rollback deleted target instant")
        self.fs.delete_file(posixpath.join(self.base_path, METAFOLDER, HEARTBEAT_FOLDER, target.timestamp))
        self.publish(timeline, rb, meta.to_avro_bytes())
        faults.step("rollback completed")
        delete_markers(self.fs, self.base_path, target.timestamp)
