"""HoodieStreamer checkpoint hand-over without Spark: the ``topic,p:o,...`` format, and
which commit's checkpoint a pipeline resumes from (ours, HoodieStreamer's, or a JSON
position written by an earlier version of this project)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from streamer.errors import SourceError
from streamer.fs import resolve
from streamer.pipeline.checkpoint import (
    BATCH_ID_KEY,
    CHECKPOINT_KEY,
    STREAMER_CHECKPOINT_KEY,
    checkpoint_history,
    checkpoint_metadata,
    stored_checkpoint,
)
from streamer.sources.position import (
    CheckpointFormatError,
    FileListPosition,
    GeneratorPosition,
    KafkaOffsets,
    position_from_json,
    position_to_json,
)
from tests.support import block_tables as tg

TOPICS = st.text(alphabet="abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-", min_size=1, max_size=40)
OFFSETS = st.dictionaries(
    st.integers(min_value=0, max_value=2**31 - 1), st.integers(min_value=0, max_value=2**63 - 1), min_size=1, max_size=12
)


# -- the string format ----------------------------------------------------------------------


def test_writes_hoodie_streamer_form_with_partitions_ascending():
    offsets = KafkaOffsets(topic="trips", partitions={1: 456, 0: 123})
    assert offsets.to_hoodie_streamer() == "trips,0:123,1:456"


def test_reads_hoodie_streamer_form_in_any_partition_order():
    parsed = KafkaOffsets.from_hoodie_streamer("trips.v1_x-y,2:0,0:123,1:456")
    assert parsed == KafkaOffsets(topic="trips.v1_x-y", partitions={0: 123, 1: 456, 2: 0})


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("", "empty"),
        ("t", "no <partition>:<offset> entries"),
        ("t,0", "entry '0' is not <partition>:<offset>"),
        ("t,x:1", "partition 'x' is not a non-negative integer"),
        ("t,0:-1", "offset '-1' is not a non-negative integer"),
        ("t,0:1,0:2", "partition 0 appears more than once"),
        ("t,", "entry '' is not"),
        ("t,0:1,", "entry '' is not"),
        (",0:1", "topic '' is not a Kafka topic name"),
        ("t,0:1:2", "offset '1:2'"),
        ("t, 0:1", "partition ' 0'"),
        ("t,0:+1", "offset '+1'"),
        ("t,0:1.5", "offset '1.5'"),
        ("t,0:\u00b2", "offset '\u00b2'"),  # a Unicode digit int() would take
        ("my topic,0:1", "topic 'my topic' is not a Kafka topic name"),
        ("t,2147483648:1", "partition 2147483648 is outside"),
        ("t,0:9223372036854775808", "offset 9223372036854775808 of partition 0 is outside"),
        ("t,0:" + "1" * 40, "at most 19 digits"),
        ('{"kind": "kafka", "topic": "t"}', "is not a Kafka topic name"),
        ("1700000000000", "no <partition>:<offset> entries"),  # a DFS source's checkpoint
    ],
)
def test_malformed_checkpoints_are_refused_with_the_value_and_the_reason(text, reason):
    with pytest.raises(CheckpointFormatError) as err:
        KafkaOffsets.from_hoodie_streamer(text)
    assert reason in err.value.reason
    assert repr(text[:200]) in str(err.value)
    assert isinstance(err.value, SourceError) and err.value.value == text


@pytest.mark.parametrize(
    "offsets",
    [
        KafkaOffsets(topic="t", partitions={}),
        KafkaOffsets(topic="a,b", partitions={0: 1}),
        KafkaOffsets(topic="a:b", partitions={0: 1}),
        KafkaOffsets(topic="t", partitions={0: -1}),
        KafkaOffsets(topic="t", partitions={-1: 0}),
    ],
)
def test_offsets_the_format_cannot_say_are_refused_not_written(offsets):
    with pytest.raises(CheckpointFormatError):
        offsets.to_hoodie_streamer()


@given(TOPICS, OFFSETS)
def test_offsets_round_trip_through_the_string(topic, partitions):
    offsets = KafkaOffsets(topic=topic, partitions=partitions)
    assert KafkaOffsets.from_hoodie_streamer(offsets.to_hoodie_streamer()) == offsets


@given(TOPICS, OFFSETS)
def test_canonical_strings_round_trip_through_the_offsets(topic, partitions):
    text = ",".join([topic, *(f"{p}:{o}" for p, o in sorted(partitions.items()))])
    assert KafkaOffsets.from_hoodie_streamer(text).to_hoodie_streamer() == text


@given(st.text(max_size=30))
def test_any_text_parses_or_is_refused_with_a_source_error(text):
    try:
        parsed = KafkaOffsets.from_hoodie_streamer(text)
    except CheckpointFormatError:
        return
    assert parsed.partitions and all(o >= 0 for o in parsed.partitions.values())


# -- what a commit records --------------------------------------------------------------------


def test_kafka_commits_record_both_forms():
    offsets = KafkaOffsets(topic="trips", partitions={0: 10, 1: 20})
    meta = checkpoint_metadata(offsets)
    assert meta[CHECKPOINT_KEY] == "trips,0:10,1:20"
    assert position_from_json(meta[STREAMER_CHECKPOINT_KEY]) == offsets


@pytest.mark.parametrize(
    "position",
    [
        FileListPosition(watermark_ns=5, files=("a.json",)),
        GeneratorPosition(batch_index=3),
        KafkaOffsets(topic="trips"),  # nothing read yet: the format has no way to say it
    ],
)
def test_other_positions_write_no_hoodie_streamer_key(position):
    meta = checkpoint_metadata(position)
    assert CHECKPOINT_KEY not in meta
    assert position_from_json(meta[STREAMER_CHECKPOINT_KEY]) == position


# -- resuming from a table ------------------------------------------------------------------


def _table(tmp_path, *extras: dict[str, str]) -> tuple[object, str, list[str]]:
    """A table with one upsert commit per ``extras`` entry; its fs, base path and instants."""
    path = str(tmp_path / "t")
    w = tg.create(path)
    gen = tg.Gen(1)
    instants = [w.upsert(gen.upserts(5), extra_metadata=dict(extra)).instant for extra in extras]
    fs, base = resolve(path)
    return fs, base, instants


def test_a_table_hoodie_streamer_wrote_resumes_at_its_offsets(tmp_path):
    fs, base, instants = _table(tmp_path, {CHECKPOINT_KEY: "trips,0:10,1:20"}, {CHECKPOINT_KEY: "trips,0:15,1:20"})
    stored = stored_checkpoint(fs, base, topic="trips")
    assert stored.position == KafkaOffsets(topic="trips", partitions={0: 15, 1: 20})
    assert (stored.instant, stored.key, stored.batch_id) == (instants[-1], CHECKPOINT_KEY, None)


def test_our_key_wins_over_the_hoodie_streamer_string(tmp_path):
    ours = KafkaOffsets(topic="trips", partitions={0: 7})
    fs, base, _ = _table(tmp_path, {**checkpoint_metadata(ours), BATCH_ID_KEY: "4"})
    stored = stored_checkpoint(fs, base, topic="trips")
    assert (stored.position, stored.key, stored.batch_id) == (ours, STREAMER_CHECKPOINT_KEY, 4)


def test_the_newest_commit_with_either_key_decides(tmp_path):
    ours = KafkaOffsets(topic="trips", partitions={0: 7, 1: 1})
    fs, base, instants = _table(
        tmp_path,
        checkpoint_metadata(ours),  # we wrote first ...
        {CHECKPOINT_KEY: "trips,0:9,1:3"},  # ... then HoodieStreamer took over ...
        {},  # ... and something without a checkpoint (skipped, as HoodieStreamer does)
        {CHECKPOINT_KEY: ""},
    )
    stored = stored_checkpoint(fs, base, topic="trips")
    assert stored.instant == instants[1]
    assert stored.position == KafkaOffsets(topic="trips", partitions={0: 9, 1: 3})
    history = checkpoint_history(fs, base)
    assert [h.instant for h in history] == instants[:2]
    assert [h.key for h in history] == [STREAMER_CHECKPOINT_KEY, CHECKPOINT_KEY]


def test_tables_of_earlier_versions_with_json_under_hudis_key_still_resume(tmp_path):
    old = FileListPosition(watermark_ns=42, files=("x.json",))
    fs, base, _ = _table(tmp_path, {CHECKPOINT_KEY: position_to_json(old), BATCH_ID_KEY: "0"})
    stored = stored_checkpoint(fs, base)
    assert (stored.position, stored.key, stored.batch_id) == (old, CHECKPOINT_KEY, 0)


def test_only_a_reset_key_is_no_checkpoint(tmp_path):
    fs, base, instants = _table(tmp_path, {CHECKPOINT_KEY: "trips,0:3"}, {"deltastreamer.checkpoint.reset_key": "x"})
    assert stored_checkpoint(fs, base).instant == instants[0]


@pytest.mark.parametrize("value", ["t", "t,0", "t,x:1", "t,0:-1", "t,0:1,0:2", "1700000000000"])
def test_a_malformed_hoodie_streamer_checkpoint_names_commit_key_and_value(tmp_path, value):
    fs, base, instants = _table(tmp_path, {CHECKPOINT_KEY: "t,0:1"}, {CHECKPOINT_KEY: value})
    with pytest.raises(SourceError) as err:
        stored_checkpoint(fs, base)
    message = str(err.value)
    assert instants[-1] in message and f"{CHECKPOINT_KEY}={value!r}" in message


def test_malformed_json_positions_name_commit_key_and_value(tmp_path):
    fs, base, instants = _table(tmp_path, {STREAMER_CHECKPOINT_KEY: '{"kind": "kafka"}'})
    with pytest.raises(SourceError) as err:
        stored_checkpoint(fs, base)
    assert instants[0] in str(err.value) and STREAMER_CHECKPOINT_KEY in str(err.value)


def test_a_checkpoint_of_another_topic_is_refused(tmp_path):
    fs, base, instants = _table(tmp_path, {CHECKPOINT_KEY: "orders,0:10"})
    with pytest.raises(SourceError) as err:
        stored_checkpoint(fs, base, topic="trips")
    message = str(err.value)
    assert instants[0] in message and f"{CHECKPOINT_KEY}='orders,0:10'" in message
    assert "'trips'" in message
    assert stored_checkpoint(fs, base).position.topic == "orders"  # no source, no check


def test_a_kafka_pipeline_refuses_another_sources_position(tmp_path):
    other = GeneratorPosition(batch_index=2)
    fs, base, instants = _table(tmp_path, checkpoint_metadata(other))
    with pytest.raises(SourceError, match=f"{instants[0]}.*{STREAMER_CHECKPOINT_KEY}.*'generator'"):
        stored_checkpoint(fs, base, topic="trips")


def test_runner_checks_the_topic_before_reading_anything(tmp_path):
    """The runner passes its Kafka topic (no Spark, no broker needed to refuse)."""
    from streamer.config import parse_pipelines
    from streamer.pipeline.runner import PipelineRunner

    lake = tmp_path / "lake"
    fs, base, instants = _table(lake, {CHECKPOINT_KEY: "orders,0:10"})
    yaml = f"""
pipelines:
  - name: t
    source: {{type: kafka, bootstrap_servers: "localhost:1", topic: trips, format: json}}
    target: {{path: {base}, record_key: [id], partition_by: [city], ordering_field: ts}}
"""
    (config,), problems = parse_pipelines(yaml)
    assert not problems
    with pytest.raises(SourceError, match=f"commit {instants[0]}.*'orders,0:10'.*'trips'"):
        _ = PipelineRunner(config).position
