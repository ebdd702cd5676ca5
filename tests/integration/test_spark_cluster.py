"""A continuous Kafka pipeline on a real Spark standalone cluster loses a worker mid-batch.

The cluster (a master and two workers with one core each) starts from pyspark's own
distribution (:class:`tests.support.spark_cluster.LocalSparkCluster`); the pipeline is a
real ``streamer run FILE`` process whose driver points at it (``spark.master``) with the
spark engine, so tagging and file-group writes run in the executors' JVMs and Python
workers, not in the driver. It runs once with each way a continuous Kafka pipeline reads
(``trigger.read``: ``poll`` and ``stream``; at smoke size, in ``make test``, ``poll`` only),
on the same cluster (the killed worker is started again in between). The executors' Python has the third-party packages but not
mor-streamer (a ``sitecustomize`` lets our packages import from a zip only, as on a node
where the project was never installed): they can only run our code from the zip the
session ships.

Once the pipeline has committed and an executor is running a file-group write (held at its
first log-file write by a pause armed on that worker only), its worker is SIGKILLed with
everything it started (a machine gone). The remaining worker finishes the
backlog and more records produced after the kill; the process then stops gracefully and
the table equals the model in our reader and in hudi-rs, and every row was committed by
the one commit whose offsets cover it (exactly once).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from streamer.faults import ENV_PAUSE_AT, ENV_PAUSE_FILE
from streamer.fs import resolve
from streamer.local.kafka import free_port
from streamer.pipeline.checkpoint import checkpoint_history
from tests.support.campaign import sized
from tests.support.spark_cluster import LocalSparkCluster, cluster_archive_options, is_running
from tests.support.trip_model import (
    SCHEMA_DDL,
    TripModel,
    assert_each_record_committed_once,
    assert_matches_model,
    produce_records,
    wait_until,
)

pytestmark = [pytest.mark.integration, pytest.mark.kafka]

STREAMER = str(Path(sys.executable).with_name("streamer"))
SEED = 20_261_123
BACKLOG = 12_000  # before the pipeline starts: three batches
AFTER_KILL = 2_000  # produced once a worker is gone
BATCH = 4_000
TOTAL_LIMIT_S = 300.0
#: How long to wait for a file-group write to run on the victim before killing it in any task.
WRITE_PATIENCE_S = 45.0
#: Kills of worker 0 tried before giving up on hitting a running task.
KILL_ATTEMPTS = 3
#: Worker 0's pause (see the ``cluster`` fixture): the step label it pauses at, and the file
#: (in the cluster's folder) that names the step while it waits.
PAUSE_AT = "markers "
PAUSE = "worker-0-paused"

#: The executors' ``sitecustomize``: this node has the third-party packages but not
#: mor-streamer - its packages import from a shipped zip on the path or not at all, however
#: the test environment installed them - and it notes the process, so the test knows the
#: executors' Python ran like that.
SITECUSTOMIZE = """\
import importlib.machinery, os, sys

class OnlyShipped:
    @staticmethod
    def find_spec(name, path=None, target=None):
        if name != "streamer":
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, [p for p in sys.path if p.endswith(".zip")])
        if spec is None:
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
        return spec

sys.meta_path.insert(0, OnlyShipped)
with open({log!r}, "a") as out:
    out.write(f"{{os.getpid()}} {{os.getcwd()}}\\n")
