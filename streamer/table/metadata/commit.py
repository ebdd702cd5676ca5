"""What a completed instant says: commit metadata and the Avro plans/metadata files.

Table version 6 stores commit metadata as pretty JSON (Jackson); versions 8+ store
the same fields as an Avro container. Plans (compaction, log compaction, clean,
rollback) and rollback/clean metadata are Avro containers in every version; the
writer's schema travels inside the file, so :func:`read_avro` needs no schema and
our own writers embed schemas field-compatible with Hudi's (``org.apache.hudi.avro.model``).
Unknown JSON keys are kept in ``extra`` so a round trip never drops another engine's data.
"""

from __future__ import annotations

import io
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field, fields
from typing import Any

import fastavro

from streamer.errors import CorruptDataError

AVRO_MAGIC = b"Obj\x01"
SCHEMA_KEY = "schema"
#: Streamer checkpoint keys (Hudi 0.x DeltaStreamer, then HoodieStreamer v2).
CHECKPOINT_KEY = "deltastreamer.checkpoint.key"
CHECKPOINT_KEY_V2 = "streamer.checkpoint.key.v2"
_NS = "org.apache.hudi.avro.model"


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(p[:1].upper() + p[1:] for p in rest)


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


# =============================================================================== commit metadata
@dataclass
class WriteStat:
    """One file written by a commit (``HoodieWriteStat`` / ``HoodieDeltaWriteStat``)."""

    file_id: str = ""
    path: str | None = None
    prev_commit: str | None = "null"
    num_writes: int = 0
    num_deletes: int = 0
    num_update_writes: int = 0
    num_inserts: int = 0
    total_write_bytes: int = 0
    total_write_errors: int = 0
    partition_path: str | None = None
    total_log_records: int = 0
    total_log_files_compacted: int = 0
    total_log_size_compacted: int = 0
    total_updated_records_compacted: int = 0
    total_log_blocks: int = 0
    total_corrupt_log_block: int = 0
    total_rollback_blocks: int = 0
    file_size_in_bytes: int = 0
    min_event_time: int | None = None
    max_event_time: int | None = None
    runtime_stats: dict[str, int] | None = None
    # Delta write stats (log files) only:
    log_version: int | None = None
    log_offset: int | None = None
    base_file: str | None = None
    log_files: list[str] | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def is_log(self) -> bool:
        return self.log_version is not None or ".log." in (self.path or "")

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"fileId": self.file_id, "path": self.path, "cdcStats": None, "tempPath": None}
        for f in fields(self):
            if f.name in ("file_id", "path", "extra") or (
                f.name in ("log_version", "log_offset", "base_file", "log_files") and not self.is_log
            ):
                continue
            out[_camel(f.name)] = getattr(self, f.name)
        if self.is_log and "recordsStats" not in self.extra:
            # Jackson's rendering of HoodieDeltaWriteStat's empty ``Option`` recordsStats
            # (column ranges Hudi fills only for the metadata table's column stats); Hudi
            # 0.15 writes it on every log write stat. Parsed back, it lands in ``extra``.
            out["recordsStats"] = dict(_EMPTY_RECORDS_STATS)
        out.update(self.extra)
        return out

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> WriteStat:
        known = {f.name for f in fields(cls)} - {"extra"}
        kwargs: dict[str, Any] = {}
        extra: dict[str, Any] = {}
        for k, v in d.items():
            name = _snake(k)
            if k in _NULL_DEFAULTS and v is None:
                continue  # always written as null; not worth keeping
            if name in known:
                kwargs[name] = v if v is not None or name not in _INT_FIELDS else 0
            else:
                extra[k] = v
        return cls(**kwargs, extra=extra)


_NULL_DEFAULTS = ("cdcStats", "tempPath")
_EMPTY_RECORDS_STATS: dict[str, Any] = {"val": None}
_INT_FIELDS = {
    f.name for f in fields(WriteStat) if f.type == "int" and f.name not in ("log_version",)
}


