"""Drop damaged files' rows knowingly: ``streamer repair PATH --drop-damaged``.

When a committed log file is lost, or a committed log block is corrupt, and no copy can
be restored, every read, compaction and write of the table refuses (see
``docs/reliability.md``). This is the one way to go on without those rows, chosen
explicitly: each file group whose served slice is damaged is **compacted** with the
damage accepted - the new base file holds every record the slice's intact files hold,
merged as a reader merges them, and nothing from the lost bytes - and the compaction's
commit lists what it dropped (``extraMetadata`` key
:data:`~streamer.integrity.DROPPED_KEY`). A compaction already pending on such a
group (a plan an earlier run refused) is the one executed; otherwise one is scheduled
over exactly the damaged groups. The result is an ordinary Hudi compaction commit.

Only damage a merge can leave out is dropped: a missing log file, a log file cut short
and a corrupt block in a log. An unreadable base file, a log block whose content does not decode, or a commit
file that does not parse is refused: restore it (or roll the table back).
"""

from __future__ import annotations

import logging
import posixpath
from dataclasses import dataclass, field

from streamer.integrity import CommittedRegions, Damage, slice_damage, timeline_damage
from streamer.read.table import Table
from streamer.services.common import DamageRefusedError, GroupId, ServiceError
from streamer.services.compaction import schedule_compaction_of
from streamer.services.executor import ExecOutcome, execute, plan_slices
from streamer.table.fsview import FileSlice
from streamer.table.naming import parse_log_file_name

log = logging.getLogger(__name__)

#: Rounds at most: a pending plan's old slice first, then the new slice it opened.
MAX_ROUNDS = 3


@dataclass(frozen=True)
class DroppedItem:
    """One damaged thing whose rows a compaction left out, and what its writer recorded."""

    damage: Damage
    compaction: str
    records: int | None = None  # inserts + updates the instant wrote into that file
    deletes: int | None = None

    def __str__(self) -> str:
        counts = ""
        if self.records is not None:
            counts = f"; its write recorded {self.records} record(s) and {self.deletes or 0} delete(s) in that file"
        return f"{self.damage} - dropped by compaction {self.compaction}{counts}"


@dataclass
class DropReport:
    dropped: list[DroppedItem] = field(default_factory=list)
    #: what cannot be dropped this way (restore it): the repair did nothing for it
    refused: list[Damage] = field(default_factory=list)
    #: droppable damage found (dry run: what would be dropped)
    found: dict[GroupId, list[Damage]] = field(default_factory=dict)
    executed: list[ExecOutcome] = field(default_factory=list)


def droppable(d: Damage) -> bool:
    name = posixpath.basename(d.path)
    return parse_log_file_name(name) is not None and (
        d.reason == "file is missing" or d.reason.startswith(("corrupt log block", "log file is ")))


def served_damage(table: Table) -> tuple[dict[GroupId, list[Damage]], list[Damage]]:
    """(droppable damage of every slice a snapshot reads, by group; damage that is not).

    A deep check (every page and block decoded, as ``streamer check`` does), so damage
    this cannot drop is named before anything is done."""
    table.refresh()
    view, tl = table.fsview, table.timeline
    bad = timeline_damage(tl)
    if bad:
        return {}, bad
    regions = CommittedRegions.of(view, tl)
    served = view.served_base_instants()
    found: dict[GroupId, list[Damage]] = {}
    other: list[Damage] = []
    for gid, slices in view.all_slices().items():
        floor = served.get(gid)
        for s in slices:
            if floor is not None and s.base_instant < floor:
                continue  # superseded: no snapshot reads it
            for d in slice_damage(table.fs, view, tl, s, regions, deep=True):
                (found.setdefault(gid, []) if droppable(d) else other).append(d)
    return found, other


def _counts(table: Table, d: Damage) -> tuple[int | None, int | None]:
    if d.instant is None:
        return None, None
    inst = table.timeline.get(d.instant)
    if inst is None:
        return None, None
    rel = posixpath.relpath(d.path, table.base_path)
    for st in table.fsview.commit_metadata(inst).write_stats():
        if st.path == rel:
            return st.num_writes, st.num_deletes
    return None, None


def drop_damaged(table: Table, *, dry_run: bool = False, lock_timeout_s: float = 30.0) -> DropReport:
    """Compact every damaged served slice with its damage accepted (see module doc)."""
    rep = DropReport()
    found, other = served_damage(table)
    rep.found, rep.refused = found, other
    if dry_run or other or not found:
        return rep
    for _ in range(MAX_ROUNDS):
        if not found:
            break
        pending = table.fsview.pending_compaction_file_groups()
        plans = sorted({pending[g] for g in found if g in pending})
        if not plans:
            inst = schedule_compaction_of(table, set(found), lock_timeout_s=lock_timeout_s)
            if inst is None:
                raise ServiceError(f"{table.base_path}: could not schedule a compaction over the damaged file "
                                   f"group(s) {sorted(found)}")
            plans = [inst.timestamp]
        for ts in plans:
            inst = table.timeline.get(ts)
            if inst is None or inst.is_completed:
                continue
            # exactly the damage in this plan's slices, as found now
            table.refresh()
            accept = frozenset(d for s in plan_slices(table, inst)
                               for d in found.get((s.partition_path, s.file_id), [])
                               if d.path in {*s.paths, *_missing_in(table, s)})
            outcome = execute(table, inst, accept_damage=accept, owner="repair", writer_lock_timeout_s=lock_timeout_s)
            rep.executed.append(outcome)
            if outcome.status != "completed":
                raise ServiceError(f"{table.base_path}: compaction {ts} did not run ({outcome.status}); "
                                   "run `streamer repair --drop-damaged` again")
            for d in sorted(accept, key=lambda d: (d.path, d.reason)):
                records, deletes = _counts(table, d)
                rep.dropped.append(DroppedItem(d, ts, records, deletes))
        found, other = served_damage(table)
        if other:
            rep.refused = other
            break
    if found:
        raise DamageRefusedError(f"{table.base_path}: damage left after {MAX_ROUNDS} rounds: "
                                 f"{next(iter(found.values()))[0]}")
    return rep


def _missing_in(table: Table, s: FileSlice) -> set[str]:
    """Paths of files completed instants wrote into slice ``s`` that are gone."""
    from streamer.integrity import missing_files

    return {d.path for d in missing_files(table.fsview, table.timeline, [s])}
