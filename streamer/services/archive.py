"""Archive: move old completed instants out of the active timeline.

Table versions 8 and 9 archive into Hudi 1.x's LSM history
(:mod:`streamer.services.archive_history`, chosen by the same rules); what follows is
version 6's archive (Hudi 0.x layout).

When more than ``max_commits`` completed writes are active, the oldest instants are
written to a new archive log ``.hoodie/archived/.commits_.archive.<n>_1-0-1``, exactly in
the form Hudi 0.15's ``HoodieTimelineArchiver`` writes: a Hudi log file (``#HUDI#`` blocks)
of Avro data blocks, at most :data:`BATCH_SIZE` records each, whose only header is the
SCHEMA of ``HoodieArchivedMetaEntry``. One record per timeline *file* (requested,
inflight, completed) of each archived instant, carrying what Hudi's
``MetadataConversionUtils.createMetaWrapper`` puts there: the commit metadata as Avro
``HoodieCommitMetadata`` for (delta)commits in every state, the cleaner plan / clean
metadata, the rollback metadata, the (log) compaction plan of a requested compaction.
Hudi's ``HoodieArchivedTimeline`` loads these records whenever a query or service looks
before the active timeline (an incremental query from an archived instant, meta sync,
the archiver itself), and it fails on an instant whose details are missing.

The archive is made durable before anything leaves ``.hoodie/``: then requested/inflight
files go first, the completed file last, so no reader ever sees a half-removed instant
as pending. ``min_commits`` completed writes always stay.

Archiving never passes (the cut is a timeline *prefix* ending before the first of):
* the earliest pending instant of any kind (a pending service still needs its plan and
  the instants around it);
* the earliest commit the last clean retains (its query must still resolve);
* the oldest base instant of any live file slice: our reader treats only *active*
  completed instants as committed, so archiving a delta commit whose blocks are still
  read would hide them. (Hudi readers also accept instants before the timeline start;
  until ours do, this bound keeps every read identical.) In layout 2 also the oldest
  delta commit that wrote a log file of a live slice (its completion time places the
  log in its slice).
"""

from __future__ import annotations

import copy
import datetime as dt
import io
import json
import logging
import posixpath
import struct
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import fastavro

from streamer.config.policies import ArchivePolicy
from streamer.errors import StreamerError
from streamer.read.table import Table
from streamer.services.archive_history import archive_to_history, finish_interrupted_move
from streamer.services.compaction import CompactionConflict
from streamer.table.avro_schema import as_record
from streamer.table.instant import Action, Instant, State, format_instant_time, parse_timeline_file
from streamer.table.log_content import AVRO_BLOCK_VERSION, split_avro_records
from streamer.table.log_format import BlockType, HeaderKey, encode_block, read_log_file
from streamer.table.lsm_history import history_dir
from streamer.table.metadata import (
    ARCHIVED_COMMIT_METADATA_SCHEMA,
    ARCHIVED_REPLACE_COMMIT_METADATA_SCHEMA,
    CLEAN_METADATA_SCHEMA,
    CLEANER_PLAN_SCHEMA,
    COMPACTION_PLAN_SCHEMA,
    ROLLBACK_METADATA_SCHEMA,
    CleanerPlan,
    CleanMetadata,
    CommitMetadata,
    CompactionPlan,
    RollbackMetadata,
)
from streamer.table.metadata_table import METADATA_TABLE_FOLDER, has_metadata_table
from streamer.table.naming import parse_log_file_name
from streamer.table.properties import METAFOLDER, load_properties
from streamer.table.timeline import Timeline
from streamer.write.lock import PlanLock
from streamer.write.transaction import Transaction

log = logging.getLogger(__name__)

ARCHIVE_TOKEN = "1-0-1"
#: Records per Avro data block (Hudi's ``hoodie.commits.archival.batch`` default).
BATCH_SIZE = 10


def _opt(schema: Any) -> list[Any]:
    return ["null", copy.deepcopy(schema)]


