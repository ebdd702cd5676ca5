"""Exactly once under ``kill -9``: ``streamer run`` processes die at seeded random moments.

A producer keeps producing upserts and deletes while the continuous pipeline runs as
real processes (``streamer run FILE --standby``, Structured Streaming). Each of the
``N_KILLS`` processes is SIGKILLed once it is the active one: from outside (the whole
process group, a random delay after its first commit) or from inside at a random I/O
step of a commit (``MOR_STREAMER_KILL_AT_STEP``: between requested, inflight, data
files, completed...). A restart pays a JVM start, so hot standbys start ahead and take
over the pipeline lease when the active process dies (what a supervisor with a
standby replica does). After a final drain the snapshot equals the model, and the
commit-time audit proves every record was committed by exactly one commit.
"""

from __future__ import annotations

import contextlib
import os
import random
import signal
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

import pytest

from streamer.config import load_pipelines
from streamer.pipeline.runner import PipelineRunner
from streamer.write.faults import ENV_KILL_AT
from tests.support.trip_model import (
    FAST_JVM,
    TripModel,
    assert_each_record_committed_once,
    assert_matches_model,
    kafka_pipeline_yaml,
    produce_records,
    run_until_caught_up,
)

pytestmark = [pytest.mark.integration, pytest.mark.kafka, pytest.mark.slow]

SEED = 20_240_607
N_KILLS = 10
TOTAL_LIMIT_S = 360.0
#: Processes alive at once: the active one and hot standbys starting up behind it.
IN_FLIGHT = 3
#: A bound on the records produced, not a target: the producer runs until the last kill
#: (every kill needs a commit, so records must keep arriving; a fixed 15,000 ran out
#: once batches got faster, and the loop then waited for commits that never came).
MAX_PRODUCED = 200_000
STREAMER = str(Path(sys.executable).with_name("streamer"))


@dataclass
class Run:
    """One streamer process, from spawn to SIGKILL."""

    index: int
    inside: bool
    delay_s: float
    proc: subprocess.Popen
    started: float = field(default_factory=time.monotonic)
    lines: list[str] = field(default_factory=list)
    first_commit: float | None = None
    killed_after_s: float | None = None

    def __post_init__(self) -> None:
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line.rstrip())
            if "| deltacommit" in line and self.first_commit is None:
                self.first_commit = time.monotonic()

    @property
    def commits(self) -> int:
        return sum("| deltacommit" in line for line in self.lines)

    def due(self) -> bool:
        """An outside kill is due: a random delay after its first commit as the active process."""
        return not self.inside and self.first_commit is not None and time.monotonic() >= self.first_commit + self.delay_s

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)  # python and its Spark JVM
        self.proc.wait(timeout=30)
        if self.killed_after_s is None:
            self.killed_after_s = round(time.monotonic() - self.started, 1)

    def tail(self) -> str:
        return "\n".join(self.lines[-25:])


def _spawn(index: int, rng: random.Random, yaml_path: Path, cwd: Path) -> Run:
    env = dict(os.environ)
    inside = index % 2 == 1
    if inside:
        env[ENV_KILL_AT] = str(rng.randint(1, 30))  # the N-th I/O step of its commits
    proc = subprocess.Popen(
        [STREAMER, "run", str(yaml_path), "--standby"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        text=True, env=env, cwd=cwd, start_new_session=True,
    )
    return Run(index, inside, rng.uniform(0.0, 3.0), proc)


def _yaml(kafka, topic: str, lake: Path) -> str:
    log4j = resources.files("streamer.resources").joinpath("log4j2.properties")
    java_opts = f"{FAST_JVM} -Dlog4j2.configurationFile=file:{log4j}"
    return "pipelines:\n" + kafka_pipeline_yaml(
        "killed", kafka.bootstrap_servers, topic, str(lake), source_extra=", max_records_per_batch: 1500",
    ).replace('spark.default.parallelism: "2"}', f'spark.default.parallelism: "2", spark.driver.extraJavaOptions: "{java_opts}"}}')


def test_sigkill_at_random_moments_loses_nothing_and_applies_nothing_twice(kafka, spark, tmp_path):
    rng = random.Random(SEED)
    topic = kafka.create_topic(f"kill-{uuid.uuid4().hex[:8]}", partitions=3)
    yaml_path = tmp_path / "killed.yaml"
    yaml_path.write_text(_yaml(kafka, topic, tmp_path / "lake"))
    model = TripModel(seed=SEED, key_space=8_000)

    stop_producing = threading.Event()
    produce_failure: list[BaseException] = []

    def produce() -> None:
        try:
            while not stop_producing.is_set() and model.produced < MAX_PRODUCED:
                produce_records(kafka, topic, model.records(150))
                stop_producing.wait(0.5)
        except BaseException as e:
            produce_failure.append(e)

    producer = threading.Thread(target=produce, daemon=True)
    producer.start()
    runs: list[Run] = []
    alive: list[Run] = []
    deadline = time.monotonic() + TOTAL_LIMIT_S
    try:
        while len(runs) < N_KILLS or alive:
            assert time.monotonic() < deadline, f"kill loop over {TOTAL_LIMIT_S}s: {[(r.index, r.commits) for r in runs]}"
            while len(alive) < IN_FLIGHT and len(runs) < N_KILLS:
                runs.append(_spawn(len(runs), rng, yaml_path, tmp_path))
                alive.append(runs[-1])
            for run in list(alive):
                if run.proc.poll() is not None or run.due():
                    run.kill()
                    alive.remove(run)
                    assert run.proc.returncode == -signal.SIGKILL, (
                        f"run {run.index} exited by itself ({run.proc.returncode}):\n{run.tail()}"
                    )
                    assert not any("Traceback" in x or x.startswith("error:") or " error: " in x for x in run.lines), run.tail()
            time.sleep(0.05)
    finally:
        for run in alive:
            run.kill()
        stop_producing.set()
        producer.join(timeout=60)
    assert not produce_failure, produce_failure
    summary = [(r.index, "inside" if r.inside else "outside", r.killed_after_s, r.commits) for r in runs]
    print("runs (index, kill, seconds alive, commits):", summary)
    assert len(runs) == N_KILLS and all(r.proc.returncode == -signal.SIGKILL for r in runs)
    assert sum(1 for r in runs if r.commits) >= N_KILLS // 2, f"too few runs made progress: {summary}"

    (config,) = load_pipelines(yaml_path)
    # The final drain runs in this process (its JVM is warm), in large batches.
    source = config.source.model_copy(update={"max_records_per_batch": 50_000})
    drain = PipelineRunner(config.model_copy(update={"source": source}), spark=spark)
    run_until_caught_up(drain, kafka, topic, lambda: True, timeout_s=120)

    assert_matches_model(config.target.path, model.expected())
    commits = assert_each_record_committed_once(config.target.path, kafka, topic)
    rollbacks = [n for n in os.listdir(Path(config.target.path) / ".hoodie") if n.endswith(".rollback")]
    print(f"{model.produced} records, {commits} data commits, {len(rollbacks)} rollbacks of killed commits")
    assert rollbacks, "no kill landed inside a commit"
