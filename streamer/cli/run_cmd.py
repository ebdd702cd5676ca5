"""``streamer run FILE``: run the pipelines of a YAML file or folder.

A pipeline that fails does not stop the others (see ``pipeline.multi``): its failure
is printed at once as one line naming it, and the exit code is 1 when any failed.

``--available-now`` (or ``trigger.mode: available_now``): each pipeline reads what its
source holds when the run starts, in capped batches, runs its services inline and
exits - the mode for scheduled jobs (cron, Airflow). ``--once``: one batch each.

Ctrl-C (or SIGTERM, as sent by container runtimes) once: finish the running
micro-batch, commit it, stop, exit 0 - at any point once the command started (during
the Spark start-up: stop before any batch). Ctrl-C twice: abandon it (Spark's jobs are
cancelled, exit 130); the next run rolls its inflight commit back, so nothing
half-written is ever read. The handler is the run's alone from its first line to its
last: Spark's own SIGINT handler (cancel all jobs, raise KeyboardInterrupt, installed
by a SparkContext made on the main thread) never replaces it (``streamer.spark``).

Progress goes to the log (standard error): one line per batch, idle polls summarised,
inline table services, an end-of-run summary. ``metrics``/``progress`` in the YAML (or
``--metrics-port``/``--progress-json``) add a Prometheus endpoint and JSON progress
events (see ``streamer.observe`` and docs/operations.md).
"""

from __future__ import annotations

import argparse
import logging
import signal
import threading
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from streamer.config.pipeline import PipelineConfig
    from streamer.observe.run import RunObservers, RunSettings
    from streamer.pipeline.database import DatabaseTables

log = logging.getLogger("streamer.run")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("run", help="run pipelines from a YAML file or folder")
    p.add_argument("file", help="pipeline YAML file or folder of them")
    p.add_argument("--pipeline", action="append",
                   help="run only this pipeline (repeatable); PARENT-TABLE: one table of a topic_pattern pipeline")
    when = p.add_mutually_exclusive_group()
    when.add_argument("--once", action="store_true", help="one batch per pipeline, whatever the trigger says")
    when.add_argument("--available-now", action="store_true",
                      help="each pipeline reads everything available at start (in capped batches), runs its "
                      "services inline and stops, whatever the trigger says (trigger.mode available_now)")
    p.add_argument("--timeout", type=float, default=None, help="stop continuous pipelines after N seconds")
    p.add_argument(
        "--standby",
        action="store_true",
        help="if a pipeline is already running elsewhere, wait (session up, read path warmed) and take over "
        "when it stops, instead of failing",
    )
    p.add_argument("--metrics-port", type=int, default=None, metavar="N",
                   help="serve Prometheus metrics on port N while running (0 = any free port, logged); "
                   "overrides metrics.port of the YAML")
    p.add_argument("--progress-json", action="store_true",
                   help="write one JSON progress event per batch to standard output (JSON Lines); "
                   "overrides progress.path of the YAML")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    stop = threading.Event()
    # first thing: a signal while the YAML loads or the broker is asked is a stop too
    with _graceful_stop(stop):
        return _run(args, stop)


def _run(args: argparse.Namespace, stop: threading.Event) -> int:
    from streamer.config import load_pipelines
    from streamer.observe.run import RunObservers
    from streamer.pipeline.database import DatabaseTables, select
    from streamer.pipeline.multi import PipelinesFailedError, failure_line, run_mode, run_pipelines
    from streamer.spark import StartInterrupted

    configs = load_pipelines(args.file)
    only = None
    if args.pipeline:
        configs, only = select(configs, args.pipeline, source=args.file)
    available_now = getattr(args, "available_now", False)
    waits = frozenset(c.name for c in configs if c.is_pattern and run_mode(c, args.once, available_now) == "continuous")
    tables = DatabaseTables(configs, only=only, waits=waits)
    _preflight([c for c in configs if not c.is_pattern])
    for c in configs:
        log.info("pipeline %s", c.summary(), extra={"pipeline": c.name})

    observers = RunObservers(configs, _settings(configs, args))
    discover = _Observed(tables, observers) if tables else None
    configs = [c for c in configs if not c.is_pattern]

    def on_failure(name: str, e: BaseException) -> None:
        observers.on_failure(name, e)
        log.error("error: %s", failure_line(name, e), extra={"pipeline": name})

    try:
        run_pipelines(
            configs,
            once=args.once,
            available_now=available_now,
            stop=stop,
            on_report=observers.on_report,
            timeout_s=args.timeout,
            standby=args.standby,
            on_failure=on_failure,
            collect_layout=observers.collect_layout,
            discover=discover,
        )
    except StartInterrupted as e:  # one Ctrl-C while Spark started: a stop before any batch
        log.warning("stopped: %s", e)
        return 0
    except PipelinesFailedError as e:
        log.error("%d of %d pipeline(s) failed (%s); %d ran", len(e.failures), e.total,
                  ", ".join(e.failures), e.total - len(e.failures))
        return 1
    finally:
        observers.close()
    return 0