_STR = ["null", "string"]
#: Hudi's ``HoodieArchivedMetaEntry`` (``org.apache.hudi.avro.model``), fields in Hudi's
#: order. Left out, because we never fill them: ``hoodieCompactionMetadata``,
#: ``hoodieSavePointMetadata``, ``hoodieRequestedReplaceMetadata`` and
#: ``hoodieIndexCommitMetadata`` - all nullable with default null in Hudi's schema, so
#: Hudi's reader (``HoodieAvroDataBlock`` decodes with this writer schema resolved to its
#: own ``HoodieArchivedMetaEntry.getClassSchema()``) reads them as null, as it would read
#: Hudi's own entries for those actions' other states.
ARCHIVED_ENTRY_SCHEMA: dict[str, Any] = {
    "type": "record", "name": "HoodieArchivedMetaEntry", "namespace": "org.apache.hudi.avro.model",
    "fields": [
        {"name": "hoodieCommitMetadata", "default": None, "type": _opt(ARCHIVED_COMMIT_METADATA_SCHEMA)},
        {"name": "hoodieCleanMetadata", "default": None, "type": _opt(CLEAN_METADATA_SCHEMA)},
        {"name": "hoodieRollbackMetadata", "default": None, "type": _opt(ROLLBACK_METADATA_SCHEMA)},
        {"name": "commitTime", "default": None, "type": _STR},
        {"name": "actionType", "default": None, "type": _STR},
        {"name": "version", "default": 1, "type": ["int", "null"]},
        {"name": "hoodieCompactionPlan", "default": None, "type": _opt(COMPACTION_PLAN_SCHEMA)},
        {"name": "hoodieCleanerPlan", "default": None, "type": _opt(CLEANER_PLAN_SCHEMA)},
        {"name": "actionState", "default": None, "type": _STR},
        {"name": "hoodieReplaceCommitMetadata", "default": None,
         "type": _opt(ARCHIVED_REPLACE_COMMIT_METADATA_SCHEMA)},
        {"name": "HoodieInflightReplaceMetadata", "default": None, "type": ["null", "HoodieCommitMetadata"]},
        {"name": "stateTransitionTime", "default": None, "type": _STR},
    ],
}
_PARSED_ENTRY_SCHEMA = fastavro.parse_schema(copy.deepcopy(ARCHIVED_ENTRY_SCHEMA))


@dataclass(frozen=True)
class ArchiveOutcome:
    archived: list[str]
    archive_file: str | None
    bound: str | None  # first instant kept because a rule forbade going further
    #: why nothing was even considered (a table version this project does not archive)
    skipped: str | None = None
    #: versions 8 and 9: the LSM history files this run merged its layers into
    merged: list[str] = field(default_factory=list)


def archive_dir(table: Table) -> str:
    return posixpath.join(table.base_path, METAFOLDER, table.properties.archive_folder)


def archive_bound(table: Table) -> str | None:
    """The earliest instant that must stay active (``None``: no rule applies).

    Hudi's archivers' rules: nothing from the first pending instant, nor what the last
    clean or a live file slice still needs; nothing from the first savepoint (restoring
    to it needs its commit and those after it); no replacecommit whose replaced file
    groups still have files (archived, it would hide them no more); and, with Hudi's
    metadata table on, nothing after its last compaction (its readers drop the log
    records of instants no longer on the active timeline)."""
    tl = table.timeline
    bounds = []
    pending = tl.pending()
    if pending:
        bounds.append(pending[0].timestamp)
    if tl.savepoints:
        bounds.append(tl.savepoints[0].timestamp)
    replaced = _first_replace_with_live_groups(table)
    if replaced is not None:
        bounds.append(replaced)
    metadata = _metadata_table_bound(table)
    if metadata is not None:
        bounds.append(metadata)
    cleans = [i for i in tl.completed() if i.action == Action.CLEAN]
    if cleans:
        meta = CleanMetadata.from_bytes(tl.read_details(cleans[-1]), tl.path_of(cleans[-1]))
        if meta.earliest_commit_to_retain:
            bounds.append(meta.earliest_commit_to_retain)
    slices = table.fsview.latest_merged_slices()
    bases = [s.base_instant for s in slices if s.base_instant]
    if bases:
        bounds.append(min(bases))
    if tl.layout_version >= 2:
        # layout 2 names a log file by the delta commit that wrote it, and a slice takes
        # the log by that instant's completion time (found on the active timeline only)
        logs = [lf.base_instant for s in slices for lf in s.log_files]
        if logs:
            bounds.append(min(logs))
    return min(bounds) if bounds else None


def _first_replace_with_live_groups(table: Table) -> str | None:
    """The first completed replacecommit (clustering, insert overwrite) some of whose
    replaced file groups still have files on storage."""
    on_storage = {(g.partition_path, g.file_id) for g in table.fsview.file_groups()}
    for inst in table.timeline.completed():
        if inst.action == Action.REPLACE_COMMIT and table.fsview.commit_metadata(inst).replaced_file_ids() & on_storage:
            return inst.timestamp
    return None


