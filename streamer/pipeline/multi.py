"""Many pipelines in one process (multi-table): one SparkSession, one thread each.

``once`` (or a pipeline whose trigger is ``once``): one batch, pipelines one after
another. Continuous pipelines each run in their own thread until the shared stop
event is set; the first failure stops the others and is re-raised, so a broken table
never goes unnoticed. Each table gets its own services, per its own ``policies``.

Every pipeline's lease is taken before it runs (see ``lease.py``): by default a
pipeline already running elsewhere is an error; ``standby=True`` waits for it with
the Spark session up and the read path warmed, then takes over.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from streamer.config.pipeline import PipelineConfig
from streamer.errors import StreamerError
from streamer.pipeline.lease import PipelineLease
from streamer.pipeline.report import BatchReport
from streamer.pipeline.runner import PipelineRunner
from streamer.pipeline.services import PipelineServices

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def run_pipelines(
    configs: Sequence[PipelineConfig],
    once: bool,
    stop: threading.Event | None = None,
    on_report: Callable[[BatchReport], None] | None = None,
    spark: SparkSession | None = None,
    timeout_s: float | None = None,
    standby: bool = False,
) -> list[PipelineRunner]:
    """Run every pipeline; ``once`` forces one batch each whatever the triggers say."""
    stop = stop or threading.Event()
    runners = [PipelineRunner(c, spark=spark, on_report=on_report) for c in configs]
    leases: list[PipelineLease] = []
    services: list[PipelineServices | None] = []
    try:
        for r in runners:
            lease = r.lease()
            if standby:
                r.spark  # noqa: B018 - a standby waits with its session up
            warmed: list[bool] = []

            def warm(_holder: object, r: PipelineRunner = r, warmed: list[bool] = warmed) -> None:
                if not warmed:
                    warmed.append(True)
                    r.warm_up()

            if not lease.acquire(standby=standby, stop=stop, on_wait=warm):
                return runners  # stopped while waiting
            leases.append(lease)
        services = [_services_for(r) for r in runners]
        continuous = [r for r in runners if not once and r.config.trigger.mode == "continuous"]
        for r in runners:
            if r not in continuous and not stop.is_set():
                r.run_once()
        if continuous:
            _run_threads(continuous, stop, timeout_s)
        return runners
    finally:
        for s in services:
            if s is not None:
                s.close()
        for lease in leases:
            lease.release()


def _run_threads(runners: list[PipelineRunner], stop: threading.Event, timeout_s: float | None) -> None:
    if len(runners) > 1:
        spark = runners[0].spark  # one session for all, created before the threads race for it
        for r in runners[1:]:
            r._spark = spark
    failures: list[BaseException] = []

    def run(r: PipelineRunner) -> None:
        try:
            r.run_continuous(stop, timeout_s=timeout_s)
        except BaseException as e:
            failures.append(e)
            stop.set()

    threads = [
        threading.Thread(target=run, args=(r,), name=f"pipeline-{r.config.name}", daemon=True) for r in runners
    ]
    for t in threads:
        t.start()
    for t in threads:
        while t.is_alive():
            t.join(0.5)
    if failures:
        err = failures[0]
        if isinstance(err, StreamerError):
            raise err
        raise StreamerError(f"{type(err).__name__}: {err}") from err


def _services_for(runner: PipelineRunner) -> PipelineServices | None:
    """Table services per the pipeline's policies (inline after commits, or async)."""
    svc = PipelineServices.for_runner(runner)
    if svc is not None:
        runner.attach_services(svc)
    return svc
