"""Upgrade a version-6 table to version 8 or 9, as Hudi 1.x's upgrade handlers do.

Hudi 1.x upgrades a table it writes to: it rolls back failed writes, compacts every file
group (a v6 log file is named by its slice's base instant, a v8 one by its own commit, so
no slice may carry logs across), rewrites the timeline in layout 2 (``.hoodie/timeline/``,
completion times in completed instants' names, Avro commit metadata) and writes the new
properties. This does the same, in an order that keeps the table readable at every step
and a crash harmless:

1. the hand-over (:func:`streamer.services.handover.handover_to_hudi`): failed writes
   rolled back, pending plans finished, every slice with logs compacted;
2. under the writers' lock, every active instant's files written again into
   ``.hoodie/timeline/`` (invisible to a version-6 reader), commit metadata as Avro and a
   HoodieStreamer checkpoint under its version-8 key, each completed instant given a
   completion time just after its own time and the previous completion;
3. ``hoodie.properties`` replaced in one atomic write: from here the table is the new
   version;
4. the layout-1 timeline files removed from ``.hoodie/``.

A crash before 3 leaves a version-6 table (the next upgrade writes step 2 again); after
3, leftovers that the next upgrade (a no-op otherwise) removes.

The archived timeline (``.hoodie/archived``) is left where it is: versions 8 and 9 keep
their archive as an LSM history (:mod:`streamer.services.archive_history` writes it from
then on), and instants archived before the upgrade are no longer reachable by time travel
or incremental queries.
"""

from __future__ import annotations

import datetime as dt
import logging
import posixpath
from dataclasses import dataclass, field

from streamer.errors import StreamerError
from streamer.fs import FileSystem, resolve
from streamer.services.handover import handover_to_hudi
from streamer.table.instant import (
    Action,
    Instant,
    State,
    format_instant_time,
    parse_instant_time,
    parse_timeline_file,
)
from streamer.table.metadata import CommitMetadata
from streamer.table.metadata.archive import REPLACE_COMMIT_METADATA_SCHEMA
from streamer.table.metadata.avro import write_avro
from streamer.table.properties import load_properties, upgraded_properties, write_properties
from streamer.table.timeline import Timeline, timeline_dir
from streamer.write.transaction import Transaction

log = logging.getLogger(__name__)

UPGRADE_TARGETS = (8, 9)


class UpgradeError(StreamerError):
    """The table cannot be upgraded as asked (the message says why and what to do)."""


@dataclass
class UpgradeReport:
    from_version: int
    to_version: int
    instants: int = 0
    handover: list[str] = field(default_factory=list)

    def lines(self) -> list[str]:
        if self.from_version == self.to_version:
            return [f"already table version {self.to_version}: nothing to do"]
        return [*self.handover,
                f"rewrote {self.instants} instant(s) into the layout-2 timeline",
                f"table version {self.from_version} -> {self.to_version}"]


def upgrade_table(path: str, *, to: int, lock_timeout_s: float = 120.0) -> UpgradeReport:
    """Upgrade the table at ``path`` to version ``to`` (see the module doc)."""
    fs, base = resolve(path)
    props = load_properties(fs, base)
    if to not in UPGRADE_TARGETS:
        raise UpgradeError(f"{path}: cannot upgrade to table version {to} (targets: 8, 9)")
    if props.version == to:
        _drop_layout1_files(fs, base)
        return UpgradeReport(to, to)
    if props.version != 6:
        raise UpgradeError(f"{path} is table version {props.version}; only version 6 is upgraded here "
                           f"(a Hudi 1.x writer with hoodie.write.table.version={to} upgrades 8 to 9)")
    report = UpgradeReport(6, to, handover=handover_to_hudi(path, lock_timeout_s=lock_timeout_s).lines()[:-1])
    with Transaction(fs, base, timeout_s=lock_timeout_s, purpose="upgrade"):
        props = load_properties(fs, base)
        old = Timeline.load(fs, base, props)
        pending = [f"{i.action} {i.timestamp}" for i in old.pending()]
        if pending:
            raise UpgradeError(f"{path}: pending instants {', '.join(pending)}; stop the table's writers "
                               "and services (their next run finishes or rolls them back), then upgrade again")
        completed = old.completed_timestamps()
        stray = [i.timestamp for i in old.savepoints if i.timestamp not in completed]
        if stray:
            raise UpgradeError(f"{path}: savepoint(s) {', '.join(stray)} name no completed commit; delete "
                               "them (Hudi's delete_savepoint), then upgrade again")
        new_props = upgraded_properties(props, to)
        new = Timeline(fs, base, 2, timeline_dir(base, new_props))
        report.instants = _rewrite(old, new)
        write_properties(fs, base, new_props)
        _drop_layout1_files(fs, base)
    log.info("%s: upgraded to table version %d (%d instants)", path, to, report.instants)
    return report


