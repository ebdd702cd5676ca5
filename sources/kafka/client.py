"""The driver's one librdkafka client per Kafka source: metadata, lag and group commits.

Why one long-lived client: a source asks the broker for watermarks every batch and,
after every table commit, mirrors the committed position into its consumer group; a
new client per call would pay a connection (and a coordinator lookup) each time.

Why quiet: librdkafka prints every failed connection attempt to stderr (hundreds of
``Connect … failed`` lines a minute when the broker is down). Its log lines and error
events go to the ``streamer.sources.kafka.librdkafka`` logger at DEBUG instead; the last error
is kept, so the one :class:`~streamer.errors.SourceError` a caller sees can say why.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from typing import TYPE_CHECKING, Any

from streamer.errors import SourceError
from streamer.sources.base import PartitionLag
from streamer.sources.kafka.settings import librdkafka_config
from streamer.sources.position import KafkaOffsets

if TYPE_CHECKING:
    from streamer.config.sources import KafkaSourceConfig

log = logging.getLogger(__name__)
client_log = logging.getLogger("streamer.sources.kafka.librdkafka")

#: Lag is an observation taken after every batch: never wait long for it.
LAG_TIMEOUT_S = 5.0
#: librdkafka's prefix (which connection) and suffix (its state machine) around a reason.
_NOISE = re.compile(r"^\S+/(?:bootstrap|\d+): |\s*\(after \d+ms in state .*\)$")
#: How long a group commit may take before it is reported as not confirmed.
COMMIT_TIMEOUT_S = 10.0
#: Granularity of the wait for a commit's confirmation (usually a few ms on a local broker).
COMMIT_POLL_S = 0.01
#: A group commit refused for a passing reason (no coordinator yet) is tried again, at most
#: this often and this many times within :data:`COMMIT_TIMEOUT_S`.
COMMIT_RETRY_S = 0.25
COMMIT_ATTEMPTS = 40


def _retriable(err: Any) -> bool:
    """A commit error that goes away by itself: the group's coordinator is being found or
    moved (a broker restarting), or a request timed out."""
    from confluent_kafka import KafkaError

    passing = {KafkaError._WAIT_COORD, KafkaError.COORDINATOR_NOT_AVAILABLE, KafkaError.NOT_COORDINATOR,
               KafkaError.COORDINATOR_LOAD_IN_PROGRESS, KafkaError.REQUEST_TIMED_OUT, KafkaError._TIMED_OUT,
               KafkaError._TRANSPORT}
    code = err.code() if hasattr(err, "code") else None
    return code in passing or bool(getattr(err, "retriable", lambda: False)())


class QuietClientLog:
    """librdkafka's ``logger``/``error_cb`` sink: DEBUG lines, and the last error kept."""

    def __init__(self) -> None:
        self.last_error: str | None = None

    def log(self, level: int, fmt: str, *args: Any) -> None:  # called by confluent_kafka
        client_log.debug(fmt, *args)

    def error(self, err: Any) -> None:
        text = err.str() if hasattr(err, "str") else str(err)
        client_log.debug("client error: %s", text)
        if self.last_error is not None and "brokers are down" in text:
            return  # the summary; the connection's own reason says more
        # "host:port/bootstrap: Connect to ... failed: Connection refused (after 0ms in state CONNECT)"
        self.last_error = _NOISE.sub("", text)


def quiet_settings(sink: QuietClientLog) -> dict[str, Any]:
    """Settings that route a confluent_kafka client's output to ``sink`` (not stderr)."""
    return {"logger": sink, "error_cb": sink.error, "log.connection.close": False}