@dataclass
class CommitMetadata:
    """``HoodieCommitMetadata`` (and ``HoodieReplaceCommitMetadata``)."""

    partition_to_write_stats: dict[str, list[WriteStat]] = field(default_factory=dict)
    compacted: bool = False
    extra_metadata: dict[str, str] = field(default_factory=dict)
    operation_type: str = "UNKNOWN"
    partition_to_replace_file_ids: dict[str, list[str]] = field(default_factory=dict)

    # -- accessors --------------------------------------------------------------
    @property
    def schema(self) -> str | None:
        return self.extra_metadata.get(SCHEMA_KEY) or None

    def checkpoint(self) -> str | None:
        """Apache Hudi HoodieStreamer's checkpoint string of this commit, or ``None``.

        Hudi's value, read as Hudi 1.x reads it (``CheckpointUtils.getCheckpoint``):
        ``streamer.checkpoint.key.v2`` when non-empty, else ``deltastreamer.checkpoint.key``
        (the only key Hudi 0.x and table version 6 writers use; for Kafka
        ``topic,partition:offset,...``). It is *not* our pipeline's own position, which
        lives under ``mor.streamer.checkpoint`` (``STREAMER_CHECKPOINT_KEY`` in
        :mod:`streamer.pipeline.checkpoint`, which reads both).
        """
        return self.extra_metadata.get(CHECKPOINT_KEY_V2) or self.extra_metadata.get(CHECKPOINT_KEY)

    def write_stats(self) -> Iterator[WriteStat]:
        for stats in self.partition_to_write_stats.values():
            yield from stats

    def file_ids_by_partition(self) -> dict[str, set[str]]:
        return {p: {s.file_id for s in stats if s.file_id} for p, stats in self.partition_to_write_stats.items()}

    def replaced_file_ids(self) -> set[tuple[str, str]]:
        return {(p, f) for p, ids in self.partition_to_replace_file_ids.items() for f in ids}

    def add(self, stat: WriteStat) -> None:
        self.partition_to_write_stats.setdefault(stat.partition_path or "", []).append(stat)

    # -- (de)serialisation ------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "partitionToWriteStats": {
                p: [s.to_dict() for s in stats] for p, stats in self.partition_to_write_stats.items()
            },
            "compacted": self.compacted,
            "extraMetadata": dict(self.extra_metadata),
            "operationType": self.operation_type,
        }
        if self.partition_to_replace_file_ids:
            out["partitionToReplaceFileIds"] = {
                p: list(ids) for p, ids in self.partition_to_replace_file_ids.items()
            }
        return out

    def to_json_bytes(self) -> bytes:
        """Jackson-style pretty JSON, as table version 6 stores it."""
        return json.dumps(self.to_dict(), indent=2, separators=(",", " : ")).encode()

    def to_archived_record(self, *, replace: bool = False) -> dict[str, Any]:
        """This metadata as Hudi's Avro ``HoodieCommitMetadata`` (``HoodieReplaceCommitMetadata``
        with ``replace``), the form an archived timeline entry carries.

        As Hudi 0.15's ``MetadataConversionUtils.convertCommitMetadata`` makes it: write stats
        keep the fields of the Avro ``HoodieWriteStat`` (``totalLogFiles`` has no JSON
        counterpart and stays null), a compacted commit says ``COMPACT``, ``version`` stays
        null and ``extraMetadata`` gains an empty ``ROLLING_STAT``. Hudi's archived-timeline
        reader turns the record back into JSON and parses it as commit metadata.
        """
        out: dict[str, Any] = {
            "partitionToWriteStats": {
                p: [_archived_stat(s) for s in stats] for p, stats in self.partition_to_write_stats.items()
            },
            "extraMetadata": {**self.extra_metadata, "ROLLING_STAT": ""},
            "version": None,
            "operationType": "COMPACT" if self.compacted else self.operation_type,
        }
        if replace:
            out["partitionToReplaceFileIds"] = {p: list(ids) for p, ids in self.partition_to_replace_file_ids.items()}
        return out

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> CommitMetadata:
        p2ws = {
            p: [WriteStat.from_dict(s) for s in (stats or [])]
            for p, stats in (d.get("partitionToWriteStats") or {}).items()
        }
        return cls(
            partition_to_write_stats=p2ws,
            compacted=bool(d.get("compacted") or False),
            extra_metadata={k: v for k, v in (d.get("extraMetadata") or {}).items() if v is not None},
            operation_type=d.get("operationType") or "UNKNOWN",
            partition_to_replace_file_ids={
                p: list(ids or []) for p, ids in (d.get("partitionToReplaceFileIds") or {}).items()
            },
        )

    @classmethod
    def from_bytes(cls, data: bytes, path: str = "<commit metadata>") -> CommitMetadata:
        """Parse JSON (v6) or Avro (v8+) commit metadata; empty bytes give empty metadata."""
        if not data.strip():
            return cls()
        try:
            if data.startswith(AVRO_MAGIC):
                _, record = read_avro(data, path)
                return cls.from_dict(record)
            return cls.from_dict(json.loads(data))
        except (ValueError, TypeError, KeyError) as e:
            raise CorruptDataError(f"unreadable commit metadata ({e})", path) from e


