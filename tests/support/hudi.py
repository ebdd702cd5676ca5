"""Apache Hudi itself, as an oracle: its Spark reader and writer in a child process.

The reference implementation decides what our tables mean: a table is only a Hudi
table if Hudi's own Spark bundle reads it as we do and can continue writing it.
The bundles need Spark 3.5 (Scala 2.12) while this project runs PySpark 4.x, so each
Hudi version runs in its own long-lived child: the ``.venv-hudi`` interpreter
(pyspark 3.5.x, made by ``make hudi-env``) running :mod:`tests.support.hudi_worker`
with one bundle from ``.jvm/hudi-<version>/`` (resolved by ``make jars``).

One child per Hudi version per test session; requests may be batched into one round
trip. Tables come back as Arrow (through IPC files), so the caller compares typed
values, not strings.

Locations can be overridden with ``MOR_HUDI_PYTHON`` (the interpreter) and
``MOR_HUDI_JAR_DIR`` (a folder holding ``hudi-<version>/*.jar``).
"""

from __future__ import annotations

import itertools
import json
import os
import shutil
import subprocess
import tempfile
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import pyarrow as pa
import pyarrow.parquet as pq

from streamer.errors import StreamerError

#: The checkout these tests run from: ``make hudi-env`` and ``make jars`` put the Hudi
#: interpreter and bundles beside it (this module is test code: it lives in the checkout).
REPO = Path(__file__).resolve().parents[2]
#: The Hudi versions the project is tested against, by the folder their bundle is in:
#: every one of them reads every table kind we write (``tests/hudi_jvm``).
VERSIONS = ("0.15", "1.0", "1.2")
#: A table version we write with the Hudi release that owns it (writes it natively).
OWNERS = ((6, "0.15"), (9, "1.2"))
#: Hudi 1.2: writes table version 9 and upgrades any table it writes to, so the tier only
#: reads ours with it (and what it reports of a table's properties), never writes them.
LATEST = "1.2"
#: The worker script, next to this file (run by path with the Hudi interpreter).
_WORKER = Path(__file__).with_name("hudi_worker.py")
_START_TIMEOUT_S = 240.0
_REQUEST_TIMEOUT_S = 600.0


class HudiOracleError(StreamerError):
    """Hudi's Spark session failed a request (the JVM's message is in ``detail``)."""

    def __init__(self, message: str, detail: str = "") -> None:
        super().__init__(message)
        self.detail = detail


def spoken(versions: tuple[str, ...] = VERSIONS) -> str:
    """``0.15, 1.0 and 1.2``: the versions as the README names them."""
    return versions[0] if len(versions) == 1 else f"{', '.join(versions[:-1])} and {versions[-1]}"


def hudi_python() -> Path:
    return Path(os.environ.get("MOR_HUDI_PYTHON", REPO / ".venv-hudi" / "bin" / "python"))


def bundle_jar(version: str) -> Path:
    """The Hudi Spark bundle of ``version`` (one of :data:`VERSIONS`)."""
    folder = Path(os.environ.get("MOR_HUDI_JAR_DIR", REPO / ".jvm")) / f"hudi-{version}"
    jars = sorted(folder.glob("hudi-spark*-bundle_*.jar"))
    if not jars:
        raise HudiOracleError(
            f"no Hudi {version} Spark bundle in {folder} (run `make jars`)"
        )
    return jars[-1]


def available() -> str | None:
    """``None`` when the Hudi tier can run here, else why not."""
    if not hudi_python().exists():
        return f"{hudi_python()} is missing (run `make hudi-env`)"
    for v in VERSIONS:
        try:
            bundle_jar(v)
        except HudiOracleError as e:
            return str(e)
    return None


