"""Everything that watches one ``streamer run``: log lines, metrics, push gateway, progress.

:class:`RunObservers` is built from the run's pipelines and CLI overrides, handed to
``run_pipelines`` as its ``on_report``/``on_failure`` callbacks, and closed at the end
(a last push, the end-of-run summary). Each observer is independent; one failing (a
full disk under the progress file) is logged and the others, and the run, go on.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

from streamer.config.pipeline import MetricsConfig, PipelineConfig, ProgressConfig
from streamer.errors import ConfigError
from streamer.observe.logs import BatchLog
from streamer.observe.metrics import Endpoint, PipelineMetrics, Pusher, serve
from streamer.observe.progress import ProgressWriter
from streamer.pipeline.report import BatchReport

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RunSettings:
    """The run-wide ``metrics`` and ``progress`` settings of a set of pipelines."""

    metrics: MetricsConfig | None = None
    progress: ProgressConfig | None = None


def run_settings(configs: Sequence[PipelineConfig]) -> RunSettings:
    """The settings all ``configs`` share (one endpoint per process); raises if they differ."""
    out: dict[str, object] = {}
    for key in ("metrics", "progress"):
        values = {getattr(c, key) for c in configs if getattr(c, key) is not None}
        if len(values) > 1:
            names = ", ".join(c.name for c in configs if getattr(c, key) is not None)
            raise ConfigError(f"pipelines {names} set different '{key}'; one run has one {key} setting "
                              "(set it once at the top level of the file)")
        out[key] = next(iter(values), None)
    return RunSettings(**out)  # type: ignore[arg-type]


class RunObservers:
    """The observers of one run (see module doc)."""

    def __init__(self, configs: Sequence[PipelineConfig], settings: RunSettings,
                 summary_every_s: float = 60.0) -> None:
        self.tables = {c.name: c.target.table_name or c.name for c in configs}
        self.batch_log = BatchLog(summary_every_s)
        self.metrics: PipelineMetrics | None = None
        self.endpoint: Endpoint | None = None
        self.pusher: Pusher | None = None
        self.progress: ProgressWriter | None = None
        m = settings.metrics
        self._layout = m is not None and m.table_layout
        try:
            if m is not None and (m.port is not None or m.push_gateway is not None):
                self.metrics = PipelineMetrics()
                for name, table in self.tables.items():
                    self.metrics.register(name, table)
                if m.port is not None:
                    self.endpoint = serve(self.metrics, m.port, m.host)
                if m.push_gateway is not None:
                    gw = m.push_gateway
                    interval = None if gw.interval is None else gw.interval.total_seconds()
                    self.pusher = Pusher(self.metrics, gw.url, gw.job, interval)
            if settings.progress is not None:
                self.progress = ProgressWriter(settings.progress.path)
        except BaseException:
            self.close(summary=False)
            raise

    def add(self, configs: Sequence[PipelineConfig]) -> None:
        """Pipelines that joined the run after it started (a database's new tables)."""
        for c in configs:
            self.tables[c.name] = c.target.table_name or c.name
            if self.metrics is not None:
                self.metrics.register(c.name, self.tables[c.name])

    @property
    def collect_layout(self) -> bool:
        """Whether runners should read the table layout after commits (metrics.table_layout)."""
        return self.metrics is not None and self._layout

    def on_report(self, report: BatchReport) -> None:
        self.batch_log(report)
        for what, step in (("metrics", self._metrics), ("progress", self._progress)):
            try:
                step(report)
            except Exception as e:  # observing must never stop ingestion
                log.warning("[%s] %s not recorded for batch %d: %s", report.pipeline, what, report.batch_id, e)

    def _metrics(self, report: BatchReport) -> None:
        if self.metrics is not None:
            self.metrics.observe(report)
            if self.pusher is not None and self.pusher.per_batch:
                self.pusher.push()

    def _progress(self, report: BatchReport) -> None:
        if self.progress is not None:
            self.progress.write(report, self.tables.get(report.pipeline, report.pipeline))

    def on_failure(self, pipeline: str, error: BaseException) -> None:
        self.batch_log.failed(pipeline)
        if self.metrics is not None:
            self.metrics.failed(pipeline)

    def close(self, summary: bool = True) -> str | None:
        """Last push, endpoint and progress file closed; the end-of-run summary logged and returned."""
        if self.pusher is not None:
            self.pusher.close()
            self.pusher = None
        if self.endpoint is not None:
            self.endpoint.close()
            self.endpoint = None
        if self.progress is not None:
            self.progress.close()
            self.progress = None
        return self.batch_log.summary() if summary else None
