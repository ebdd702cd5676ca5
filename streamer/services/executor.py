"""Execute a pending plan exactly once, whoever else is trying to.

Protocol (any number of compactors, any of them may die at any point):

1. take the plan's :class:`~streamer.services.lock.PlanLock` or leave it to its holder;
2. re-read the timeline: a plan already completed is done (someone ran it before we
   got the lock); an *inflight* plan means its previous runner died (we now hold the
   lock it held) - recover (:func:`~streamer.services.rollback_services.recover`);
3. requested -> inflight, execute, check we still own the lock, complete, drop markers.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from streamer.config.policies import LogCompactionPolicy
from streamer.errors import StorageError
from streamer.read.table import Table
from streamer.services import rollback_services
from streamer.services.common import ServiceError
from streamer.services.compaction import CompactionConflict, execute_compaction
from streamer.services.lock import PlanLock
from streamer.services.log_compaction import execute_log_compaction
from streamer.table.instant import Action, Instant
from streamer.table.metadata import CommitMetadata
from streamer.write import faults
from streamer.write.markers import delete_markers

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ExecOutcome:
    instant: str
    action: str
    status: str  # "completed" | "busy" | "done-elsewhere" | "rolled-back" | "retry"
    files_written: int = 0
    bytes_written: int = 0


def execute(table: Table, inst: Instant, *, log_policy: LogCompactionPolicy | None = None,
            lock_expiry_s: float = 30.0, writer_lock_timeout_s: float = 120.0, owner: str = "") -> ExecOutcome:
    """Run one pending compaction or log compaction plan (see module doc)."""
    lock = PlanLock(table.fs, table.base_path, inst.timestamp, expiry_s=lock_expiry_s, purpose=owner)
    if not lock.try_acquire():
        return ExecOutcome(inst.timestamp, inst.action, "busy")
    try:
        table.refresh()
        cur = table.timeline.get(inst.timestamp)
        if cur is None or cur.is_completed:
            return ExecOutcome(inst.timestamp, inst.action, "done-elsewhere")
        try:
            if cur.is_inflight and not rollback_services.recover(table, cur, lock_timeout_s=writer_lock_timeout_s):
                return ExecOutcome(inst.timestamp, inst.action, "rolled-back")
        except CompactionConflict as e:  # writers' lock busy: the next run recovers it
            log.info("%s", e)
            return ExecOutcome(inst.timestamp, inst.action, "retry")
        table.refresh()
        cur = table.timeline.get(inst.timestamp)
        if cur is None or not cur.is_requested:
            return ExecOutcome(inst.timestamp, inst.action, "done-elsewhere")
        inflight = table.timeline.transition_to_inflight(cur)
        faults.step(f"{inst.action} inflight")

        def complete(meta: CommitMetadata) -> None:
            if not lock.still_owner():
                raise ServiceError(f"lost the lock of {inst.action} {inst.timestamp} while running it; "
                                   "its new owner will redo it")
            table.timeline.complete(inflight, meta.to_json_bytes())
            faults.step(f"{inst.action} completed")

        try:
            if inflight.action == Action.LOG_COMPACTION:
                meta = execute_log_compaction(table, inflight, log_policy or LogCompactionPolicy()).metadata
                complete(meta)
            elif inflight.action == Action.COMPACTION:
                run = execute_compaction(table, inflight, lock_timeout_s=writer_lock_timeout_s)
                meta = run.finish(table, complete)
            else:
                raise ServiceError(f"{inflight} is not a compaction or log compaction")
        except StorageError as e:  # a full disk: one line naming the instant and the file
            raise ServiceError(f"{inflight.action} {inst.timestamp} stopped: {e}; nothing was committed - "
                               "the plan stays pending and the next run redoes it") from e
        except CompactionConflict as e:
            log.info("%s", e)
            try:
                rollback_services.revert_compaction(table, inflight, lock_timeout_s=writer_lock_timeout_s)
            except CompactionConflict as again:  # left inflight: the next run reverts it
                log.info("%s", again)
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
        lock.release()


def pending_plans(table: Table, action: str) -> list[Instant]:
    table.refresh()
    return [i for i in table.timeline.pending() if i.action == action]


def execute_pending(table: Table, action: str, **kw) -> list[ExecOutcome]:
    """Try every pending plan of ``action``, oldest first."""
    return [execute(table, i, **kw) for i in pending_plans(table, action)]