def _archived_stat(stat: WriteStat) -> dict[str, Any]:
    d = stat.to_dict()
    return {k: d.get(k) for k in ARCHIVED_WRITE_STAT_FIELDS}


# =============================================================================== Avro helpers
def read_avro(data: bytes, path: str = "<avro>") -> tuple[dict[str, Any], dict[str, Any]]:
    """(writer schema, first record) of a single-record Avro container file."""
    try:
        reader = fastavro.reader(io.BytesIO(data))
        schema = reader.writer_schema
        for record in reader:
            return schema, record
    except Exception as e:  # fastavro raises many types on bad bytes
        raise CorruptDataError(f"unreadable Avro metadata ({e})", path) from e
    raise CorruptDataError("Avro metadata file holds no record", path)


def write_avro(schema: dict[str, Any], record: dict[str, Any]) -> bytes:
    buf = io.BytesIO()
    fastavro.writer(buf, fastavro.parse_schema(schema), [record])
    return buf.getvalue()


def _opt(t: Any) -> list[Any]:
    return ["null", t]


_S = "string"
_STR_MAP = {"type": "map", "values": "string"}
_STR_ARR = {"type": "array", "items": "string"}

# --------------------------------------------------------------------------- commit metadata (Avro)
#: Fields of Hudi 0.15's Avro ``HoodieWriteStat`` (all nullable longs/strings), in its order.
ARCHIVED_WRITE_STAT_FIELDS = (
    "fileId", "path", "prevCommit", "numWrites", "numDeletes", "numUpdateWrites", "totalWriteBytes",
    "totalWriteErrors", "partitionPath", "totalLogRecords", "totalLogFiles", "totalUpdatedRecordsCompacted",
    "numInserts", "totalLogBlocks", "totalCorruptLogBlock", "totalRollbackBlocks", "fileSizeInBytes",
)
_STRING_STAT_FIELDS = {"fileId", "path", "prevCommit", "partitionPath"}
_WRITE_STATS_MAP = {"type": "map", "values": {"type": "array", "items": {
    "type": "record", "name": "HoodieWriteStat", "fields": [
        {"name": n, "default": None, "type": _opt(_S if n in _STRING_STAT_FIELDS else "long")}
        for n in ARCHIVED_WRITE_STAT_FIELDS]}}}

#: Avro ``HoodieCommitMetadata`` as table version 6 archives it (Hudi 0.15 field set; the
#: active timeline of v6 keeps the JSON form, :meth:`CommitMetadata.to_json_bytes`).
ARCHIVED_COMMIT_METADATA_SCHEMA: dict[str, Any] = {
    "type": "record", "name": "HoodieCommitMetadata", "namespace": _NS, "fields": [
        {"name": "partitionToWriteStats", "default": None, "type": _opt(_WRITE_STATS_MAP)},
        {"name": "extraMetadata", "default": None, "type": _opt(_STR_MAP)},
        {"name": "version", "default": 1, "type": ["int", "null"]},
        {"name": "operationType", "default": None, "type": _opt(_S)},
    ]}

