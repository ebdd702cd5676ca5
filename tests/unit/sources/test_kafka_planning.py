"""Offset planning and Avro decoding without a broker (pure functions)."""

from __future__ import annotations

import io
import json

import fastavro
import pytest

from streamer.config.sources import KafkaSourceConfig
from streamer.errors import SourceError
from streamer.sources.kafka.avro import _decode_one, confluent_frame
from streamer.sources.kafka.offsets import plan_end, resolve_start
from streamer.sources.kafka.settings import FETCH_MAX_WAIT_MS, spark_kafka_options
from streamer.sources.position import KafkaOffsets


def cfg(**kw) -> KafkaSourceConfig:
    return KafkaSourceConfig(type="kafka", bootstrap_servers="b:1", topic="t", **kw)


def test_plan_end_takes_everything_without_a_cap():
    start = KafkaOffsets(topic="t", partitions={0: 5, 1: 0})
    assert plan_end(start, {0: 10, 1: 3}, None).partitions == {0: 10, 1: 3}


def test_plan_end_shares_the_cap_by_backlog_and_moves_every_partition():
    start = KafkaOffsets(topic="t", partitions={0: 0, 1: 0, 2: 0})
    end = plan_end(start, {0: 900, 1: 100, 2: 1}, 100)
    assert sum(end.partitions.values()) == 100
    assert end.partitions[0] > end.partitions[1] > 0 and end.partitions[2] == 1


def test_plan_end_keeps_the_cap_when_the_backlog_is_skewed():
    """A busy partition beside a nearly empty one: the one record the small partition is
    owed comes out of the cap, not on top of it (a batch of 5 under a cap of 4 before)."""
    start = KafkaOffsets(topic="t", partitions={0: 0, 1: 0})
    assert plan_end(start, {0: 14, 1: 2}, 4).partitions == {0: 3, 1: 1}
    assert plan_end(start, {0: 15, 1: 1}, 4).partitions == {0: 3, 1: 1}
    # more partitions with a backlog than the cap: each still moves by one
    three = KafkaOffsets(topic="t", partitions={0: 0, 1: 0, 2: 0})
    assert plan_end(three, {0: 5, 1: 5, 2: 5}, 2).partitions == {0: 1, 1: 1, 2: 1}


def test_resolve_start_modes_and_data_loss():
    low, high = {0: 10, 1: 0}, {0: 50, 1: 7}
    assert resolve_start(cfg(), None, low, high).partitions == {0: 10, 1: 0}
    assert resolve_start(cfg(starting_offsets="latest"), None, low, high).partitions == {0: 50, 1: 7}
    assert resolve_start(cfg(starting_offsets={1: 3}), None, low, high).partitions == {0: 10, 1: 3}
    stored = KafkaOffsets(topic="t", partitions={0: 2})  # partition 1 is new: starts at earliest
    with pytest.raises(SourceError, match="outside the available range"):
        resolve_start(cfg(), stored, low, high)
    assert resolve_start(cfg(fail_on_data_loss=False), stored, low, high).partitions == {0: 10, 1: 0}
    with pytest.raises(SourceError, match="topic 'other'"):
        resolve_start(cfg(), KafkaOffsets(topic="other"), low, high)
    with pytest.raises(SourceError, match="no longer exist"):
        resolve_start(cfg(), KafkaOffsets(topic="t", partitions={0: 20, 5: 1}), low, high)


SCHEMA_V1 = {"type": "record", "name": "T", "fields": [{"name": "a", "type": "int"}]}
SCHEMA_V2 = {
    "type": "record", "name": "T",
    "fields": [{"name": "a", "type": "int"}, {"name": "b", "type": "string", "default": "none"}],
}


def body(schema, record) -> bytes:
    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, fastavro.parse_schema(schema), record)
    return buf.getvalue()


def test_avro_decoding_resolves_writer_into_reader_schema_and_names_failures():
    reader = fastavro.parse_schema(SCHEMA_V2)
    writers = {1: fastavro.parse_schema(SCHEMA_V1), 2: reader}
    assert _decode_one(confluent_frame(1, body(SCHEMA_V1, {"a": 4})), reader, writers, "confluent", False) == (
        {"a": 4, "b": "none"}, None,
    )
    assert _decode_one(confluent_frame(2, body(SCHEMA_V2, {"a": 1, "b": "x"})), reader, writers, "confluent", False)[0] == {
        "a": 1, "b": "x",
    }
    assert "schema id 9" in _decode_one(confluent_frame(9, b"\x02"), reader, writers, "confluent", False)[1]
    assert "magic byte" in _decode_one(b"\x05abcdef", reader, writers, "confluent", False)[1]
    assert "tombstone" in _decode_one(None, reader, writers, "confluent", False)[1]
    assert "trailing" in _decode_one(confluent_frame(1, body(SCHEMA_V1, {"a": 4}) + b"zz"), writers[1], writers, "confluent", False)[1]
    assert _decode_one(body(SCHEMA_V1, {"a": 3}), writers[1], {}, "raw", True) == ({"a": 3}, None)
    assert json.dumps(SCHEMA_V1)  # schemas are plain JSON-able data (shipped to executors)


def test_spark_consumers_wait_briefly_at_a_partitions_end_unless_the_source_says_otherwise():
    """A batch read up to the log end ends with a fetch the broker holds for
    ``fetch.max.wait.ms``: ours is short (the consumer's 500 ms default cost ~1 s of
    every caught-up micro-batch); a user's own setting wins."""
    assert spark_kafka_options(cfg())["kafka.fetch.max.wait.ms"] == FETCH_MAX_WAIT_MS
    assert int(FETCH_MAX_WAIT_MS) < 500
    mine = cfg(options={"kafka.fetch.max.wait.ms": "250"})
    assert spark_kafka_options(mine)["kafka.fetch.max.wait.ms"] == "250"
