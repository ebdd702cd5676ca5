"""A real Spark standalone cluster (a master and N workers) from pyspark's own distribution.

Why: ``local[*]`` runs every task in the driver's JVM, so nothing there proves that the
Spark engine works when its functions are shipped to executors in other JVMs and other
Python processes, on other machines' paths, and that a lost executor costs nothing but a
retry. The pip package of pyspark carries ``bin/spark-class`` and every jar a standalone
master and worker need (``SPARK_HOME`` = the package folder), so the cluster starts from
what is already installed: no download, no Docker.

Every daemon listens on 127.0.0.1 on a free port and keeps its log and work folder in a
temp folder (``master.log``, ``worker-<i>.log``, ``worker-<i>/`` with the executors'
folders and stderr). Workers are started in their own process sessions, so
:meth:`LocalSparkCluster.kill_worker` can SIGKILL a worker with its executor JVM and
Python workers (a machine that vanished). Every wait is bounded; a failed start quotes
the logs.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from streamer.errors import StreamerError
from streamer.local.kafka import free_port
from streamer.spark import archive_options, class_archive

log = logging.getLogger(__name__)

_START_TIMEOUT_S = 120.0
_STOP_TIMEOUT_S = 15.0

_LOG4J = """\
rootLogger.level = warn
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{HH:mm:ss.SSS} %p %c{1}: %m%n
logger.master.name = org.apache.spark.deploy
logger.master.level = info
"""


class LocalSparkClusterError(StreamerError):
    """The local Spark cluster could not be started or did not answer in time."""


def spark_home() -> Path:
    """The pyspark package folder: a complete ``SPARK_HOME`` (``bin/``, ``jars/``)."""
    import pyspark

    home = Path(pyspark.__file__).resolve().parent
    if not (home / "bin" / "spark-class").is_file() or not (home / "jars").is_dir():
        raise LocalSparkClusterError(f"{home} has no bin/spark-class or jars/: not a usable SPARK_HOME")
    return home


def process_tree(pid: int) -> list[int]:
    """``pid`` and every descendant alive now (from ``/proc``), parents first."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # "pid (comm) state ppid ...": comm may hold spaces and parentheses
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(entry.name))
    out, todo = [], [pid]
    while todo:
        p = todo.pop(0)
        out.append(p)
        todo.extend(children.get(p, []))
    return out