#: Avro ``HoodieReplaceCommitMetadata`` (its write stats reuse ``HoodieWriteStat`` by name).
ARCHIVED_REPLACE_COMMIT_METADATA_SCHEMA: dict[str, Any] = {
    "type": "record", "name": "HoodieReplaceCommitMetadata", "namespace": _NS, "fields": [
        {"name": "partitionToWriteStats", "default": None,
         "type": _opt({"type": "map", "values": {"type": "array", "items": "HoodieWriteStat"}})},
        {"name": "extraMetadata", "default": None, "type": _opt(_STR_MAP)},
        {"name": "version", "default": 1, "type": ["int", "null"]},
        {"name": "operationType", "default": None, "type": _opt(_S)},
        {"name": "partitionToReplaceFileIds", "default": None,
         "type": _opt({"type": "map", "values": _STR_ARR})},
    ]}

# --------------------------------------------------------------------------- compaction plan
COMPACTION_PLAN_SCHEMA: dict[str, Any] = {
    "type": "record",
    "name": "HoodieCompactionPlan",
    "namespace": _NS,
    "fields": [
        {"name": "operations", "default": None, "type": _opt({"type": "array", "items": {
            "type": "record", "name": "HoodieCompactionOperation", "fields": [
                {"name": "baseInstantTime", "type": _opt(_S)},
                {"name": "deltaFilePaths", "default": None, "type": _opt(_STR_ARR)},
                {"name": "dataFilePath", "default": None, "type": _opt(_S)},
                {"name": "fileId", "type": _opt(_S)},
                {"name": "partitionPath", "default": None, "type": _opt(_S)},
                {"name": "metrics", "default": None, "type": _opt({"type": "map", "values": "double"})},
                {"name": "bootstrapFilePath", "default": None, "type": _opt(_S)},
            ]}})},
        {"name": "extraMetadata", "default": None, "type": _opt(_STR_MAP)},
        {"name": "version", "default": 1, "type": ["int", "null"]},
        {"name": "strategy", "default": None, "type": _opt({
            "type": "record", "name": "HoodieCompactionStrategy", "fields": [
                {"name": "compactorClassName", "default": None, "type": _opt(_S)},
                {"name": "strategyParams", "default": None, "type": _opt(_STR_MAP)},
                {"name": "version", "default": 1, "type": ["int", "null"]},
            ]})},
        {"name": "preserveHoodieMetadata", "default": False, "type": ["boolean", "null"]},
        # Hudi 1.x adds "missingSchedulePartitions" (nullable, default null); 0.15 has no
        # such field, so we leave it out as Hudi 0.15 does.
    ],
}


@dataclass
class CompactionOperation:
    """One file slice to compact: its base file (if any) and the log files to merge in."""

    file_id: str
    partition_path: str
    base_instant_time: str
    data_file_path: str | None = None
    delta_file_paths: list[str] = field(default_factory=list)
    metrics: dict[str, float] = field(default_factory=dict)
    bootstrap_file_path: str | None = None

    def to_record(self) -> dict[str, Any]:
        return {
            "baseInstantTime": self.base_instant_time,
            "deltaFilePaths": list(self.delta_file_paths),
            "dataFilePath": self.data_file_path,
            "fileId": self.file_id,
            "partitionPath": self.partition_path,
            "metrics": dict(self.metrics),
            "bootstrapFilePath": self.bootstrap_file_path,
        }

    @classmethod
    def from_record(cls, r: dict[str, Any]) -> CompactionOperation:
        return cls(
            file_id=r.get("fileId") or "",
            partition_path=r.get("partitionPath") or "",
            base_instant_time=r.get("baseInstantTime") or "",
            data_file_path=r.get("dataFilePath"),
            delta_file_paths=list(r.get("deltaFilePaths") or []),
            metrics=dict(r.get("metrics") or {}),
            bootstrap_file_path=r.get("bootstrapFilePath"),
        )


