"""Continuous mode: a Structured Streaming query whose ``foreachBatch`` is the runner.

The query always starts from the table's committed position, with a fresh Spark
checkpoint per run: the table, not Spark's checkpoint, is the truth, so a Spark
checkpoint lost or left behind by a killed process can never skip or repeat data.

Stopping is graceful: once a stop is requested no new micro-batch starts work, the
one in flight finishes and commits, then the query stops. (Spark's own
``query.stop()`` would interrupt a batch mid-write; the next run would roll it back,
but a graceful stop should not leave work to roll back.)
"""

from __future__ import annotations

import contextlib
import logging
import os
import posixpath
import shutil
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Protocol

from streamer.config.pipeline import PipelineConfig
from streamer.errors import StreamerError
from streamer.sources.base import Source, StreamingSource
from streamer.sources.position import Position
from streamer.write.lock import pid_alive, process_start

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from streamer.pipeline.report import BatchReport

log = logging.getLogger(__name__)

#: How long a graceful stop waits for the running micro-batch to finish.
GRACEFUL_STOP_S = 120.0
_RUN_PREFIX = "run-"


class Pipeline(Protocol):
    """What the loops here drive (``PipelineRunner``; named by shape, so the runner can
    import this module and not the other way round)."""

    config: PipelineConfig
    source: Source

    @property
    def reports(self) -> Sequence[BatchReport]: ...

    @property
    def spark(self) -> SparkSession: ...

    @property
    def position(self) -> Position | None: ...

    def seed_position(self, start: Position) -> None: ...

    def run_once(self) -> BatchReport: ...

    def foreach_batch(self, raw: DataFrame, spark_batch_id: int | None = None) -> BatchReport: ...


class BatchGate:
    """Lets micro-batches in until :meth:`close`, which waits for the one inside to finish."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._closed = threading.Event()

    @contextlib.contextmanager
    def enter(self) -> Iterator[bool]:
        """Yields False (do nothing) once closing; holds the gate while a batch runs."""
        if self._closed.is_set():
            yield False
            return
        with self._lock:
            yield not self._closed.is_set()

    def close(self, timeout_s: float) -> bool:
        """Refuse new batches; True once no batch is running (False if ``timeout_s`` passed)."""
        self._closed.set()
        if self._lock.acquire(timeout=timeout_s):
            self._lock.release()
            return True
        return False


def _done(runner: Pipeline, stop: threading.Event, max_batches: int | None,
          deadline: float | None, first: int) -> bool:
    return (
        stop.is_set()
        or (max_batches is not None and len(runner.reports) - first >= max_batches)
        or (deadline is not None and time.monotonic() >= deadline)
    )


def run_polling(runner: Pipeline, stop: threading.Event, max_batches: int | None,
                timeout_s: float | None) -> None:
    """Sources without a Spark stream: one ``run_once`` per trigger interval."""
    interval = runner.config.trigger.interval.total_seconds()
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    first = len(runner.reports)
    while not _done(runner, stop, max_batches, deadline, first):
        started = time.monotonic()
        runner.run_once()
        stop.wait(max(0.0, interval - (time.monotonic() - started)))


def run_stream(runner: Pipeline, stop: threading.Event, max_batches: int | None,
               timeout_s: float | None) -> None:
    """Run the streaming query until stopped; re-raise a failed micro-batch's error."""
    cfg = runner.config
    source = runner.source
    assert isinstance(source, StreamingSource)
    begin = source.resolve_stream_start(runner.position)  # fails loudly on data loss
    runner.seed_position(begin)
    stream = source.stream(runner.spark, begin)
    checkpoint = _fresh_checkpoint(cfg.checkpoint_dir)
    gate = BatchGate()
    failure: list[BaseException] = []

    def on_batch(raw: DataFrame, spark_batch_id: int) -> None:
        with gate.enter() as allowed:
            if not allowed:
                return  # stopping: not committed, so the next run reads it again
            try:
                runner.foreach_batch(raw, spark_batch_id)
            except BaseException as e:  # surfaced by the query; kept for a clear error
                failure.append(e)
                raise

    name = f"mor_streamer_{cfg.name.replace('-', '_')}_{uuid.uuid4().hex[:6]}"
    query = (
        stream.writeStream.queryName(name)
        .foreachBatch(on_batch)
        .option("checkpointLocation", checkpoint)
        .trigger(processingTime=cfg.trigger.spark_processing_time())
        .start()
    )
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    first = len(runner.reports)
    try:
        while query.isActive and not _done(runner, stop, max_batches, deadline, first):
            # seconds; pyspark declares int but takes a float (it waits int(timeout * 1000) ms)
            query.awaitTermination(0.25)  # type: ignore[arg-type]
    finally:
        if not gate.close(GRACEFUL_STOP_S):
            log.warning("[%s] micro-batch still running after %.0fs; stopping anyway", cfg.name, GRACEFUL_STOP_S)
        query.stop()
        with contextlib.suppress(Exception):
            query.awaitTermination(60)
        _remove_checkpoint(checkpoint)
    if failure:
        err = failure[0]
        if isinstance(err, StreamerError):
            raise err
        raise StreamerError(f"pipeline {cfg.name}: micro-batch failed: {err}") from err
    exc = query.exception()
    if exc is not None:
        raise StreamerError(f"pipeline {cfg.name}: streaming query failed: {exc}")


def _fresh_checkpoint(folder: str | None) -> str:
    """A new Spark checkpoint folder for this run; folders of dead runs are removed.

    Spark's checkpoint is scratch (the exactly-once position lives in the table's
    commits), and our Spark has no object-store connector: a ``checkpoint_dir`` on
    ``s3://`` (the default beside a lake on S3) becomes a local temp folder of the same
    name. ``file:`` URIs name the local folder.
    """
    from streamer.fs import location_key

    key = location_key(folder or "_checkpoints")
    if "://" in key:
        key = os.path.join(tempfile.gettempdir(), "mor-streamer-checkpoints", key.split("://", 1)[1])
    folder = key
    if os.path.isdir(folder):
        for name in os.listdir(folder):
            if name.startswith(_RUN_PREFIX) and not _owner_alive(name):
                shutil.rmtree(os.path.join(folder, name), ignore_errors=True)
    pid = os.getpid()
    start = process_start(pid)
    owner = f"{pid}.{start}" if start is not None else str(pid)
    return posixpath.join(folder, f"{_RUN_PREFIX}{owner}-{uuid.uuid4().hex[:12]}")


def _owner_alive(name: str) -> bool:
    """Whether the run that made scratch folder ``name`` (``run-PID[.START]-HEX``) still
    runs: its pid exists and, where the name has it, the process has the same start time
    (pids are reused: see :func:`streamer.write.lock.process_start`; a folder judged
    alive by a reused pid alone would never be removed)."""
    pid_part, start_part = name[len(_RUN_PREFIX):].split("-", 1)[0], None
    if "." in pid_part:
        pid_part, start_part = pid_part.split(".", 1)
    try:
        pid = int(pid_part)
        started = int(start_part) if start_part is not None else None
    except ValueError:
        return False
    if not pid_alive(pid):
        return False
    now = process_start(pid) if started is not None else None
    return now is None or now == started


def _remove_checkpoint(checkpoint: str) -> None:
    if "://" not in checkpoint:
        shutil.rmtree(checkpoint, ignore_errors=True)