"""


def _get_json(url: str) -> Any:
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # loopback: never a proxy
    with opener.open(url, timeout=30) as resp:  # a busy driver can take seconds to answer
        return json.loads(resp.read())


def _pipeline_yaml(cluster: LocalSparkCluster, kafka, topic: str, lake: Path, site: Path, ui_port: int,
                   read: str) -> str:
    return textwrap.dedent(f"""\
        pipelines:
          - name: on_cluster
            source: {{type: kafka, bootstrap_servers: "{kafka.bootstrap_servers}", topic: {topic}, format: json,
                      schema: "{SCHEMA_DDL}", max_records_per_batch: {BATCH}}}
            target: {{path: {lake}/on_cluster, record_key: [uuid], partition_by: [city], ordering_field: ts}}
            policies: {{log_compaction: {{mode: off}}, compaction: {{mode: off}}, clean: {{mode: off}}, archive: {{mode: off}}}}
            trigger: {{mode: continuous, interval: 500ms, read: {read}}}
            engine: spark
            spark:
              master: "{cluster.master_url}"
              conf:
                spark.executor.memory: 512m
                spark.executor.cores: "1"
                spark.cores.max: "2"
                spark.sql.shuffle.partitions: "4"
                spark.default.parallelism: "4"
                spark.driver.host: 127.0.0.1
                spark.driver.bindAddress: 127.0.0.1
                spark.executorEnv.PYTHONPATH: "{site}"
                spark.ui.enabled: "true"
                spark.ui.port: "{ui_port}"
                spark.port.maxRetries: "0"
                spark.driver.extraJavaOptions: "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC {cluster_archive_options()}"
                spark.executor.extraJavaOptions: "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC {cluster_archive_options()}"
        """)


class Driver:
    """The ``streamer run`` process and its output."""

    def __init__(self, yaml_path: Path, cwd: Path, env: dict[str, str]) -> None:
        self.proc = subprocess.Popen(
            [STREAMER, "run", str(yaml_path)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            text=True, cwd=cwd, env=env, start_new_session=True,
        )
        self.lines: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line.rstrip())

    @property
    def commits(self) -> int:
        return sum("| deltacommit" in line for line in self.lines)

    def tail(self, n: int = 40) -> str:
        return "\n".join(self.lines[-n:])

    def check_alive(self) -> bool:
        assert self.proc.poll() is None, f"streamer run exited ({self.proc.returncode}):\n{self.tail()}"
        return True

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(30)


def _check_executor_python(site: Path, env: dict[str, str], cwd: Path) -> None:
    """The executors' interpreter, with ``site`` on its path, cannot import mor-streamer,
    but can from the zip the session ships (so the pipeline below can only run from it)."""
    from streamer.spark import package_zip

    probe = "import streamer.sources, streamer.transforms; print(streamer.__file__)"
    run_env = {**env, "PYTHONPATH": str(site)}
    hidden = subprocess.run([sys.executable, "-c", probe], env=run_env, cwd=cwd, capture_output=True,
                            text=True, timeout=60)
    assert hidden.returncode != 0 and "No module named 'streamer'" in hidden.stderr, hidden
    shipped = package_zip(cwd / "pyfiles")
    found = subprocess.run([sys.executable, "-c", f"import sys; sys.path.insert(1, {str(shipped)!r}); {probe}"],
                           env=run_env, cwd=cwd, capture_output=True, text=True, timeout=60)
    assert found.returncode == 0 and found.stdout.startswith(str(shipped)), found


def _writing(table: str) -> bool:
    """An instant's file-group writes have started (its markers folder has a marker)."""
    temp = Path(table) / ".hoodie" / ".temp"
    with contextlib.suppress(OSError):
        return any(p.is_file() for p in temp.rglob("*.marker.*"))
    return False


def _committed_offsets(table: str) -> int:
    fs, base = resolve(table)
    history = checkpoint_history(fs, base)
    return sum(history[-1].position.partitions.values()) if history else 0


def _executors_on(cluster: LocalSparkCluster, worker: int, app_id: str) -> list[str]:
    """The ids of the application's executors the worker runs."""
    return [str(e["id"]) for e in cluster.worker_state(worker)["executors"] if e["appid"] == app_id]


def _wait_for_victim_task(driver: Driver, ui: str, app_id: str, victim: str, table: str,
                          pause_file: Path) -> str:
    """Return as soon as executor ``victim`` runs a task: paused at its first log-file
    write (see the ``cluster`` fixture), else during any file-group write, else any task;
    says which it waited for."""
    def paused() -> bool:
        driver.check_alive()
        return pause_file.is_file()

    def victim_busy() -> bool:
        driver.check_alive()
        try:
            executors = {e["id"]: e for e in _get_json(f"{ui}/{app_id}/executors")}
        except OSError:  # no answer this time
            return False
        return executors.get(victim, {}).get("activeTasks", 0) > 0

    with contextlib.suppress(AssertionError):
        wait_until(paused, WRITE_PATIENCE_S, "worker 0's executor to pause in a log-file write", poll_s=0.05)
        wait_until(victim_busy, 30, "the paused write to show as a running task", poll_s=0.1)
        return f"a log-file write (paused at {pause_file.read_text()!r})"
    try:
        wait_until(lambda: _writing(table) and victim_busy(), WRITE_PATIENCE_S,
                   "a file-group write on worker 0's executor", poll_s=0.02)
        return "a file-group write"
    except AssertionError:
        wait_until(victim_busy, 60, "a task running on worker 0's executor", poll_s=0.02)
        return "a task before the writes"


