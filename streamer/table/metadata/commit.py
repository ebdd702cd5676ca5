"""Commit metadata: ``HoodieCommitMetadata`` and its write stats.

Table version 6 stores commit metadata as pretty JSON (Jackson); versions 8+ store
the same fields as an Avro container (read here; :mod:`.archive` has the Avro form an
archived timeline entry carries). Unknown JSON keys are kept in ``extra`` so a round trip
never drops another engine's data.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field, fields
from typing import Any

from streamer.errors import CorruptDataError
from streamer.table.metadata.archive import archived_commit_record
from streamer.table.metadata.avro import AVRO_MAGIC, read_avro
from streamer.table.metadata.codec import encode, hudi_key, snake
from streamer.table.metadata.commit_avro import commit_avro_bytes

SCHEMA_KEY = "schema"
#: Streamer checkpoint keys (Hudi 0.x DeltaStreamer, then HoodieStreamer v2).
CHECKPOINT_KEY = "deltastreamer.checkpoint.key"
CHECKPOINT_KEY_V2 = "streamer.checkpoint.key.v2"


@dataclass
class WriteStat:
    """One file written by a commit (``HoodieWriteStat`` / ``HoodieDeltaWriteStat``)."""

    # Declared by what they describe, not in Jackson's order: JSON readers take keys in any order.
    # The file: its group, partition and path, and the instant of the base it follows.
    file_id: str = ""
    partition_path: str | None = None
    path: str | None = None
    prev_commit: str | None = "null"
    # The records written: all, new, updated, deleted, failed; their event-time range.
    num_writes: int = 0
    num_inserts: int = 0
    num_update_writes: int = 0
    num_deletes: int = 0
    total_write_errors: int = 0
    min_event_time: int | None = None
    max_event_time: int | None = None
    # The bytes written, and the file's size after the write.
    total_write_bytes: int = 0
    file_size_in_bytes: int = 0
    # A log file's only (``HoodieDeltaWriteStat``): its version, where the write began, its slice.
    log_version: int | None = None
    log_offset: int | None = None
    base_file: str | None = None
    log_files: list[str] | None = None
    # A compaction's or log compaction's: the logs it read, the records in them, its times.
    total_log_files_compacted: int = 0
    total_log_size_compacted: int = 0
    total_log_records: int = 0
    total_updated_records_compacted: int = 0
    runtime_stats: dict[str, int] | None = None
    # Log blocks: those a log write wrote or a compaction read; the corrupt and rolled-back ones read.
    total_log_blocks: int = 0
    total_corrupt_log_block: int = 0
    total_rollback_blocks: int = 0
    #: Keys we do not model, written back as they came (not a key of its own).
    extra: dict[str, Any] = field(default_factory=dict, metadata=hudi_key(None))

    @property
    def is_log(self) -> bool:
        return self.log_version is not None or ".log." in (self.path or "")

    def to_dict(self) -> dict[str, Any]:
        """Jackson's JSON of ``HoodieWriteStat`` (``HoodieDeltaWriteStat`` for a log file)."""
        rec = encode(self)
        if not self.is_log:
            for key in _LOG_KEYS:
                del rec[key]
        # Jackson's order: fileId, path, the always-null cdcStats and tempPath, the rest
        out: dict[str, Any] = {"fileId": rec.pop("fileId"), "path": rec.pop("path"),
                               **dict.fromkeys(_NULL_DEFAULTS), **rec}
        if self.is_log and "recordsStats" not in self.extra:
            # Jackson's rendering of HoodieDeltaWriteStat's empty ``Option`` recordsStats
            # (column ranges Hudi fills only for the metadata table's column stats); Hudi
            # 0.15 writes it on every log write stat. Parsed back, it lands in ``extra``.
            out["recordsStats"] = dict(_EMPTY_RECORDS_STATS)
        out.update(self.extra)
        return out

    #: A write stat's record is its JSON form (how the codec nests it in commit metadata).
    to_record = to_dict

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> WriteStat:
        """Lenient, as JSON from any writer may be: unknown keys go to ``extra``, nulls are
        kept (Jackson writes an absent value as null) but for the counters, which read 0."""
        known = _STAT_FIELDS
        kwargs: dict[str, Any] = {}
        extra: dict[str, Any] = {}
        for k, v in d.items():
            name = snake(k)
            if k in _NULL_DEFAULTS and v is None:
                continue  # always written as null; not worth keeping
            if name in known:
                kwargs[name] = v if v is not None or name not in _INT_FIELDS else 0
            else:
                extra[k] = v
        return cls(**kwargs, extra=extra)


_NULL_DEFAULTS = ("cdcStats", "tempPath")
_STAT_FIELDS = frozenset(f.name for f in fields(WriteStat)) - {"extra"}
#: Keys of ``HoodieDeltaWriteStat`` only, written for log files.
_LOG_KEYS = ("logVersion", "logOffset", "baseFile", "logFiles")
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

    def replaced_file_ids(self) -> set[tuple[str, str]]:
        return {(p, f) for p, ids in self.partition_to_replace_file_ids.items() for f in ids}

    def add(self, stat: WriteStat) -> None:
        self.partition_to_write_stats.setdefault(stat.partition_path or "", []).append(stat)

    # -- (de)serialisation ------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        out = encode(self)
        if not self.partition_to_replace_file_ids:
            del out["partitionToReplaceFileIds"]  # only a replacecommit's metadata has it
        return out

    def to_json_bytes(self) -> bytes:
        """Jackson-style pretty JSON, as table version 6 stores it."""
        return json.dumps(self.to_dict(), indent=2, separators=(",", " : ")).encode()

    def to_avro_bytes(self) -> bytes:
        """Avro ``HoodieCommitMetadata``, as table versions 8 and 9 store it."""
        return commit_avro_bytes(self)

    def to_archived_record(self, *, replace: bool = False) -> dict[str, Any]:
        """This metadata as Hudi's Avro ``HoodieCommitMetadata`` (``HoodieReplaceCommitMetadata``
        with ``replace``), the form an archived timeline entry carries
        (:func:`~streamer.table.metadata.archive.archived_commit_record`)."""
        return archived_commit_record(self, replace=replace)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> CommitMetadata:
        """From the JSON (or v8 Avro) record, leniently: any value may be null there, and a
        null extra-metadata value is dropped - read field by field, not through the codec."""
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
