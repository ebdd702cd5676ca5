"""``streamer kafka-local`` argument handling (the broker itself: tests/integration/test_kafka_local_cmd.py)."""

from __future__ import annotations

import argparse
import socket

import pytest

from streamer.cli import build_parser
from streamer.cli.kafka_cmd import choose_port, topic_arg
from streamer.errors import ConfigError


def test_topic_argument_takes_an_optional_partition_count():
    assert topic_arg("trips") == ("trips", 1)
    assert topic_arg("trips:3") == ("trips", 3)
    for bad in ("trips:x", ":3", "trips:0"):
        with pytest.raises(argparse.ArgumentTypeError):
            topic_arg(bad)


def test_command_is_registered_with_its_options():
    args = build_parser().parse_args(["kafka-local", "--port", "0", "--registry", "--create-topic", "t:2"])
    assert (args.port, args.registry, args.create_topic) == (0, True, [("t", 2)])


def test_a_taken_port_is_an_error_when_asked_for_and_avoided_by_default():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        taken = s.getsockname()[1]
        with pytest.raises(ConfigError, match=f"port {taken} .* in use"):
            choose_port(taken, 9092, "broker")
        assert choose_port(None, taken, "broker") == 0  # default taken: any free port
    assert choose_port(0, 9092, "broker") == 0
