"""The table services a pipeline runs alongside its writes, per its ``policies``.

``inline`` services run in the writer right after each commit; ``async`` ones in a
background thread started with the run when the table exists, else with the first
commit, so a compaction never stalls ingestion: the default for compaction and log
compaction in a continuous pipeline (``streamer.config.policies.for_run``). What the thread did is
reported with the next batch (``ServiceRun.mode == "async"``). When compaction falls
behind (``compaction.max_pending``), the pipeline waits before its next commit instead
of piling up logs nobody compacts. A plan an earlier run left pending is resumed when
the run starts (:meth:`PipelineServices.at_start`).
"""

from __future__ import annotations

import logging
from typing import Protocol

from streamer.config.pipeline import PipelineConfig
from streamer.config.policies import PoliciesConfig, for_run
from streamer.errors import one_line
from streamer.fs import FileSystem
from streamer.pipeline.report import ServiceRun
from streamer.read.table import Table
from streamer.services.runner import (
    AsyncServices,
    ServicesReport,
    run_inline_services,
    wait_for_capacity,
)
from streamer.table.properties import properties_path
from streamer.table.snapshot import TableSnapshot

log = logging.getLogger(__name__)

_SERVICES = ("log_compaction", "compaction", "clean", "archive")


class _Pipeline(Protocol):
    """What :meth:`PipelineServices.for_runner` reads of a runner (its config and sink)."""

    @property
    def config(self) -> PipelineConfig: ...
    @property
    def sink(self) -> _Sink: ...


class _Sink(Protocol):
    """Where the runner writes (:class:`streamer.pipeline.sink.TableSink`)."""

    @property
    def fs(self) -> FileSystem: ...
    @property
    def path(self) -> str: ...


class PipelineServices:
    def __init__(self, fs: FileSystem, table_path: str, policies: PoliciesConfig, name: str) -> None:
        self.fs = fs
        self.table_path = table_path
        self.policies = policies
        self.name = name
        modes = {getattr(policies, s).mode for s in _SERVICES}
        self.has_inline = "inline" in modes or policies.compaction.mode == "async"
        self.has_async = "async" in modes
        self._async: AsyncServices | None = None
        self._async_seen = 0
        #: The table handle of the last round in which an inline service acted (its
        #: layout changed after the writer's snapshot); None after a quiet round.
        self.changed_table: Table | None = None

    @classmethod
    def for_runner(cls, runner: _Pipeline, continuous: bool = False) -> PipelineServices | None:
        """The services of ``runner``'s table, per its policies as resolved for the run
        (``continuous``: unset compaction modes are async)."""
        policies = for_run(runner.config.policies, continuous)
        svc = cls(runner.sink.fs, runner.sink.path, policies, runner.config.name)
        return svc if (svc.has_inline or svc.has_async) else None

    def at_start(self) -> tuple[ServiceRun, ...]:
        """Resume, before the first batch, what an earlier run left pending.

        A compaction or log compaction planned by a run that was killed or stopped would
        otherwise wait for this run's first commit, and a run with nothing new to read
        makes none; meanwhile readers merge its logs (hudi-rs 0.5 reads a file group with
        a pending compaction plan as of its base file only). So, as HoodieStreamer queues
        the pending compactions when it starts, the background thread starts now when the
        table exists, and inline services run one round when a plan is pending. A failure
        here is logged, not raised: the round after the next commit tries again.
        """
        try:
            if not self.fs.exists(properties_path(self.table_path)):
                return ()
            table = Table.open(self.table_path, fs=self.fs)
            runs: tuple[ServiceRun, ...] = ()
            pending = table.timeline.pending_compactions() or table.timeline.pending_log_compactions()
            if self.has_inline and pending:
                runs = self._inline_round(table)
            if self.has_async and self._async is None:
                self._async = AsyncServices(self.table_path, self.policies, fs=self.fs).start()
            return runs
        except Exception as e:
            log.warning("[%s] table services at start failed, retried after the next commit: %s",
                        self.name, one_line(e), extra={"pipeline": self.name})
            return ()

    def _inline_round(self, table: Table) -> tuple[ServiceRun, ...]:
        """One round of the inline services on ``table``, each run logged at INFO."""
        runs = service_runs(run_inline_services(table, self.policies, fs=self.fs))
        for run in runs:
            log.info("[%s] table service: %s", self.name, run.line(),
                     extra={"pipeline": self.name, "service": run.action})
        return runs

    def after_commit(self, snapshot: TableSnapshot | None = None) -> tuple[ServiceRun, ...]:
        """Run what the policies ask for after a commit; ``snapshot`` is the writer's
        post-commit snapshot (services then read no table state unless they act).

        Returns what ran inline (each also logged at INFO, so a run's output shows its
        services); async services report in their own thread.
        """
        table = Table.from_snapshot(snapshot) if snapshot is not None else Table.open(self.table_path, fs=self.fs)
        runs: tuple[ServiceRun, ...] = ()
        self.changed_table = None
        if self.has_inline:
            runs = self._inline_round(table)
            if runs:
                self.changed_table = table
        if self.has_async and self._async is None:
            self._async = AsyncServices(self.table_path, self.policies, fs=self.fs).start()
        runs += self._async_runs()
        if self.policies.compaction.mode != "off":
            waited = wait_for_capacity(table, self.policies.compaction, fs=self.fs)
            if waited > 1:
                log.warning("[%s] ingestion throttled %.1fs: compaction behind (max_pending)", self.name, waited)
        return runs

    def _async_runs(self) -> tuple[ServiceRun, ...]:
        """What the background thread did since the last call (logged here, once)."""
        if self._async is None:
            return ()
        reports = self._async.reports[self._async_seen:]  # appended by the thread only
        self._async_seen += len(reports)
        runs = tuple(
            ServiceRun(r.action, r.instant, r.outcome, r.seconds, r.detail, mode="async")
            for rep in reports for r in service_runs(rep)
        )
        for run in runs:
            log.info("[%s] table service: %s", self.name, run.line(),
                     extra={"pipeline": self.name, "service": run.action})
        return runs

    def close(self) -> None:
        if self._async is not None:
            self._async.stop()
            self._async_runs()  # logged: the run's last rounds
            for e in self._async.errors:
                log.warning("[%s] async table service error: %s", self.name, e)
            self._async = None


def service_runs(report: ServicesReport) -> tuple[ServiceRun, ...]:
    """One :class:`ServiceRun` per thing a services round did. A service's step (e.g.
    schedule then execute a compaction) is timed once: its first run carries the
    seconds, later runs of the same action in the round carry None."""
    steps = {t.action: t.seconds for t in report.timings}

    def seconds(action: str) -> float | None:
        return steps.pop(action, None)

    runs = [ServiceRun(action, instant, "scheduled", seconds(action)) for action, instant in report.scheduled]
    runs += [
        ServiceRun(o.action, o.instant, o.status, seconds(o.action),
                   f"{o.files_written} files, {o.bytes_written} bytes" if o.files_written else "")
        for o in report.executed
    ]
    if report.clean is not None:
        runs.append(ServiceRun("clean", report.clean.instant, "cleaned", seconds("clean"),
                               f"{report.clean.files_deleted} files deleted"))
    if report.archive is not None:
        runs.append(ServiceRun("archive", None, "archived", seconds("archive"),
                               f"{len(report.archive.archived)} instants"))
    return tuple(runs)
