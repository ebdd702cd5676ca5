"""Rollback plan and rollback metadata (``HoodieRollbackPlan``, ``HoodieRollbackMetadata``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from streamer.table.metadata import avro
from streamer.table.metadata.avro import NS, STR_ARR, STRING, VERSION_FIELD, opt
from streamer.table.metadata.codec import CamelRecord, decode, encode, hudi_key

_INSTANT_INFO = {"type": "record", "name": "HoodieInstantInfo", "fields": [
    {"name": "commitTime", "type": STRING}, {"name": "action", "type": STRING}]}
_LONG_MAP = {"type": "map", "values": "long"}

ROLLBACK_PLAN_SCHEMA: dict[str, Any] = {
    "type": "record", "name": "HoodieRollbackPlan", "namespace": NS, "fields": [
        {"name": "instantToRollback", "default": None, "type": opt(_INSTANT_INFO)},
        {"name": "RollbackRequests", "default": None, "type": opt({"type": "array", "items": {
            "type": "record", "name": "HoodieRollbackRequest", "fields": [
                {"name": "partitionPath", "type": STRING},
                {"name": "fileId", "default": None, "type": opt(STRING)},
                {"name": "latestBaseInstant", "default": None, "type": opt(STRING)},
                {"name": "filesToBeDeleted", "default": [], "type": STR_ARR},
                {"name": "logBlocksToBeDeleted", "default": None, "type": opt(_LONG_MAP)},
            ]}})},
        VERSION_FIELD,
    ]}

ROLLBACK_METADATA_SCHEMA: dict[str, Any] = {
    "type": "record", "name": "HoodieRollbackMetadata", "namespace": NS, "fields": [
        *avro.deletion_head("startRollbackTime"),
        {"name": "commitsRollback", "type": STR_ARR},
        {"name": "partitionMetadata", "type": {"type": "map", "values": {
            "type": "record", "name": "HoodieRollbackPartitionMetadata", "fields": [
                {"name": "partitionPath", "type": STRING},
                {"name": "successDeleteFiles", "type": STR_ARR},
                {"name": "failedDeleteFiles", "type": STR_ARR},
                {"name": "rollbackLogFiles", "default": None, "type": opt(_LONG_MAP)},
                {"name": "logFilesFromFailedCommit", "default": None, "type": opt(_LONG_MAP)},
            ]}}},
        VERSION_FIELD,
        {"name": "instantsRollback", "default": [], "type": {"type": "array", "items": _INSTANT_INFO}},
    ]}


@dataclass
class RollbackRequest(CamelRecord):
    partition_path: str
    file_id: str = ""
    latest_base_instant: str = ""
    files_to_be_deleted: list[str] = field(default_factory=list)
    log_blocks_to_be_deleted: dict[str, int] = field(default_factory=dict)


@dataclass
class RollbackPlan:
    """``HoodieRollbackPlan``: which instant to undo and which files/blocks that takes."""

    # instant_time and action: one record, instantToRollback {commitTime, action}
    instant_time: str = field(metadata=hudi_key(None))
    action: str = field(metadata=hudi_key(None))
    # Hudi's key starts with a capital letter
    requests: list[RollbackRequest] = field(default_factory=list, metadata=hudi_key("RollbackRequests"))
    version: int = 1

    def to_record(self) -> dict[str, Any]:
        return {"instantToRollback": {"commitTime": self.instant_time, "action": self.action}, **encode(self)}

    def to_avro_bytes(self) -> bytes:
        return avro.write_avro(ROLLBACK_PLAN_SCHEMA, self.to_record())

    @classmethod
    def from_bytes(cls, data: bytes, path: str = "<rollback plan>") -> RollbackPlan:
        _, r = avro.read_avro(data, path)
        target = r.get("instantToRollback") or {}
        return decode(cls, r, instant_time=target.get("commitTime", ""), action=target.get("action", ""),
                      version=avro.read_version(r))


@dataclass
class RollbackPartitionMetadata(CamelRecord):
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
    # (commitTime, action) pairs for HoodieInstantInfo records
    instants_rollback: list[tuple[str, str]] = field(default_factory=list, metadata=hudi_key(None))
    partition_metadata: dict[str, RollbackPartitionMetadata] = field(default_factory=dict)
    time_taken_ms: int = field(default=0, metadata=hudi_key("timeTakenInMillis"))
    total_files_deleted: int = 0
    version: int = 1

    def to_record(self) -> dict[str, Any]:
        return {**encode(self),
                "instantsRollback": [{"commitTime": t, "action": a} for t, a in self.instants_rollback]}

    def to_avro_bytes(self) -> bytes:
        return avro.write_avro(ROLLBACK_METADATA_SCHEMA, self.to_record())

    @classmethod
    def from_bytes(cls, data: bytes, path: str = "<rollback metadata>") -> RollbackMetadata:
        _, r = avro.read_avro(data, path)
        return decode(cls, r, version=avro.read_version(r), instants_rollback=[
            (i["commitTime"], i["action"]) for i in r.get("instantsRollback") or []])
