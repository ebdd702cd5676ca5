"""``streamer kafka-local`` as a user runs it: a subprocess that prints its address,
serves a produce/consume round trip, and exits 0 on Ctrl-C (SIGINT) within a bounded wait."""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import threading
import time

import pytest

from streamer.local.kafka import KafkaClient, free_port

pytestmark = [pytest.mark.integration, pytest.mark.kafka]

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
START_S = 150.0
STOP_S = 60.0


def _lines(proc: subprocess.Popen[str]) -> queue.Queue[str | None]:
    out: queue.Queue[str | None] = queue.Queue()

    def pump() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            out.put(line.rstrip("\n"))
        out.put(None)

    threading.Thread(target=pump, daemon=True).start()
    return out


def _wait_for(lines: queue.Queue[str | None], prefix: str, seen: list[str]) -> str:
    deadline = time.monotonic() + START_S
    while time.monotonic() < deadline:
        try:
            line = lines.get(timeout=max(0.1, deadline - time.monotonic()))
        except queue.Empty:
            break
        if line is None:
            break
        seen.append(line)
        if line.startswith(prefix):
            return line
    raise AssertionError(f"no line starting {prefix!r}; output so far:\n" + "\n".join(seen))


def test_kafka_local_serves_a_round_trip_and_stops_on_ctrl_c():
    from confluent_kafka import Consumer, TopicPartition

    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "streamer.cli", "kafka-local", "--port", str(port), "--create-topic", "hello:2"],
        cwd=REPO, env={**os.environ, "PYTHONPATH": REPO}, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        text=True,
    )
    seen: list[str] = []
    try:
        lines = _lines(proc)
        ready = _wait_for(lines, "Kafka broker ready at", seen)
        address = ready.rsplit(" ", 1)[-1]
        assert address == f"127.0.0.1:{port}"
        _wait_for(lines, "Ctrl-C stops it", seen)
        assert any(f"KAFKA_BOOTSTRAP={address} streamer run configs/kafka_json.yaml" in s for s in seen)

        client = KafkaClient(address)
        assert client.produce("hello", [b"one record"], partition=1) == 1
        consumer = Consumer({"bootstrap.servers": address, "group.id": "kafka-local-test",
                             "enable.auto.commit": False})
        try:
            consumer.assign([TopicPartition("hello", 1, 0)])
            message = None
            deadline = time.monotonic() + 30
            while message is None and time.monotonic() < deadline:
                message = consumer.poll(1.0)
            assert message is not None and message.error() is None and message.value() == b"one record"
        finally:
            consumer.close()

        proc.send_signal(signal.SIGINT)
        assert proc.wait(STOP_S) == 0
        _wait_for(lines, "stopped", seen)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
