"""A real, single-node Apache Kafka broker (KRaft) for trying the project out and for tests.

Why not a mock: the streamer's exactly-once story rests on real offsets, real
partitions and real consumer behaviour, so the tests talk to a real broker. The
broker runs from the Maven-resolved jars in ``.jvm/kafka`` (its own classpath,
never Spark's) on a free 127.0.0.1 port, with its data in a temp folder.

``streamer kafka-local`` starts it; the tests choose between it, an existing broker and
testcontainers' Kafka in ``tests/support/kafka.py``.

Every wait here is bounded: a broker that stops answering produces a
:class:`~streamer.errors.KafkaBrokerError` naming the address, never a hang.
"""

from __future__ import annotations

import base64
import logging
import os
import socket
import subprocess
import time
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from streamer.errors import KafkaBrokerError
from streamer.jvm import classpath, java_executable
from streamer.local.process import ManagedProcess

if TYPE_CHECKING:
    from confluent_kafka import KafkaError, Message
    from confluent_kafka.admin import AdminClient

log = logging.getLogger(__name__)

_ADMIN_TIMEOUT_S = 15.0


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _existing_cluster_id(data: Path) -> str | None:
    meta = data / "meta.properties"
    if not meta.is_file():
        return None
    for line in meta.read_text().splitlines():
        if line.startswith("cluster.id="):
            return line.split("=", 1)[1].strip()
    return None


def _quiet() -> dict[str, object]:
    """No librdkafka log lines on stderr (a stopped broker would print one per reconnect);
    failures surface as :class:`KafkaBrokerError` with the client's reason instead."""
    return {"log_level": 0, "error_cb": lambda _err: None}


def _random_cluster_id() -> str:
    """A KRaft cluster id (base64 of a random UUID) that does not start with ``-``: the
    storage tool would read it as an option and fail the broker's start (1 in 64 ids),
    which is why Kafka's own ``Uuid.randomUuid`` draws again in that case."""
    for _ in range(1000):
        cid = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode("ascii").rstrip("=")
        if not cid.startswith("-"):
            return cid
    raise AssertionError("no cluster id without a leading '-' in 1000 draws")


