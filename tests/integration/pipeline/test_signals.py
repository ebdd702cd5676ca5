"""One Ctrl-C finishes the batch and exits 0, however ``streamer run`` was started.

Each run here is a real ``streamer run FILE`` process started with ``subprocess.Popen``
(no shell, no job control: as a supervisor starts it, with Python's default SIGINT
handler inherited, not SIGINT ignored as a shell's background job has it). It gets one
SIGINT at a known point, reached deterministically through the pause hook
(``MOR_STREAMER_PAUSE_AT_LABEL``, ``streamer.faults``) rather than by sleeping:

* ``start-up``: while the Spark session starts (``spark start``): no batch, exit 0;
* ``mid-batch``: after the batch was read, before it is prepared (``batch read``);
* ``mid-commit``: at the data commit's first I/O step (``requested``);
* ``idle``: after an empty poll (the log's "no new data");
* ``service``: inside an async compaction (``compaction marker``).

Each must exit 0 after finishing its batch, the table equal to the model of what was
sent. Two SIGINTs (the second once the first was acknowledged, the process paused
mid-commit) abandon the batch: exit 130, and the next run repairs the table.

The default run: files at start-up, mid-commit and in a service, and the double Ctrl-C;
Kafka mid-commit. The ``campaign``: Kafka mid-batch at smoke size; at full size every
point and the double Ctrl-C with Kafka, and files mid-batch and idle.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from streamer.cli import main
from streamer.faults import ENV_KILL_AT, ENV_PAUSE_AT, ENV_PAUSE_FILE
from streamer.read import Table
from tests.support.campaign import sized

pytestmark = [pytest.mark.integration, pytest.mark.slow]

POINTS = ("start-up", "mid-batch", "mid-commit", "idle", "service")
PAUSE_AT = {"start-up": "spark start", "mid-batch": "batch read", "mid-commit": "requested",
            "service": "compaction marker"}
#: Bounds of one process: start-up (a JVM on a shared machine) and each wait after it.
START_S = 240.0
WAIT_S = 180.0
FAST_JVM = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"


class Process:
    """One ``streamer run`` process, its output collected, optionally paused at a label."""

    def __init__(self, yaml: Path, workdir: Path, pause_at: str | None, extra: tuple[str, ...] = ()) -> None:
        self.pause_file = workdir / f"pause-{uuid.uuid4().hex[:6]}"
        env = dict(os.environ)
        env.pop(ENV_KILL_AT, None)
        if pause_at is not None:
            env[ENV_PAUSE_AT] = pause_at
            env[ENV_PAUSE_FILE] = str(self.pause_file)
        self.lines: list[str] = []
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "streamer", "run", str(yaml), *extra], stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, text=True, env=env, cwd=workdir, start_new_session=True,
        )
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line.rstrip())

    def output(self) -> str:
        return "\n".join(self.lines[-60:])

    def wait_for(self, what: str, ready: Callable[[], bool], timeout_s: float = WAIT_S) -> None:
        deadline = time.monotonic() + timeout_s
        for _ in range(int(timeout_s / 0.1) + 1):  # bounded in count and time
            if ready():
                return
            assert self.proc.poll() is None, f"exited ({self.proc.returncode}) before {what}:\n{self.output()}"
            if time.monotonic() > deadline:
                break
            time.sleep(0.1)
        raise AssertionError(f"no {what} within {timeout_s:.0f}s:\n{self.output()}")

    def said(self, text: str) -> bool:
        return any(text in line for line in list(self.lines))

    def paused(self) -> bool:
        return self.pause_file.exists()

    def release(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            self.pause_file.unlink()

    def interrupt(self) -> None:
        self.proc.send_signal(signal.SIGINT)

    def finish(self, timeout_s: float = WAIT_S) -> int:
        try:
            return self.proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError(f"still running {timeout_s:.0f}s after the signal:\n{self.output()}") from None

    def kill(self) -> None:
        self.release()
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=30)


@dataclass
class Feed:
    """A source of one pipeline: the YAML line and how records reach it."""

    source_yaml: str
    send: Callable[[list[dict]], None]


def _files(tmp_path: Path) -> Feed:
    src = tmp_path / "in"
    src.mkdir()
    n = [0]

    def send(records: list[dict]) -> None:
        n[0] += 1
        tmp = src / f".{n[0]:03d}.json"  # hidden while written: never half-read
        tmp.write_text("".join(json.dumps(r) + "\n" for r in records))
        tmp.rename(src / f"{n[0]:03d}.json")

    return Feed(f'{{type: files, path: "{src}", format: json, schema: "id STRING, v BIGINT"}}', send)


def _kafka(kafka) -> Feed:
    topic = kafka.create_topic(f"signals-{uuid.uuid4().hex[:8]}", partitions=2)

    def send(records: list[dict]) -> None:
        kafka.produce(topic, [json.dumps(r) for r in records], keys=[r["id"] for r in records])

    return Feed(f'{{type: kafka, bootstrap_servers: "{kafka.bootstrap_servers}", topic: {topic}, format: json, '
                'schema: "id STRING, v BIGINT"}', send)


def _yaml(tmp_path: Path, feed: Feed, service: bool) -> Path:
    compaction = '{mode: async, trigger: {delta_commits: 1}}' if service else '{mode: "off"}'
    path = tmp_path / "p.yaml"
    path.write_text(f"""
