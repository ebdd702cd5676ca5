"""The broker helper itself: start, topics, offsets, and clear errors when the broker goes away."""

from __future__ import annotations

import pytest

from streamer.errors import KafkaBrokerError
from streamer.local.kafka import LocalKafkaBroker

pytestmark = [pytest.mark.integration, pytest.mark.kafka]


def test_shared_broker_answers_and_tracks_offsets(kafka):
    topic = kafka.create_topic("helper-offsets", partitions=2)
    kafka.produce(topic, [b"a", b"b", b"c"], partition=1)
    assert kafka.end_offsets(topic) == {0: 0, 1: 3}


@pytest.mark.timeout(240)
def test_broker_stopped_midway_is_a_clear_error_not_a_hang():
    broker = LocalKafkaBroker(heap="256m").start()
    try:
        broker.timeout_s = 5
        topic = broker.create_topic("doomed", partitions=1)
        assert broker.produce(topic, [b"before"] * 100) == 100
        address = broker.bootstrap_servers

        broker.kill()  # the broker dies under us, as in a crash

        with pytest.raises(KafkaBrokerError) as produce_err:
            broker.produce(topic, [b"after"] * 100)
        assert address in str(produce_err.value)
        assert "not delivered" in str(produce_err.value)

        with pytest.raises(KafkaBrokerError, match="exited"):
            broker.ping()
        with pytest.raises(KafkaBrokerError, match=address.replace(".", r"\.")):
            broker.create_topic("never")
    finally:
        broker.stop()
    assert not broker.running