@dataclass
class KafkaClient:
    """Admin/produce helpers over any broker, with bounded waits and clear errors."""

    bootstrap_servers: str
    timeout_s: float = _ADMIN_TIMEOUT_S

    def _admin(self) -> AdminClient:
        from confluent_kafka.admin import AdminClient

        return AdminClient(
            # confluent_kafka declares config values as str/int/float/bool, but librdkafka's
            # callbacks (``error_cb`` in _quiet) are config values too
            {"bootstrap.servers": self.bootstrap_servers, "socket.timeout.ms": 5000, **_quiet()}  # type: ignore[dict-item]
        )

    def _unreachable(self, what: str, cause: object) -> KafkaBrokerError:
        return KafkaBrokerError(
            f"Kafka broker at {self.bootstrap_servers} did not answer while trying to {what} "
            f"within {self.timeout_s:.0f}s (is it stopped?): {cause}"
        )

    def ping(self) -> None:
        """Raise :class:`KafkaBrokerError` unless the broker answers a metadata request."""
        try:
            self._admin().list_topics(timeout=self.timeout_s)
        except Exception as e:  # confluent_kafka.KafkaException and friends
            raise self._unreachable("list topics", e) from e

    def create_topic(self, name: str, partitions: int = 1, config: dict[str, str] | None = None) -> str:
        from confluent_kafka.admin import NewTopic

        admin = self._admin()  # must outlive the futures, or librdkafka destroys the handle
        futures = admin.create_topics(
            [NewTopic(name, num_partitions=partitions, replication_factor=1, config=config or {})],
            operation_timeout=self.timeout_s,
            request_timeout=self.timeout_s,
        )
        try:
            futures[name].result(timeout=self.timeout_s + 5)
        except Exception as e:
            if "TOPIC_ALREADY_EXISTS" in str(e):
                return name
            raise self._unreachable(f"create topic {name!r}", e) from e
        self._wait_topic_ready(name, partitions)
        return name

    def _wait_topic_ready(self, name: str, partitions: int) -> None:
        deadline = time.monotonic() + self.timeout_s
        while time.monotonic() < deadline:
            md = self._admin().list_topics(topic=name, timeout=self.timeout_s)
            topic = md.topics.get(name)
            if (
                topic is not None
                and topic.error is None
                and len(topic.partitions) == partitions
                and all(p.leader >= 0 for p in topic.partitions.values())
            ):
                return
            time.sleep(0.1)
        raise self._unreachable(f"see topic {name!r} with {partitions} partitions ready", "timed out")

    def produce(
        self,
        topic: str,
        values: Iterable[bytes | str | None],
        keys: Iterable[bytes | str | None] | None = None,
        partition: int | None = None,
    ) -> int:
        """Produce and wait for every delivery; returns the count delivered.

        Raises :class:`KafkaBrokerError` naming how many records were not delivered,
        so a producer against a dead broker fails loudly instead of buffering forever.
        """
        from confluent_kafka import Producer

        producer = Producer(
            {
                "bootstrap.servers": self.bootstrap_servers,
                "linger.ms": 5,
                "enable.idempotence": True,
                "message.timeout.ms": int(self.timeout_s * 1000),
                "socket.timeout.ms": 5000,
                **_quiet(),
            }
        )
        failures: list[str] = []
        delivered = 0

        def on_delivery(err: KafkaError | None, _msg: Message) -> None:
            nonlocal delivered
            if err is not None:
                failures.append(str(err))
            else:
                delivered += 1

        key_iter = iter(keys) if keys is not None else None
        sent = 0
        for value in values:
            key = next(key_iter) if key_iter is not None else None
            # -1: librdkafka's partitioner picks (produce's default)
            part = partition if partition is not None else -1
            while True:
                try:
                    producer.produce(topic, value=value, key=key, partition=part, on_delivery=on_delivery)
                    break
                except BufferError:
                    producer.poll(0.1)
            sent += 1
            if sent % 1000 == 0:
                producer.poll(0)
        remaining = producer.flush(self.timeout_s + 5)
        if remaining or failures:
            reason = failures[0] if failures else f"{remaining} still queued after flush"
            raise KafkaBrokerError(
                f"Kafka broker at {self.bootstrap_servers}: {sent - delivered} of {sent} records "
                f"to topic {topic!r} were not delivered: {reason}"
            )
        return delivered

    def end_offsets(self, topic: str) -> dict[int, int]:
        """High watermark per partition (the next offset to be written)."""
        from confluent_kafka import Consumer, TopicPartition

        consumer = Consumer(
            {
                "bootstrap.servers": self.bootstrap_servers,
                "group.id": f"mor-streamer-probe-{uuid.uuid4().hex[:8]}",
                "enable.auto.commit": False,
                **_quiet(),
            }
        )
        try:
            md = consumer.list_topics(topic, timeout=self.timeout_s)
            parts = md.topics[topic].partitions
            out = {}
            for p in parts:
                _low, high = consumer.get_watermark_offsets(
                    TopicPartition(topic, p), timeout=self.timeout_s
                )
                out[p] = high
            return out
        except Exception as e:
            raise self._unreachable(f"read end offsets of {topic!r}", e) from e
        finally:
            consumer.close()


