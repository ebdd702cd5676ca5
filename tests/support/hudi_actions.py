"""Timeline actions Apache Hudi takes on a table and this project never writes: a
metadata table, a savepoint (``CALL create_savepoint``), a replacecommit (``delete_partition``,
``insert_overwrite``) and a version-6 clustering plan, made in Hudi's file form for the tests of what our
services leave alone (tests/unit/services/test_archive_rules.py, test_upgrade.py)."""

from __future__ import annotations

import os
from collections.abc import Sequence

from streamer.read import Table
from streamer.table.instant import Action
from streamer.table.metadata import CommitMetadata
from streamer.table.metadata.archive import REPLACE_COMMIT_METADATA_SCHEMA
from streamer.table.metadata.avro import write_avro
from streamer.table.properties import load_properties, write_properties
from streamer.table.table_keys import METADATA_PARTITIONS
from streamer.write.transaction import Transaction


def savepoint(path: str, timestamp: str) -> list[str]:
    """Hudi's savepoint files of the write ``timestamp`` (``CALL create_savepoint``); their
    Avro content is read by nobody here. Returns the file names."""
    t = Table.open(path)
    inst = t.timeline.get(timestamp)
    assert inst is not None and inst.is_completed
    done = f"{timestamp}.savepoint" if t.timeline.layout_version < 2 else f"{timestamp}_{inst.completion_time}.savepoint"
    names = [f"{timestamp}.savepoint.inflight", done]
    for name in names:
        with open(os.path.join(t.timeline.folder, name), "wb"):
            pass
    return names


def metadata_table(path: str, compacted_at: str | None) -> None:
    """What a Hudi writer with ``hoodie.metadata.enable`` leaves: the ``files`` partition
    on, and the metadata table's own timeline, compacted at ``compacted_at`` (None: never,
    only its delta commits)."""
    t = Table.open(path)
    write_properties(t.fs, path, t.properties.with_updates({METADATA_PARTITIONS: "files"}))
    folder = os.path.join(path, ".hoodie", "metadata")
    os.makedirs(os.path.join(folder, ".hoodie"))
    write_properties(t.fs, folder, load_properties(t.fs, path).with_updates({"hoodie.table.name": "t_metadata"}))
    timeline = Table.open(folder).timeline.folder
    os.makedirs(timeline, exist_ok=True)
    first = t.timeline.completed_writes()[0].timestamp
    done = (lambda ts: f"{ts}.") if t.timeline.layout_version < 2 else (lambda ts: f"{ts}_{ts}.")
    names = [done(first) + "deltacommit"]
    if compacted_at is not None:
        names.append(done(compacted_at + "001") + "commit")
    for name in names:
        with open(os.path.join(timeline, name), "wb"):
            pass


def replace_partition(path: str, partition_suffix: str) -> tuple[str, str]:
    """A Hudi ``delete_partition``: a replacecommit replacing every file group of the
    partition, its files left on storage (Hudi's cleaner deletes them later)."""
    t = Table.open(path)
    part = next(s.partition_path for s in t.fsview.latest_merged_slices() if s.partition_path.endswith(partition_suffix))
    groups = sorted({s.file_id for s in t.fsview.latest_merged_slices() if s.partition_path == part})
    meta = CommitMetadata(operation_type="delete_partition", partition_to_replace_file_ids={part: groups})
    with Transaction(t.fs, path) as tx:
        tl = t.timeline
        inflight = tx.start(tl, tx.request(tl, Action.REPLACE_COMMIT))
        data = (meta.to_json_bytes() if tl.layout_version < 2
                else write_avro(REPLACE_COMMIT_METADATA_SCHEMA, meta.to_archived_record(replace=True)))
        return tx.publish(tl, inflight, data).timestamp, part


_SLICE = {"type": "record", "name": "HoodieSliceInfo", "fields": [
    {"name": "fileId", "type": ["null", "string"], "default": None},
    {"name": "partitionPath", "type": ["null", "string"], "default": None}]}
_GROUP = {"type": "record", "name": "HoodieClusteringGroup", "fields": [
    {"name": "slices", "type": ["null", {"type": "array", "items": _SLICE}], "default": None}]}
#: ``HoodieRequestedReplaceMetadata`` as far as a clustering's requested file is looked at
#: here: the operation and the plan's input groups (Hudi's schema has more, all nullable).
REQUESTED_REPLACE_SCHEMA = {
    "type": "record", "name": "HoodieRequestedReplaceMetadata", "namespace": "org.apache.hudi.avro.model",
    "fields": [{"name": "operationType", "type": ["null", "string"], "default": None},
               {"name": "clusteringPlan", "default": None, "type": ["null", {
                   "type": "record", "name": "HoodieClusteringPlan", "fields": [
                       {"name": "inputGroups", "type": ["null", {"type": "array", "items": _GROUP}],
                        "default": None}]}]},
               {"name": "version", "type": ["int", "null"], "default": 1}]}


def clustering_plan(path: str, groups: Sequence[tuple[str, str]] = ()) -> str:
    """A pending Hudi clustering of ``groups`` ((partition, file id) pairs): at version 6
    ``<t>.replacecommit.requested``, at 8 and 9 ``<t>.clustering.requested``, holding
    ``HoodieRequestedReplaceMetadata`` with operation ``CLUSTER``. Returns its time."""
    t = Table.open(path)
    slices = [{"fileId": f, "partitionPath": p} for p, f in groups]
    plan = write_avro(REQUESTED_REPLACE_SCHEMA, {"operationType": "CLUSTER", "version": 1,
                                                 "clusteringPlan": {"inputGroups": [{"slices": slices}]}})
    action = Action.REPLACE_COMMIT if t.timeline.layout_version < 2 else Action.CLUSTERING
    with Transaction(t.fs, path) as tx:
        return tx.request(t.timeline, action, plan=plan).timestamp
