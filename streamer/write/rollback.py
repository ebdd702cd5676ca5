"""Roll back a failed (pending) write before the next one starts, as Hudi does.

A writer that died mid-commit leaves a pending ``deltacommit`` and, in its markers,
the list of files it created or appended to. Its successor:

1. writes a ``rollback.requested`` holding a Hudi ``HoodieRollbackPlan`` built from the
   markers (base files to delete; file groups whose logs got a block);
2. executes it: deletes the partial base files (and any temp file a rename never
   published), appends a rollback *command block* naming the failed instant to each
   touched file group (a new log version), so every Hudi reader skips its blocks;
3. deletes the failed instant's timeline files and heartbeat - except a failed
   *compaction*, which goes back to requested with its plan kept - then completes the
   rollback with Avro ``HoodieRollbackMetadata``, and drops the markers.

Every step is idempotent, so a rollback interrupted by another crash is simply run
again from its saved plan. This module builds and executes the plan; its instant's
transitions are the commit protocol's (:meth:`streamer.write.transaction.Transaction.rollback`).
"""

from __future__ import annotations

import posixpath
import time
from dataclasses import dataclass

from streamer import faults
from streamer.fs import TEMP_PREFIX, FileSystem
from streamer.table.instant import Instant
from streamer.table.log_format import HeaderKey, encode_command_block
from streamer.table.metadata import (
    RollbackMetadata,
    RollbackPartitionMetadata,
    RollbackPlan,
    RollbackRequest,
)
from streamer.table.naming import (
    log_file_name,
    parse_base_file_name,
    parse_log_file_name,
    write_token,
)
from streamer.table.properties import METAFOLDER
from streamer.table.timeline import HEARTBEAT_FOLDER, Timeline
from streamer.write.markers import TEMP_FOLDER, IOType, list_markers

ROLLBACK_TOKEN = write_token(1, 0, 1)


@dataclass(frozen=True)
class RollbackOutcome:
    rollback_instant: str
    target: str
    deleted_files: int
    rollback_blocks: int


def _abs(base_path: str, partition: str, name: str) -> str:
    return posixpath.join(base_path, partition, name) if partition else posixpath.join(base_path, name)


def build_plan(fs: FileSystem, base_path: str, target: Instant, *, delete_logs: bool = False) -> RollbackPlan:
    """A Hudi rollback plan from the failed instant's markers.

    ``delete_logs`` (table version 8+): the failed instant's log files are its own, named
    by it, so they are deleted like base files, as Hudi 1.x rolls them back; in version 6
    a log file may hold other commits' blocks, so a command block is appended instead."""
    requests: list[RollbackRequest] = []
    seen_logs: set[str] = set()
    for m in list_markers(fs, base_path, target.timestamp):
        own_log = delete_logs and (lf := parse_log_file_name(m.file_name)) is not None and (
            lf.base_instant == target.timestamp)
        if (m.io_type is IOType.CREATE and parse_base_file_name(m.file_name)) or own_log:
            requests.append(
                RollbackRequest(
                    m.partition, "", "", files_to_be_deleted=[_abs(base_path, m.partition, m.file_name)]
                )
            )
        elif m.io_type in (IOType.CREATE, IOType.APPEND) and (lf := parse_log_file_name(m.file_name)):
            # a log file's marker: our CREATE, or the APPEND marker named after the log file
            # that Hudi 0.15's HoodieWriteHandle writes (and its MarkerBasedRollbackStrategy
            # requires: it rejects CREATE markers of log files)
            path = _abs(base_path, m.partition, m.file_name)
            if path in seen_logs:
                continue
            seen_logs.add(path)
            size = fs.status(path).size if fs.exists(path) else 0
            if size == 0:
                continue  # never published: nothing for readers to skip
            # Hudi's listing-based plans key logBlocksToBeDeleted by the full path too (its
            # marker-based ones by the bare name, size 1); Hudi's BaseRollbackHelper only uses
            # fileId + latestBaseInstant to place the rollback block, the keys are reported.
            requests.append(
                RollbackRequest(m.partition, lf.file_id, lf.base_instant, [], {path: size})
            )
        # APPEND markers named after the base file (Hudi before HUDI-1517, and ours) need
        # nothing here: the log file's own marker says whether a block was published.
    return RollbackPlan(target.timestamp, target.action, requests)


