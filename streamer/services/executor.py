"""Execute a pending plan exactly once, whoever else is trying to.

Protocol (any number of compactors, any of them may die at any point):

1. take the plan's :class:`~streamer.write.lock.PlanLock` or leave it to its holder;
2. re-read the timeline: a plan already completed is done (someone ran it before we
   got the lock); an *inflight* plan means its previous runner died (we now hold the
   lock it held) - recover (:func:`~streamer.services.rollback_services.recover`);
3. requested -> inflight, execute, check we still own the lock, complete, drop markers -
   the steps of a :class:`~streamer.write.transaction.Transaction` holding the plan's lock.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypedDict

from streamer import faults
from streamer.config.policies import LogCompactionPolicy
from streamer.errors import CorruptDataError, MissingFileError, StorageError, one_line
from streamer.integrity import (
    DROPPED_KEY,
    CommittedRegions,
    Damage,
    dropped_damage,
    slice_damage,
    timeline_damage,
)
from streamer.read.table import Table
from streamer.services import rollback_services
from streamer.services.common import DamageRefusedError, ServiceError, damage_message, read_plan
from streamer.services.compaction import CompactionConflict, execute_compaction, old_slice
from streamer.services.log_compaction import execute_log_compaction
from streamer.table.fsview import FileSlice, slice_named
from streamer.table.instant import Action, Instant
from streamer.table.metadata import CommitMetadata
from streamer.table.metadata_table import has_metadata_table
from streamer.table.timeline import hudi_run
from streamer.write.lock import PlanLock
from streamer.write.markers import delete_markers, list_markers
from streamer.write.transaction import Transaction

if TYPE_CHECKING:
    from typing import Unpack  # Python 3.11; annotations only

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ExecOutcome:
    instant: str
    action: str
    status: str  # "completed" | "busy" | "done-elsewhere" | "rolled-back" | "retry"
    files_written: int = 0
    bytes_written: int = 0


def execute(table: Table, inst: Instant, *, log_policy: LogCompactionPolicy | None = None,
            lock_expiry_s: float = 30.0, writer_lock_timeout_s: float = 120.0, owner: str = "",
            accept_damage: frozenset[Damage] = frozenset()) -> ExecOutcome:
    """Run one pending compaction or log compaction plan (see module doc).

    Damage in a slice of the plan refuses it (:class:`DamageRefusedError`) and leaves it
    requested, except the items of ``accept_damage`` (``streamer repair --drop-damaged``):
    their rows are dropped knowingly and listed in the commit's metadata
    (:data:`DROPPED_KEY`). Storage refusing a write midway (``ENOSPC``, a quota: any
    ``OSError``) stops the run with one :class:`ServiceError` naming the instant and the
    file, after undoing the run as a refused one is undone (see :func:`_undo_stopped`)."""
    lock = PlanLock(table.fs, table.base_path, inst.timestamp, expiry_s=lock_expiry_s, purpose=owner)
    if not lock.try_acquire():
        return ExecOutcome(inst.timestamp, inst.action, "busy")
    try:
        table.refresh()
        cur = table.timeline.get(inst.timestamp)
        if cur is None or cur.is_completed:
            return ExecOutcome(inst.timestamp, inst.action, "done-elsewhere")
        if _left_to_hudi(table, cur):
            return ExecOutcome(inst.timestamp, inst.action, "busy")
        early = _recover_dead_run(table, cur, writer_lock_timeout_s)
        if early is not None:
            return early
        table.refresh()
        cur = table.timeline.get(inst.timestamp)
        if cur is None or not cur.is_requested:
            return ExecOutcome(inst.timestamp, inst.action, "done-elsewhere")
        # damage first, before the plan goes inflight or anything is written: a refused
        # plan stays requested, and the table (whose reads check the old slices of
        # pending plans too) keeps refusing until the file is restored
        # damage an earlier repair dropped knowingly (in slices its compaction superseded,
        # which a log compaction planned before it may still name) refuses nothing
        accepted = accept_damage | frozenset(dropped_damage(table.fsview, table.timeline))
        refuse_plan_damage(table, cur, accept=accepted)
        if _left_to_hudi(table, cur):  # again, last: Hudi may have started while we recovered or checked
            return ExecOutcome(inst.timestamp, inst.action, "busy")
        # the run's transaction holds the plan's lock, not the writers': writers go on
        # appending meanwhile (a compaction catches up with them in CompactionRun.finish)
        tx = Transaction(table.fs, table.base_path, lock=lock)
        # Hudi's heartbeat of the plan, before it goes inflight: a Hudi compactor neither
        # runs nor rolls back a plan whose heartbeat is fresh (it cannot see our plan lock)
        lock.start_instant(inst.timestamp)
        run = _Run(table, tx, tx.start(table.timeline, cur), writer_lock_timeout_s, accepted, accept_damage)
        meta = run.execute(log_policy or LogCompactionPolicy())
        if meta is None:
            return ExecOutcome(inst.timestamp, inst.action, "retry")
        try:
            delete_markers(table.fs, table.base_path, inst.timestamp)
        except OSError as e:  # leftover markers of a completed instant are harmless
            log.warning("could not delete markers of %s: %s", inst.timestamp, e)
        table.refresh()
        stats = list(meta.write_stats())
        return ExecOutcome(inst.timestamp, inst.action, "completed", len(stats),
                           sum(s.total_write_bytes for s in stats))
    finally:
        lock.end_heartbeat()
        lock.release()


def _left_to_hudi(table: Table, cur: Instant) -> bool:
    """Whether Apache Hudi is running something that keeps this run from starting now.

    Hudi runs a plan without our plan lock, keeping its heartbeat instead: an inflight run
    of its is not a dead one to undo (that would delete the files it is about to commit),
    nor one to run a second time beside it. And on a table with Hudi's metadata table,
    while Hudi makes any instant (:meth:`Timeline.live_hudi_instants`), this run's commit
    would find its service step busy (the metadata table stays for Hudi's commit): merging
    first would only throw the work away."""
    if has_metadata_table(table.properties):  # one status call per pending instant, ``cur`` among them
        live = table.timeline.live_hudi_instants()
    else:
        age = table.timeline.hudi_heartbeat_age(cur)
        live = [] if age is None else [(cur, age)]
    own = [age for other, age in live if other.timestamp == cur.timestamp]
    if own:
        log.info("%s: %s; left to it", table.base_path, hudi_run(cur, own[0]))
    elif live:
        log.info("%s: %s %s waits: %s, whose commit updates Hudi's metadata table", table.base_path,
                 cur.action, cur.timestamp, hudi_run(*live[0]))
    return bool(live)


def _recover_dead_run(table: Table, cur: Instant, lock_timeout_s: float) -> ExecOutcome | None:
    """Undo what a dead run of ``cur`` left (we hold its plan lock); an outcome when the
    plan cannot run now, ``None`` when it can."""
    try:
        # a rollback an earlier run left pending (its undo met a full disk too) first:
        # it may target this plan, whose files it would delete after it completed
        if rollback_services.finish_dead_rollbacks(table, lock_timeout_s=lock_timeout_s):
            now = table.timeline.get(cur.timestamp)
            if now is None or now.is_completed:
                return ExecOutcome(cur.timestamp, cur.action, "rolled-back" if now is None else "done-elsewhere")
            cur = now
        if cur.is_inflight and not rollback_services.recover(table, cur, lock_timeout_s=lock_timeout_s):
            return ExecOutcome(cur.timestamp, cur.action, "rolled-back")
    except CompactionConflict as e:  # writers' lock busy: the next run recovers it
        log.info("%s", e)
        return ExecOutcome(cur.timestamp, cur.action, "retry")
    return None


@dataclass
class _Run:
    """One run of an inflight plan, under its transaction (see :func:`execute`)."""

    table: Table
    tx: Transaction
    inflight: Instant
    lock_timeout_s: float
    accepted: frozenset[Damage]
    accept_damage: frozenset[Damage]

    def check_heartbeat(self) -> None:
        """Stop the run once its heartbeat lapsed: Apache Hudi may have taken the plan over."""
        inst = self.inflight
        if (lapse := self.tx.heartbeat_lapse()) is not None:
            raise ServiceError(f"the heartbeat of {inst.action} {inst.timestamp} went unrefreshed for {lapse:.0f}s "
                               "(the process stalled, or storage refused or held its writes), so Apache Hudi "
                               "may be rolling the run back or running the plan; not completed: the next run "
                               "finds out which")

    def publish(self, meta: CommitMetadata) -> None:
        inst = self.inflight
        if not self.tx.still_owner():
            raise ServiceError(f"lost the lock of {inst.action} {inst.timestamp} while running it; "
                               "its new owner will redo it")
        self.check_heartbeat()
        faults.step(f"{inst.action} before complete")  # the completed instant's write is next
        self.tx.publish(self.table.timeline, inst, self.table.timeline.commit_bytes(meta))
        faults.step(f"{inst.action} completed")

    def _complete(self, meta: CommitMetadata) -> None:
        """A compaction's last step (holding the writers' lock): record the damage it
        dropped, then publish it."""
        _record_dropped(meta, self.accept_damage)
        self.publish(meta)

    def execute(self, log_policy: LogCompactionPolicy) -> CommitMetadata | None:
        """Run and complete the plan; ``None``: the writers' lock stayed busy, retry later."""
        table, inflight = self.table, self.inflight
        try:
            # inside the try: an error injected here stands for the run's next write (its
            # first marker), which fails inside it (streamer.faults)
            faults.step(f"{inflight.action} inflight")
            if inflight.action == Action.LOG_COMPACTION:
                meta = execute_log_compaction(table, inflight, log_policy, accept_damage=self.accepted,
                                              check=self.check_heartbeat).metadata
                _record_dropped(meta, self.accept_damage)
                self.publish(meta)
                return meta
            if inflight.action == Action.COMPACTION:
                run = execute_compaction(table, inflight, lock_timeout_s=self.lock_timeout_s,
                                         accept_damage=self.accepted, check=self.check_heartbeat)
                return run.finish(table, self._complete)
            raise ServiceError(f"{inflight} is not a compaction or log compaction")
        except (DamageRefusedError, MissingFileError, CorruptDataError) as e:
            # damage met during the run (after the check above): undo what it wrote, so no
            # half-done state is left behind, and refuse loudly
            state = _undo_refused(table, self.tx, inflight, self.lock_timeout_s)
            if isinstance(e, DamageRefusedError):
                raise DamageRefusedError(f"{e}; {state}") from e
            raise DamageRefusedError(f"{inflight.action} {inflight.timestamp} refused: {one_line(e)}; {state}") from e
        except OSError as e:
            # storage refused a write (a full disk, a quota): one line naming the instant and
            # the file. Not only StorageError (write_atomic's): a marker, the writers' lock
            # or a stitched block's staging fail with the bare OSError open/pyarrow raise.
            # Undone at once like a refused run, so no partial file of the run is left and
            # the next run does the service whole: a compaction goes back to requested (its
            # plan is kept), a log compaction is rolled back once it wrote (its groups are
            # planned again by the next schedule - left inflight, its slices would stay out
            # of any new plan until a run rolled it back, and that run would complete no
            # log compaction)
            state = _undo_stopped(table, self.tx, inflight, self.lock_timeout_s)
            raise ServiceError(f"{inflight.action} {inflight.timestamp} stopped: {storage_reason(e)}; {state}") from e
        except CompactionConflict as e:
            log.info("%s", e)
            if self.tx.heartbeat_lapse() is not None:  # Hudi may be running it: not ours to revert
                return None
            try:
                rollback_services.revert_compaction(table, inflight, lock_timeout_s=self.lock_timeout_s)
            except CompactionConflict as again:  # left inflight: the next run reverts it
                log.info("%s", again)
            return None


