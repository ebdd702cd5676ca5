"""Incremental ranges that reach back past the active timeline: archived writes' rows.

An incremental query answers "the rows the completed writes of ``(begin, end]`` wrote".
The active timeline lists recent writes and, in their metadata, the files each wrote, so
a range of active writes reads only those files. A write an archiver moved off the
timeline (``.hoodie/archived`` at table version 6, the LSM history at 8 and 9) lists no
files any more, yet its rows stay in every slice no later write replaced: reading the
active writes' files alone answers such a range with part of its rows and no error (what
Apache Hudi 0.15 does by default). Here, as Hudi 1.x does by default
(``hoodie.datasource.read.incr.fallback.fulltablescan.enable``), a range holding archived
writes reads today's latest slices. As Hudi 1.2.0's scan does (1.0.2's reads base files
alone), each source of a slice - its base file, each data block - gives only its rows whose ``_hoodie_commit_time``
names a write of the range, those merge, and every committed delete applies: a key the
range wrote and a later write updated keeps the range's value, a key deleted since is
gone (tests/hudi_jvm/test_lsm_history.py). Today's slices, not those as of the range's
end: a clean may have removed those (the usual reason the writes were archived), and a
slice missing there would drop its rows unseen. A range of active writes whose files a
clean removed (the slices a later compaction superseded) is read the same way. The range's
writes are:

- layout 1 (Hudi 0.x: requested times order the range): any commit time in
  ``(begin, end]`` - a row's commit time is a committed write's requested time, so the
  range is the set without listing the archive (Hudi's own fallback filter);
- layout 2 (Hudi 1.x: completion times order it): the requested times of the range's
  writes, the archived ones with their completion times from the LSM history - its files
  of writes requested from a day before ``begin`` on, as Hudi 1.x's completion-time view
  loads it (a write completes within a day of its request), so a long history is not
  read whole by every query.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

import pyarrow as pa
import pyarrow.compute as pc

from streamer.fs import FileSystem
from streamer.table import lsm_history
from streamer.table.instant import Action, format_instant_time, parse_instant_time
from streamer.table.properties import TableProperties
from streamer.table.timeline import Timeline


@dataclass(frozen=True)
class ArchivedReach:
    """The rows of archived writes a range keeps, beyond its active writes' commit times."""

    #: layout 2: requested times of archived writes that completed in the range
    commit_times: frozenset[str] = frozenset()
    #: layout 1: every commit time in ``(begin, end]`` (``None``: unbounded)
    commit_range: tuple[str | None, str | None] | None = None


def archived_reach(fs: FileSystem, base_path: str, props: TableProperties, timeline: Timeline,
                   begin: str | None, end: str | None) -> ArchivedReach | None:
    """What of ``(begin, end]`` was archived; ``None`` when no archived write is in it
    (the range then reads only the files its active writes name)."""
    if timeline.layout_version < 2:
        first = timeline.first_instant
        if begin is not None and first is not None and begin >= first:
            return None  # every archived instant is older than the active timeline
        return ArchivedReach(commit_range=(begin, end)) if has_archive(fs, base_path, props, timeline) else None
    snapshot = lsm_history.read_snapshot(fs, lsm_history.history_dir(base_path, props))
    if not snapshot.files:
        return None
    rows = lsm_history.read_instants(fs, snapshot, since=_day_before(begin))
    done, requested = rows.column("completionTime"), rows.column("instantTime")
    keep = pc.is_in(rows.column("action"), value_set=pa.array(sorted(Action.WRITE_ACTIONS)))
    if begin is not None:
        keep = pc.and_(keep, pc.greater(done, begin))
    if end is not None:
        keep = pc.and_(keep, pc.less_equal(done, end))
    times = frozenset(requested.filter(keep).to_pylist())
    return ArchivedReach(commit_times=times) if times else None


def has_archive(fs: FileSystem, base_path: str, props: TableProperties, timeline: Timeline) -> bool:
    """Instants were archived: ``.hoodie/archived`` (layout 1) or the LSM history (layout
    2) holds some."""
    if timeline.layout_version >= 2:
        return bool(lsm_history.read_snapshot(fs, lsm_history.history_dir(base_path, props)).files)
    return bool(fs.list_dir(f"{base_path.rstrip('/')}/.hoodie/{props.archive_folder}"))


def _day_before(begin: str | None) -> str | None:
    """The instant a day before ``begin`` (``None``: from the first; so is a bound that is
    no instant time, such as Hudi's ``000``)."""
    try:
        return format_instant_time(parse_instant_time(begin) - timedelta(days=1)) if begin else None
    except ValueError:
        return None
