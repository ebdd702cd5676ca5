"""Commit metadata as the active timeline of table versions 8 and 9 holds it: Avro.

Hudi 1.x reads a layout-2 timeline's commit, deltacommit and compaction-commit files as
Avro ``HoodieCommitMetadata`` only (``CommitMetadataSerDeV2``); the JSON of version 6 is
not accepted there. The schema is Hudi 1.x's (as embedded in the files Hudi 1.0.2 and
1.2.0 write): every field nullable with a null default, ``HoodieWriteStat`` grown by the
delta-stat fields (``logVersion``, ``logFiles``...), so a reader resolves what we leave out.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from streamer.table.metadata.avro import (
    NS,
    STR_ARR,
    STR_MAP,
    STRING,
    VERSION_FIELD,
    opt,
    write_avro,
)

if TYPE_CHECKING:
    from streamer.table.metadata.commit import CommitMetadata, WriteStat

_STRINGS = ("fileId", "path", "prevCommit", "partitionPath", "baseFile", "prevBaseFile", "tempPath")
#: Hudi 1.x's Avro ``HoodieWriteStat`` fields, in its order, and their (non-null) types.
WRITE_STAT_FIELDS_V2: tuple[tuple[str, Any], ...] = (
    *((n, STRING if n in _STRINGS else "long") for n in (
        "fileId", "path", "prevCommit", "numWrites", "numDeletes", "numUpdateWrites", "totalWriteBytes",
        "totalWriteErrors", "partitionPath", "totalLogRecords", "totalLogFiles", "totalUpdatedRecordsCompacted",
        "numInserts", "totalLogBlocks", "totalCorruptLogBlock", "totalRollbackBlocks", "fileSizeInBytes")),
    ("logVersion", "int"), ("logOffset", "long"), ("baseFile", STRING), ("logFiles", STR_ARR),
    ("cdcStats", {"type": "map", "values": "long"}), ("prevBaseFile", STRING),
    ("minEventTime", "long"), ("maxEventTime", "long"),
    ("runtimeStats", {"type": "record", "name": "HoodieRuntimeStats", "fields": [
        {"name": n, "default": None, "type": opt("long")}
        for n in ("totalScanTime", "totalCreateTime", "totalUpsertTime")]}),
    ("totalLogFilesCompacted", "long"), ("totalLogReadTimeMs", "long"), ("totalLogSizeCompacted", "long"),
    ("tempPath", STRING), ("numUpdates", "long"),
)

COMMIT_METADATA_SCHEMA_V2: dict[str, Any] = {
    "type": "record", "name": "HoodieCommitMetadata", "namespace": NS, "fields": [
        {"name": "partitionToWriteStats", "default": None, "type": opt({"type": "map", "values": {
            "type": "array", "items": {"type": "record", "name": "HoodieWriteStat", "fields": [
                {"name": n, "default": None, "type": opt(t)} for n, t in WRITE_STAT_FIELDS_V2]}}})},
        {"name": "compacted", "default": None, "type": opt("boolean")},
        {"name": "extraMetadata", "default": None, "type": opt(STR_MAP)},
        VERSION_FIELD,
        {"name": "operationType", "default": None, "type": opt(STRING)},
    ]}


def commit_record_v2(meta: CommitMetadata) -> dict[str, Any]:
    """``meta`` as a record of :data:`COMMIT_METADATA_SCHEMA_V2`."""
    return {
        "partitionToWriteStats": {
            p: [_stat(s) for s in stats] for p, stats in meta.partition_to_write_stats.items()
        },
        "compacted": meta.compacted,
        "extraMetadata": dict(meta.extra_metadata),
        "version": 1,
        "operationType": meta.operation_type,
    }


def commit_avro_bytes(meta: CommitMetadata) -> bytes:
    return write_avro(COMMIT_METADATA_SCHEMA_V2, commit_record_v2(meta))


def _stat(stat: WriteStat) -> dict[str, Any]:
    # the JSON keys are the Avro ones; a value of the wrong shape (a key we carry through
    # from another writer) is left out rather than failing the commit
    d = stat.to_dict()
    out: dict[str, Any] = {}
    for name, kind in WRITE_STAT_FIELDS_V2:
        v = d.get(name)
        if kind == "long" or kind == "int":
            v = int(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None
        elif kind == STRING:
            v = v if isinstance(v, str) else None
        elif kind == STR_ARR:
            v = [x for x in v if isinstance(x, str)] if isinstance(v, list) else None
        elif isinstance(kind, dict) and kind.get("type") == "map":
            v = {k: int(x) for k, x in v.items() if isinstance(x, int)} if isinstance(v, dict) else None
        elif isinstance(kind, dict):
            v = {k: (int(v[k]) if isinstance(v.get(k), int) else None)
                 for k in ("totalScanTime", "totalCreateTime", "totalUpsertTime")} if isinstance(v, dict) else None
        out[name] = v
    return out
