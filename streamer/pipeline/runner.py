"""Run a pipeline: read a batch after the stored position, transform, commit with it.

Exactly once comes from one rule: **the source position is committed in the same
Hudi commit as the data it covers** (``extraMetadata``), and every batch starts from
the position of the newest completed commit. A crash before the commit completes
leaves an inflight instant the next writer rolls back, and the batch is read again;
a crash after it leaves nothing to redo. In continuous mode Spark may hand a
micro-batch over again (a restarted query, a replayed batch id): rows at offsets
below the committed position are dropped before anything is written, so a replay
writes nothing twice.
"""

from __future__ import annotations

import logging
import posixpath
import shutil
import threading
import time
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING

from sources import build_source
from sources.base import Batch, StreamingSource
from sources.position import KafkaOffsets, Position, position_to_json
from streamer.config.base import reveal
from streamer.config.pipeline import PipelineConfig
from streamer.errors import SourceError, StreamerError
from streamer.pipeline.checkpoint import (
    BATCH_ID_KEY,
    CHECKPOINT_KEY,
    PIPELINE_KEY,
    stored_checkpoint,
)
from streamer.pipeline.errors_table import ErrorTable, split_unkeyable
from streamer.pipeline.report import BatchReport
from streamer.pipeline.sink import TableSink
from transforms import apply_transforms

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

log = logging.getLogger(__name__)

#: How long a graceful stop waits for the running micro-batch to finish.
GRACEFUL_STOP_S = 120.0