def _removed_executor(driver: Driver, ui: str, app_id: str, victim: str) -> dict[str, Any]:
    """The driver's record of executor ``victim`` once it counts it as gone."""
    found: list[dict[str, Any]] = []

    def removed() -> bool:
        driver.check_alive()
        found[:] = [e for e in _get_json(f"{ui}/{app_id}/allexecutors") if e["id"] == victim]
        return bool(found) and not found[0]["isActive"]

    wait_until(removed, 120, f"the driver to count executor {victim} as lost")
    return found[0]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory) -> Iterator[LocalSparkCluster]:
    """Two one-core workers; a test that killed one starts it again for the next.

    Worker 0 is the victim: its executors' Python workers pause at their first log-file
    write (``MOR_STREAMER_PAUSE_AT_LABEL``, ``streamer/faults.py``) until :data:`PAUSE`'s
    file goes, so the kill lands inside a file-group write by construction, not by timing
    (the first batch only creates base files: it commits before any pause)."""
    workdir = tmp_path_factory.mktemp("spark-cluster")
    pause = {ENV_PAUSE_AT: PAUSE_AT, ENV_PAUSE_FILE: str(workdir / PAUSE)}
    with LocalSparkCluster(workers=2, worker_cores=1, worker_memory="1g", workdir=workdir,
                           worker_env={0: pause}) as running:
        yield running


#: poll: the driver plans each batch's offsets (HoodieStreamer's way, the default of a continuous
#: Kafka pipeline); stream: Structured Streaming. A campaign: ``make test`` (smoke) kills a worker
#: under the default read mode, ``make test-campaigns`` (full) under each; both read modes are
#: checked on local Spark by the Kafka pipeline tests, the worker loss is the same Spark engine.
READ_MODES = sized(smoke=["poll"], full=["poll", "stream"])