@dataclass
class CompactionPlan:
    """``HoodieCompactionPlan``: used by both compaction and log compaction."""

    operations: list[CompactionOperation] = field(default_factory=list)
    extra_metadata: dict[str, str] = field(default_factory=dict)
    version: int = 2
    strategy: dict[str, Any] | None = None
    preserve_hoodie_metadata: bool = False

    def to_record(self) -> dict[str, Any]:
        return {
            "operations": [op.to_record() for op in self.operations],
            "extraMetadata": dict(self.extra_metadata),
            "version": self.version,
            "strategy": self.strategy,
            "preserveHoodieMetadata": self.preserve_hoodie_metadata,
        }

    def to_avro_bytes(self) -> bytes:
        return write_avro(COMPACTION_PLAN_SCHEMA, self.to_record())

    @classmethod
    def from_bytes(cls, data: bytes, path: str = "<compaction plan>") -> CompactionPlan:
        if not data:
            return cls()
        _, r = read_avro(data, path)
        return cls(
            operations=[CompactionOperation.from_record(o) for o in (r.get("operations") or [])],
            extra_metadata=dict(r.get("extraMetadata") or {}),
            version=r.get("version") or 1,
            strategy=r.get("strategy"),
            preserve_hoodie_metadata=bool(r.get("preserveHoodieMetadata")),
        )


# --------------------------------------------------------------------------- rollback
_INSTANT_INFO = {"type": "record", "name": "HoodieInstantInfo", "fields": [
    {"name": "commitTime", "type": _S}, {"name": "action", "type": _S}]}

ROLLBACK_PLAN_SCHEMA: dict[str, Any] = {
    "type": "record", "name": "HoodieRollbackPlan", "namespace": _NS, "fields": [
        {"name": "instantToRollback", "default": None, "type": _opt(_INSTANT_INFO)},
        {"name": "RollbackRequests", "default": None, "type": _opt({"type": "array", "items": {
            "type": "record", "name": "HoodieRollbackRequest", "fields": [
                {"name": "partitionPath", "type": _S},
                {"name": "fileId", "default": None, "type": _opt(_S)},
                {"name": "latestBaseInstant", "default": None, "type": _opt(_S)},
                {"name": "filesToBeDeleted", "default": [], "type": _STR_ARR},
                {"name": "logBlocksToBeDeleted", "default": None,
                 "type": _opt({"type": "map", "values": "long"})},
            ]}})},
        {"name": "version", "default": 1, "type": ["int", "null"]},
    ]}

ROLLBACK_METADATA_SCHEMA: dict[str, Any] = {
    "type": "record", "name": "HoodieRollbackMetadata", "namespace": _NS, "fields": [
        {"name": "startRollbackTime", "type": _S},
        {"name": "timeTakenInMillis", "type": "long"},
        {"name": "totalFilesDeleted", "type": "int"},
        {"name": "commitsRollback", "type": _STR_ARR},
        {"name": "partitionMetadata", "type": {"type": "map", "values": {
            "type": "record", "name": "HoodieRollbackPartitionMetadata", "fields": [
                {"name": "partitionPath", "type": _S},
                {"name": "successDeleteFiles", "type": _STR_ARR},
                {"name": "failedDeleteFiles", "type": _STR_ARR},
                {"name": "rollbackLogFiles", "default": None,
                 "type": _opt({"type": "map", "values": "long"})},
                {"name": "logFilesFromFailedCommit", "default": None,
                 "type": _opt({"type": "map", "values": "long"})},
            ]}}},
        {"name": "version", "default": 1, "type": ["int", "null"]},
        {"name": "instantsRollback", "default": [], "type": {"type": "array", "items": _INSTANT_INFO}},
    ]}


@dataclass
class RollbackRequest:
    partition_path: str
    file_id: str = ""
    latest_base_instant: str = ""
    files_to_be_deleted: list[str] = field(default_factory=list)
    log_blocks_to_be_deleted: dict[str, int] = field(default_factory=dict)


