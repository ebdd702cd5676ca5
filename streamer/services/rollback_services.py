"""Undo a table service run that died: log compaction is rolled back, compaction retried.

* A failed **log compaction** is rolled back like a failed write (the writer's
  :func:`streamer.write.rollback.rollback_failed`, driven by the run's markers): a
  rollback command block naming the log compaction instant goes into each touched file
  group, so every reader ignores whatever blocks it published, and its
  ``logcompaction`` instant leaves the timeline. The same plan cannot be re-executed -
  a rollback block cancels its instant forever - so the groups are simply planned again.
* A failed **compaction** keeps its plan, as Hudi does: the partial base files its
  markers name are deleted and ``<instant>.compaction.inflight`` is removed, reverting
  it to requested, so any compactor can execute it again. (No ``rollback`` instant is
  written for it: an interrupted rollback is resumed by the writer, whose resume path
  deletes the target instant - fatal for a compaction plan that writers already
  append behind. See the report's request to the writer's owner.)
"""

from __future__ import annotations

import logging
import posixpath

from streamer.read.table import Table
from streamer.table.instant import Action, Instant, State
from streamer.table.naming import parse_base_file_name
from streamer.write import faults
from streamer.write.markers import IOType, delete_markers, list_markers
from streamer.write.rollback import RollbackOutcome, rollback_failed

log = logging.getLogger(__name__)


def rollback_log_compaction(table: Table, inst: Instant) -> RollbackOutcome:
    """Roll back a dead log compaction run (its instant disappears)."""
    out = rollback_failed(table.fs, table.base_path, table.timeline, inst)
    log.warning("%s: rolled back failed log compaction %s (rollback %s)", table.base_path,
                inst.timestamp, out.rollback_instant)
    table.refresh()
    return out


def revert_compaction(table: Table, inst: Instant) -> int:
    """Delete a dead compaction run's partial base files and revert it to requested."""
    deleted = 0
    for m in list_markers(table.fs, table.base_path, inst.timestamp):
        if m.io_type is IOType.CREATE and parse_base_file_name(m.file_name):
            path = m.data_path(table.base_path)
            parent, name = posixpath.split(path)
            for st in table.fs.list_dir(parent):
                if st.name.startswith(f".{name}.") and st.name.endswith(".tmp"):
                    table.fs.delete_file(st.path)
            if table.fs.exists(path):
                table.fs.delete_file(path)
                deleted += 1
            faults.step(f"compaction revert delete {name}")
    tl = table.timeline
    if inst.state is State.INFLIGHT:
        table.fs.delete_file(tl.path_of(inst, State.INFLIGHT))
        faults.step("compaction reverted to requested")
    delete_markers(table.fs, table.base_path, inst.timestamp)
    log.warning("%s: reverted failed compaction %s to requested (%d partial file(s) deleted)",
                table.base_path, inst.timestamp, deleted)
    table.refresh()
    return deleted


def recover(table: Table, inst: Instant) -> bool:
    """Handle a dead run of ``inst`` (we hold its lock). ``True``: the plan can run now."""
    if inst.action == Action.LOG_COMPACTION:
        if inst.is_inflight:
            rollback_log_compaction(table, inst)
            return False
        return True
    if inst.action == Action.COMPACTION and inst.is_inflight:
        revert_compaction(table, inst)
    return True