@dataclass
class HudiSpark:
    """One running Hudi Spark session (a child process) and its request channel."""

    version: str
    workdir: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="hudi-oracle-")))
    _proc: subprocess.Popen[str] | None = None
    _log: IO[bytes] | None = None
    _ids: Any = field(default_factory=lambda: itertools.count())
    _lock: threading.Lock = field(default_factory=threading.Lock)
    spark_version: str = ""
    #: Extra Spark settings for the child's session (e.g. a Hive metastore catalog).
    conf: dict[str, str] = field(default_factory=dict)

    # -- lifecycle ---------------------------------------------------------------------
    def start(self) -> HudiSpark:
        jar = bundle_jar(self.version)
        env = dict(os.environ)
        env.update(
            {
                "HUDI_WORKER_JAR": str(jar),
                "TMPDIR": str(self.workdir),
                # the child's pyspark must not pick up the project's Spark
                "PYSPARK_PYTHON": str(hudi_python()),
                "PYSPARK_DRIVER_PYTHON": str(hudi_python()),
            }
        )
        for k in ("SPARK_HOME", "PYTHONPATH", "SPARK_CONF_DIR"):
            env.pop(k, None)
        if self.conf:
            env["HUDI_WORKER_CONF"] = json.dumps(self.conf)
        self._log = open(self.workdir / "hudi-spark.log", "ab")  # noqa: SIM115 - lives with the child
        self._proc = subprocess.Popen(
            [str(hudi_python()), str(_WORKER)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._log,
            text=True,
            env=env,
            cwd=self.workdir,
            start_new_session=True,
        )
        hello = self._receive(_START_TIMEOUT_S)
        if "ready" not in hello:
            self.stop()
            raise HudiOracleError(f"Hudi {self.version} did not start: {hello.get('error')}")
        self.spark_version = hello["ready"]
        return self

    def stop(self) -> None:
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            try:
                stdin, _ = self._pipes(proc)
                stdin.write(json.dumps({"op": "stop"}) + "\n")
                stdin.flush()
                proc.wait(60)
            except (OSError, subprocess.TimeoutExpired):
                proc.kill()
                proc.wait(10)
        if self._log is not None:
            self._log.close()
            self._log = None
        shutil.rmtree(self.workdir, ignore_errors=True)

    def __enter__(self) -> HudiSpark:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def log_tail(self, chars: int = 4000) -> str:
        path = self.workdir / "hudi-spark.log"
        return path.read_text(errors="replace")[-chars:] if path.exists() else ""

    # -- channel -----------------------------------------------------------------------
    def _pipes(self, proc: subprocess.Popen[str]) -> tuple[IO[str], IO[str]]:
        """The worker's stdin and stdout (it is always started with both piped)."""
        if proc.stdin is None or proc.stdout is None:
            raise HudiOracleError(f"Hudi {self.version} worker has no stdin/stdout pipe")
        return proc.stdin, proc.stdout

    def _receive(self, timeout_s: float) -> dict[str, Any]:
        proc = self._proc
        if proc is None:
            raise HudiOracleError(f"Hudi {self.version} is not running")
        _, stdout = self._pipes(proc)
        result: list[str] = []
        reader = threading.Thread(target=lambda: result.append(stdout.readline()))
        reader.daemon = True
        reader.start()
        reader.join(timeout_s)
        if reader.is_alive():
            proc.kill()
            raise HudiOracleError(f"Hudi {self.version} gave no answer in {timeout_s:.0f} s")
        if not result or not result[0]:
            raise HudiOracleError(
                f"Hudi {self.version} exited (code {proc.poll()}):\n{self.log_tail()}"
            )
        return json.loads(result[0])

    def request(self, req: Mapping[str, Any]) -> dict[str, Any]:
        """Send one request; its ``ok`` payload, or :class:`HudiOracleError`."""
        with self._lock:
            if self._proc is None or self._proc.poll() is not None:
                raise HudiOracleError(f"Hudi {self.version} is not running")
            stdin, _ = self._pipes(self._proc)
            stdin.write(json.dumps(req) + "\n")
            stdin.flush()
            answer = self._receive(_REQUEST_TIMEOUT_S)
        return _unwrap(self.version, answer)

    def _out(self) -> str:
        return str(self.workdir / f"result-{next(self._ids)}.arrow")

    # -- reads -------------------------------------------------------------------------
    def read_request(
        self,
        path: str | Path,
        *,
        query: str = "snapshot",
        begin: str | None = None,
        end: str | None = None,
        as_of: str | None = None,
        columns: Sequence[str] | None = None,
        options: Mapping[str, str] | None = None,
    ) -> dict[str, Any]:
        """A read request for :meth:`read_many` (nothing is sent yet)."""
        return {
            "op": "read",
            "path": str(path),
            "query": query,
            "begin": begin,
            "end": end,
            "as_of": as_of,
            "columns": list(columns) if columns else None,
            "options": dict(options or {}),
            "out": self._out(),
        }

    def read(self, path: str | Path, **kwargs: Any) -> pa.Table:
        """One Hudi query of ``path`` (see :meth:`read_request` for the keywords)."""
        result = self.read_many([self.read_request(path, **kwargs)])[0]
        if isinstance(result, HudiOracleError):
            raise result
        return result

    def read_many(self, requests: Sequence[dict[str, Any]]) -> list[pa.Table | HudiOracleError]:
        """Run many read requests in one round trip; a failed one comes back as its error."""
        answer = self.request({"op": "batch", "requests": list(requests)})
        out: list[pa.Table | HudiOracleError] = []
        for req, res in zip(requests, answer["results"], strict=True):
            try:
                _unwrap(self.version, res)
            except HudiOracleError as e:
                out.append(e)
                continue
            with pa.memory_map(req["out"]) as src:
                out.append(pa.ipc.open_file(src).read_all())
            os.unlink(req["out"])
        return out

    def table_configs(self, paths: Sequence[str | Path]) -> list[dict[str, Any] | HudiOracleError]:
        """What Hudi's ``HoodieTableConfig`` reports for each table (one round trip):
        ``version``, ``ordering_fields``, ``record_key_fields``, ``partition_fields``
        (``None`` when Hudi has none) and ``keygen_class``; a table Hudi cannot open
        comes back as its error."""
        requests = [{"op": "table_config", "path": str(p)} for p in paths]
        answer = self.request({"op": "batch", "requests": requests})
        out: list[dict[str, Any] | HudiOracleError] = []
        for res in answer["results"]:
            try:
                out.append(_unwrap(self.version, res))
            except HudiOracleError as e:
                out.append(e)
        return out

    def checkpoint(self, path: str | Path) -> dict[str, Any]:
        """Hudi 1.x only: the checkpoint its ``CheckpointUtils.getCheckpoint`` reads from
        the newest completed commit - ``instant``, ``class`` (``StreamerCheckpointV1`` or
        ``V2``) and ``value``."""
        return self.request({"op": "checkpoint", "path": str(path)})

    def archived_timeline(self, path: str | Path) -> list[dict[str, Any]]:
        """Hudi 1.x only: the instants its ``HoodieArchivedTimeline`` loads from the table's
        LSM history, oldest first - ``requested``, ``completed``, ``action`` and ``detail``
        (the deserialised metadata's gist, ``ERR ...`` when it does not deserialise)."""
        return list(self.request({"op": "archived_timeline", "path": str(path)})["instants"])

    # -- writes ------------------------------------------------------------------------
    def write(
        self,
        path: str | Path,
        rows: pa.Table,
        options: Mapping[str, str],
        *,
        mode: str = "append",
        columns_sql: Sequence[str] | None = None,
    ) -> dict[str, Any]:
        """A Hudi datasource write of ``rows`` (``hoodie.*`` options as Hudi takes them).

        ``columns_sql`` are Spark SQL expressions applied to the rows first (e.g. casts
        to types Parquet cannot carry as we want them). Returns the worker's answer:
        ``seconds`` (wall time of the save alone, without staging the rows or the round
        trip), ``jvm_cpu_s`` (the Spark JVM's CPU seconds during the save, None if its
        pid is unknown), ``py_cpu_s`` (the worker interpreter's) and ``jobs`` (the Spark
        jobs the save ran: ``id``, ``description``, wall ``seconds``).
        """
        staged = self.workdir / f"rows-{next(self._ids)}.parquet"
        pq.write_table(rows, staged)
        try:
            return self.request(
                {
                    "op": "write",
                    "path": str(path),
                    "rows": str(staged),
                    "options": {k: str(v) for k, v in options.items()},
                    "mode": mode,
                    "columns_sql": list(columns_sql) if columns_sql else None,
                }
            )
        finally:
            staged.unlink(missing_ok=True)

    def sql(self, statement: str, *, collect: bool = False) -> pa.Table | None:
        """Run Spark SQL in Hudi's session (procedures such as ``CALL run_compaction``)."""
        out = self._out() if collect else None
        self.request({"op": "sql", "sql": statement, "out": out})
        if out is None:
            return None
        with pa.memory_map(out) as src:
            table = pa.ipc.open_file(src).read_all()
        os.unlink(out)
        return table


def _unwrap(version: str, answer: Mapping[str, Any]) -> dict[str, Any]:
    if "ok" in answer:
        return answer["ok"]
    raise HudiOracleError(
        f"Hudi {version}: {answer.get('error')}", answer.get("detail", "") or ""
    )
