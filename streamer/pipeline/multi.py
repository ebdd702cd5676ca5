"""Many pipelines in one process (multi-table): one SparkSession, one thread each.

``once``: pipelines run one after another, each committing one batch. ``continuous``:
each runs in its own thread until the shared stop event is set; the first failure
stops the others and is re-raised, so a broken table never goes unnoticed.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence

from streamer.config.pipeline import PipelineConfig
from streamer.errors import StreamerError
from streamer.pipeline.report import BatchReport
from streamer.pipeline.runner import PipelineRunner


def run_pipelines(
    configs: Sequence[PipelineConfig],
    once: bool,
    stop: threading.Event | None = None,
    on_report: Callable[[BatchReport], None] | None = None,
    spark=None,
    timeout_s: float | None = None,
) -> list[PipelineRunner]:
    stop = stop or threading.Event()
    runners = [PipelineRunner(c, spark=spark, on_report=on_report) for c in configs]
    services = [_services_for(r) for r in runners]
    try:
        if once:
            for r in runners:
                r.run_once()
            return runners
        failures: list[BaseException] = []

        def run(r: PipelineRunner) -> None:
            try:
                r.run_continuous(stop, timeout_s=timeout_s)
            except BaseException as e:
                failures.append(e)
                stop.set()

        threads = [threading.Thread(target=run, args=(r,), name=f"pipeline-{r.config.name}", daemon=True) for r in runners]
        for t in threads:
            t.start()
        for t in threads:
            while t.is_alive():
                t.join(0.5)
        if failures:
            err = failures[0]
            raise err if isinstance(err, StreamerError) else StreamerError(str(err))
        return runners
    finally:
        for s in services:
            if s is not None:
                s.close()


def _services_for(runner: PipelineRunner):
    """Table services per the pipeline's policies (inline after commits, or async)."""
    from streamer.pipeline.services import PipelineServices

    svc = PipelineServices.for_runner(runner)
    if svc is not None:
        runner.attach_services(svc)
    return svc