@dataclass
class RollbackPlan:
    """``HoodieRollbackPlan``: which instant to undo and which files/blocks that takes."""

    instant_time: str
    action: str
    requests: list[RollbackRequest] = field(default_factory=list)
    version: int = 1

    def to_avro_bytes(self) -> bytes:
        return write_avro(ROLLBACK_PLAN_SCHEMA, {
            "instantToRollback": {"commitTime": self.instant_time, "action": self.action},
            "RollbackRequests": [{
                "partitionPath": r.partition_path, "fileId": r.file_id,
                "latestBaseInstant": r.latest_base_instant,
                "filesToBeDeleted": list(r.files_to_be_deleted),
                "logBlocksToBeDeleted": dict(r.log_blocks_to_be_deleted),
            } for r in self.requests],
            "version": self.version,
        })

    @classmethod
    def from_bytes(cls, data: bytes, path: str = "<rollback plan>") -> RollbackPlan:
        _, r = read_avro(data, path)
        target = r.get("instantToRollback") or {}
        return cls(
            instant_time=target.get("commitTime", ""),
            action=target.get("action", ""),
            requests=[RollbackRequest(
                partition_path=q.get("partitionPath") or "",
                file_id=q.get("fileId") or "",
                latest_base_instant=q.get("latestBaseInstant") or "",
                files_to_be_deleted=list(q.get("filesToBeDeleted") or []),
                log_blocks_to_be_deleted=dict(q.get("logBlocksToBeDeleted") or {}),
            ) for q in (r.get("RollbackRequests") or [])],
            version=r.get("version") or 1,
        )


@dataclass
class RollbackPartitionMetadata:
    partition_path: str
    success_delete_files: list[str] = field(default_factory=list)
    failed_delete_files: list[str] = field(default_factory=list)
    rollback_log_files: dict[str, int] = field(default_factory=dict)
    log_files_from_failed_commit: dict[str, int] = field(default_factory=dict)


@dataclass
class RollbackMetadata:
    """``HoodieRollbackMetadata``: what a completed rollback removed or appended."""

    start_rollback_time: str
    commits_rollback: list[str]
    instants_rollback: list[tuple[str, str]] = field(default_factory=list)
    partition_metadata: dict[str, RollbackPartitionMetadata] = field(default_factory=dict)
    time_taken_ms: int = 0
    total_files_deleted: int = 0
    version: int = 1

    def to_record(self) -> dict[str, Any]:
        return {
            "startRollbackTime": self.start_rollback_time,
            "timeTakenInMillis": self.time_taken_ms,
            "totalFilesDeleted": self.total_files_deleted,
            "commitsRollback": list(self.commits_rollback),
            "partitionMetadata": {p: {
                "partitionPath": m.partition_path,
                "successDeleteFiles": list(m.success_delete_files),
                "failedDeleteFiles": list(m.failed_delete_files),
                "rollbackLogFiles": dict(m.rollback_log_files),
                "logFilesFromFailedCommit": dict(m.log_files_from_failed_commit),
            } for p, m in self.partition_metadata.items()},
            "version": self.version,
            "instantsRollback": [{"commitTime": t, "action": a} for t, a in self.instants_rollback],
        }

    def to_avro_bytes(self) -> bytes:
        return write_avro(ROLLBACK_METADATA_SCHEMA, self.to_record())

    @classmethod
    def from_bytes(cls, data: bytes, path: str = "<rollback metadata>") -> RollbackMetadata:
        _, r = read_avro(data, path)
        return cls(
            start_rollback_time=r.get("startRollbackTime") or "",
            commits_rollback=list(r.get("commitsRollback") or []),
            instants_rollback=[(i["commitTime"], i["action"]) for i in r.get("instantsRollback") or []],
            partition_metadata={p: RollbackPartitionMetadata(
                partition_path=m.get("partitionPath") or "",
                success_delete_files=list(m.get("successDeleteFiles") or []),
                failed_delete_files=list(m.get("failedDeleteFiles") or []),
                rollback_log_files=dict(m.get("rollbackLogFiles") or {}),
                log_files_from_failed_commit=dict(m.get("logFilesFromFailedCommit") or {}),
            ) for p, m in (r.get("partitionMetadata") or {}).items()},
            time_taken_ms=r.get("timeTakenInMillis") or 0,
            total_files_deleted=r.get("totalFilesDeleted") or 0,
            version=r.get("version") or 1,
        )