def _rewrite(old: Timeline, new: Timeline) -> int:
    """Every instant of ``old`` (all completed) and its savepoints written into ``new``'s
    folder, completion times in order (a savepoint after the commit whose time it shares)."""
    completion = ""
    savepoints = {i.timestamp: i for i in old.savepoints}
    for inst in old.completed():
        completion = done_at = _after(max(inst.timestamp, completion))
        saved = savepoints.get(inst.timestamp)
        if saved is not None:
            completion = _carry_savepoint(old, new, saved, done_at)
        pending_action = inst.pending_action or inst.action
        for state in (State.REQUESTED, State.INFLIGHT):
            src = old.path_of(Instant(inst.timestamp, pending_action, state), state)
            if old.fs.exists(src):
                data = old.fs.read_bytes(src)
                if state is State.INFLIGHT and pending_action in Action.WRITE_ACTIONS and data:
                    data = new.commit_bytes(CommitMetadata.from_bytes(data, src))
                _put(new, Instant(inst.timestamp, pending_action, state), data)
        done = Instant(inst.timestamp, inst.action, State.COMPLETED, done_at, inst.pending_action)
        _put(new, done, _completed_bytes(old, new, inst))
    return len(old.completed())


def _carry_savepoint(old: Timeline, new: Timeline, saved: Instant, commit_done: str) -> str:
    """Write ``saved``'s files into ``new`` (Hudi's Avro savepoint metadata is the same at
    every version), completed just after its commit (``commit_done``); returns the last
    completion time given out."""
    done = _after(commit_done)
    for state in (State.REQUESTED, State.INFLIGHT, State.COMPLETED):
        src = posixpath.join(old.folder, Instant(saved.timestamp, Action.SAVEPOINT, state).file_name(1))
        if old.fs.exists(src):
            at = done if state is State.COMPLETED else None
            _put(new, Instant(saved.timestamp, Action.SAVEPOINT, state, at), old.fs.read_bytes(src))
    return done if saved.is_completed else commit_done


def _completed_bytes(old: Timeline, new: Timeline, inst: Instant) -> bytes:
    data = old.read_details(inst)
    if inst.action == Action.REPLACE_COMMIT:
        meta = CommitMetadata.from_bytes(data, old.path_of(inst))
        return write_avro(REPLACE_COMMIT_METADATA_SCHEMA, meta.to_archived_record(replace=True))
    if inst.action in Action.WRITE_ACTIONS:
        return new.commit_bytes(CommitMetadata.from_bytes(data, old.path_of(inst)))
    return data  # clean and rollback metadata are Avro in both layouts


def _put(new: Timeline, inst: Instant, data: bytes) -> None:
    new.fs.write_atomic(posixpath.join(new.folder, inst.file_name(2)), data)


def _after(ts: str) -> str:
    """The instant time one millisecond after ``ts``."""
    return format_instant_time(parse_instant_time(ts[:17].ljust(17, "0")) + dt.timedelta(milliseconds=1))


def _drop_layout1_files(fs: FileSystem, base: str) -> None:
    """Remove the version-6 timeline files from ``.hoodie/`` (after the switch)."""
    meta = posixpath.join(base, ".hoodie")
    for st in fs.list_dir(meta):
        if not st.is_dir and parse_timeline_file(st.name) is not None:
            fs.delete_file(st.path)
