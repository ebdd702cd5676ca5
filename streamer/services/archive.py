"""Archive: move old completed instants out of the active timeline (Hudi 0.x layout).

When more than ``max_commits`` completed writes are active, the oldest instants are
written to a new archive log ``.hoodie/archived/.commits_.archive.<n>_1-0-1`` - a Hudi
log file of Avro data blocks of ``HoodieArchivedMetaEntry`` records (``commitTime``,
``actionType``, ``actionState``, ``version``; the instant's timeline files travel in
``mor_streamer_files`` since we do not re-encode JSON commit metadata as Avro) - made
durable, and only then deleted from ``.hoodie/`` (requested/inflight first, the
completed file last, so no reader ever sees a half-removed instant as pending).
``min_commits`` completed writes always stay.

Archiving never passes (the cut is a timeline *prefix* ending before the first of):
* the earliest pending instant of any kind (a pending service still needs its plan and
  the instants around it);
* the earliest commit the last clean retains (its query must still resolve);
* the oldest base instant of any live file slice: our reader treats only *active*
  completed instants as committed, so archiving a delta commit whose blocks are still
  read would hide them. (Hudi readers also accept instants before the timeline start;
  until ours do, this bound keeps every read identical.)
"""

from __future__ import annotations

import logging
import posixpath
from dataclasses import dataclass

import pyarrow as pa

from streamer.config.policies import ArchivePolicy
from streamer.read.table import Table
from streamer.services.lock import PlanLock
from streamer.table.instant import Action, Instant, State
from streamer.table.log_format import BlockType, HeaderKey, encode_data_block
from streamer.table.metadata import CleanMetadata
from streamer.table.naming import parse_log_file_name
from streamer.table.properties import ARCHIVELOG_FOLDER, METAFOLDER
from streamer.write import faults

log = logging.getLogger(__name__)

ARCHIVE_TOKEN = "1-0-1"
ARCHIVED_ENTRY_SCHEMA = {
    "type": "record", "name": "HoodieArchivedMetaEntry", "namespace": "org.apache.hudi.avro.model",
    "fields": [
        {"name": "commitTime", "type": ["null", "string"], "default": None},
        {"name": "actionType", "type": ["null", "string"], "default": None},
        {"name": "version", "type": ["int", "null"], "default": 1},
        {"name": "actionState", "type": ["null", "string"], "default": None},
        {"name": "mor_streamer_files", "type": ["null", {"type": "map", "values": "bytes"}], "default": None},
    ],
}


@dataclass(frozen=True)
class ArchiveOutcome:
    archived: list[str]
    archive_file: str | None
    bound: str | None  # first instant kept because a rule forbade going further


def archive_dir(table: Table) -> str:
    folder = table.properties.get(ARCHIVELOG_FOLDER) or "archived"
    return posixpath.join(table.base_path, METAFOLDER, folder)


def archive_bound(table: Table) -> str | None:
    """The earliest instant that must stay active (``None``: no rule applies)."""
    tl = table.timeline
    bounds = []
    pending = tl.pending()
    if pending:
        bounds.append(pending[0].timestamp)
    cleans = [i for i in tl.completed() if i.action == Action.CLEAN]
    if cleans:
        meta = CleanMetadata.from_bytes(tl.read_details(cleans[-1]), tl.path_of(cleans[-1]))
        if meta.earliest_commit_to_retain:
            bounds.append(meta.earliest_commit_to_retain)
    bases = [s.base_instant for s in table.fsview.latest_merged_slices() if s.base_instant]
    if bases:
        bounds.append(min(bases))
    return min(bounds) if bounds else None


def instants_to_archive(table: Table, policy: ArchivePolicy) -> tuple[list[Instant], str | None]:
    tl = table.timeline
    writes = tl.completed_writes()
    if len(writes) <= policy.max_commits:
        return [], None
    keep_from = writes[len(writes) - policy.min_commits].timestamp
    bound = archive_bound(table)
    if bound is not None:
        keep_from = min(keep_from, bound)
    out = []
    for i in tl.instants:
        if i.timestamp >= keep_from or not i.is_completed:
            break
        out.append(i)
    return out, bound


def _entry(table: Table, inst: Instant) -> dict:
    tl = table.timeline
    files = {}
    for state in (State.REQUESTED, State.INFLIGHT, State.COMPLETED):
        path = tl.path_of(inst, state)
        if table.fs.exists(path):
            files[posixpath.basename(path)] = table.fs.read_bytes(path)
    return {"commitTime": inst.timestamp, "actionType": inst.action, "version": 1,
            "actionState": "COMPLETED", "mor_streamer_files": files}


def _next_archive_version(table: Table) -> int:
    top = 0
    for st in table.fs.list_dir(archive_dir(table)):
        lf = parse_log_file_name(st.name)
        if lf is not None and lf.kind == "archive":
            top = max(top, lf.version)
    return top + 1


def run_archive(table: Table, policy: ArchivePolicy, *, lock_expiry_s: float = 30.0) -> ArchiveOutcome:
    lock = PlanLock(table.fs, table.base_path, "archive", expiry_s=lock_expiry_s, purpose="archive")
    if not lock.try_acquire():
        return ArchiveOutcome([], None, None)
    try:
        table.refresh()
        victims, bound = instants_to_archive(table, policy)
        if not victims:
            return ArchiveOutcome([], None, bound)
        rows = [_entry(table, i) for i in victims]
        arrow_rows = pa.Table.from_pylist(rows, schema=pa.schema([
            ("commitTime", pa.string()), ("actionType", pa.string()), ("version", pa.int32()),
            ("actionState", pa.string()), ("mor_streamer_files", pa.map_(pa.string(), pa.binary()))]))
        block = encode_data_block(arrow_rows, {HeaderKey.INSTANT_TIME: victims[-1].timestamp},
                                  kind=BlockType.AVRO_DATA, avro_schema=ARCHIVED_ENTRY_SCHEMA)
        name = f".commits_.archive.{_next_archive_version(table)}_{ARCHIVE_TOKEN}"
        path = posixpath.join(archive_dir(table), name)
        table.fs.write_atomic(path, block)
        faults.step("archive written")
        tl = table.timeline
        for inst in victims:
            for state in (State.REQUESTED, State.INFLIGHT, State.COMPLETED):
                table.fs.delete_file(tl.path_of(inst, state))
            faults.step(f"archive removed {inst.timestamp}")
        log.info("%s: archived %d instant(s) into %s", table.base_path, len(victims), name)
        table.refresh()
        return ArchiveOutcome([i.timestamp for i in victims], path, bound)
    finally:
        lock.release()