@pytest.mark.campaign
@pytest.mark.parametrize("read", READ_MODES)
def test_a_pipeline_on_a_standalone_cluster_survives_a_worker_killed_mid_batch(kafka, cluster, read, tmp_path):
    started = time.monotonic()
    for i in (0, 1):
        cluster.restart_worker(i)
    topic = kafka.create_topic(f"cluster-{uuid.uuid4().hex[:8]}", partitions=3)
    model = TripModel(seed=SEED, key_space=3_000)
    for _ in range(BACKLOG // 2_000):
        produce_records(kafka, topic, model.records(2_000))

    site = tmp_path / "executor-site"
    site.mkdir()
    executor_log = tmp_path / "executor-pythons.log"
    (site / "sitecustomize.py").write_text(SITECUSTOMIZE.format(log=str(executor_log)))
    lake = tmp_path / "lake"
    table = str(lake / "on_cluster")
    ui_port = free_port()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "MOR_STREAMER_SPARK_MASTER")}
    _check_executor_python(site, env, tmp_path)
    executor_log.unlink(missing_ok=True)  # the check's own interpreters noted themselves

    yaml_path = tmp_path / "cluster.yaml"
    yaml_path.write_text(_pipeline_yaml(cluster, kafka, topic, lake, site, ui_port, read))
    driver = Driver(yaml_path, tmp_path, env)
    ui = f"http://127.0.0.1:{ui_port}/api/v1/applications"
    try:
        # 1. the first batch commits, with an executor on each worker
        wait_until(lambda: driver.check_alive() and driver.commits >= 1, 180, "the first commit on the cluster")
        (app,) = _get_json(ui)
        app_id = app["id"]
        on_worker = {i: _executors_on(cluster, i, app_id) for i in (0, 1)}
        assert on_worker[0] and on_worker[1], f"an executor on each worker expected: {on_worker}"
        processes = {i: cluster.executor_processes(i) for i in (0, 1)}
        assert all(p["executor"] for p in processes.values()), processes
        assert driver.proc.pid not in processes[0]["executor"] + processes[1]["executor"]

        # 2. kill worker 0 (with its executor JVM and Python workers) while its executor runs a
        #    task: a log-file write it is paused in (the ``cluster`` fixture), else - should
        #    no pause come - any file-group write or task. Tasks here last a fraction of a
        #    second, so an unpaused kill can land just after one ended; the driver's record of
        #    the removed executor says whether one was running (its counts stay as they were
        #    at its removal, and a lost task counts as failed). A miss restarts the worker,
        #    gives the pipeline more work and tries again.
        misses: list[str] = []
        for attempt in range(1, KILL_ATTEMPTS + 1):
            if attempt > 1:
                cluster.restart_worker(0)
                wait_until(lambda: driver.check_alive() and bool(_executors_on(cluster, 0, app_id)), 120,
                           "a new executor of the pipeline on the restarted worker 0")
                produce_records(kafka, topic, model.records(6 * BATCH))
            victim = _executors_on(cluster, 0, app_id)[0]
            victim_jvms = cluster.executor_processes(0)["executor"]
            pause_file = cluster.workdir / PAUSE
            phase = _wait_for_victim_task(driver, ui, app_id, victim, table, pause_file)
            commits_at_kill = driver.commits
            killed = cluster.kill_worker(0)
            pause_file.unlink(missing_ok=True)  # its pauser is gone; a restarted worker pauses anew
            offsets_at_kill = _committed_offsets(table)
            assert set(victim_jvms) <= set(killed), (victim_jvms, killed)
            assert not [p for p in killed if is_running(p)], f"survivors of the kill: {killed}"
            lost = _removed_executor(driver, ui, app_id, victim)
            if lost["activeTasks"] + lost["failedTasks"] >= 1:
                assert offsets_at_kill < sum(kafka.end_offsets(topic).values()), "the backlog was done"
                break
            misses.append(f"attempt {attempt} ({phase}): executor {victim} had no task running when removed "
                          f"({lost['completedTasks']} completed)")
        else:
            pytest.fail(f"no kill of worker 0 hit a running task in {KILL_ATTEMPTS} attempts: {misses}")

        # 3. more records; the surviving worker takes everything to the end
        produce_records(kafka, topic, model.records(AFTER_KILL))
        end = sum(kafka.end_offsets(topic).values())
        remaining = TOTAL_LIMIT_S - (time.monotonic() - started)
        wait_until(lambda: driver.check_alive() and _committed_offsets(table) >= end, max(remaining, 30),
                   f"the pipeline to commit all {end} offsets on the surviving worker")
        executors_used = [e for e in _get_json(f"{ui}/{app_id}/allexecutors") if e["id"] != "driver"]
        assert all(e["totalTasks"] > 0 for e in executors_used), executors_used

        # 4. a graceful stop (SIGTERM: finish the running batch, then stop)
        driver.proc.send_signal(signal.SIGTERM)
        driver.proc.wait(90)
        assert driver.proc.returncode == 0, driver.tail()
    except BaseException:
        print(driver.tail(80))
        print(cluster.log_tails(40))
        raise
    finally:
        if driver.proc.poll() is None:
            driver.kill()
    print(f"killed worker 0 (pids {killed}) in {phase} (attempt {attempt}, misses {misses}) after "
          f"{commits_at_kill} commits covering {offsets_at_kill} offsets; {driver.commits} commits in all; {model.produced} records; {time.monotonic() - started:.0f}s")
    assert not any("Traceback" in line for line in driver.lines), driver.tail()

    # the executors ran in Python processes of their own (in their work folders under the
    # workers'), without mor-streamer installed
    pythons = dict(line.split(" ", 1) for line in executor_log.read_text().splitlines())
    assert pythons, "no executor Python process started"
    assert all(cwd.startswith(str(cluster.workdir / "worker-")) for cwd in pythons.values()), pythons
    assert str(driver.proc.pid) not in pythons and str(os.getpid()) not in pythons, pythons
    assert commits_at_kill >= 1 and driver.commits > commits_at_kill

    assert_matches_model(table, model.expected())
    assert_each_record_committed_once(table, kafka, topic)
