"""Archive for table versions 8 and 9: old instants into Hudi 1.x's LSM history.

The instants to move are chosen as for version 6 (:func:`streamer.services.archive.
instants_to_archive`: a timeline prefix, ``min_commits`` writes kept, never past a pending
instant, the last clean's retained commit or an instant whose files a live slice reads).
Each becomes one row of a layer-0 Parquet file of ``.hoodie/timeline/history`` in the
form Hudi 1.x's ``LSMTimelineWriter`` writes (``MetadataConversionUtils
.createLSMTimelineInstant``): its requested and completion times, its completed action,
the completed file's bytes as ``metadata``, and as ``plan`` the pending file a plan lives
in (a clean's requested file, else its inflight one; a compaction's or log compaction's
requested file; a replace commit's or clustering's inflight file when not empty, else its
requested one). The snapshot is published (:meth:`Transaction.archive_history`) before
any instant leaves the active timeline.

A run first finishes a move a crash interrupted: instants the history already holds
(by requested time and action) but the active timeline still shows are removed from it.
Hudi's readers take an instant from either place once (they de-duplicate), so the
interrupted state reads right; finishing it keeps the next run from archiving them twice.
"""

from __future__ import annotations

import logging

from streamer.errors import CorruptDataError, MissingFileError
from streamer.read.table import Table
from streamer.table import lsm_history
from streamer.table.instant import Action, Instant, State
from streamer.table.timeline import Timeline
from streamer.write.transaction import Transaction

log = logging.getLogger(__name__)

#: Pending actions whose plan the history keeps, and in which of their files.
_PLAN_IN_REQUESTED = frozenset({Action.COMPACTION, Action.LOG_COMPACTION})
_PLAN_IN_INFLIGHT_ELSE_REQUESTED = frozenset({Action.REPLACE_COMMIT, Action.CLUSTERING})


def _file(timeline: Timeline, inst: Instant, state: State) -> bytes | None:
    try:
        return timeline.read_details(inst, state) or None
    except MissingFileError:
        return None


def history_row(timeline: Timeline, inst: Instant) -> lsm_history.ArchivedInstant:
    """The history's row of completed instant ``inst`` (what Hudi 1.x writes for it)."""
    if not inst.completion_time:
        raise CorruptDataError(f"instant {inst.timestamp} has no completion time: Hudi's history "
                               "readers fail on a row without one", timeline.path_of(inst))
    pending = inst.pending_action or inst.action
    plan = None
    if pending == Action.CLEAN:
        plan = _file(timeline, inst, State.REQUESTED) or _file(timeline, inst, State.INFLIGHT)
    elif pending in _PLAN_IN_REQUESTED:
        plan = _file(timeline, inst, State.REQUESTED)
    elif pending in _PLAN_IN_INFLIGHT_ELSE_REQUESTED:
        plan = _file(timeline, inst, State.INFLIGHT) or _file(timeline, inst, State.REQUESTED)
    return lsm_history.ArchivedInstant(inst.timestamp, inst.completion_time, inst.completed_action,
                                       _file(timeline, inst, State.COMPLETED), plan)


def finish_interrupted_move(table: Table, folder: str, txn: Transaction) -> list[str]:
    """Remove from the active timeline the completed instants the history already holds
    (a crash between publishing a snapshot and the last delete); returns their times."""
    snap = lsm_history.read_snapshot(table.fs, folder)
    last = snap.last_instant
    if last is None:
        return []
    candidates = [i for i in table.timeline.completed() if i.timestamp <= last]
    if not candidates:
        return []
    held = lsm_history.read_instants(table.fs, snap, since=candidates[0].timestamp,
                                     columns=("instantTime", "action"))
    pairs = set(zip(held.column("instantTime").to_pylist(), held.column("action").to_pylist(), strict=True))
    done = [i for i in candidates if (i.timestamp, i.completed_action) in pairs]
    if done:
        txn.finish_archive(table.timeline, done)
        log.info("%s: finished archiving %d instant(s) an interrupted run had archived", table.base_path, len(done))
    return [i.timestamp for i in done]


def archive_to_history(table: Table, victims: list[Instant], txn: Transaction) -> str:
    """Move ``victims`` (a prefix of completed instants) into the table's LSM history;
    returns the new data file's path."""
    folder = lsm_history.history_dir(table.base_path, table.properties)
    name, data = lsm_history.data_file([history_row(table.timeline, i) for i in victims])
    return txn.archive_history(table.timeline, victims, folder, name, data)