def _metadata_table_bound(table: Table) -> str | None:
    """With Hudi's metadata table on: its last compaction's time, before which archiving
    stops; the first instant (nothing archived) if it never compacted or cannot be read."""
    if not has_metadata_table(table.properties):
        return None
    folder = posixpath.join(table.base_path, METAFOLDER, METADATA_TABLE_FOLDER)
    try:
        props = load_properties(table.fs, folder)
        compactions = [i for i in Timeline.load(table.fs, folder, props).completed() if i.action == Action.COMMIT]
    except StreamerError as e:
        log.info("%s: the metadata table's timeline cannot be read (%s); not archiving", table.base_path, e)
        compactions = []
    if compactions:
        return compactions[-1].timestamp
    log.info("%s: Hudi's metadata table has not compacted yet; not archiving before it has", table.base_path)
    return table.timeline.first_instant


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


def _details(action: str, state: State, data: bytes, where: str, plan: bytes) -> dict[str, Any]:
    """The metadata field(s) Hudi 0.15's ``MetadataConversionUtils.createMetaWrapper`` sets
    for one timeline file. ``plan``: the instant's requested file (a clean's inflight file
    holds the same plan; older tables of ours left it empty)."""
    if action in (Action.COMMIT, Action.DELTA_COMMIT):
        if state is State.COMPLETED and not data:
            return {}  # Hudi's createMetaWrapperForEmptyInstant
        return {"hoodieCommitMetadata": CommitMetadata.from_bytes(data, where).to_archived_record()}
    if action == Action.REPLACE_COMMIT:
        if state is State.COMPLETED and data:
            meta = CommitMetadata.from_bytes(data, where).to_archived_record(replace=True)
            return {"hoodieReplaceCommitMetadata": meta}
        if state is State.INFLIGHT and data:
            return {"HoodieInflightReplaceMetadata": CommitMetadata.from_bytes(data, where).to_archived_record()}
        # a requested replacecommit (clustering plan) is not re-encoded: Hudi's archived
        # timeline reads replacecommit details from hoodieReplaceCommitMetadata only
        return {}
    if action == Action.CLEAN:
        if state is State.COMPLETED:
            return {"hoodieCleanMetadata": CleanMetadata.from_bytes(data, where).to_record()}
        return {"hoodieCleanerPlan": CleanerPlan.from_bytes(data or plan, where).to_record()}
    if action == Action.ROLLBACK:
        if state is State.COMPLETED:
            return {"hoodieRollbackMetadata": RollbackMetadata.from_bytes(data, where).to_record()}
        return {}
    if action in (Action.COMPACTION, Action.LOG_COMPACTION):
        if state is State.REQUESTED:
            return {"hoodieCompactionPlan": CompactionPlan.from_bytes(data, where).to_record()}
        return {}
    return {}  # savepoint & co.: an entry without details (we never write those actions)


def archived_entries(table: Table, inst: Instant) -> Iterator[dict[str, Any]]:
    """``HoodieArchivedMetaEntry`` records of one instant: one per timeline file, in state order."""
    tl = table.timeline
    requested = tl.path_of(inst, State.REQUESTED)
    plan = table.fs.read_bytes(requested) if table.fs.exists(requested) else b""
    for state in (State.REQUESTED, State.INFLIGHT, State.COMPLETED):
        path = tl.path_of(inst, state)
        if not table.fs.exists(path):
            continue
        tf = parse_timeline_file(posixpath.basename(path))
        action = tf.action if tf is not None else inst.action
        mtime_ns = table.fs.status(path).mtime_ns
        entry: dict[str, Any] = {
            "commitTime": inst.timestamp,
            "actionType": action,
            "version": None,  # Hudi leaves it unset too
            "actionState": state.name,
            "stateTransitionTime": (
                format_instant_time(dt.datetime.fromtimestamp(mtime_ns / 1e9, dt.timezone.utc))
                if mtime_ns else None
            ),
        }
        entry.update(_details(action, state, table.fs.read_bytes(path), path, plan))
        yield entry