def _record_dropped(meta: CommitMetadata, accepted: frozenset[Damage]) -> None:
    if accepted:
        meta.extra_metadata[DROPPED_KEY] = json.dumps(
            [{"path": d.path, "reason": d.reason, "instant": d.instant}
             for d in sorted(accepted, key=lambda d: (d.path, d.reason))], separators=(",", ":"))


def plan_slices(table: Table, inst: Instant) -> list[FileSlice]:
    """The slices a pending plan would rewrite, as they are now (a log compaction's op
    whose slice is gone is left out, as its execution skips it)."""
    plan = read_plan(table, inst)
    out = []
    if inst.action == Action.COMPACTION:
        for op in plan.operations:
            out.append(old_slice(table, op, inst.timestamp))
        return out
    groups = table.fsview.all_slices()
    for op in plan.operations:
        s = slice_named(groups.get((op.partition_path, op.file_id), ()), op.base_instant_time,
                        planned_at=inst.timestamp)
        if s is not None:
            out.append(s)
    return out


def refuse_plan_damage(table: Table, inst: Instant, *, accept: frozenset[Damage] = frozenset()) -> None:
    """Raise :class:`DamageRefusedError` naming the first damaged file of the plan's
    slices (missing files, corrupt committed blocks, an unreadable base footer) or of the
    timeline (a commit file that does not decode), unless every item is in ``accept``."""
    found: list[Damage] = [d for d in timeline_damage(table.timeline) if d not in accept]
    if not found:  # the slices are judged by the commit metadata: it must parse first
        regions = CommittedRegions.of(table.fsview, table.timeline)
        found = [d for s in plan_slices(table, inst)
                 for d in slice_damage(table.fs, table.fsview, table.timeline, s, regions) if d not in accept]
    if found:
        what = "compaction" if inst.action == Action.COMPACTION else "log compaction"
        raise DamageRefusedError(damage_message(what, inst.timestamp, found, table.base_path)
                                 + "; nothing was written, the plan stays requested")