class PipelineRunner:
    """One pipeline, run once or continuously. Not thread-safe: one runner per thread."""

    def __init__(
        self,
        config: PipelineConfig,
        spark: SparkSession | None = None,
        on_report: Callable[[BatchReport], None] | None = None,
    ) -> None:
        self.config = config
        self.source = build_source(config.source)
        self.sink = TableSink(config.target, config.engine)
        self.errors = ErrorTable(config.errors.path, config.name) if config.errors.path else None
        self._spark = spark
        self._on_report = on_report or (lambda r: log.info("%s", r.line()))
        self._position: Position | None = None
        self._next_batch_id = 0
        self._loaded = False
        self.reports: list[BatchReport] = []
        self._services = None

    # ------------------------------------------------------------------ plumbing
    @property
    def spark(self) -> SparkSession:
        if self._spark is None:
            from streamer.spark import get_spark

            self._spark = get_spark(
                master=self.config.spark.master,
                app_name=f"mor-streamer-{self.config.name}",
                conf=reveal(self.config.spark.conf),
            )
        return self._spark

    def _load_position(self) -> Position | None:
        """The committed position (read from the table once, then tracked in memory)."""
        if not self._loaded:
            stored = stored_checkpoint(self.sink.fs, self.sink.path)
            self._position = stored.position
            self._next_batch_id = 0 if stored.batch_id is None else stored.batch_id + 1
            self._loaded = True
        return self._position

    @property
    def position(self) -> Position | None:
        return self._load_position()

    # ------------------------------------------------------------------ run once
    def run_once(self) -> BatchReport:
        """Read everything after the stored position (up to the source's batch cap), commit once."""
        start = self._load_position()
        batch = self.source.read_batch(self.spark, start)
        return self._process(batch, self._next_batch_id)

    # ------------------------------------------------------------------ one batch
    def _process(self, batch: Batch, batch_id: int) -> BatchReport:
        cfg = self.config
        t0 = time.monotonic()
        end_json = position_to_json(batch.end)
        try:
            if not batch.has_new_data:
                return self._report(
                    BatchReport(cfg.name, batch_id, 0, 0, 0, 0, None, None,
                                time.monotonic() - t0, end_json, skipped="no new data")
                )
            n_good_in = batch.df.count()
            n_bad_in = batch.errors.count()
            transformed = apply_transforms(batch.df, cfg.transforms, self.spark)
            good, unkeyable = split_unkeyable(
                transformed, cfg.target, self.source.source_type, end_json
            )
            errors = batch.errors.unionByName(unkeyable)
            good_rows = self._collect_if_small(good)
            n_written = good_rows.num_rows if hasattr(good_rows, "num_rows") else good_rows.count()
            n_errors = n_bad_in + unkeyable.count()
            n_read = n_good_in + n_bad_in
            self._check_error_fraction(n_errors, n_read)

            meta = {
                CHECKPOINT_KEY: end_json,
                BATCH_ID_KEY: str(batch_id),
                PIPELINE_KEY: cfg.name,
            }
            error_instant = None
            if n_errors and self.errors is not None:
                # Errors first: if we die between the two commits the batch is redone and
                # the error rows are upserted again under the same ids.
                error_instant = self.errors.write(errors, {PIPELINE_KEY: cfg.name}).instant
            elif n_errors:
                log.warning("[%s] %d bad records and no error table configured", cfg.name, n_errors)
            writer = self.sink.writer(_arrow_schema(good_rows))
            op = cfg.target.operation
            result = getattr(writer, op)(good_rows, extra_metadata=meta)
            self._position = batch.end
            self._next_batch_id = batch_id + 1
            self._after_commit()
            return self._report(
                BatchReport(
                    cfg.name, batch_id, n_read, n_written, n_errors,
                    n_read - n_written - n_errors, result.instant, error_instant,
                    time.monotonic() - t0, end_json,
                )
            )
        finally:
            batch.release()

    def _collect_if_small(self, df: DataFrame):
        """Small batches travel to the driver as Arrow once; large ones stay distributed."""
        if self.config.engine.mode == "spark":
            return df
        if self.config.engine.mode == "local":
            return df.toArrow()
        n = df.limit(self.config.engine.local_max_records + 1).count()
        return df.toArrow() if n <= self.config.engine.local_max_records else df

    def _check_error_fraction(self, n_errors: int, n_read: int) -> None:
        limit = self.config.errors.max_error_fraction
        if limit is not None and n_read and n_errors / n_read > limit:
            raise SourceError(
                f"pipeline {self.config.name}: {n_errors} of {n_read} records are bad "
                f"(> errors.max_error_fraction {limit}); nothing was committed"
            )

    def _report(self, report: BatchReport) -> BatchReport:
        self.reports.append(report)
        self._on_report(report)
        return report

    def _after_commit(self) -> None:
        if self._services is not None:
            self._services.after_commit()

    def attach_services(self, services) -> None:
        """Table services to run after each commit (``after_commit()``), per the policies."""
        self._services = services

    # ------------------------------------------------------------------ continuous
    def run_continuous(
        self,
        stop: threading.Event | None = None,
        max_batches: int | None = None,
        timeout_s: float | None = None,
    ) -> None:
        """Run until ``stop`` is set, ``max_batches`` batches ran, or ``timeout_s`` passed."""
        stop = stop or threading.Event()
        if isinstance(self.source, StreamingSource):
            self._run_stream(stop, max_batches, timeout_s)
        else:
            self._run_polling(stop, max_batches, timeout_s)

    def _done(self, stop: threading.Event, max_batches: int | None, deadline: float | None, first: int) -> bool:
        return (
            stop.is_set()
            or (max_batches is not None and len(self.reports) - first >= max_batches)
            or (deadline is not None and time.monotonic() >= deadline)
        )

    def _run_polling(self, stop: threading.Event, max_batches: int | None, timeout_s: float | None) -> None:
        """Sources without a Spark stream: one ``run_once`` per trigger interval."""
        interval = self.config.trigger.interval.total_seconds()
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        first = len(self.reports)
        while not self._done(stop, max_batches, deadline, first):
            started = time.monotonic()
            self.run_once()
            stop.wait(max(0.0, interval - (time.monotonic() - started)))

    def _run_stream(self, stop: threading.Event, max_batches: int | None, timeout_s: float | None) -> None:
        """Spark Structured Streaming with ``foreachBatch`` into :meth:`_process`.

        The stream always starts from the table's committed position (a fresh Spark
        checkpoint per run), so the table, not Spark's checkpoint, is the truth.
        """
        from sources.kafka_options import fetch_watermarks, resolve_start

        source = self.source
        assert isinstance(source, StreamingSource)
        start = self._load_position()
        begin = start
        if self.config.source.type == "kafka":
            low, high = fetch_watermarks(self.config.source)
            begin = resolve_start(self.config.source, start, low, high)
        stream = source.stream(self.spark, begin)
        checkpoint = posixpath.join(self.config.checkpoint_dir or "", f"run-{uuid.uuid4().hex[:12]}")
        failure: list[BaseException] = []

        def on_batch(raw: DataFrame, spark_batch_id: int) -> None:
            try:
                self._foreach_batch(raw)
            except BaseException as e:  # surfaced by the query; kept for a clear error
                failure.append(e)
                raise

        query = (
            stream.writeStream.queryName(f"mor_streamer_{self.config.name.replace('-', '_')}_{uuid.uuid4().hex[:6]}")
            .foreachBatch(on_batch)
            .option("checkpointLocation", checkpoint)
            .trigger(processingTime=self.config.trigger.spark_processing_time())
            .start()
        )
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        first = len(self.reports)
        try:
            while query.isActive and not self._done(stop, max_batches, deadline, first):
                query.awaitTermination(0.25)
        finally:
            self._stop_query(query)
            if "://" not in checkpoint:
                shutil.rmtree(checkpoint, ignore_errors=True)
        if failure:
            err = failure[0]
            if isinstance(err, StreamerError):
                raise err
            raise StreamerError(f"pipeline {self.config.name}: micro-batch failed: {err}") from err
        exc = query.exception()
        if exc is not None:
            raise StreamerError(f"pipeline {self.config.name}: streaming query failed: {exc}")

    def _foreach_batch(self, raw: DataFrame) -> None:
        start = self._load_position()
        if isinstance(start, KafkaOffsets) and start.partitions:
            raw = raw.where(_at_or_after(start))
        assert isinstance(self.source, StreamingSource)
        batch = self.source.batch_from_raw(raw, start)
        self._process(batch, self._next_batch_id)

    @staticmethod
    def _stop_query(query) -> None:
        """Let a running micro-batch finish (bounded), then stop the query."""
        deadline = time.monotonic() + GRACEFUL_STOP_S
        while query.isActive and time.monotonic() < deadline:
            try:
                if not query.status.get("isTriggerActive", False):
                    break
            except Exception:  # the query may be going away under us
                break
            time.sleep(0.1)
        query.stop()
        query.awaitTermination(60)


def _at_or_after(position: KafkaOffsets):
    """Row filter keeping Kafka rows at or after the committed offset of their partition."""
    from pyspark.sql import functions as F

    cond = None
    for p, off in position.partitions.items():
        c = (F.col("partition") == F.lit(p)) & (F.col("offset") < F.lit(off))
        cond = c if cond is None else cond | c
    return ~cond


def _arrow_schema(data):
    import pyarrow as pa

    if isinstance(data, pa.Table):
        return data.schema
    from pyspark.sql.pandas.types import to_arrow_schema

    return to_arrow_schema(data.schema)
