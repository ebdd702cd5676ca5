"""Undo a table service run that died: log compaction is rolled back, compaction retried.

* A failed **log compaction** is rolled back like a failed write (the writer's
  :meth:`streamer.write.transaction.Transaction.rollback`, driven by the run's markers): a
  rollback command block naming the log compaction instant goes into each touched file
  group, so every reader ignores whatever blocks it published, and its
  ``logcompaction`` instant leaves the timeline. The same plan cannot be re-executed -
  a rollback block cancels its instant forever - so the groups are simply planned again.
* A failed **compaction** keeps its plan, as Hudi does: a ``rollback`` instant (plan from
  the run's markers) deletes the partial base files, and the compaction goes back to
  requested (:meth:`Timeline.revert_to_requested`), so any compactor can execute it
  again. A rollback interrupted by a crash is resumed by the next writer, whose resume
  path also sends a compaction back to requested - never deletes its plan.

Both roll back holding the writers' lock: a writer resumes *pending* rollbacks (dead
ones, it assumes), so it must never see one a live service is still executing.

A rollback a service could not finish (its own writes failed on a full disk, or it died)
stays pending, and is finished before the plan it targets runs again
(:func:`finish_dead_rollbacks`): rolled back anew instead, the old one would stay pending
while the plan completes, and a writer resuming it later would delete files of the
*completed* compaction - the same process writes the same file names again.
"""

from __future__ import annotations

import logging

from streamer.read.table import Table
from streamer.services.compaction import CompactionConflict, service_transaction
from streamer.table.instant import Action, Instant
from streamer.table.timeline import hudi_run
from streamer.write.markers import list_markers
from streamer.write.rollback import RollbackOutcome

log = logging.getLogger(__name__)


def rollback_log_compaction(table: Table, inst: Instant, *, lock_timeout_s: float = 120.0) -> RollbackOutcome:
    """Roll back a dead log compaction run (its instant disappears)."""
    with service_transaction(table, lock_timeout_s) as tx:
        table.refresh()
        _refuse_hudi_run(table, inst)
        out = tx.rollback(table.timeline, inst)
    log.warning("%s: rolled back failed log compaction %s (rollback %s)", table.base_path,
                inst.timestamp, out.rollback_instant)
    table.refresh()
    return out


def revert_compaction(table: Table, inst: Instant, *, lock_timeout_s: float = 120.0) -> int:
    """Roll back a dead compaction run's partial base files and revert it to requested.

    Raises :class:`~streamer.services.compaction.CompactionConflict` when the writers'
    lock stays busy; the run stays inflight and the next executor reverts it.
    """
    with service_transaction(table, lock_timeout_s) as tx:
        table.refresh()
        cur = table.timeline.get(inst.timestamp)
        if cur is None or cur.is_completed:
            return 0
        if cur.is_requested and not list_markers(table.fs, table.base_path, inst.timestamp):
            return 0
        _refuse_hudi_run(table, cur)
        out = tx.rollback(table.timeline, cur)
    log.warning("%s: reverted failed compaction %s to requested (rollback %s, %d partial file(s) deleted)",
                table.base_path, inst.timestamp, out.rollback_instant, out.deleted_files)
    table.refresh()
    return out.deleted_files


def _refuse_hudi_run(table: Table, inst: Instant) -> None:
    """Raise :class:`CompactionConflict` when Apache Hudi runs ``inst`` now (its heartbeat
    is fresh), checked under the writers' lock: the run looked dead before the wait for
    that lock, and Hudi may have started it meanwhile - rolling it back now would
    delete what Hudi is about to commit."""
    age = table.timeline.hudi_heartbeat_age(inst)
    if age is not None:
        raise CompactionConflict(f"{table.base_path}: {hudi_run(inst, age)}; left to it")


def finish_dead_rollbacks(table: Table, *, lock_timeout_s: float = 120.0) -> int:
    """Finish every pending rollback (see module); how many. Holding the writers' lock,
    every pending rollback is a dead one: writers and services roll back only holding it.

    Raises :class:`~streamer.services.compaction.CompactionConflict` when the writers'
    lock stays busy."""
    if not any(i.action == Action.ROLLBACK for i in table.timeline.pending()):
        return 0
    with service_transaction(table, lock_timeout_s) as tx:
        table.refresh()
        done = tx.resume_rollbacks(table.timeline)
    for out in done:
        log.warning("%s: finished rollback %s of %s, left pending by a run that could not finish it",
                    table.base_path, out.rollback_instant, out.target)
    table.refresh()
    return len(done)


def recover(table: Table, inst: Instant, *, lock_timeout_s: float = 120.0) -> bool:
    """Handle a dead run of ``inst`` (we hold its lock). ``True``: the plan can run now."""
    if inst.action == Action.LOG_COMPACTION:
        if inst.is_inflight:
            rollback_log_compaction(table, inst, lock_timeout_s=lock_timeout_s)
            return False
        return True
    if inst.action == Action.COMPACTION and inst.is_inflight:
        revert_compaction(table, inst, lock_timeout_s=lock_timeout_s)
    return True
