"""Prometheus metrics of a run, per pipeline and table, from its batch reports.

One :class:`PipelineMetrics` per run owns its own ``CollectorRegistry`` (not the
process-global default): two runs in one process (tests, the demo) never share or
double-register series, and a scrape shows only what this run measured. Every series
carries ``pipeline`` and ``table`` labels. See docs/operations.md for the list.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    push_to_gateway,
    start_http_server,
)

from streamer.errors import ConfigError
from streamer.pipeline.report import BatchReport
from streamer.table.layout import TableLayout

log = logging.getLogger(__name__)

_LABELS = ("pipeline", "table")
#: Batch phases last from milliseconds (an empty poll) to minutes (a compaction).
_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, float("inf"))


class PipelineMetrics:
    """The series of one run; :meth:`observe` feeds one batch report into them."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry

        def counter(name: str, doc: str, extra: tuple[str, ...] = ()) -> Counter:
            return Counter(name, doc, (*_LABELS, *extra), registry=r)

        def gauge(name: str, doc: str, extra: tuple[str, ...] = ()) -> Gauge:
            return Gauge(name, doc, (*_LABELS, *extra), registry=r)

        def histogram(name: str, doc: str, extra: tuple[str, ...] = ()) -> Histogram:
            return Histogram(name, doc, (*_LABELS, *extra), buckets=_BUCKETS, registry=r)

        self.batches = counter("streamer_batches", "Micro-batches run, by status (committed, skipped, no_commit)",
                               ("status",))
        self.records_read = counter("streamer_records_read", "Records read from the source")
        self.records_written = counter("streamer_records_written", "Records handed to the table writer")
        self.records_errored = counter("streamer_records_errored", "Records sent to the error table")
        self.records_filtered = counter("streamer_records_filtered", "Records dropped by transforms")
        self.bytes_written = counter("streamer_bytes_written", "Bytes of data files the commits wrote")
        self.files_written = counter("streamer_files_written", "Data files (base or log) the commits wrote")
        self.batch_duration = histogram("streamer_batch_duration_seconds",
                                        "Seconds per batch phase (read, prepare, write_errors, commit, services, "
                                        "total)", ("phase",))
        self.commit_latency = histogram("streamer_commit_latency_seconds", "Seconds of the data commit")
        self.freshness = gauge("streamer_freshness_seconds",
                               "Seconds from the newest input the source can date to its commit (last batch)")
        self.commit_time = gauge("streamer_last_commit_timestamp_seconds", "When the last data commit completed")
        self.lag = gauge("streamer_source_lag_records", "Records available after the committed position",
                         ("partition",))
        self.service_runs = counter("streamer_table_service_runs", "Table services run after commits (inline, or by the pipeline's background service thread)",
                                    ("action", "outcome"))
        self.service_duration = histogram("streamer_table_service_duration_seconds",
                                          "Seconds of a table service step (inline or background)", ("action",))
        self.pending_compactions = gauge("streamer_table_pending_compactions", "Compactions scheduled, not done")
        self.pending_log_compactions = gauge("streamer_table_pending_log_compactions",
                                             "Log compactions scheduled, not done")
        self.file_groups = gauge("streamer_table_file_groups", "Live file groups (latest slices)")
        self.log_files = gauge("streamer_table_log_files", "Log files in the latest slices")
        self.log_blocks = gauge("streamer_table_log_blocks", "Log blocks in the latest slices")
        self.log_files_per_slice = gauge("streamer_table_log_files_per_slice",
                                         "Log files per latest slice (stat: max, mean)", ("stat",))
        self.log_blocks_per_slice = gauge("streamer_table_log_blocks_per_slice",
                                          "Log blocks per latest slice (stat: max, mean)", ("stat",))
        self.failures = counter("streamer_pipeline_failures", "Pipelines of the run that failed")
        self._tables: dict[str, str] = {}

    def register(self, pipeline: str, table: str) -> None:
        """Name ``pipeline``'s table and show its zero-valued series before its first batch."""
        self._tables[pipeline] = table
        labels = (pipeline, table)
        for c in (self.records_read, self.records_written, self.records_errored, self.records_filtered,
                  self.bytes_written, self.files_written, self.failures):
            c.labels(*labels)

    def observe(self, report: BatchReport) -> None:
        """Count one batch (thread-safe: each pipeline thread reports its own batches)."""
        labels = (report.pipeline, self._tables.get(report.pipeline, report.pipeline))
        self.batches.labels(*labels, report.status).inc()
        self.records_read.labels(*labels).inc(report.read)
        self.records_written.labels(*labels).inc(report.written)
        self.records_errored.labels(*labels).inc(report.errored)
        self.records_filtered.labels(*labels).inc(report.filtered)
        self.bytes_written.labels(*labels).inc(report.bytes_written)
        self.files_written.labels(*labels).inc(report.files_written)
        if not report.skipped:
            for phase, seconds in report.phases.items():
                self.batch_duration.labels(*labels, phase).observe(seconds)
        self.batch_duration.labels(*labels, "total").observe(report.latency_s)
        if report.instant:
            self.commit_latency.labels(*labels).observe(report.phases.commit)
            self.commit_time.labels(*labels).set(report.started_at + report.latency_s)
        if report.freshness_s is not None:
            self.freshness.labels(*labels).set(report.freshness_s)
        for lag in report.lag:
            self.lag.labels(*labels, lag.partition).set(lag.records)
        for run in report.services:
            self.service_runs.labels(*labels, run.action, run.outcome).inc()
            if run.seconds is not None:
                self.service_duration.labels(*labels, run.action).observe(run.seconds)
        if report.layout is not None:
            self._set_layout(labels, report.layout)

    def _set_layout(self, labels: tuple[str, str], layout: TableLayout) -> None:
        self.pending_compactions.labels(*labels).set(layout.pending_compactions)
        self.pending_log_compactions.labels(*labels).set(layout.pending_log_compactions)
        self.file_groups.labels(*labels).set(layout.file_groups)
        self.log_files.labels(*labels).set(layout.log_files)
        self.log_blocks.labels(*labels).set(layout.log_blocks)
        self.log_files_per_slice.labels(*labels, "max").set(layout.max_log_files_per_slice)
        self.log_files_per_slice.labels(*labels, "mean").set(layout.mean_log_files_per_slice)
        self.log_blocks_per_slice.labels(*labels, "max").set(layout.max_log_blocks_per_slice)
        self.log_blocks_per_slice.labels(*labels, "mean").set(layout.mean_log_blocks_per_slice)

    def failed(self, pipeline: str) -> None:
        self.failures.labels(pipeline, self._tables.get(pipeline, pipeline)).inc()


