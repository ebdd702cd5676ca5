"""Commit metadata (JSON v6, Avro v8+) and Avro plans round trip; fixtures parse."""

from __future__ import annotations

import json

from streamer.fs import FileSystem
from streamer.table.metadata import (
    CleanerPlan,
    CleanMetadata,
    CleanPartitionMetadata,
    CommitMetadata,
    RollbackMetadata,
    RollbackPlan,
    RollbackRequest,
    WriteStat,
)
from streamer.table.properties import load_properties
from streamer.table.timeline import Timeline
from tests.support.fixture_tables import fixture_table_path


def test_json_round_trip_keeps_unknown_keys():
    cm = CommitMetadata(operation_type="UPSERT", extra_metadata={"schema": "{}"})
    cm.add(WriteStat(file_id="f", path="p/f.parquet", partition_path="p", num_inserts=3,
                     extra={"recordsStats": {"val": None}}))
    d = json.loads(cm.to_json_bytes())
    assert d["partitionToWriteStats"]["p"][0]["numInserts"] == 3
    back = CommitMetadata.from_bytes(cm.to_json_bytes())
    assert back == cm


def test_every_fixture_commit_parses(hudi_fixtures_dir):
    fs = FileSystem()
    for d in hudi_fixtures_dir.iterdir():
        path = str(fixture_table_path(hudi_fixtures_dir, d.name))
        tl = Timeline.load(fs, path, load_properties(fs, path))
        for inst in tl.completed_writes():
            cm = CommitMetadata.from_bytes(tl.read_details(inst))
            assert cm.operation_type != "UNKNOWN"
            assert all(s.file_id for s in cm.write_stats())


def test_replacecommit_fixture_lists_replaced_groups(hudi_fixtures_dir):
    fs = FileSystem()
    path = str(fixture_table_path(hudi_fixtures_dir, "sample_table__mor__parquet__v6_simplekeygen_nonhivestyle_overwritetable"))
    tl = Timeline.load(fs, path, load_properties(fs, path))
    cm = CommitMetadata.from_bytes(tl.read_details(tl.completed()[-1]))
    assert cm.operation_type == "INSERT_OVERWRITE_TABLE" and len(cm.replaced_file_ids()) == 3


def test_rollback_fixture_and_round_trip(hudi_fixtures_dir):
    fs = FileSystem()
    path = str(fixture_table_path(hudi_fixtures_dir, "sample_table__mor__parquet__v6_nonpartitioned_rollback"))
    tl = Timeline.load(fs, path, load_properties(fs, path))
    rb = next(i for i in tl if i.action == "rollback")
    meta = RollbackMetadata.from_bytes(tl.read_details(rb))
    assert meta.commits_rollback == ["20250126040826878"]
    plan = RollbackPlan.from_bytes(tl.read_plan(rb))
    assert plan.instant_time == "20250126040826878" and plan.action == "deltacommit"
    assert RollbackMetadata.from_bytes(meta.to_avro_bytes()) == meta
    assert RollbackPlan.from_bytes(plan.to_avro_bytes()) == plan
    p2 = RollbackPlan("1", "deltacommit", [RollbackRequest("p", "f", "0", ["x"], {"y": 3})])
    assert RollbackPlan.from_bytes(p2.to_avro_bytes()) == p2


def test_clean_round_trip():
    plan = CleanerPlan("KEEP_LATEST_COMMITS", {"p": ["/t/p/a.parquet"]}, ("5", "commit", "COMPLETED"))
    assert CleanerPlan.from_bytes(plan.to_avro_bytes()) == plan
    meta = CleanMetadata("6", "5", "KEEP_LATEST_COMMITS",
                         {"p": CleanPartitionMetadata("p", "KEEP_LATEST_COMMITS", ["a"], ["a"])},
                         total_files_deleted=1)
    assert CleanMetadata.from_bytes(meta.to_avro_bytes()) == meta
