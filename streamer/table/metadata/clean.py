"""Cleaner plan and clean metadata (``HoodieCleanerPlan``, ``HoodieCleanMetadata``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from streamer.table.metadata import avro
from streamer.table.metadata.avro import NS, STR_ARR, STR_MAP, STRING, VERSION_FIELD, opt
from streamer.table.metadata.codec import CamelRecord, decode, encode, hudi_key

CLEANER_PLAN_SCHEMA: dict[str, Any] = {
    "type": "record", "name": "HoodieCleanerPlan", "namespace": NS, "fields": [
        {"name": "earliestInstantToRetain", "default": None, "type": opt({
            "type": "record", "name": "HoodieActionInstant", "fields": [
                {"name": "timestamp", "type": STRING}, {"name": "action", "type": STRING},
                {"name": "state", "type": STRING}]})},
        {"name": "lastCompletedCommitTimestamp", "default": "", "type": STRING},
        {"name": "policy", "type": STRING},
        {"name": "filesToBeDeletedPerPartition", "default": None,
         "type": opt({"type": "map", "values": STR_ARR})},
        VERSION_FIELD,
        {"name": "filePathsToBeDeletedPerPartition", "default": None, "type": opt({
            "type": "map", "values": {"type": "array", "items": {
                "type": "record", "name": "HoodieCleanFileInfo", "fields": [
                    {"name": "filePath", "default": None, "type": opt(STRING)},
                    {"name": "isBootstrapBaseFile", "default": None, "type": opt("boolean")},
                ]}}})},
        {"name": "partitionsToBeDeleted", "default": None, "type": opt(STR_ARR)},
        {"name": "extraMetadata", "default": None, "type": opt(STR_MAP)},
    ]}

_CLEAN_PARTITION = {
    "type": "record", "name": "HoodieCleanPartitionMetadata", "fields": [
        {"name": "partitionPath", "type": STRING},
        {"name": "policy", "type": STRING},
        {"name": "deletePathPatterns", "type": STR_ARR},
        {"name": "successDeleteFiles", "type": STR_ARR},
        {"name": "failedDeleteFiles", "type": STR_ARR},
        {"name": "isPartitionDeleted", "default": None, "type": opt("boolean")},
    ]}

CLEAN_METADATA_SCHEMA: dict[str, Any] = {
    "type": "record", "name": "HoodieCleanMetadata", "namespace": NS, "fields": [
        *avro.deletion_head("startCleanTime"),
        {"name": "earliestCommitToRetain", "type": STRING},
        {"name": "lastCompletedCommitTimestamp", "default": "", "type": STRING},
        {"name": "partitionMetadata", "type": {"type": "map", "values": _CLEAN_PARTITION}},
        VERSION_FIELD,
        {"name": "bootstrapPartitionMetadata", "default": None,
         "type": opt({"type": "map", "values": "HoodieCleanPartitionMetadata"})},
        {"name": "extraMetadata", "default": None, "type": opt(STR_MAP)},
    ]}


@dataclass
class CleanerPlan:
    """``HoodieCleanerPlan``: full paths to delete, per partition."""

    policy: str
    # written as version 2's filePathsToBeDeletedPerPartition (HoodieCleanFileInfo records);
    # version 1's filesToBeDeletedPerPartition (names) is read too
    files_per_partition: dict[str, list[str]] = field(default_factory=dict, metadata=hudi_key(None))
    # (timestamp, action, state) for a HoodieActionInstant record
    earliest_instant_to_retain: tuple[str, str, str] | None = field(default=None, metadata=hudi_key(None))
    partitions_to_be_deleted: list[str] = field(default_factory=list)
    version: int = 2
    #: The last completed commit when the plan was made; Hudi copies it into the clean
    #: metadata, where its incremental clean planning reads it.
    last_completed_commit_timestamp: str = ""

    def to_record(self) -> dict[str, Any]:
        eitr = self.earliest_instant_to_retain
        return {
            **encode(self),
            "earliestInstantToRetain": (
                {"timestamp": eitr[0], "action": eitr[1], "state": eitr[2]} if eitr else None
            ),
            # version 2 plans list full paths below; Hudi leaves the v1 map empty, not null
            "filesToBeDeletedPerPartition": {},
            "filePathsToBeDeletedPerPartition": {
                p: [{"filePath": f, "isBootstrapBaseFile": False} for f in files]
                for p, files in self.files_per_partition.items()
            },
            "extraMetadata": {},
        }

    def to_avro_bytes(self) -> bytes:
        return avro.write_avro(CLEANER_PLAN_SCHEMA, self.to_record())

    @classmethod
    def from_bytes(cls, data: bytes, path: str = "<cleaner plan>") -> CleanerPlan:
        _, r = avro.read_avro(data, path)
        files: dict[str, list[str]] = {}
        for p, infos in (r.get("filePathsToBeDeletedPerPartition") or {}).items():
            files[p] = [i["filePath"] for i in infos if i.get("filePath")]
        for p, names in (r.get("filesToBeDeletedPerPartition") or {}).items():
            files.setdefault(p, list(names))
        e = r.get("earliestInstantToRetain")
        return decode(
            cls, r, files_per_partition=files, version=avro.read_version(r),
            earliest_instant_to_retain=(e["timestamp"], e["action"], e["state"]) if e else None,
        )


@dataclass
class CleanPartitionMetadata(CamelRecord):
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
    # No "policy" key: Hudi's HoodieCleanMetadata (0.15 and 1.x) has none; the policy is
    # per partition. (Files we wrote before carried one; from_bytes reads it.)
    policy: str = field(default="", metadata=hudi_key(None))
    partition_metadata: dict[str, CleanPartitionMetadata] = field(default_factory=dict)
    time_taken_ms: int = field(default=0, metadata=hudi_key("timeTakenInMillis"))
    total_files_deleted: int = 0
    last_completed_commit_timestamp: str = ""
    version: int = 2

    def to_record(self) -> dict[str, Any]:
        return {**encode(self), "bootstrapPartitionMetadata": {}, "extraMetadata": {}}

    def to_avro_bytes(self) -> bytes:
        return avro.write_avro(CLEAN_METADATA_SCHEMA, self.to_record())

    @classmethod
    def from_bytes(cls, data: bytes, path: str = "<clean metadata>") -> CleanMetadata:
        _, r = avro.read_avro(data, path)
        policies = [m.get("policy") for m in (r.get("partitionMetadata") or {}).values() if m.get("policy")]
        return decode(cls, r, policy=r.get("policy") or (policies[0] if policies else ""),
                      version=avro.read_version(r))