class KafkaSourceClient:
    """A ``confluent_kafka.Consumer`` that never subscribes (so it never joins the group)
    and commits explicit offsets for the source's consumer group.

    A commit by a consumer outside the group is what Kafka calls a "simple consumer"
    commit: allowed while the group has no active members, which holds here (Spark's
    executors ``assign`` partitions, they never join the group).
    """

    def __init__(self, config: KafkaSourceConfig) -> None:
        self.config = config
        self.group_id = config.commit_group_id
        self.where = f"topic {config.topic!r} at {config.bootstrap_servers}"
        self._sink = QuietClientLog()
        self._lock = threading.Lock()
        self._consumer: Any = None
        self._commits: list[tuple[Any, list[Any]]] = []

    # -- lifecycle ----------------------------------------------------------------------

    def _client(self) -> Any:
        if self._consumer is None:
            from confluent_kafka import Consumer

            conf: dict[str, Any] = dict(librdkafka_config(self.config))
            conf["group.id"] = self.group_id
            conf.update(quiet_settings(self._sink))
            conf["on_commit"] = self._on_commit
            conf["session.timeout.ms"] = 6_000  # bounds close() while a commit waits for a coordinator
            self._consumer = Consumer(conf)
        return self._consumer

    def close(self) -> None:
        with self._lock:
            if self._consumer is not None:
                consumer, self._consumer = self._consumer, None
                consumer.close()

    def _drain(self) -> None:
        """Serve queued log lines and error events (they only arrive on a poll)."""
        try:
            self._client().poll(0)
        except Exception as e:  # a closed or broken handle: nothing to serve
            client_log.debug("poll failed: %s", e)

    # -- metadata -----------------------------------------------------------------------

    def partitions(self, timeout_s: float) -> list[int]:
        """The topic's partitions; one clear :class:`SourceError` when the broker is unreachable."""
        from confluent_kafka import KafkaError, KafkaException

        try:
            md = self._client().list_topics(self.config.topic, timeout=timeout_s)
        except KafkaException as e:
            err = e.args[0] if e.args else None
            code = err.code() if isinstance(err, KafkaError) else None
            self._drain()
            if code in (KafkaError._TRANSPORT, KafkaError._TIMED_OUT, KafkaError._ALL_BROKERS_DOWN):
                raise self.unreachable(timeout_s) from None
            raise SourceError(f"cannot read {self.where}: {e}") from e
        topic = md.topics.get(self.config.topic)
        if topic is None or topic.error is not None or not topic.partitions:
            reason = topic.error if topic is not None and topic.error is not None else "no such topic"
            raise SourceError(f"cannot read {self.where}: {reason}")
        return sorted(topic.partitions)

    def unreachable(self, timeout_s: float) -> SourceError:
        cause = f": {self._sink.last_error}" if self._sink.last_error else ""
        return SourceError(
            f"Kafka broker unreachable: no answer from {self.config.bootstrap_servers} within "
            f"{timeout_s:g}s while reading topic {self.config.topic!r}{cause} "
            "(is the broker running? `streamer kafka-local` starts one for trying things)"
        )

    def watermarks(self, timeout_s: float | None = None) -> tuple[dict[int, int], dict[int, int]]:
        """(low, high) watermark offsets per partition; raises :class:`SourceError`."""
        from confluent_kafka import KafkaException, TopicPartition

        timeout = timeout_s if timeout_s is not None else self.config.metadata_timeout.total_seconds()
        with self._lock:
            low, high = {}, {}
            for p in self.partitions(timeout):
                try:
                    lo, hi = self._client().get_watermark_offsets(TopicPartition(self.config.topic, p), timeout=timeout)
                except KafkaException as e:
                    self._drain()
                    raise SourceError(f"cannot read the offsets of {self.where} partition {p}: {e}") from e
                low[p], high[p] = lo, hi
            return low, high

    def lag(self, position: KafkaOffsets | None) -> list[PartitionLag]:
        """Records after ``position`` per partition (no position: after ``starting_offsets``).

        An observation: any failure (broker down, topic gone) gives ``[]``, never an error.
        """
        from streamer.sources.kafka.offsets import resolve_start

        timeout = min(LAG_TIMEOUT_S, self.config.metadata_timeout.total_seconds())
        try:
            low, high = self.watermarks(timeout)
            lenient = self.config.model_copy(update={"fail_on_data_loss": False})
            begin = resolve_start(lenient, position, low, high)
        except Exception as e:  # SourceError and anything the client raises
            log.debug("kafka %s: lag not available: %s", self.config.topic, e)
            return []
        topic = self.config.topic
        return [PartitionLag(f"{topic}-{p}", max(0, high[p] - begin.partitions[p])) for p in sorted(high)]

    # -- consumer group -----------------------------------------------------------------

    def commit(self, position: KafkaOffsets, note: str = "") -> None:
        """Store ``position`` as the group's committed offsets; raises :class:`SourceError`.

        An asynchronous commit whose outcome is awaited by polling, at most
        :data:`COMMIT_TIMEOUT_S`: librdkafka's synchronous commit has no timeout of its own,
        and a commit must not hold a pipeline up when the broker is gone.
        """
        from confluent_kafka import TopicPartition

        offsets = [TopicPartition(position.topic, p, o, metadata=note) for p, o in sorted(position.partitions.items())]
        if not offsets:
            return
        timeout = min(COMMIT_TIMEOUT_S, self.config.metadata_timeout.total_seconds())
        deadline = time.monotonic() + timeout
        for _ in range(COMMIT_ATTEMPTS):
            err = self._commit_once(offsets, deadline, timeout)
            # a broker that just restarted answers "waiting for coordinator" (and kin) for a
            # moment: that commit is retried within the same time budget, not given up
            if err is None or not _retriable(err) or time.monotonic() >= deadline:
                break
            time.sleep(min(COMMIT_RETRY_S, max(0.0, deadline - time.monotonic())))
        if err is not None:
            raise SourceError(f"group {self.group_id!r}: commit to {self.where} failed: {err}")

    def _commit_once(self, offsets: list, deadline: float, timeout: float) -> Any:
        """One asynchronous commit awaited until ``deadline``: None, or its error."""
        from confluent_kafka import KafkaException

        with self._lock:
            consumer = self._client()
            self._commits.clear()
            try:
                consumer.commit(offsets=offsets, asynchronous=True)
            except KafkaException as e:
                return e.args[0] if e.args else e
            while not self._commits and time.monotonic() < deadline:
                # serves the on_commit callback (never a record: no subscription); poll returns
                # at its timeout, not at the callback, so a short one ends the wait soon after
                consumer.poll(COMMIT_POLL_S)
        if not self._commits:
            cause = f" ({self._sink.last_error})" if self._sink.last_error else ""
            raise SourceError(f"group {self.group_id!r}: commit to {self.where} not confirmed within {timeout:g}s{cause}")
        err, partitions = self._commits[-1]
        failed = [tp.error for tp in partitions or [] if tp.error is not None]
        return err or (failed[0] if failed else None)

    def _on_commit(self, err: Any, partitions: list[Any]) -> None:
        self._commits.append((err, partitions))


def fetch_watermarks(config: KafkaSourceConfig) -> tuple[dict[int, int], dict[int, int]]:
    """(low, high) watermark offsets per partition of the topic, from the broker.

    One short-lived quiet client (:class:`KafkaSourceClient`): an unreachable broker
    is one :class:`SourceError` after ``metadata_timeout``, not a stream of client logs.
    """
    client = KafkaSourceClient(config)
    try:
        return client.watermarks()
    finally:
        client.close()
