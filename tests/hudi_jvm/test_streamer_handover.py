"""HoodieStreamer -> our pipeline hand-over on one Kafka topic, and the checkpoint we leave
for HoodieStreamer to take it back.

Apache Hudi 0.15 creates the MOR table from the first records of each partition and
records ``deltastreamer.checkpoint.key`` exactly as HoodieStreamer does (a Spark write
whose commit-metadata prefix copies the option into the commit). Our pipeline must then
continue at those offsets: every record lands once (no gap, no duplicate) in our reader
and in Hudi's, and our commit says where HoodieStreamer would go on, in its own format.
"""

from __future__ import annotations

import uuid

import pyarrow as pa
import pytest

from streamer.config import parse_pipelines
from streamer.fs import resolve
from streamer.pipeline.checkpoint import STREAMER_CHECKPOINT_KEY
from streamer.pipeline.runner import PipelineRunner
from streamer.read import Table
from streamer.sources.position import KafkaOffsets
from streamer.table.metadata import CHECKPOINT_KEY, CHECKPOINT_KEY_V2, CommitMetadata
from streamer.table.properties import load_properties
from streamer.table.timeline import Timeline
from tests.support.trip_model import (
    TripModel,
    kafka_pipeline_yaml,
    offsets_by_ts,
    produce_records,
)

pytestmark = [pytest.mark.kafka, pytest.mark.integration, pytest.mark.hudi_jvm]

N_RECORDS = 200
ROWS = pa.schema(
    [("uuid", pa.string()), ("ts", pa.int64()), ("city", pa.string()), ("fare", pa.float64()),
     ("_hoodie_is_deleted", pa.bool_())]
)


def _hoodie_streamer_write_options(table_name: str, checkpoint: str, key: str = CHECKPOINT_KEY) -> dict[str, str]:
    """A Hudi datasource write that records its checkpoint under ``key`` as HoodieStreamer
    does (0.x: ``deltastreamer.checkpoint.key``; 1.x on table version 8+:
    ``streamer.checkpoint.key.v2``)."""
    return {
        "hoodie.table.name": table_name,
        "hoodie.datasource.write.table.type": "MERGE_ON_READ",
        "hoodie.datasource.write.recordkey.field": "uuid",
        "hoodie.datasource.write.partitionpath.field": "city",
        "hoodie.datasource.write.precombine.field": "ts",
        "hoodie.datasource.write.operation": "upsert",
        "hoodie.metadata.enable": "false",
        "hoodie.datasource.write.commitmeta.key.prefix": key.split(".")[0] + ".",
        key: checkpoint,
    }


def _newest_write_metadata(path: str) -> tuple[str, dict[str, str]]:
    fs, base = resolve(path)
    timeline = Timeline.load(fs, base, load_properties(fs, base))
    instant = timeline.completed_writes()[-1]
    meta = CommitMetadata.from_bytes(timeline.read_details(instant), timeline.path_of(instant))
    return instant.timestamp, meta.extra_metadata


def _uuid_ts(table: pa.Table) -> list[tuple[str, int]]:
    return sorted(zip(table.column("uuid").to_pylist(), table.column("ts").to_pylist(), strict=True))


def test_pipeline_continues_a_topic_hoodie_streamer_started(kafka, spark, hudi015, tmp_path):
    _continue_hoodie_streamer(kafka, spark, hudi015, tmp_path, CHECKPOINT_KEY, version=6)


def test_pipeline_continues_a_topic_hoodie_streamer_1x_started_at_v9(kafka, spark, hudi12, tmp_path):
    """Issue 29 acc 4: HoodieStreamer 1.x's v2 checkpoint in a Hudi 1.2 commit (a v9
    table); our commits continue the table at v9 and carry the v2 key."""
    _continue_hoodie_streamer(kafka, spark, hudi12, tmp_path, CHECKPOINT_KEY_V2, version=9)


def _continue_hoodie_streamer(kafka, spark, hudi, tmp_path, key: str, *, version: int) -> None:
    topic = kafka.create_topic(f"handover-{uuid.uuid4().hex[:8]}", partitions=2)
    model = TripModel(seed=21, key_space=1_000_000, delete_ratio=0.0, update_ratio=0.0)  # inserts only
    records = model.records(N_RECORDS)
    produce_records(kafka, topic, records)
    where = offsets_by_ts(kafka, topic)  # ts -> (partition, offset)
    per_partition = {p: sum(1 for q, _ in where.values() if q == p) for p in (0, 1)}
    assert min(per_partition.values()) >= 3, per_partition

    # (b) HoodieStreamer's run: the first two thirds of each partition, checkpoint "<topic>,0:k0,1:k1".
    handed = {p: n * 2 // 3 for p, n in per_partition.items()}
    first = [r for r in records if where[r["ts"]][1] < handed[where[r["ts"]][0]]]
    (config,), problems = parse_pipelines(
        "pipelines:\n" + kafka_pipeline_yaml("handover", kafka.bootstrap_servers, topic, str(tmp_path / "lake"),
                                             trigger="{mode: once}")
    )
    assert not problems
    path = config.target.path
    checkpoint = f"{topic},0:{handed[0]},1:{handed[1]}"
    hudi.write(path, pa.Table.from_pylist(first, schema=ROWS),
               _hoodie_streamer_write_options(config.target.table_name, checkpoint, key), mode="overwrite")
    hudi_instant, hudi_meta = _newest_write_metadata(path)
    assert hudi_meta.get(key) == checkpoint, "precondition: Hudi recorded the checkpoint"
    assert load_properties(*resolve(path)).version == version

    # (c) our pipeline resumes at HoodieStreamer's offsets.
    runner = PipelineRunner(config, spark=spark)
    assert runner.position == KafkaOffsets(topic=topic, partitions=handed)
    report = runner.run_once()
    rest = N_RECORDS - len(first)
    assert (report.read, report.written, report.errored) == (rest, rest, 0)

    expected = sorted((r["uuid"], r["ts"]) for r in records)
    assert _uuid_ts(Table.open(path).read()) == expected, "our reader: a gap or a duplicate"
    assert _uuid_ts(hudi.read(path)) == expected, f"Hudi {hudi.version}: a gap or a duplicate"

    # (d) our commit leaves HoodieStreamer's checkpoint, at the topic's end offsets.
    our_instant, our_meta = _newest_write_metadata(path)
    assert our_instant == report.instant and our_instant > hudi_instant
    assert load_properties(*resolve(path)).version == version
    other = CHECKPOINT_KEY if key == CHECKPOINT_KEY_V2 else CHECKPOINT_KEY_V2
    assert other not in our_meta, f"{other} on a version-{version} table"
    resumed = KafkaOffsets.from_hoodie_streamer(our_meta[key])
    if key == CHECKPOINT_KEY_V2:  # what HoodieStreamer 1.x itself would resume from
        found = hudi.checkpoint(path)
        assert (found["instant"], found["class"], found["value"]) == (
            our_instant, "StreamerCheckpointV2", our_meta[key]), found
    assert resumed == KafkaOffsets(topic=topic, partitions=kafka.end_offsets(topic))
    assert STREAMER_CHECKPOINT_KEY in our_meta
    assert PipelineRunner(config, spark=spark).run_once().skipped  # nothing left to read