def _temp_leftovers(fs: FileSystem, path: str) -> list[str]:
    """Temp files a crashed atomic write left next to ``path`` (never renamed): named by
    :func:`streamer.fs.temp_name`, or ``.<name>.<hex>.tmp`` by writers before it."""
    parent, name = posixpath.split(path)
    prefixes = (f"{TEMP_PREFIX}{name}.", f".{name}.")
    return [st.path for st in fs.list_dir(parent) if st.name.startswith(prefixes) and st.name.endswith(".tmp")]


def _next_log_version(fs: FileSystem, base_path: str, partition: str, file_id: str, base_instant: str) -> int:
    top = 0
    for st in fs.list_dir(_abs(base_path, partition, "")):
        lf = parse_log_file_name(st.name)
        if lf and lf.file_id == file_id and lf.base_instant == base_instant:
            top = max(top, lf.version)
    return top + 1


def execute_plan(
    fs: FileSystem, base_path: str, plan: RollbackPlan, rollback_instant: str
) -> RollbackMetadata:
    started = time.monotonic()
    parts: dict[str, RollbackPartitionMetadata] = {}
    deleted = 0
    blocks = 0
    for req in plan.requests:
        pm = parts.setdefault(req.partition_path, RollbackPartitionMetadata(req.partition_path))
        for path in req.files_to_be_deleted:
            for tmp in _temp_leftovers(fs, path):
                fs.delete_file(tmp)
            existed = fs.exists(path)
            fs.delete_file(path)
            faults.step(f"rollback delete {posixpath.basename(path)}")
            if existed:
                deleted += 1
                pm.success_delete_files.append(path)
        if req.log_blocks_to_be_deleted:
            pm.log_files_from_failed_commit.update(req.log_blocks_to_be_deleted)
            version = _next_log_version(fs, base_path, req.partition_path, req.file_id, req.latest_base_instant)
            name = log_file_name(req.file_id, req.latest_base_instant, version, ROLLBACK_TOKEN)
            block = encode_command_block(
                {
                    HeaderKey.INSTANT_TIME: rollback_instant,
                    HeaderKey.TARGET_INSTANT_TIME: plan.instant_time,
                }
            )
            path = _abs(base_path, req.partition_path, name)
            fs.write_atomic(path, block)
            faults.step(f"rollback block {name}")
            pm.rollback_log_files[path] = len(block)
            blocks += 1
    return RollbackMetadata(
        start_rollback_time=rollback_instant,
        commits_rollback=[plan.instant_time],
        instants_rollback=[(plan.instant_time, plan.action)],
        partition_metadata=parts,
        time_taken_ms=int((time.monotonic() - started) * 1000),
        total_files_deleted=deleted,
    )


def sweep_temp_for_markers(fs: FileSystem, base_path: str, target: str) -> None:
    """Delete temp files of any marked data file (also those whose marker is CREATE of a log)."""
    for m in list_markers(fs, base_path, target):
        for tmp in _temp_leftovers(fs, _abs(base_path, m.partition, m.file_name)):
            fs.delete_file(tmp)


def sweep_completed(fs: FileSystem, base_path: str, timeline: Timeline) -> None:
    """Drop markers/heartbeats a writer killed right after completing left behind, a
    heartbeat's temp file (:func:`streamer.fs.temp_name`) a kill left mid-beat once its
    instant is no longer pending (completed or rolled back), and a heartbeat of ours (it
    holds a time) whose instant is not pending: a writer killed between its heartbeat and
    its requested instant left it. Hudi's (empty) are left: a Hudi writer begins its
    heartbeat before its instant too. Called holding the writers' lock, so no writer of
    ours is between the two."""
    done = {i.timestamp for i in timeline.completed()}
    pending = {i.timestamp for i in timeline.pending()}
    for folder in (TEMP_FOLDER, HEARTBEAT_FOLDER):
        for st in fs.list_dir(posixpath.join(base_path, METAFOLDER, folder)):
            beat, temp = folder == HEARTBEAT_FOLDER, st.name.startswith(TEMP_PREFIX)
            if st.name in done or (beat and temp and st.name[len(TEMP_PREFIX):].split(".")[0] not in pending) or (
                    beat and not temp and not st.is_dir and st.size > 0 and st.name not in pending):
                if st.is_dir:
                    fs.delete_dir(st.path)
                else:
                    fs.delete_file(st.path)