def storage_reason(e: OSError) -> str:
    """What storage said and the file, on one line: a :class:`StorageError` names its file
    already; a bare ``OSError`` gives its ``strerror`` and ``filename``."""
    if isinstance(e, StorageError) or not e.strerror:
        text = str(e).strip()
        return text.splitlines()[-1] if text else type(e).__name__
    return f"{e.strerror}: {e.filename}" if e.filename else e.strerror


def _undo_stopped(table: Table, tx: Transaction, inflight: Instant, lock_timeout_s: float) -> str:
    """Undo a run a storage error stopped (see :func:`execute`) as a refused one is undone;
    says what became of the plan. The undo writes too (a rollback instant, rollback
    blocks): on a disk still full it fails as well, and the run is left inflight for the
    next run to roll back first."""
    try:
        table.refresh()
        cur = table.timeline.get(inflight.timestamp)
        if cur is not None and cur.is_completed:  # failed after its completed instant landed
            return "but the plan had completed"
        return _undo(table, tx, inflight, lock_timeout_s, replanned="the next run plans the groups again")
    except OSError as e:
        log.warning("could not undo %s %s now (%s); the next run rolls it back", inflight.action,
                    inflight.timestamp, e)
        return "the run is left inflight (its undo failed too); the next run rolls it back first"