pipelines:
  - name: sig
    source: {feed.source_yaml}
    target: {{path: "{tmp_path / 'lake' / 'sig'}", record_key: [id]}}
    trigger: {{mode: continuous, interval: 1s}}
    engine: local
    policies: {{log_compaction: {{mode: "off"}}, compaction: {compaction}, clean: {{mode: "off"}}, archive: {{mode: "off"}}}}
    spark:
      master: "local[1]"
      conf: {{spark.sql.shuffle.partitions: "1", spark.default.parallelism: "1", spark.driver.extraJavaOptions: "{FAST_JVM}"}}
""")
    return path


def _table(tmp_path: Path) -> dict[str, int]:
    path = tmp_path / "lake" / "sig"
    if not (path / ".hoodie" / "hoodie.properties").exists():
        return {}
    return {r["id"]: r["v"] for r in Table.open(str(path)).read().select(["id", "v"]).to_pylist()}


FIRST = [{"id": f"k{i}", "v": i} for i in range(10)]
UPDATES = [{"id": f"k{i}", "v": 100 + i} for i in range(5)]


def _one_ctrl_c(point: str, feed: Feed, tmp_path: Path) -> None:
    """Start, signal once at ``point``, and check exit 0 and the table against the model."""
    yaml = _yaml(tmp_path, feed, service=point == "service")
    model: dict[str, int] = {}
    feed.send(FIRST)
    run = Process(yaml, tmp_path, PAUSE_AT.get(point))
    try:
        if point == "start-up":
            run.wait_for("the pause in the Spark start-up", run.paused, START_S)
        elif point == "idle":
            run.wait_for("an idle poll", lambda: run.said("no new data"), START_S)
            model.update({r["id"]: r["v"] for r in FIRST})
        elif point == "service":
            run.wait_for("the first batch", lambda: run.said("] batch 0:"), START_S)
            feed.send(UPDATES)  # log files for the compaction to compact
            run.wait_for("the pause in the async compaction", run.paused)
            model.update({r["id"]: r["v"] for r in [*FIRST, *UPDATES]})
        else:
            run.wait_for(f"the pause at {PAUSE_AT[point]}", run.paused, START_S)
            model.update({r["id"]: r["v"] for r in FIRST})
        run.interrupt()
        run.wait_for("the stop being acknowledged", lambda: run.said("stopping after the current batch")
                     or run.said("stopped:"))
        run.release()
        code = run.finish()
    finally:
        run.kill()
    assert code == 0, f"{point}: exit {code}\n{run.output()}"
    assert "interrupted" not in run.lines and "Traceback" not in run.output(), run.output()
    if point == "service":  # the batch before the signal, and the one it interrupted, committed
        assert run.said("] batch 1:") or run.said("] batch 2:"), run.output()
    assert _table(tmp_path) == model, run.output()


def _two_ctrl_cs(feed: Feed, tmp_path: Path) -> None:
    """Paused mid-commit, two SIGINTs: exit 130; the next run rolls back and commits."""
    yaml = _yaml(tmp_path, feed, service=False)
    feed.send(FIRST)
    run = Process(yaml, tmp_path, "requested")
    try:
        run.wait_for("the pause at requested", run.paused, START_S)
        run.interrupt()
        run.wait_for("the stop being acknowledged", lambda: run.said("stopping after the current batch"))
        run.interrupt()
        code = run.finish()
    finally:
        run.kill()
    assert code == 130, f"exit {code}\n{run.output()}"
    assert run.said("interrupted"), run.output()
    assert _table(tmp_path) == {}  # abandoned mid-commit: nothing of it is read
    # the next run (this process, its Spark session) repairs: rolls back, reads again, commits
    assert main(["run", str(yaml), "--available-now"]) == 0
    assert _table(tmp_path) == {r["id"]: r["v"] for r in FIRST}


@pytest.mark.parametrize("point", ("start-up", "mid-commit"))
def test_one_ctrl_c_finishes_the_batch_and_exits_0_files(point, tmp_path):
    _one_ctrl_c(point, _files(tmp_path), tmp_path)


def test_two_ctrl_cs_abandon_the_batch_and_the_next_run_repairs_files(tmp_path, spark):
    _two_ctrl_cs(_files(tmp_path), tmp_path)


@pytest.mark.kafka
def test_one_ctrl_c_finishes_the_batch_and_exits_0_kafka(kafka, tmp_path):
    _one_ctrl_c("mid-commit", _kafka(kafka), tmp_path)


@pytest.mark.kafka
@pytest.mark.campaign
def test_ctrl_c_campaign_kafka(kafka, spark, tmp_path):
    """Every point with Kafka and two Ctrl-Cs, and the files points the default run leaves
    out (smoke: one Kafka point the default run does not cover, during a table service)."""
    points = sized(smoke=(), full=("mid-batch", "idle", "service"))
    for point in points:
        where = tmp_path / f"files-{point}"
        where.mkdir()
        _one_ctrl_c(point, _files(where), where)
    points = sized(smoke=("service",), full=POINTS)
    for point in points:
        where = tmp_path / point
        where.mkdir()
        _one_ctrl_c(point, _kafka(kafka), where)
    if sized(smoke=False, full=True):
        where = tmp_path / "two-ctrl-cs"
        where.mkdir()
        _two_ctrl_cs(_kafka(kafka), where)
