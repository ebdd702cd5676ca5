"""Compaction and log compaction plans (``HoodieCompactionPlan``, one schema for both)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from streamer.table.metadata import avro
from streamer.table.metadata.avro import NS, STR_ARR, STR_MAP, STRING, VERSION_FIELD, opt
from streamer.table.metadata.codec import CamelRecord, decode

COMPACTION_PLAN_SCHEMA: dict[str, Any] = {
    "type": "record",
    "name": "HoodieCompactionPlan",
    "namespace": NS,
    "fields": [
        {"name": "operations", "default": None, "type": opt({"type": "array", "items": {
            "type": "record", "name": "HoodieCompactionOperation", "fields": [
                {"name": "baseInstantTime", "type": opt(STRING)},
                {"name": "deltaFilePaths", "default": None, "type": opt(STR_ARR)},
                {"name": "dataFilePath", "default": None, "type": opt(STRING)},
                {"name": "fileId", "type": opt(STRING)},
                {"name": "partitionPath", "default": None, "type": opt(STRING)},
                {"name": "metrics", "default": None, "type": opt({"type": "map", "values": "double"})},
                {"name": "bootstrapFilePath", "default": None, "type": opt(STRING)},
            ]}})},
        {"name": "extraMetadata", "default": None, "type": opt(STR_MAP)},
        VERSION_FIELD,
        {"name": "strategy", "default": None, "type": opt({
            "type": "record", "name": "HoodieCompactionStrategy", "fields": [
                {"name": "compactorClassName", "default": None, "type": opt(STRING)},
                {"name": "strategyParams", "default": None, "type": opt(STR_MAP)},
                VERSION_FIELD,
            ]})},
        {"name": "preserveHoodieMetadata", "default": False, "type": ["boolean", "null"]},
        # Hudi 1.x adds "missingSchedulePartitions" (nullable, default null); 0.15 has no
        # such field, so we leave it out as Hudi 0.15 does.
    ],
}


@dataclass
class CompactionOperation(CamelRecord):
    """One file slice to compact: its base file (if any) and the log files to merge in."""

    file_id: str
    partition_path: str
    base_instant_time: str
    data_file_path: str | None = None
    delta_file_paths: list[str] = field(default_factory=list)
    metrics: dict[str, float] = field(default_factory=dict)
    bootstrap_file_path: str | None = None


@dataclass
class CompactionPlan(CamelRecord):
    """``HoodieCompactionPlan``: used by both compaction and log compaction."""

    operations: list[CompactionOperation] = field(default_factory=list)
    extra_metadata: dict[str, str] = field(default_factory=dict)
    version: int = 2  # the version we write; a plan without one reads as Hudi's default, 1
    strategy: dict[str, Any] | None = None
    preserve_hoodie_metadata: bool = False

    def to_avro_bytes(self) -> bytes:
        return avro.write_avro(COMPACTION_PLAN_SCHEMA, self.to_record())

    @classmethod
    def from_bytes(cls, data: bytes, path: str = "<compaction plan>") -> CompactionPlan:
        if not data:
            return cls()
        _, r = avro.read_avro(data, path)
        return decode(cls, r, version=avro.read_version(r))