def is_running(pid: int) -> bool:
    """The process exists and is not a zombie (dead, waiting for its parent to reap it)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


def _command_line(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def cluster_archive_options() -> str:
    """The class-data archive's JVM options (``streamer.spark.archive_options``) for the
    cluster's JVMs - master, workers, executors: they start from the driver's classpath
    (pyspark's ``jars/``), so most of what they load is in the archive; empty without one."""
    archive = class_archive()
    return archive_options(archive) if archive is not None else ""


@dataclass
class _Daemon:
    name: str
    port: int
    webui_port: int
    proc: subprocess.Popen[bytes]
    log_path: Path
    log_file: IO[bytes]
    workdir: Path | None = None

    def alive(self) -> bool:
        return self.proc.poll() is None

    def log_tail(self, lines: int = 30) -> str:
        with contextlib.suppress(OSError):
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        return ""


@dataclass
class LocalSparkCluster:
    """A standalone master and ``workers`` workers on loopback; a context manager.

    Each worker offers ``worker_cores`` cores and ``worker_memory`` to executors. Point a
    session at :attr:`master_url`; give executors at most ``worker_memory`` each
    (``spark.executor.memory``). Daemons run with ``daemon_memory`` of heap.
    ``worker_env`` adds variables to worker ``i``'s environment, which its executors and
    their Python workers inherit (one machine's settings, e.g. a pause armed on it only).
    """

    workers: int = 2
    worker_cores: int = 1
    worker_memory: str = "1g"
    daemon_memory: str = "256m"
    workdir: Path | None = None
    worker_env: dict[int, dict[str, str]] = field(default_factory=dict)
    _master: _Daemon | None = field(default=None, repr=False)
    _workers: list[_Daemon] = field(default_factory=list, repr=False)
    _owns_workdir: bool = field(default=False, repr=False)

    # -- addresses ------------------------------------------------------------------
    @property
    def master_url(self) -> str:
        assert self._master is not None, "the cluster is not started"
        return f"spark://127.0.0.1:{self._master.port}"

    @property
    def master_webui(self) -> str:
        assert self._master is not None, "the cluster is not started"
        return f"http://127.0.0.1:{self._master.webui_port}"

    def describe(self) -> str:
        return f"local Spark cluster at {self.master_url}" if self._master else "local Spark cluster"

    # -- lifecycle ------------------------------------------------------------------
    def start(self, timeout_s: float = _START_TIMEOUT_S) -> LocalSparkCluster:
        if self._master is not None:
            return self
        if self.workdir is None:
            self.workdir = Path(tempfile.mkdtemp(prefix="mor-spark-cluster-"))
            self._owns_workdir = True
        self.workdir.mkdir(parents=True, exist_ok=True)
        (self.workdir / "log4j2.properties").write_text(_LOG4J)
        started = time.monotonic()
        deadline = started + timeout_s
        try:
            self._master = self._spawn("master", "org.apache.spark.deploy.master.Master", [])
            self._wait_for_json(self._master, deadline)
            for i in range(self.workers):
                self._workers.append(self._start_worker(i))
            self.wait_for_workers(self.workers, deadline - time.monotonic())
        except BaseException:
            log.error("local Spark cluster failed to start; logs:\n%s", self.log_tails())
            self.stop()
            raise
        log.info("local Spark cluster ready at %s with %d workers in %.1fs",
                 self.master_url, self.workers, time.monotonic() - started)
        return self

    def _start_worker(self, i: int) -> _Daemon:
        assert self.workdir is not None
        work = self.workdir / f"worker-{i}"
        work.mkdir(exist_ok=True)
        daemon = self._spawn(
            f"worker-{i}", "org.apache.spark.deploy.worker.Worker",
            ["--cores", str(self.worker_cores), "--memory", self.worker_memory,
             "--work-dir", str(work), self.master_url],
            self.worker_env.get(i, {}),
        )
        daemon.workdir = work
        return daemon

    def _spawn(self, name: str, main: str, args: list[str], extra_env: dict[str, str] | None = None) -> _Daemon:
        assert self.workdir is not None
        home = spark_home()
        port, webui = free_port(), free_port()
        log_path = self.workdir / f"{name}.log"
        log_file = open(log_path, "ab")  # noqa: SIM115 - lives with the process
        java_opts = (f"-Dlog4j2.configurationFile=file:{self.workdir / 'log4j2.properties'} "
                     f"-XX:TieredStopAtLevel=1 -XX:+UseSerialGC {cluster_archive_options()}").strip()
        env = {
            **os.environ,
            "SPARK_HOME": str(home),
            "SPARK_LOCAL_IP": "127.0.0.1",
            "SPARK_LOCAL_HOSTNAME": "127.0.0.1",
            "SPARK_DAEMON_MEMORY": self.daemon_memory,
            "SPARK_DAEMON_JAVA_OPTS": java_opts,
            "SPARK_LOG_DIR": str(self.workdir),
            "SPARK_NO_DAEMONIZE": "1",
            **(extra_env or {}),
        }
        from streamer.jvm import java_executable

        env.setdefault("JAVA_HOME", str(Path(java_executable()).resolve().parent.parent))
        cmd = [str(home / "bin" / "spark-class"), main, "--host", "127.0.0.1", "--port", str(port),
               "--webui-port", str(webui), *args]
        proc = subprocess.Popen(cmd, stdout=log_file, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                env=env, cwd=self.workdir, start_new_session=True)
        return _Daemon(name, port, webui, proc, log_path, log_file)

    def _wait_for_json(self, daemon: _Daemon, deadline: float) -> dict[str, Any]:
        last: object = None
        while time.monotonic() < deadline:
            if not daemon.alive():
                raise LocalSparkClusterError(
                    f"Spark {daemon.name} exited during start-up (code {daemon.proc.returncode}); "
                    f"log tail:\n{daemon.log_tail()}")
            try:
                return _get_json(f"http://127.0.0.1:{daemon.webui_port}/json/")
            except OSError as e:
                last = e
                time.sleep(0.3)
        raise LocalSparkClusterError(
            f"Spark {daemon.name} did not answer on its web UI port {daemon.webui_port} in time ({last}); "
            f"log tail:\n{daemon.log_tail()}")

    def wait_for_workers(self, n: int, timeout_s: float) -> list[dict[str, Any]]:
        """Wait until the master lists ``n`` ALIVE workers; returns them."""
        deadline = time.monotonic() + max(timeout_s, 0.0)
        alive: list[dict[str, Any]] = []
        while True:
            for w in self._workers:
                if not w.alive() and w.proc.returncode != -signal.SIGKILL:
                    raise LocalSparkClusterError(
                        f"Spark {w.name} exited (code {w.proc.returncode}); log tail:\n{w.log_tail()}")
            with contextlib.suppress(OSError):
                alive = [w for w in self.master_state().get("workers", []) if w.get("state") == "ALIVE"]
                if len(alive) >= n:
                    return alive
            if time.monotonic() >= deadline:
                raise LocalSparkClusterError(
                    f"{self.describe()}: {len(alive)} of {n} workers registered in time; logs:\n{self.log_tails()}")
            time.sleep(0.3)

    def stop(self, timeout_s: float = _STOP_TIMEOUT_S) -> None:
        """Stop the workers (with their executors) and the master; remove an owned work folder."""
        for daemon in [*self._workers, *([self._master] if self._master else [])]:
            tree = process_tree(daemon.proc.pid) if daemon.alive() else []
            if daemon.alive():
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(daemon.proc.pid, signal.SIGTERM)
                try:
                    daemon.proc.wait(timeout_s)
                except subprocess.TimeoutExpired:
                    log.warning("Spark %s did not stop in %ss; killing", daemon.name, timeout_s)
            _kill_all(tree + [daemon.proc.pid])
            with contextlib.suppress(subprocess.TimeoutExpired):
                daemon.proc.wait(10)
            daemon.log_file.close()
        self._workers, self._master = [], None
        if self._owns_workdir and self.workdir is not None:
            shutil.rmtree(self.workdir, ignore_errors=True)
            self.workdir = None

    def __enter__(self) -> LocalSparkCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- faults -----------------------------------------------------------------------
    def kill_worker(self, i: int) -> list[int]:
        """SIGKILL worker ``i`` and everything it started (executor JVMs, their Python daemon
        and workers, which sit in process groups of their own): a machine that vanished.
        Returns the pids killed. The master notices the lost connection and drops it."""
        w = self._workers[i]
        tree = process_tree(w.proc.pid)
        _kill_all(tree)
        w.proc.wait(10)
        # SIGKILL is delivered at once, but a big JVM takes a moment to go (longer under load)
        deadline = time.monotonic() + 30
        while (left := [p for p in tree if is_running(p)]) and time.monotonic() < deadline:
            time.sleep(0.05)
        if left:
            raise LocalSparkClusterError(f"Spark {w.name}: pids {left} still run 30s after SIGKILL")
        log.info("killed Spark %s: pids %s", w.name, tree)
        return tree

    def restart_worker(self, i: int, timeout_s: float = _START_TIMEOUT_S) -> None:
        """Start worker ``i`` again if it is gone (after :meth:`kill_worker`), and wait until
        the master lists all workers alive."""
        w = self._workers[i]
        if w.alive():
            return
        w.log_file.close()
        self._workers[i] = self._start_worker(i)
        self.wait_for_workers(len(self._workers), timeout_s)

    def worker_pids(self, i: int) -> list[int]:
        """Worker ``i``'s process and its descendants (executor JVMs, Python processes)."""
        return process_tree(self._workers[i].proc.pid)

    def executor_processes(self, i: int) -> dict[str, list[int]]:
        """Worker ``i``'s descendants by kind: ``executor`` (JVMs) and ``python`` processes."""
        out: dict[str, list[int]] = {"executor": [], "python": []}
        for pid in self.worker_pids(i)[1:]:
            cmd = _command_line(pid)
            if "CoarseGrainedExecutorBackend" in cmd:
                out["executor"].append(pid)
            elif "pyspark" in cmd or "python" in cmd.split(" ", 1)[0]:
                out["python"].append(pid)
        return out

    # -- state ------------------------------------------------------------------------
    def master_state(self) -> dict[str, Any]:
        """The master's JSON (``workers``, ``activeapps``, ``completedapps``...)."""
        return _get_json(f"{self.master_webui}/json/")

    def worker_state(self, i: int) -> dict[str, Any]:
        """Worker ``i``'s JSON (``executors``, ``finishedexecutors``...)."""
        return _get_json(f"http://127.0.0.1:{self._workers[i].webui_port}/json/")

    def worker_dir(self, i: int) -> Path:
        w = self._workers[i].workdir
        assert w is not None
        return w

    def worker_alive(self, i: int) -> bool:
        return self._workers[i].alive()

    def log_tails(self, lines: int = 20) -> str:
        parts = []
        for d in [*([self._master] if self._master else []), *self._workers]:
            parts.append(f"--- {d.name} ({d.log_path}) ---\n{d.log_tail(lines)}")
        return "\n".join(parts)


def _kill_all(pids: list[int]) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)


def _get_json(url: str, timeout_s: float = 5.0) -> dict[str, Any]:
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # loopback: never a proxy
    with opener.open(url, timeout=timeout_s) as resp:
        return json.loads(resp.read())