def encode_archive_blocks(entries: list[dict[str, Any]]) -> bytes:
    """Avro data blocks of ``entries`` (content layout of :mod:`streamer.table.log_content`:
    version, record count, then length-prefixed Avro datums), :data:`BATCH_SIZE` a block."""
    header = {HeaderKey.SCHEMA: json.dumps(ARCHIVED_ENTRY_SCHEMA, separators=(",", ":"))}
    blocks = []
    for i in range(0, len(entries), BATCH_SIZE):
        batch = entries[i:i + BATCH_SIZE]
        out = io.BytesIO()
        out.write(struct.pack(">ii", AVRO_BLOCK_VERSION, len(batch)))
        for rec in batch:
            buf = io.BytesIO()
            fastavro.schemaless_writer(buf, _PARSED_ENTRY_SCHEMA, rec)
            out.write(struct.pack(">i", buf.tell()))
            out.write(buf.getvalue())
        blocks.append(encode_block(BlockType.AVRO_DATA, header, out.getvalue()))
    return b"".join(blocks)


#: The field our archive records had before they carried Hudi's metadata (the instant's
#: raw timeline files by name); Hudi cannot read instant details from such records.
LEGACY_FILES_FIELD = "mor_streamer_files"


def _legacy_entries(rec: dict[str, Any], where: str) -> list[dict[str, Any]]:
    """Hudi entries for one record of our former archive format, from the raw files it kept."""
    files = {name: bytes(data) for name, data in (rec.get(LEGACY_FILES_FIELD) or {}).items()}
    parsed = sorted(((tf, data) for name, data in files.items() if (tf := parse_timeline_file(name))),
                    key=lambda x: x[0].state.rank)
    plan = next((data for tf, data in parsed if tf.state is State.REQUESTED), b"")
    out = []
    for tf, data in parsed:
        entry: dict[str, Any] = {"commitTime": tf.timestamp, "actionType": tf.action, "version": None,
                                 "actionState": tf.state.name, "stateTransitionTime": None}
        entry.update(_details(tf.action, tf.state, data, f"{where}:{tf.name}", plan))
        out.append(entry)
    if not out:  # nothing kept: at least the instant itself, as Hudi's empty-instant wrapper
        out.append({"commitTime": rec.get("commitTime"), "actionType": rec.get("actionType"), "version": None,
                    "actionState": rec.get("actionState") or "COMPLETED", "stateTransitionTime": None})
    return out


def upgrade_legacy_archives(table: Table) -> list[str]:
    """Rewrite archive files of our former format (records without Hudi's instant details,
    which made Hudi's ``HoodieArchivedTimeline`` fail with ``NoSuchElementException``) in
    Hudi's form, in place and atomically. Returns the paths rewritten."""
    rewritten = []
    folder = archive_dir(table)
    for st in table.fs.list_dir(folder):
        lf = parse_log_file_name(st.name)
        if lf is None or lf.kind != "archive":
            continue
        # headers only (every run looks at every file): the schema says whether it is ours of old
        if not any(b.block_type == BlockType.AVRO_DATA and b.schema
                   and any(f["name"] == LEGACY_FILES_FIELD for f in b.schema.get("fields", []))
                   for b in read_log_file(table.fs, st.path)):
            continue
        blocks = read_log_file(table.fs, st.path, lazy=False)
        entries: list[dict[str, Any]] = []
        for b in blocks:
            if b.block_type != BlockType.AVRO_DATA or not b.schema:
                continue
            legacy = any(f["name"] == LEGACY_FILES_FIELD for f in b.schema.get("fields", []))
            writer = fastavro.parse_schema(b.schema)
            for datum in split_avro_records(b.content(), st.path):
                if legacy:
                    raw = fastavro.schemaless_reader(io.BytesIO(bytes(datum)), writer)
                    entries.extend(_legacy_entries(as_record(raw, st.path), st.path))
                else:
                    entry = fastavro.schemaless_reader(io.BytesIO(bytes(datum)), writer, _PARSED_ENTRY_SCHEMA)
                    entries.append(as_record(entry, st.path))
        table.fs.write_atomic(st.path, encode_archive_blocks(entries))
        rewritten.append(st.path)
        log.info("%s: rewrote archive %s in Hudi's form (%d entries)", table.base_path, st.name, len(entries))
    return rewritten


def _archive_files(table: Table) -> list[tuple[int, str]]:
    """(version, path) of each archive file, oldest first."""
    out = []
    for st in table.fs.list_dir(archive_dir(table)):
        lf = parse_log_file_name(st.name)
        if lf is not None and lf.kind == "archive":
            out.append((lf.version, st.path))
    return sorted(out)


def _next_archive_version(table: Table) -> int:
    files = _archive_files(table)
    return files[-1][0] + 1 if files else 1