class _Observed:
    """A database's tables as :func:`run_pipelines` discovers them, each one registered with
    the run's observers (metrics, progress) as it is found."""

    def __init__(self, tables: DatabaseTables, observers: RunObservers) -> None:
        self.tables, self.observers = tables, observers

    @property
    def every_s(self) -> float:
        return self.tables.every_s

    @property
    def goes_on(self) -> bool:
        return self.tables.goes_on

    def discover(self) -> tuple[list[PipelineConfig], dict[str, BaseException]]:
        found, refused = self.tables.discover()
        self.observers.add(found)
        return found, refused


def _settings(configs: list[PipelineConfig], args: argparse.Namespace) -> RunSettings:
    """The YAML's run-wide settings with the command line's overrides."""
    from streamer.config.pipeline import MetricsConfig, ProgressConfig
    from streamer.observe.run import RunSettings, run_settings

    settings = run_settings(configs)
    metrics, progress = settings.metrics, settings.progress
    if getattr(args, "metrics_port", None) is not None:
        port = args.metrics_port
        metrics = (metrics or MetricsConfig()).model_copy(update={"port": port})
    if getattr(args, "progress_json", False):
        progress = ProgressConfig(path="-")
    return RunSettings(metrics, progress)


class _graceful_stop:  # noqa: N801 - used as a context manager like a function
    """SIGINT/SIGTERM set ``stop``; a second SIGINT cancels Spark's jobs and raises
    KeyboardInterrupt (abandon: exit 130).

    Installed whatever the signals' dispositions were when the process started: a
    process started by a non-interactive shell as a background job (``streamer run x &``)
    begins with SIGINT *ignored*, one started by ``subprocess.Popen`` with Python's
    default handler (KeyboardInterrupt), so any window without this handler behaved
    differently in the two: a lost signal in one, exit 130 in the other.
    """

    def __init__(self, stop: threading.Event) -> None:
        self.stop = stop
        self.previous: dict[int, object] = {}

    def _on_signal(self, signum: int, frame: object) -> None:
        if self.stop.is_set() and signum == signal.SIGINT:
            _cancel_spark_jobs()
            raise KeyboardInterrupt
        if not self.stop.is_set():
            log.warning("stopping after the current batch (Ctrl-C again to abandon it)...")
        self.stop.set()

    def __enter__(self) -> _graceful_stop:
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                self.previous[sig] = signal.getsignal(sig)
                signal.signal(sig, self._on_signal)
        return self

    def __exit__(self, *exc: object) -> None:
        for sig, handler in self.previous.items():
            signal.signal(sig, handler)  # type: ignore[arg-type]


def _cancel_spark_jobs() -> None:
    """The abandon path's part of Spark's own Ctrl-C handler: cancel every running job
    (when a SparkContext is up), so that the exit does not wait for them."""
    import sys

    if "pyspark" not in sys.modules:
        return
    try:
        from pyspark import SparkContext

        sc = SparkContext._active_spark_context
        if sc is not None:
            sc.cancelAllJobs()
    except Exception as e:  # abandoning anyway: the next run rolls back what was left
        log.debug("cancelling Spark's jobs failed: %s", e)


def _preflight(configs: list[PipelineConfig]) -> None:
    """Before any JVM starts: a missing source folder or an unreachable broker is one
    clear error now, not "no new data" forever or a failure after Spark's start-up."""
    from streamer.config.preflight import require_source_folders
    from streamer.sources import build_source
    from streamer.sources.base import Preflight

    require_source_folders(configs)
    for c in configs:
        source = build_source(c.source)
        if isinstance(source, Preflight):
            try:
                source.preflight()
            finally:
                close = getattr(source, "close", None)
                if callable(close):
                    close()
