"""Commit metadata as an archived timeline entry carries it.

Hudi's ``HoodieArchivedMetaEntry`` (built in :mod:`streamer.services.archive`) holds a
commit's metadata as Avro ``HoodieCommitMetadata`` (``HoodieReplaceCommitMetadata`` for a
replacecommit), not as the JSON of the active timeline of table version 6. Hudi's
archived-timeline reader turns the record back into JSON and parses it as commit metadata.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from streamer.table.metadata.avro import NS, STR_ARR, STR_MAP, STRING, VERSION_FIELD, opt

if TYPE_CHECKING:
    from streamer.table.metadata.commit import CommitMetadata, WriteStat

#: Fields of Hudi 0.15's Avro ``HoodieWriteStat`` (all nullable longs/strings), in its order.
ARCHIVED_WRITE_STAT_FIELDS = (
    "fileId", "path", "prevCommit", "numWrites", "numDeletes", "numUpdateWrites", "totalWriteBytes",
    "totalWriteErrors", "partitionPath", "totalLogRecords", "totalLogFiles", "totalUpdatedRecordsCompacted",
    "numInserts", "totalLogBlocks", "totalCorruptLogBlock", "totalRollbackBlocks", "fileSizeInBytes",
)
_STRING_STAT_FIELDS = {"fileId", "path", "prevCommit", "partitionPath"}
_WRITE_STATS_MAP = {"type": "map", "values": {"type": "array", "items": {
    "type": "record", "name": "HoodieWriteStat", "fields": [
        {"name": n, "default": None, "type": opt(STRING if n in _STRING_STAT_FIELDS else "long")}
        for n in ARCHIVED_WRITE_STAT_FIELDS]}}}

#: Avro ``HoodieCommitMetadata`` as table version 6 archives it (Hudi 0.15 field set; the
#: active timeline of v6 keeps the JSON form, :meth:`CommitMetadata.to_json_bytes`).
ARCHIVED_COMMIT_METADATA_SCHEMA: dict[str, Any] = {
    "type": "record", "name": "HoodieCommitMetadata", "namespace": NS, "fields": [
        {"name": "partitionToWriteStats", "default": None, "type": opt(_WRITE_STATS_MAP)},
        {"name": "extraMetadata", "default": None, "type": opt(STR_MAP)},
        VERSION_FIELD,
        {"name": "operationType", "default": None, "type": opt(STRING)},
    ]}

#: Avro ``HoodieReplaceCommitMetadata`` (its write stats reuse ``HoodieWriteStat`` by name).
ARCHIVED_REPLACE_COMMIT_METADATA_SCHEMA: dict[str, Any] = {
    "type": "record", "name": "HoodieReplaceCommitMetadata", "namespace": NS, "fields": [
        {"name": "partitionToWriteStats", "default": None,
         "type": opt({"type": "map", "values": {"type": "array", "items": "HoodieWriteStat"}})},
        {"name": "extraMetadata", "default": None, "type": opt(STR_MAP)},
        VERSION_FIELD,
        {"name": "operationType", "default": None, "type": opt(STRING)},
        {"name": "partitionToReplaceFileIds", "default": None,
         "type": opt({"type": "map", "values": STR_ARR})},
    ]}
#: The same on its own, as a completed replacecommit's file of table version 8 or 9 holds
#: it: the write-stat record is defined in place, not named from an enclosing schema.
REPLACE_COMMIT_METADATA_SCHEMA: dict[str, Any] = {
    **ARCHIVED_REPLACE_COMMIT_METADATA_SCHEMA,
    "fields": [{"name": "partitionToWriteStats", "default": None, "type": opt(_WRITE_STATS_MAP)},
               *ARCHIVED_REPLACE_COMMIT_METADATA_SCHEMA["fields"][1:]]}


def archived_commit_record(meta: CommitMetadata, *, replace: bool = False) -> dict[str, Any]:
    """``meta`` as Hudi's Avro ``HoodieCommitMetadata`` (``HoodieReplaceCommitMetadata``
    with ``replace``), as Hudi 0.15's ``MetadataConversionUtils.convertCommitMetadata``
    makes it: write stats keep the fields of the Avro ``HoodieWriteStat`` (``totalLogFiles``
    has no JSON counterpart and stays null), a compacted commit says ``COMPACT``,
    ``version`` stays null and ``extraMetadata`` gains an empty ``ROLLING_STAT``."""
    out: dict[str, Any] = {
        "partitionToWriteStats": {
            p: [_archived_stat(s) for s in stats] for p, stats in meta.partition_to_write_stats.items()
        },
        "extraMetadata": {**meta.extra_metadata, "ROLLING_STAT": ""},
        "version": None,
        "operationType": "COMPACT" if meta.compacted else meta.operation_type,
    }
    if replace:
        out["partitionToReplaceFileIds"] = {p: list(ids) for p, ids in meta.partition_to_replace_file_ids.items()}
    return out


def _archived_stat(stat: WriteStat) -> dict[str, Any]:
    # the JSON keys are the Avro ones: pick Hudi's Avro fields from the JSON form
    d = stat.to_dict()
    return {k: d.get(k) for k in ARCHIVED_WRITE_STAT_FIELDS}