@dataclass
class LocalKafkaBroker(ManagedProcess, KafkaClient):
    """A KRaft broker process started from ``.jvm/kafka`` in a temp folder.

    Use as a context manager, or call :meth:`start` / :meth:`stop`.
    """

    bootstrap_servers: str = ""
    port: int = 0
    controller_port: int = 0
    heap: str = "512m"

    LOG_NAME: ClassVar[str] = "broker.log"
    START_TIMEOUT_S: ClassVar[float] = 90.0
    #: SIGTERM is a controlled shutdown, given longer than the default.
    STOP_TIMEOUT_S: ClassVar[float] = 20.0

    def describe(self) -> str:
        return f"Kafka broker at {self.bootstrap_servers}"

    # -- lifecycle ------------------------------------------------------------------
    def _launch(self, timeout_s: float) -> None:
        self._own_workdir("mor-kafka-")
        self.port = self.port or free_port()
        self.controller_port = self.controller_port or free_port()
        self.bootstrap_servers = f"127.0.0.1:{self.port}"
        props = self._write_config()
        self._format(props)
        self._spawn(self._java_cmd("kafka.Kafka", str(props)))
        self._wait_until_ready(timeout_s)
        log.info("Kafka broker ready at %s (data in %s)", self.bootstrap_servers, self.workdir)

    def ping(self) -> None:
        self._raise_if_exited(KafkaBrokerError)
        super().ping()

    # -- internals ------------------------------------------------------------------
    def _java_cmd(self, main: str, *args: str) -> list[str]:
        log4j = resources.files("streamer.resources").joinpath("log4j2.properties")
        return [
            java_executable(),
            f"-Xmx{self.heap}",
            f"-Xms{min(256, int(self.heap.rstrip('m')))}m" if self.heap.endswith("m") else "-Xms256m",
            # A local broker's load is small: the client compiler and the serial collector
            # start it with less CPU than C2 and G1, which matters on a 2-core laptop.
            "-XX:+UseSerialGC",
            "-XX:TieredStopAtLevel=1",
            "-Djava.awt.headless=true",
            f"-Dlog4j2.configurationFile=file:{log4j}",
            f"-Dkafka.logs.dir={self.workdir}",
            "-cp",
            os.pathsep.join(classpath("kafka")),
            main,
            *args,
        ]

    def _write_config(self) -> Path:
        assert self.workdir is not None
        data = self.workdir / "data"
        cfg = {
            "process.roles": "broker,controller",
            "node.id": "1",
            "controller.quorum.voters": f"1@127.0.0.1:{self.controller_port}",
            "listeners": f"PLAINTEXT://127.0.0.1:{self.port},CONTROLLER://127.0.0.1:{self.controller_port}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
            "log.dirs": str(data),
            "num.partitions": "1",
            "offsets.topic.replication.factor": "1",
            "offsets.topic.num.partitions": "4",
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
            "share.coordinator.state.topic.replication.factor": "1",
            "share.coordinator.state.topic.min.isr": "1",
            "group.initial.rebalance.delay.ms": "0",
            "auto.create.topics.enable": "true",
            "log.flush.interval.messages": "10000",
            "message.max.bytes": "10485760",
            "delete.topic.enable": "true",
        }
        path = self.workdir / "server.properties"
        path.write_text("".join(f"{k}={v}\n" for k, v in cfg.items()))
        return path

    def _format(self, props: Path) -> None:
        """Format the log dir; a dir formatted before (a kept ``workdir``) keeps its cluster id."""
        assert self.workdir is not None
        cmd = self._java_cmd(
            "kafka.tools.StorageTool", "format", "-t", _existing_cluster_id(self.workdir / "data") or _random_cluster_id(),
            "-c", str(props),
            "--ignore-formatted",
        )
        try:
            out = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
        except subprocess.TimeoutExpired as e:
            raise KafkaBrokerError(f"formatting the KRaft log dir in {self.workdir} timed out") from e
        if out.returncode != 0:
            raise KafkaBrokerError(
                f"formatting the KRaft log dir in {self.workdir} failed (exit {out.returncode}):\n"
                f"{out.stdout[-2000:]}{out.stderr[-2000:]}"
            )

    def _wait_until_ready(self, timeout_s: float) -> None:
        def answers() -> None:
            with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                pass
            KafkaClient(self.bootstrap_servers, timeout_s=5).ping()

        self._wait_until(answers, timeout_s, KafkaBrokerError, retry_on=(OSError, KafkaBrokerError),
                         waits_for="answer")
