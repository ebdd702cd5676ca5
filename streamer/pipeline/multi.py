"""Many pipelines in one process (multi-table): one SparkSession, one thread each.

``once`` (or a pipeline whose trigger is ``once``): one batch, pipelines one after
another; ``available_now`` likewise, each catching up to where its source stood when
it started. Continuous pipelines each run in their own thread until the shared stop
event is set. Each table gets its own services, per its own ``policies`` as resolved
for how it runs (``policies.for_run``: compaction async when continuous).

**A pipeline fails alone.** One YAML often holds unrelated tables; a poison record or
a broken target in one of them must not stall the others. So a failure (while taking
its lease, setting up services, or running a batch) is recorded for that pipeline,
announced at once as one line naming it (``on_failure``), and the others go on. After
all pipelines finished, :class:`PipelinesFailedError` names every failed one, so a
broken table never goes unnoticed and ``streamer run`` exits non-zero.

Every pipeline's lease is taken before it runs (see ``lease.py``): by default a
pipeline already running elsewhere is an error (of that pipeline); ``standby=True``
waits for it with the Spark session up and the read path warmed, then takes over.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Protocol

from streamer.config.pipeline import PipelineConfig
from streamer.errors import StreamerError, first_line
from streamer.pipeline.lease import PipelineLease
from streamer.pipeline.report import BatchReport
from streamer.pipeline.runner import PipelineRunner
from streamer.pipeline.services import PipelineServices

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


log = logging.getLogger(__name__)


class Discover(Protocol):
    """Pipelines that appear while a run goes on (``streamer.pipeline.database``)."""

    @property
    def every_s(self) -> float: ...

    @property
    def goes_on(self) -> bool:
        """Whether to look again while the run goes on (else only once, at its start)."""
        ...

    def discover(self) -> tuple[list[PipelineConfig], dict[str, BaseException]]:
        """New pipelines since the last call, and the ones refused (by name)."""
        ...


class PipelinesFailedError(StreamerError):
    """Some pipelines of a run failed (the others ran to the end); one line per failure.

    ``failures`` maps each failed pipeline's name to its exception; ``total`` counts the
    run's pipelines, the ones a whole-database pipeline discovered included.
    """

    def __init__(self, failures: dict[str, BaseException], total: int | None = None) -> None:
        self.failures = dict(failures)
        self.total = max(total or 0, len(self.failures))
        lines = [failure_line(name, e) for name, e in self.failures.items()]
        head = f"{len(lines)} pipeline(s) failed" if len(lines) > 1 else ""
        super().__init__("\n".join([head, *lines]) if head else lines[0])


def failure_line(pipeline: str, error: BaseException) -> str:
    """``pipeline NAME failed: reason``, on one line (a Spark/JVM message keeps its first line)."""
    reason = first_line(error)
    if not isinstance(error, StreamerError) and str(error).strip():
        reason = f"{type(error).__name__}: {reason}"
    return f"pipeline {pipeline} failed: {reason}"


class _Failures:
    """Failures of one run, by pipeline name (thread-safe; reported as they happen)."""

    def __init__(self, on_failure: Callable[[str, BaseException], None] | None) -> None:
        self.by_name: dict[str, BaseException] = {}
        self._lock = threading.Lock()
        self._on_failure = on_failure

    def add(self, name: str, error: BaseException) -> None:
        with self._lock:
            self.by_name.setdefault(name, error)
        # Announced once: by the caller's callback when there is one (the CLI's error line),
        # else here. The traceback of an unexpected error stays available at DEBUG.
        level = logging.ERROR if self._on_failure is None else logging.DEBUG
        log.log(level, "%s", failure_line(name, error), exc_info=not isinstance(error, StreamerError),
                extra={"pipeline": name})
        if self._on_failure is not None:
            self._on_failure(name, error)

    def add_all(self, failures: dict[str, BaseException]) -> None:
        for name, error in failures.items():
            self.add(name, error)

    def raise_if_any(self, runners: Sequence[PipelineRunner]) -> None:
        if self.by_name:
            names = {r.config.name for r in runners} | set(self.by_name)
            raise PipelinesFailedError(self.by_name, total=len(names))


def run_pipelines(
    configs: Sequence[PipelineConfig],
    once: bool,
    stop: threading.Event | None = None,
    on_report: Callable[[BatchReport], None] | None = None,
    spark: SparkSession | None = None,
    timeout_s: float | None = None,
    standby: bool = False,
    on_failure: Callable[[str, BaseException], None] | None = None,
    collect_layout: bool = False,
    available_now: bool = False,
    discover: Discover | None = None,
) -> list[PipelineRunner]:
    """Run every pipeline; ``once`` forces one batch each whatever the triggers say,
    ``available_now`` a catch-up-and-stop run each (see :func:`run_mode`).

    ``collect_layout`` puts the table's file layout into each committed batch's report
    (for the layout metrics). ``discover`` (continuous runs): called every its ``every_s``
    for pipelines that appeared since (a database's new tables, ``streamer.pipeline.database``),
    which then start beside the others. Returns the runners of the pipelines that could be
    set up, after all finished; raises :class:`PipelinesFailedError` afterwards if any failed.
    """
    stop = stop or threading.Event()
    failures = _Failures(on_failure)
    runners: list[PipelineRunner] = []

    def make(new_configs: Sequence[PipelineConfig]) -> list[PipelineRunner]:
        made = []
        for c in new_configs:
            try:
                runner = PipelineRunner(c, spark=spark, on_report=on_report, stop=stop)
                runner.collect_layout = collect_layout
                made.append(runner)
            except Exception as e:
                failures.add(c.name, e)
        return made

    if discover is not None:  # the database tables there are now; a continuous run looks again
        found, refused = discover.discover()
        failures.add_all(refused)
        configs = [*configs, *found]
    runners.extend(make(configs))
    leases: list[PipelineLease] = []
    services: list[PipelineServices | None] = []
    ready: list[PipelineRunner] = []
    try:
        _acquire_leases(runners, leases, services, ready, standby=standby, stop=stop, once=once,
                        available_now=available_now, failures=failures)
        if stop.is_set():
            ready = []
        continuous = [r for r in ready if run_mode(r.config, once, available_now) == "continuous"]
        _run_batches([r for r in ready if r not in continuous], stop, once, available_now, failures)

        def admit() -> list[PipelineRunner]:
            """The pipelines ``discover`` found since, made and leased, ready to run."""
            assert discover is not None
            found, refused = discover.discover()
            failures.add_all(refused)
            fresh = make(found)
            runners.extend(fresh)
            admitted: list[PipelineRunner] = []
            _acquire_leases(fresh, leases, services, admitted, standby=False, stop=stop, once=once,
                            available_now=available_now, failures=failures)
            return admitted

        if continuous or (discover is not None and discover.goes_on and not once and not available_now):
            _run_threads(continuous, stop, timeout_s, failures,
                         (admit, discover.every_s) if discover is not None and discover.goes_on else None, spark)
    finally:
        for s in services:
            if s is not None:
                s.close()
        for lease in leases:
            lease.release()
    failures.raise_if_any(runners)
    return runners


def _run_batches(runners: list[PipelineRunner], stop: threading.Event, once: bool, available_now: bool,
                 failures: _Failures) -> None:
    """The pipelines that run a batch (``once``) or catch up (``available_now``), in turn."""
    for r in runners:
        if stop.is_set():
            return
        try:
            # the session first, then the stop check: a Ctrl-C that came after the last
            # check but before the JVM's start-up began (imports, configuration: seconds
            # on a loaded machine) only set ``stop``, and must not run a batch either
            r.spark  # noqa: B018
            if stop.is_set():
                log.warning("[%s] stopped before its first batch", r.config.name)
                return
            if run_mode(r.config, once, available_now) == "available_now":
                r.run_available_now(stop)
            else:
                r.run_trigger_once()
        except Exception as e:
            failures.add(r.config.name, e)


def _acquire_leases(
    runners: list[PipelineRunner],
    leases: list[PipelineLease],
    services: list[PipelineServices | None],
    ready: list[PipelineRunner],
    *,
    standby: bool,
    stop: threading.Event,
    once: bool,
    available_now: bool,
    failures: _Failures,
) -> None:
    """Take each pipeline's lease in turn (a standby waits for it, warming up meanwhile);
    appends to ``leases``, ``services`` and ``ready`` as it goes, so the caller releases
    what was taken even if this is interrupted."""
    for r in runners:
        try:
            lease = r.lease()
            if standby:
                r.spark  # noqa: B018 - a standby waits with its session up
            warmed: list[bool] = []

            def warm(_holder: object, r: PipelineRunner = r, warmed: list[bool] = warmed) -> None:
                if not warmed:
                    warmed.append(True)
                    r.warm_up()

            if not lease.acquire(standby=standby, stop=stop, on_wait=warm):
                return  # stopped while waiting: run nothing
            leases.append(lease)
            services.append(_services_for(r, run_mode(r.config, once, available_now) == "continuous"))
            ready.append(r)
        except Exception as e:
            failures.add(r.config.name, e)


def _run_threads(
    runners: list[PipelineRunner], stop: threading.Event, timeout_s: float | None, failures: _Failures,
    admit: tuple[Callable[[], list[PipelineRunner]], float] | None = None,
    spark: SparkSession | None = None,
) -> None:
    # One session for all, started here on the main thread before the threads race for it:
    # a Ctrl-C during the JVM's start-up then reaches the run's handler (a worker thread
    # never sees the signal) and no batch starts after it.
    if runners:
        spark = runners[0].spark
    for r in runners[1:]:
        r._spark = spark
    if stop.is_set():
        return

    def run(r: PipelineRunner) -> None:
        try:
            r.run_continuous(stop, timeout_s=timeout_s)
        except Exception as e:  # this pipeline stops; the others go on
            failures.add(r.config.name, e)

    def start(r: PipelineRunner) -> threading.Thread:
        thread = threading.Thread(target=run, args=(r,), name=f"pipeline-{r.config.name}", daemon=True)
        thread.start()
        return thread

    threads = [start(r) for r in runners]
    if admit is None:
        for t in threads:
            while t.is_alive():
                t.join(0.5)
        return
    find, every_s = admit
    started = time.monotonic()
    next_look = time.monotonic() + every_s
    # with discovery the run lasts until it is stopped (or times out), new tables or not
    while not stop.is_set() and (timeout_s is None or time.monotonic() - started < timeout_s):
        if time.monotonic() >= next_look:
            for r in find():
                if spark is None:
                    spark = r.spark  # the first pipeline of the run: its session, on this thread
                else:
                    r._spark = spark
                threads.append(start(r))
            next_look = time.monotonic() + every_s
        stop.wait(min(0.5, max(0.0, next_look - time.monotonic())))
    for t in threads:
        while t.is_alive():
            t.join(0.5)


def run_mode(config: PipelineConfig, once: bool, available_now: bool) -> str:
    """How a pipeline runs: the command line's ``--once``/``--available-now``, else its trigger."""
    if once:
        return "once"
    if available_now:
        return "available_now"
    return config.trigger.mode


def _services_for(runner: PipelineRunner, continuous: bool = False) -> PipelineServices | None:
    """Table services per the pipeline's policies (inline after commits, or async)."""
    svc = PipelineServices.for_runner(runner, continuous)
    if svc is not None:
        runner.attach_services(svc)
        svc.at_start()  # what an earlier run left pending, before this run's first batch
    return svc