# --------------------------------------------------------------------------- clean
CLEANER_PLAN_SCHEMA: dict[str, Any] = {
    "type": "record", "name": "HoodieCleanerPlan", "namespace": _NS, "fields": [
        {"name": "earliestInstantToRetain", "default": None, "type": _opt({
            "type": "record", "name": "HoodieActionInstant", "fields": [
                {"name": "timestamp", "type": _S}, {"name": "action", "type": _S},
                {"name": "state", "type": _S}]})},
        {"name": "lastCompletedCommitTimestamp", "default": "", "type": _S},
        {"name": "policy", "type": _S},
        {"name": "filesToBeDeletedPerPartition", "default": None,
         "type": _opt({"type": "map", "values": _STR_ARR})},
        {"name": "version", "default": 1, "type": ["int", "null"]},
        {"name": "filePathsToBeDeletedPerPartition", "default": None, "type": _opt({
            "type": "map", "values": {"type": "array", "items": {
                "type": "record", "name": "HoodieCleanFileInfo", "fields": [
                    {"name": "filePath", "default": None, "type": _opt(_S)},
                    {"name": "isBootstrapBaseFile", "default": None, "type": _opt("boolean")},
                ]}}})},
        {"name": "partitionsToBeDeleted", "default": None, "type": _opt(_STR_ARR)},
        {"name": "extraMetadata", "default": None, "type": _opt(_STR_MAP)},
    ]}

_CLEAN_PARTITION = {
    "type": "record", "name": "HoodieCleanPartitionMetadata", "fields": [
        {"name": "partitionPath", "type": _S},
        {"name": "policy", "type": _S},
        {"name": "deletePathPatterns", "type": _STR_ARR},
        {"name": "successDeleteFiles", "type": _STR_ARR},
        {"name": "failedDeleteFiles", "type": _STR_ARR},
        {"name": "isPartitionDeleted", "default": None, "type": _opt("boolean")},
    ]}

CLEAN_METADATA_SCHEMA: dict[str, Any] = {
    "type": "record", "name": "HoodieCleanMetadata", "namespace": _NS, "fields": [
        {"name": "startCleanTime", "type": _S},
        {"name": "timeTakenInMillis", "type": "long"},
        {"name": "totalFilesDeleted", "type": "int"},
        {"name": "earliestCommitToRetain", "type": _S},
        {"name": "lastCompletedCommitTimestamp", "default": "", "type": _S},
        {"name": "partitionMetadata", "type": {"type": "map", "values": _CLEAN_PARTITION}},
        {"name": "version", "default": 1, "type": ["int", "null"]},
        {"name": "bootstrapPartitionMetadata", "default": None,
         "type": _opt({"type": "map", "values": "HoodieCleanPartitionMetadata"})},
        {"name": "extraMetadata", "default": None, "type": _opt(_STR_MAP)},
    ]}


@dataclass
class CleanerPlan:
    """``HoodieCleanerPlan``: full paths to delete, per partition."""

    policy: str
    files_per_partition: dict[str, list[str]] = field(default_factory=dict)
    earliest_instant_to_retain: tuple[str, str, str] | None = None  # (ts, action, state)
    partitions_to_be_deleted: list[str] = field(default_factory=list)
    version: int = 2
    #: The last completed commit when the plan was made; Hudi copies it into the clean
    #: metadata, where its incremental clean planning reads it.
    last_completed_commit_timestamp: str = ""

    def to_record(self) -> dict[str, Any]:
        eitr = self.earliest_instant_to_retain
        return {
            "earliestInstantToRetain": (
                {"timestamp": eitr[0], "action": eitr[1], "state": eitr[2]} if eitr else None
            ),
            "lastCompletedCommitTimestamp": self.last_completed_commit_timestamp,
            "policy": self.policy,
            # version 2 plans list full paths below; Hudi leaves the v1 map empty, not null
            "filesToBeDeletedPerPartition": {},
            "version": self.version,
            "filePathsToBeDeletedPerPartition": {
                p: [{"filePath": f, "isBootstrapBaseFile": False} for f in files]
                for p, files in self.files_per_partition.items()
            },
            "partitionsToBeDeleted": list(self.partitions_to_be_deleted),
            "extraMetadata": {},
        }

    def to_avro_bytes(self) -> bytes:
        return write_avro(CLEANER_PLAN_SCHEMA, self.to_record())

    @classmethod
    def from_bytes(cls, data: bytes, path: str = "<cleaner plan>") -> CleanerPlan:
        _, r = read_avro(data, path)
        files: dict[str, list[str]] = {}
        for p, infos in (r.get("filePathsToBeDeletedPerPartition") or {}).items():
            files[p] = [i["filePath"] for i in infos if i.get("filePath")]
        for p, names in (r.get("filesToBeDeletedPerPartition") or {}).items():
            files.setdefault(p, list(names))
        e = r.get("earliestInstantToRetain")
        return cls(
            policy=r.get("policy") or "",
            files_per_partition=files,
            earliest_instant_to_retain=(e["timestamp"], e["action"], e["state"]) if e else None,
            partitions_to_be_deleted=list(r.get("partitionsToBeDeleted") or []),
            version=r.get("version") or 1,
            last_completed_commit_timestamp=r.get("lastCompletedCommitTimestamp") or "",
        )