@dataclass(frozen=True)
class Endpoint:
    """The running ``/metrics`` HTTP server (``port`` is the bound one, also for port 0)."""

    host: str
    port: int
    _server: object

    def close(self) -> None:
        self._server.shutdown()  # type: ignore[attr-defined]
        self._server.server_close()  # type: ignore[attr-defined]


def serve(metrics: PipelineMetrics, port: int, host: str = "0.0.0.0") -> Endpoint:
    """Serve ``metrics`` over HTTP in a daemon thread until :meth:`Endpoint.close`.

    A port that cannot be bound is a :class:`~streamer.errors.ConfigError` naming it,
    raised before any pipeline starts (a run asked for metrics it could not serve).
    """
    try:
        server, _thread = start_http_server(port, addr=host, registry=metrics.registry)
    except OSError as e:
        raise ConfigError(f"metrics: cannot serve on {host}:{port}: {e.strerror or e}") from e
    bound = server.server_port
    log.info("metrics: serving http://%s:%d/metrics", host, bound)
    return Endpoint(host, bound, server)


class Pusher:
    """Pushes the registry to a push gateway: on demand (:meth:`push`) and, with an
    interval, from a background thread until :meth:`close` (which pushes once more)."""

    def __init__(self, metrics: PipelineMetrics, url: str, job: str, interval_s: float | None = None) -> None:
        self.metrics = metrics
        self.url = url
        self.job = job
        self.interval_s = interval_s
        self.pushes = 0
        self.failures = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        if interval_s is not None:
            self._thread = threading.Thread(target=self._loop, name="metrics-push", daemon=True)
            self._thread.start()

    @property
    def per_batch(self) -> bool:
        return self.interval_s is None

    def push(self) -> bool:
        """One push (replacing this job's series on the gateway); False (logged) if it failed."""
        with self._lock:
            try:
                push_to_gateway(self.url, job=self.job, registry=self.metrics.registry, timeout=10)
            except Exception as e:  # an unreachable gateway is an observation problem, not the pipeline's
                self.failures += 1
                log.warning("metrics: push to %s failed: %s", self.url, e)
                return False
            self.pushes += 1
            return True

    def _loop(self) -> None:
        assert self.interval_s is not None
        while not self._stop.wait(self.interval_s):
            self.push()

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(15)
        self.push()
