"""No broker at the address: one clear SourceError, not a screen of librdkafka lines.

A closed loopback port stands in for a stopped broker (connections are refused at
once, so every wait below is the configured timeout, a few seconds). Output is
checked at the file-descriptor level (``capfd``): librdkafka writes to fd 2 itself.
"""

from __future__ import annotations

import logging

import pytest

from streamer.config.sources import KafkaSourceConfig
from streamer.errors import SourceError
from streamer.local.kafka import free_port
from streamer.sources.kafka import KafkaSource
from streamer.sources.kafka.client import fetch_watermarks
from streamer.sources.position import KafkaOffsets

#: At most this many lines of client output for a failed first contact.
FEW_LINES = 3


@pytest.fixture()
def dead_config() -> KafkaSourceConfig:
    address = f"127.0.0.1:{free_port()}"  # bound then released: nothing listens there
    return KafkaSourceConfig(type="kafka", bootstrap_servers=address, topic="trips", metadata_timeout="2s")


def test_first_contact_is_one_error_naming_the_address_and_topic(dead_config, capfd):
    source = KafkaSource(dead_config)
    with pytest.raises(SourceError) as info:
        source.plan(None)
    message = str(info.value)
    assert dead_config.bootstrap_servers in message and "'trips'" in message
    assert "unreachable" in message and "within 2s" in message
    assert "Connection refused" in message  # the client's own reason, kept from its error events
    err = capfd.readouterr().err
    assert len(err.splitlines()) <= FEW_LINES, err
    source.close()


def test_fetch_watermarks_fails_the_same_way(dead_config, capfd):
    with pytest.raises(SourceError, match="unreachable"):
        fetch_watermarks(dead_config)
    assert len(capfd.readouterr().err.splitlines()) <= FEW_LINES


def test_lag_is_empty_and_a_group_commit_only_warns(dead_config, capfd, caplog):
    source = KafkaSource(dead_config)
    assert source.lag(None) == []
    assert source.lag(KafkaOffsets(topic="trips", partitions={0: 5})) == []
    with caplog.at_level(logging.WARNING, logger="streamer.sources.kafka"):
        source.on_table_commit(KafkaOffsets(topic="trips", partitions={0: 5}), "20260101000000000")
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "the table has the position" in warnings[0].getMessage()
    assert len(capfd.readouterr().err.splitlines()) <= FEW_LINES
    source.close()


def test_commits_can_be_switched_off(dead_config, caplog):
    source = KafkaSource(dead_config.model_copy(update={"commit_offsets": False}))
    with caplog.at_level(logging.WARNING, logger="streamer.sources.kafka"):
        source.on_table_commit(KafkaOffsets(topic="trips", partitions={0: 5}), "20260101000000000")
    assert not caplog.records  # not even tried
    source.close()


def test_default_group_is_per_topic():
    config = KafkaSourceConfig(type="kafka", bootstrap_servers="127.0.0.1:9", topic="trips")
    assert config.commit_group_id == "mor-streamer-trips"
    assert config.model_copy(update={"group_id": "etl"}).commit_group_id == "etl"