@dataclass
class CleanPartitionMetadata:
    partition_path: str
    policy: str
    delete_path_patterns: list[str] = field(default_factory=list)
    success_delete_files: list[str] = field(default_factory=list)
    failed_delete_files: list[str] = field(default_factory=list)
    is_partition_deleted: bool = False


@dataclass
class CleanMetadata:
    """``HoodieCleanMetadata``: what a completed clean deleted."""

    start_clean_time: str
    earliest_commit_to_retain: str
    policy: str = ""
    partition_metadata: dict[str, CleanPartitionMetadata] = field(default_factory=dict)
    time_taken_ms: int = 0
    total_files_deleted: int = 0
    last_completed_commit_timestamp: str = ""
    version: int = 2

    def to_record(self) -> dict[str, Any]:
        # No top-level "policy": Hudi's HoodieCleanMetadata (0.15 and 1.x) has none; the
        # policy is per partition. (Files we wrote before carried one; from_bytes reads it.)
        return {
            "startCleanTime": self.start_clean_time,
            "timeTakenInMillis": self.time_taken_ms,
            "totalFilesDeleted": self.total_files_deleted,
            "earliestCommitToRetain": self.earliest_commit_to_retain,
            "lastCompletedCommitTimestamp": self.last_completed_commit_timestamp,
            "partitionMetadata": {p: {
                "partitionPath": m.partition_path, "policy": m.policy,
                "deletePathPatterns": list(m.delete_path_patterns),
                "successDeleteFiles": list(m.success_delete_files),
                "failedDeleteFiles": list(m.failed_delete_files),
                "isPartitionDeleted": m.is_partition_deleted,
            } for p, m in self.partition_metadata.items()},
            "version": self.version,
            "bootstrapPartitionMetadata": {},
            "extraMetadata": {},
        }

    def to_avro_bytes(self) -> bytes:
        return write_avro(CLEAN_METADATA_SCHEMA, self.to_record())

    @classmethod
    def from_bytes(cls, data: bytes, path: str = "<clean metadata>") -> CleanMetadata:
        _, r = read_avro(data, path)
        policies = [m.get("policy") for m in (r.get("partitionMetadata") or {}).values() if m.get("policy")]
        return cls(
            start_clean_time=r.get("startCleanTime") or "",
            earliest_commit_to_retain=r.get("earliestCommitToRetain") or "",
            policy=r.get("policy") or (policies[0] if policies else ""),
            partition_metadata={p: CleanPartitionMetadata(
                partition_path=m.get("partitionPath") or "",
                policy=m.get("policy") or "",
                delete_path_patterns=list(m.get("deletePathPatterns") or []),
                success_delete_files=list(m.get("successDeleteFiles") or []),
                failed_delete_files=list(m.get("failedDeleteFiles") or []),
                is_partition_deleted=bool(m.get("isPartitionDeleted")),
            ) for p, m in (r.get("partitionMetadata") or {}).items()},
            time_taken_ms=r.get("timeTakenInMillis") or 0,
            total_files_deleted=r.get("totalFilesDeleted") or 0,
            last_completed_commit_timestamp=r.get("lastCompletedCommitTimestamp") or "",
            version=r.get("version") or 1,
        )
