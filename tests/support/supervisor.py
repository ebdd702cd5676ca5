"""A continuous pipeline run in a thread of the test process, started again when it fails.

What a supervisor (systemd, Kubernetes, a scheduler) does for a streaming job whose
dependencies misbehave: a run that fails is counted and a new run starts from the
table's committed position, here with the suite's Spark session (no JVM start).
"""

from __future__ import annotations

import threading

from streamer.pipeline.runner import PipelineRunner
from tests.support.trip_model import committed_offsets

#: At most this many runs (every restart is a failed run, counted).
MAX_RUNS = 200


class Supervisor:
    def __init__(self, config, spark, *, pause_s: float = 1.0) -> None:
        self.config, self.spark, self.pause_s = config, spark, pause_s
        self.stop = threading.Event()
        self.failures: list[str] = []
        self.reports: list = []
        self.runner: PipelineRunner | None = None
        self.thread = threading.Thread(target=self._loop, name="supervised-pipeline", daemon=True)

    def __enter__(self) -> Supervisor:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join(180)
        assert not self.thread.is_alive(), "the pipeline did not stop within 180 s of being asked to"

    def _loop(self) -> None:
        for _ in range(MAX_RUNS):
            if self.stop.is_set():
                return
            try:
                self.runner = PipelineRunner(self.config, spark=self.spark, on_report=self.reports.append)
                self.runner.run_continuous(self.stop)
                return
            except Exception as e:  # a dependency failed it: a supervisor starts it again
                self.failures.append(f"{type(e).__name__}: {str(e)[:300]}")
                self.stop.wait(self.pause_s)

    def committed(self) -> int:
        """The offsets the current run's table position holds (all partitions)."""
        return committed_offsets(self.runner) if self.runner is not None else 0