def finish_interrupted_legacy_move(table: Table, txn: Transaction) -> list[str]:
    """Version 6: remove from the active timeline the completed instants the newest archive
    file already holds - a run stopped between writing that file and its last delete, whose
    instants the next run would otherwise archive a second time. Returns their times."""
    files = _archive_files(table)
    if not files:
        return []
    path = files[-1][1]
    active = {(i.timestamp, i.completed_action): i for i in table.timeline.completed()}
    found_in: dict[str, Instant] = {}
    # newest block first, until a block holds none of them (Hudi 0.x appends every run's
    # blocks to one archive file: only the last run's can have been interrupted)
    for block in reversed(read_log_file(table.fs, path)):
        if block.block_type != BlockType.AVRO_DATA or not block.schema:
            continue
        writer = fastavro.parse_schema(block.schema)
        found = False
        for datum in split_avro_records(block.content(), path):
            rec: dict[str, Any] = fastavro.schemaless_reader(io.BytesIO(bytes(datum)), writer)  # type: ignore[assignment]
            inst = active.get((str(rec.get("commitTime")), str(rec.get("actionType"))))
            if inst is not None and (rec.get("actionState") or "COMPLETED") == "COMPLETED":
                found_in[inst.timestamp] = inst
                found = True
        if not found:
            break
    done = sorted(found_in.values(), key=lambda i: i.timestamp)
    if done:
        txn.finish_archive(table.timeline, done)
        log.info("%s: finished archiving %d instant(s) an interrupted run had archived", table.base_path, len(done))
    return [i.timestamp for i in done]


def run_archive(table: Table, policy: ArchivePolicy, *, lock_expiry_s: float = 30.0) -> ArchiveOutcome:
    """Archive what ``policy`` allows, holding the archive's own lock and then the
    writers' lock (as Hudi's archiver holds the table lock): a writer or service reads the
    commit metadata of completed instants - recent writes' sizes, the latest schema, a
    checkpoint - from a listing made under the writers' lock, and an instant removed
    between that listing and that read would fail their commit. Nothing archived when the
    writers' lock stays busy for ``4 * lock_expiry_s``; the next run archives it."""
    lock = PlanLock(table.fs, table.base_path, "archive", expiry_s=lock_expiry_s, purpose="archive")
    if not lock.try_acquire():
        return ArchiveOutcome([], None, None)
    try:
        # the writers' lock, without the metadata-table drop of services that commit
        with Transaction(table.fs, table.base_path, timeout_s=lock_expiry_s * 4, purpose="archive",
                         busy=CompactionConflict) as txn:
            table.refresh()
            if table.timeline.layout_version >= 2:
                return _run_history_archive(table, policy, txn)
            upgrade_legacy_archives(table)
            if finish_interrupted_legacy_move(table, txn):
                table.refresh()
            victims, bound = instants_to_archive(table, policy)
            if not victims:
                return ArchiveOutcome([], None, bound)
            entries = [e for i in victims for e in archived_entries(table, i)]
            data = encode_archive_blocks(entries)
            name = f".commits_.archive.{_next_archive_version(table)}_{ARCHIVE_TOKEN}"
            path = posixpath.join(archive_dir(table), name)
            txn.archive(table.timeline, victims, path, data)
            log.info("%s: archived %d instant(s) into %s", table.base_path, len(victims), name)
            table.refresh()
            return ArchiveOutcome([i.timestamp for i in victims], path, bound)
    except CompactionConflict as e:
        log.info("not archiving now: %s", e)
        return ArchiveOutcome([], None, None)
    finally:
        lock.release()


def _run_history_archive(table: Table, policy: ArchivePolicy, txn: Transaction) -> ArchiveOutcome:
    """Table versions 8 and 9: into the LSM history (:mod:`streamer.services.archive_history`),
    holding the locks :func:`run_archive` took."""
    folder = history_dir(table.base_path, table.properties)
    if finish_interrupted_move(table, folder, txn):
        table.refresh()
    victims, bound = instants_to_archive(table, policy)
    if not victims:
        return ArchiveOutcome([], None, bound)
    path = archive_to_history(table, victims, txn)
    log.info("%s: archived %d instant(s) into %s", table.base_path, len(victims), posixpath.basename(path))
    merged = txn.merge_history(folder, batch=policy.history_merge_batch)
    if merged:
        log.info("%s: merged the archive's history into %s", table.base_path, ", ".join(merged))
    table.refresh()
    return ArchiveOutcome([i.timestamp for i in victims], path, bound, merged=merged)