def _undo_refused(table: Table, tx: Transaction, inflight: Instant, lock_timeout_s: float) -> str:
    """Leave no trace of a run refused midway; says what became of the plan."""
    return _undo(table, tx, inflight, lock_timeout_s, replanned="the groups are planned again once intact")


def _undo(table: Table, tx: Transaction, inflight: Instant, lock_timeout_s: float, *, replanned: str) -> str:
    """Leave no trace of a run stopped midway: nothing written, back to requested; a
    compaction's partial files rolled back, its plan kept; a log compaction rolled back
    (its instant cannot run again, see :mod:`~streamer.services.rollback_services`). Not
    a run whose heartbeat lapsed: Apache Hudi may be running the plan or rolling it back."""
    if (lapse := tx.heartbeat_lapse()) is not None:
        return (f"left inflight: its heartbeat went unrefreshed for {lapse:.0f}s, so Apache Hudi may be running "
                "the plan or rolling the run back; the next run finds out which")
    try:
        if not list_markers(table.fs, table.base_path, inflight.timestamp):
            tx.revert(table.timeline, inflight)  # nothing written
            table.refresh()
            return "nothing was written, the plan stays requested"
        if inflight.action == Action.COMPACTION:
            rollback_services.revert_compaction(table, inflight, lock_timeout_s=lock_timeout_s)
            return "its partial files were rolled back, the plan stays requested"
        rollback_services.rollback_log_compaction(table, inflight, lock_timeout_s=lock_timeout_s)
        return f"its blocks were rolled back ({replanned})"
    except CompactionConflict as e:  # writers' lock busy: the next run reverts it
        log.info("%s", e)
        return "left inflight (writers' lock busy); the next run rolls it back"


def pending_plans(table: Table, action: str) -> list[Instant]:
    table.refresh()
    return [i for i in table.timeline.pending() if i.action == action]


class ExecOptions(TypedDict, total=False):
    """The options of :func:`execute`, passed on by :func:`execute_pending`."""

    log_policy: LogCompactionPolicy | None
    lock_expiry_s: float
    writer_lock_timeout_s: float
    owner: str
    accept_damage: frozenset[Damage]


def execute_pending(table: Table, action: str, **kw: Unpack[ExecOptions]) -> list[ExecOutcome]:
    """Try every pending plan of ``action``, oldest first."""
    return [execute(table, i, **kw) for i in pending_plans(table, action)]
