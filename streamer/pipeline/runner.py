"""Run a pipeline: read a batch after the stored position, transform, commit with it.

Exactly once comes from one rule: **the source position is committed in the same
Hudi commit as the data it covers** (``extraMetadata``), and every batch starts from
the position of the newest completed commit. A crash before the commit completes
leaves an inflight instant the next writer rolls back, and the batch is read again;
a crash after it leaves nothing to redo. In continuous mode Spark may hand a
micro-batch over again (a restarted query, a replayed batch id): rows at offsets
below the committed position are dropped before anything is written, so a replay
writes nothing twice (:meth:`PipelineRunner.foreach_batch`).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from streamer import faults
from streamer.catalog.hook import catalog_hook
from streamer.config.base import reveal
from streamer.config.pipeline import PipelineConfig
from streamer.data import arrow_schema
from streamer.errors import CommitConflictError, ConfigError, SourceError, one_line
from streamer.pipeline.batch import PreparedBatch, prepare
from streamer.pipeline.checkpoint import (
    BATCH_ID_KEY,
    CHECKPOINT_KEYS,
    PIPELINE_KEY,
    StoredCheckpoint,
    checkpoint_metadata,
    stored_checkpoint,
)
from streamer.pipeline.errors_table import ErrorTable
from streamer.pipeline.held_back import held_end
from streamer.pipeline.lease import PipelineLease
from streamer.pipeline.null_columns import typed_like_table
from streamer.pipeline.report import BatchReport, PhaseTimes, ServiceRun
from streamer.pipeline.sink import TableSink
from streamer.pipeline.stream import run_polling, run_stream
from streamer.sources import build_source
from streamer.sources.base import (
    Batch,
    NotifiedOfCommits,
    PartitionLag,
    ReadsAvailableNow,
    RecordIdentity,
    ReportsLag,
    Source,
    StreamingSource,
    WarmsUp,
    record_identity,
)
from streamer.sources.position import Position, position_to_json
from streamer.table.layout import TableLayout, table_layout
from streamer.write.requirements import ExpectCheckpoint
from streamer.write.result import CommitResult

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession

    from streamer.pipeline.services import PipelineServices
    from streamer.table.snapshot import TableSnapshot

log = logging.getLogger(__name__)

#: Upper bound on the batches of one ``available_now`` run (a guard: each batch moves the
#: position forward towards an end fixed at the start, so the loop ends long before).
MAX_BATCHES = 1_000_000


class PipelineRunner:
    """One pipeline, run once or continuously. One runner per table and process."""

    def __init__(
        self,
        config: PipelineConfig,
        spark: SparkSession | None = None,
        on_report: Callable[[BatchReport], None] | None = None,
        stop: threading.Event | None = None,
    ) -> None:
        self.config = config
        #: The run's stop request: it also cuts short a wait to try a commit again.
        self._stop = stop or threading.Event()
        #: How rows name their input record (stable error ids); its source may read
        #: identity columns the YAML did not ask for (hidden from the table).
        self.identity: RecordIdentity = record_identity(build_source(config.source))
        self.source: Source = self.identity.source
        # every location of the pipeline resolves with its storage settings (one place)
        self.s3 = config.s3_settings()
        self.sink = TableSink(config.target, config.engine, s3=self.s3)
        self.errors = ErrorTable(config.errors.path, config.name, s3=self.s3) if config.errors.path else None
        #: Keeps ``target.catalog`` current after each commit (None without one).
        self.catalog = catalog_hook(config.target, config.name)
        self._spark = spark
        self._on_report = on_report or (lambda r: log.info("%s", r.line()))
        self._position: Position | None = None
        #: Where the last batch's input ended: past ``_position`` when it held records back.
        self._read_to: Position | None = None
        #: How far a ``trigger.mode: once`` run's second batch reads (PreparedBatch.read_again).
        self._read_again: Position | None = None
        self._committed_instant: str | None = None
        self._next_batch_id = 0
        self._loaded = False
        self._services: PipelineServices | None = None
        self.reports: list[BatchReport] = []
        #: The table right after this runner's last commit (handed to inline services).
        self._snapshot: TableSnapshot | None = None
        #: Collect the table layout after each commit into the report (metrics turn it on).
        self.collect_layout = False

    # ------------------------------------------------------------------ plumbing
    @property
    def spark(self) -> SparkSession:
        if self._spark is None:
            from streamer.spark import get_spark

            self._spark = get_spark(
                master=self.config.spark.master,
                app_name=f"mor-streamer-{self.config.name}",
                conf=reveal(self.config.spark.conf),
                register_reader=self.config.may_read_tables(),
            )
        return self._spark

    @property
    def position(self) -> Position | None:
        """Where the next batch starts: the committed position (read from the table once,
        then tracked in memory, as this runner is the table's only writer)."""
        if not self._loaded:
            stored = self._stored_checkpoint()
            self._position = stored.position
            self._committed_instant = stored.instant
            self._next_batch_id = 0 if stored.batch_id is None else stored.batch_id + 1
            self._loaded = True
        return self._position

    def _stored_checkpoint(self) -> StoredCheckpoint:
        """The table's newest checkpoint; for a source reading a topic it must be for that
        topic (a table HoodieStreamer or another pipeline filled from another is refused).

        Without one in the table, the error table's: a batch of only bad records that
        arrived before the table existed committed its position with its error rows
        (:meth:`_write_errors`). Its ``instant`` stays None, as it names no commit of the
        table (the data commit's conflict check is against the table's checkpoints).
        """
        topic = getattr(self.config.source, "topic", None)
        found = stored_checkpoint(self.sink.fs, self.sink.path, topic=topic, pipeline=self.config.name)
        if found.position is not None or self.errors is None:
            return found
        errs = self.errors.sink
        if not errs.exists():
            return found
        alone = stored_checkpoint(errs.fs, errs.path, topic=topic, pipeline=self.config.name)
        if alone.position is None:
            return found
        return StoredCheckpoint(alone.position, None, alone.batch_id, key=alone.key, value=alone.value)

    def seed_position(self, start: Position) -> None:
        """Start a table without a stored position at ``start`` (the stream's resolved start),
        so the first batch's end names every partition, not only those it saw."""
        if self.position is None:
            self._position = start

    def lease(self) -> PipelineLease:
        """The lease that keeps a second process from running this pipeline (see ``lease.py``)."""
        folder = self.config.checkpoint_dir or f"{self.sink.path.rstrip('/')}_checkpoints"
        return PipelineLease(folder, self.config.name, s3=self.s3)

    def warm_up(self) -> None:
        """Read and decode a few records without writing, so a standby's first batch is fast.

        A hot standby waits with its JVM up; the first batch after a takeover would still
        pay class loading, code generation and Python worker start-up of the read path
        (seconds, while the pipeline stands still), so pay it here. Nothing is committed
        and the runner's position is not touched: it is read when the runner starts.
        """
        try:
            start = self._stored_checkpoint().position  # not cached: the holder moves it on meanwhile
            if isinstance(self.source, WarmsUp):
                batch = self.source.warm_up_batch(self.spark, start)
            else:
                batch = self.source.read_batch(self.spark, start)
            # a stream warms up even on an empty batch (its decoding is planned all the same)
            self._warm_up_on(batch, even_empty=isinstance(self.source, StreamingSource))
        except Exception as e:  # a warm-up is an optimisation; the real run reports real errors
            log.info("[%s] warm-up skipped: %s", self.config.name, e)

    def _warm_up_on(self, batch: Batch, even_empty: bool = False) -> None:
        try:
            if even_empty or batch.has_new_data:
                prepare(self.config, self.spark, batch, self.source.source_type, "{}", self.identity).release()
        finally:
            batch.release()

    def attach_services(self, services: PipelineServices) -> None:
        """Table services to run after each commit (``after_commit()``), per the policies."""
        self._services = services

    # ------------------------------------------------------------------ run
    def run_once(self) -> BatchReport:
        """Read everything after the stored position (up to the source's batch cap), commit once."""
        started_at, t0 = time.time(), time.monotonic()
        batch = self.source.read_batch(self.spark, self.position)
        return self._process(batch, started_at, time.monotonic() - t0)

    def run_trigger_once(self) -> list[BatchReport]:
        """``trigger.mode: once``: :meth:`run_once`, then the records that batch read but left
        to the next one, in one more batch.

        A Debezium batch leaves a trailing delete of a key it also changed to the next batch
        (:mod:`streamer.pipeline.held_back`): the key's earlier change must be in a commit
        before the delete, in case the delete is a key change whose create is still to come.
        Without this second batch such a delete would wait for the next run, and until then
        the table would hold a row the database has deleted. The second batch reads only up
        to where the first read, and those records are deletes and tombstones alone, so it
        holds nothing back itself. A partition held back for a key change's create whose
        delete the first batch's cap left unread is not read again: the next run reads on
        to the delete.
        """
        reports = [self.run_once()]
        read_to = self._read_again
        if read_to is None or read_to == self.position or not isinstance(self.source, ReadsAvailableNow):
            return reports
        started_at, t0 = time.time(), time.monotonic()
        batch = self.source.read_batch_until(self.spark, self.position, read_to)
        reports.append(self._process(batch, started_at, time.monotonic() - t0))
        return reports

    def run_available_now(self, stop: threading.Event | None = None) -> list[BatchReport]:
        """Everything available when called, in capped batches, then return (``available_now``).

        The end is fixed first (:class:`~streamer.sources.base.ReadsAvailableNow`), so records
        arriving meanwhile are left to the next run and the loop ends however fast
        producers write. Each batch moves the position forward; the loop ends at the first
        batch with nothing new (its report is kept only if it is the run's only one, so
        an empty run says "skipped"), when ``stop`` is set, or after ``MAX_BATCHES``.
        """
        stop = stop or threading.Event()
        if not isinstance(self.source, ReadsAvailableNow):
            raise ConfigError(f"pipeline {self.config.name}: the {self.source.source_type} source "
                              "cannot run with trigger.mode available_now")
        bound = self.source.available_now(self.position)
        reports: list[BatchReport] = []
        for _ in range(MAX_BATCHES):
            if stop.is_set():
                break
            started_at, t0 = time.time(), time.monotonic()
            batch = self.source.read_batch_until(self.spark, self.position, bound)
            if not batch.has_new_data and reports:
                batch.release()
                break
            report = self._process(batch, started_at, time.monotonic() - t0)
            reports.append(report)
            if report.skipped:
                break
        written = sum(r.written for r in reports)
        commits = sum((r.instant is not None) + (r.first_instant is not None) for r in reports)
        log.info("[%s] available now: %d batch(es), %d commit(s), %d record(s) written; stopped at %s",
                 self.config.name, len(reports), commits, written,
                 reports[-1].position if reports else None, extra={"pipeline": self.config.name})
        return reports

    def run_continuous(
        self,
        stop: threading.Event | None = None,
        max_batches: int | None = None,
        timeout_s: float | None = None,
    ) -> None:
        """Run until ``stop`` is set, ``max_batches`` batches ran, or ``timeout_s`` passed.

        A :class:`~streamer.sources.base.StreamingSource` runs as Spark Structured Streaming
        (``foreachBatch``) unless ``trigger.read`` is ``poll``; other sources poll with
        one :meth:`run_once` per interval.
        """
        stop = stop or threading.Event()
        if isinstance(self.source, StreamingSource) and self.config.trigger.read == "stream":
            run_stream(self, stop, max_batches, timeout_s)
        else:
            run_polling(self, stop, max_batches, timeout_s)

    def foreach_batch(self, raw: DataFrame, spark_batch_id: int | None = None) -> BatchReport:
        """The ``foreachBatch`` handler: commit the rows of ``raw`` not committed yet.

        Rows below the committed offset of their partition are dropped first, so a
        micro-batch handed over twice (or overlapping a committed one) writes nothing twice.
        """
        started_at, t0 = time.time(), time.monotonic()
        start = self.position
        assert isinstance(self.source, StreamingSource)
        raw = self.source.filter_committed(raw, start)
        if start is not None and self._read_to is not None and self._read_to != start:
            # the last micro-batch left records to this one: Spark's stream is past them
            raw = self.source.raw_between(self.spark, start, self._read_to).unionByName(raw)
        batch = self.source.batch_from_raw(raw, start)
        return self._process(batch, started_at, time.monotonic() - t0)

    # ------------------------------------------------------------------ one batch
    def _process(self, batch: Batch, started_at: float | None = None, read_s: float = 0.0) -> BatchReport:
        cfg = self.config
        batch_id = self._next_batch_id
        started_at = time.time() if started_at is None else started_at
        t0 = time.monotonic() - read_s
        end_json = position_to_json(batch.end)
        start_json = None if batch.start is None else position_to_json(batch.start)
        prepared: PreparedBatch | None = None
        try:
            if not batch.has_new_data:
                return self._report(
                    BatchReport(cfg.name, batch_id, 0, 0, 0, 0, None, None,
                                time.monotonic() - t0, end_json, skipped="no new data",
                                started_at=started_at, start_position=start_json,
                                phases=PhaseTimes(read=read_s), lag=self._lag(batch.end))
                )
            faults.pause_point("batch read")  # tests: a signal at a known point of a batch
            clock = _Clock()
            prepared = prepare(cfg, self.spark, batch, self.source.source_type, _retry_identity(batch),
                               self.identity)
            self._check_error_fraction(prepared)
            prepare_s = clock.lap()
            # a Debezium batch may leave its tail to the next batch (streamer.pipeline.held_back)
            end = batch.end if prepared.end is None else prepared.end
            if prepared.end is not None:
                log.info("[%s] the batch leaves the end of a primary-key change to the next batch "
                         "(streamer.pipeline.held_back): it commits %s and leaves the rest (read until %s)",
                         cfg.name, position_to_json(end), position_to_json(batch.end), extra={"pipeline": cfg.name})
            end_json = position_to_json(end)
            # a batch without a row for a table that does not exist yet: its position goes
            # with its error rows (a table cannot be created without a record schema)
            errors_alone = prepared.written == 0 and prepared.errored > 0 and not self.sink.exists()
            error_instant = self._write_errors(prepared, end if errors_alone else None, batch_id)
            errors_s = clock.lap()
            first, result = (None, None) if errors_alone else self._commit_batch(prepared, end, batch_id)
            instant = None if result is None else result.instant
            commit_s = clock.lap()
            committed_at = time.time()
            self._position = end
            self._read_to = batch.end
            self._read_again = batch.end if prepared.read_again is None else prepared.read_again
            self._next_batch_id = batch_id + 1
            holder = instant if instant is not None else (error_instant if errors_alone else None)
            if holder is not None and isinstance(self.source, NotifiedOfCommits):
                self.source.on_table_commit(end, holder)
            services: tuple[ServiceRun, ...] = ()
            if result is not None and self._services is not None:
                services = self._services.after_commit(result.snapshot)
            if result is not None and self.catalog is not None and result.snapshot is not None:
                self.catalog.after_commit(result.snapshot)  # reports its failures, never raises
            services_s = clock.lap()
            return self._report(
                BatchReport(
                    cfg.name, batch_id, prepared.read, prepared.written, prepared.errored,
                    prepared.filtered, instant, error_instant, time.monotonic() - t0, end_json,
                    started_at=started_at, start_position=start_json,
                    phases=PhaseTimes(read_s, prepare_s, errors_s, commit_s, services_s),
                    bytes_written=sum(r.bytes_written for r in (first, result) if r is not None),
                    files_written=sum(len(r.stats) for r in (first, result) if r is not None),
                    first_instant=first.instant if first is not None else None,
                    freshness_s=_freshness(end, prepared.good, committed_at, self.identity.event_time),
                    lag=self._lag(end), services=services,
                    layout=self._layout() if instant is not None else None,
                )
            )
        finally:
            if prepared is not None:
                prepared.release()
            batch.release()

    def _lag(self, position: Position) -> tuple[PartitionLag, ...]:
        """The source's lag after ``position`` (an observation: never fails the batch)."""
        if not isinstance(self.source, ReportsLag):
            return ()
        try:
            return tuple(self.source.lag(position))
        except Exception as e:
            log.debug("[%s] lag not available: %s", self.config.name, e)
            return ()

    def _layout(self) -> TableLayout | None:
        """The table layout after the commit and its inline services, when asked for.

        The writer's post-commit snapshot costs no extra listing when services planned on
        it; only after a service changed the table (a compaction, a clean) is it re-read.
        An observation: it never fails the batch.
        """
        if not self.collect_layout or self._snapshot is None:
            return None
        try:
            changed = self._services.changed_table if self._services is not None else None
            if changed is not None:
                changed.refresh()
                return table_layout(changed.snapshot)
            return table_layout(self._snapshot)
        except Exception as e:
            log.debug("[%s] table layout not available: %s", self.config.name, e)
            return None

    def _write_errors(self, prepared: PreparedBatch, position: Position | None = None,
                      batch_id: int | None = None) -> str | None:
        """Errors first: if we die between the two commits the batch is redone and the
        error rows are upserted again under the same ids.

        ``position``: the batch has no data commit to carry its position (only bad
        records, and no table yet), so the error commit carries it, and a restart resumes
        after it (:meth:`_stored_checkpoint`): those records are neither read again nor
        skipped. Without an error table such a batch commits nothing and is read again.
        """
        if not prepared.errored:
            return None
        if self.errors is None:
            log.warning("[%s] %d bad records and no error table configured", self.config.name, prepared.errored)
            return None
        meta = {PIPELINE_KEY: self.config.name}
        if position is not None:
            meta.update(checkpoint_metadata(position))
            meta[BATCH_ID_KEY] = str(batch_id)
        return self.errors.write(prepared.errors, meta).instant

    def _commit_batch(self, prepared: PreparedBatch, end: Position,
                      batch_id: int) -> tuple[CommitResult | None, CommitResult | None]:
        """The batch's data commit (second of the pair), and a first one when it commits
        deletes on their own after its other rows (:mod:`streamer.pipeline.held_back`): that
        carries the position of the first such delete in its partition, so a crash between
        the two reads them again."""
        deferred = prepared.deferred
        if deferred is None:
            return None, self._commit(prepared.good, prepared.written, end, batch_id)
        first = held_end(end, deferred.at)
        log.info("[%s] the batch deletes keys it also changed, maybe key changes whose creates are still to come: "
                 "%d delete(s) committed after its other rows, which commit %s", self.config.name, deferred.count,
                 position_to_json(first), extra={"pipeline": self.config.name})
        before = self._commit(prepared.good, prepared.written - deferred.count, first, batch_id)
        self._position = first  # what the table holds, should the second commit fail
        faults.pause_point("between a batch's two commits")
        return before, self._commit(deferred.rows, deferred.count, end, batch_id)

    def _commit(self, good: Any, written: int, end: Position, batch_id: int) -> CommitResult | None:
        """The data commit carrying the position; None when there is nothing to commit to.

        The position goes in twice for Kafka (ours, and HoodieStreamer's string under
        ``deltastreamer.checkpoint.key``, see :func:`checkpoint_metadata`), so either
        streamer can continue the table.

        A batch with no row for the table still commits (an empty delta commit) to move the
        stored position. Its rows are the table's columns, none: what such a batch decoded
        says nothing about the table (a batch whose only record was too large or malformed
        has no columns at all, and its key fields "missing" failed the commit, every
        retry). Before the table exists there is nothing to commit to (a table cannot be
        created without a record schema): the error commit carried the position.
        """
        if written == 0 and not self.sink.exists():
            return None
        meta = {**checkpoint_metadata(end), BATCH_ID_KEY: str(batch_id), PIPELINE_KEY: self.config.name}
        # a column the batch has no value in takes the table's type (pipeline/null_columns.py)
        good = typed_like_table(good, self._table_schema) if written else self._no_rows()
        writer = self.sink.writer(_arrow_schema(good))
        # Checked by the writer under its lock: no other run of this pipeline committed a
        # position since ours was read (its batch would overlap ours).
        expect = ExpectCheckpoint(self._committed_instant, CHECKPOINT_KEYS, owner=self.config.name,
                                  owner_key=PIPELINE_KEY)
        result = self._retrying(lambda: getattr(writer, self.config.target.operation)(
            good, extra_metadata=meta, expect_checkpoint=expect,
            engine=self.sink.engine_for(good),  # decided once, by the batch step
        ))
        self._committed_instant = result.instant
        self._snapshot = result.snapshot
        return result

    def _retrying(self, commit: Callable[[], CommitResult]) -> CommitResult:
        """``commit``, tried again after a conflict with another writer, up to
        ``target.conflict_retries`` times with a doubling wait: a long commit of another
        pipeline or of Apache Hudi on a shared table should delay a batch, not end the run.
        A try that conflicted committed nothing (a write it began is rolled back by the
        next try's transaction); another run of this pipeline is no conflict to wait out.
        A stop request ends the wait: a graceful stop should not sit out minutes of retries."""
        retries = self.config.target.conflict_retries
        for attempt in range(retries + 1):
            try:
                return commit()
            except CommitConflictError as e:
                if not e.retryable or attempt == retries:
                    raise
                wait = min(30.0, 2.0 ** attempt)
                log.warning("[%s] commit conflict (try %d of %d), trying again in %.0fs: %s", self.config.name,
                            attempt + 1, retries + 1, wait, one_line(e), extra={"pipeline": self.config.name})
                if self._stop.wait(wait):
                    raise CommitConflictError(f"{one_line(e)}; stopped while waiting to try again: nothing of "
                                              "the batch was committed, the next run reads it again") from e
        raise AssertionError("unreachable")  # the last try returns or raises

    def _no_rows(self) -> pa.Table:
        """No rows, in the table's data columns (an existing table's: see :meth:`_commit`)."""
        import pyarrow as pa

        from streamer.write.schema import data_schema

        schema = self._table_schema()
        return (data_schema(schema) if schema is not None else pa.schema([])).empty_table()

    def _table_schema(self) -> pa.Schema | None:
        """The table's latest data schema (None: no table yet), as this run last saw it."""
        from streamer.table.snapshot import TableSnapshot

        if self._snapshot is not None:
            return self._snapshot.latest_schema()
        if not self.sink.exists():
            return None
        return TableSnapshot.load(self.sink.fs, self.sink.path).latest_schema()

    def _check_error_fraction(self, prepared: PreparedBatch) -> None:
        limit = self.config.errors.max_error_fraction
        if limit is not None and prepared.read and prepared.errored / prepared.read > limit:
            raise SourceError(
                f"pipeline {self.config.name}: {prepared.errored} of {prepared.read} records are bad "
                f"(> errors.max_error_fraction {limit}); nothing was committed"
            )

    def _report(self, report: BatchReport) -> BatchReport:
        self.reports.append(report)
        self._on_report(report)
        return report


class _Clock:
    """Seconds between successive :meth:`lap` calls (the phases of one batch)."""

    def __init__(self) -> None:
        self._last = time.monotonic()

    def lap(self) -> float:
        now = time.monotonic()
        elapsed, self._last = now - self._last, now
        return elapsed


def _freshness(end: Position, good: object, committed_at: float, event_time: str | None) -> float | None:
    """Seconds from the newest input the source can date to the commit.

    A position with a watermark (files: the newest input file's modification time), else
    the newest value of the source's ``event_time`` column (a streamed record's timestamp, when
    the rows keep it and the batch is on the driver). Otherwise None: the source cannot
    date its input cheaply (a Spark job just for this would cost more than it tells).
    """
    watermark_ns = getattr(end, "watermark_ns", None)
    if watermark_ns:
        return max(0.0, committed_at - watermark_ns / 1e9)
    import pyarrow as pa

    if event_time and isinstance(good, pa.Table) and event_time in good.column_names and good.num_rows:
        import pyarrow.compute as pc

        newest = pc.max(good.column(event_time).cast(pa.timestamp("us", tz="UTC"))).value
        if newest is not None:
            return max(0.0, committed_at - newest / 1e6)
    return None


def _retry_identity(batch: Batch) -> str:
    """The position error rows fall back on when their record has none of its own.

    The batch's *start*, not its end: a batch killed between its error commit and its
    data commit is read again from the same stored start, but its end depends on what had
    arrived by then (more files, more offsets). Identified by the end, the replay's error
    rows got new ids and every such bad record was in the error table twice (or more, one
    row per restart); by the start, the replay upserts the same rows.
    """
    return "{}" if batch.start is None else position_to_json(batch.start)


_arrow_schema = arrow_schema
