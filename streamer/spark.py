"""The one SparkSession factory everything uses.

Defaults suit a laptop (``local[*]``, no UI, quiet logs) and any cluster is a master
URL away. The Python workers are pinned to the running interpreter: a worker on
another Python would import another pyarrow/pyspark and fail in confusing ways.

On a cluster (any master but ``local``/``local[...]``) the executors must import this
project's code (the ``streamer`` package, ``streamer.sources`` and
``streamer.transforms`` included): by default the session ships it, zipped from the
running installation, with ``SparkContext.addPyFile`` (executors then run exactly the
driver's version). ``spark.morstreamer.shipPackage: "false"``
relies on an installation on every node instead. docs/cluster.md has both.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import signal
import sys
import tempfile
import threading
import zipfile
from collections.abc import Callable, Mapping
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from streamer import spark_daemon
from streamer.errors import first_line
from streamer.jvm import classpath

if TYPE_CHECKING:  # py4j's objects are untyped (Any to mypy)
    from py4j.java_gateway import JavaGateway, JavaObject
    from pyspark.sql import SparkSession

DEFAULT_MASTER = "local[*]"

_DEFAULT_CONF: dict[str, str] = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.session.timeZone": "UTC",
    # Small local batches: a handful of shuffle partitions, not 200.
    "spark.sql.shuffle.partitions": "4",
    "spark.default.parallelism": "4",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    # Arrow batches for Python steps (mapInArrow) bounded by rows (maxRecordsPerBatch,
    # 10,000) only: with a byte bound Spark re-measures the batch after every row, which
    # was ~40% of the JVM's time in the Spark engine's upsert (benchmarks/RESULTS.md,
    # "Engines"). Value exactly Int.MaxValue: Spark skips the check.
    "spark.sql.execution.arrow.maxBytesPerBatch": "2147483647",
    "spark.sql.streaming.forceDeleteTempCheckpointLocation": "true",
}

#: Where a local master's driver listens: loopback only. A cluster's executors must reach
#: the driver, so with any other master Spark's own default (this host's address) stands
#: unless ``spark.driver.host`` / ``spark.driver.bindAddress`` are set.
#: Its Python workers' daemon imports the installed pyspark, not Spark's uncached
#: ``pyspark.zip`` (see :mod:`streamer.spark_daemon`; the workers run this interpreter).
_LOCAL_DRIVER_CONF: dict[str, str] = {
    "spark.driver.bindAddress": "127.0.0.1",
    "spark.driver.host": "127.0.0.1",
    "spark.python.daemon.module": spark_daemon.MODULE,
}

#: Our setting (``true``/``false``/``auto``, the default): ship this project's code to the
#: executors as a zip (``auto``: unless the master is ``local``/``local[...]``).
SHIP_PACKAGE_CONF = "spark.morstreamer.shipPackage"
#: The packages executors import: the one top-level package of the ``mor-streamer`` distribution.
SHIPPED_PACKAGES = ("streamer",)


def is_local_master(master: str) -> bool:
    """``local``, ``local[N]``, ``local[*]``, ``local[N,F]``: tasks run in the driver's JVM."""
    return master == "local" or master.startswith("local[")


def _log4j_config() -> str:
    return str(resources.files("streamer.resources").joinpath("log4j2.properties"))


def spark_conf(
    master: str | None = None,
    conf: Mapping[str, str] | None = None,
    with_kafka: bool = True,
) -> dict[str, str]:
    """The full configuration a session is built with (exposed for inspection/tests)."""
    out = dict(_DEFAULT_CONF)
    out["spark.master"] = master or os.environ.get("MOR_STREAMER_SPARK_MASTER", DEFAULT_MASTER)
    if is_local_master(out["spark.master"]):
        out.update(_LOCAL_DRIVER_CONF)
    out["spark.pyspark.python"] = sys.executable
    out["spark.pyspark.driver.python"] = sys.executable
    log_opt = f"-Dlog4j2.configurationFile=file:{_log4j_config()}"
    out["spark.driver.extraJavaOptions"] = log_opt
    out["spark.executor.extraJavaOptions"] = log_opt
    if with_kafka:
        out["spark.jars"] = ",".join(classpath("spark"))
    out.update(conf or {})
    if is_local_master(out["spark.master"]):
        extra = local_driver_options()
        if extra:
            out["spark.driver.extraJavaOptions"] = f"{out['spark.driver.extraJavaOptions']} {extra}".strip()
    return out


#: Options added to a local session's driver JVM (the one JVM of ``local[...]``), after the
#: pipeline's own ``spark.driver.extraJavaOptions``; e.g. ``-XX:TieredStopAtLevel=1
#: -XX:+UseSerialGC`` on a small machine running small batches, where C2's compile
#: threads and G1 cost more CPU than they win back. Not applied to a cluster's JVMs.
JVM_OPTIONS_ENV = "MOR_STREAMER_JVM_OPTIONS"


def local_driver_options() -> str:
    """What the environment adds to a local driver JVM: ``$MOR_STREAMER_JVM_OPTIONS`` and
    the class-data archive's options (:func:`class_archive`)."""
    parts = [os.environ.get(JVM_OPTIONS_ENV, "").strip()]
    archive = class_archive()
    if archive is not None:
        parts.append(archive_options(archive))
    return " ".join(p for p in parts if p)


#: A JDK class-data archive (CDS) of Spark's driver classes, when one was made for this
#: installation: a JVM start maps the classes it lists instead of parsing and verifying them
#: from the jars again, about a third of a local session's start-up CPU.
JVM_ARCHIVE_ENV = "MOR_STREAMER_JVM_ARCHIVE"


def class_archive() -> Path | None:
    """The archive ``$MOR_STREAMER_JVM_ARCHIVE`` names, if that file exists."""
    value = os.environ.get(JVM_ARCHIVE_ENV, "").strip()
    return Path(value) if value and Path(value).is_file() else None


def archive_options(archive: Path) -> str:
    """JVM options that use ``archive``. One made by another JDK or for another classpath
    is refused by the JVM, which then starts as without it: the warning it would print
    on stdout is turned off, as the archive only ever changes the start's speed."""
    return f"-XX:SharedArchiveFile={archive} -Xlog:cds=off -Xlog:cds+dynamic=off"


def ships_package(conf: Mapping[str, str]) -> bool:
    """Whether a session built with ``conf`` (see :func:`spark_conf`) ships our code."""
    value = str(conf.get(SHIP_PACKAGE_CONF, "auto")).strip().lower()
    if value in ("auto", ""):
        return not is_local_master(conf.get("spark.master", DEFAULT_MASTER))
    if value in ("true", "1", "yes"):
        return True
    if value in ("false", "0", "no"):
        return False
    from streamer.errors import ConfigError

    raise ConfigError(f"{SHIP_PACKAGE_CONF} must be true, false or auto, not {value!r}")


def package_zip(out_dir: str | os.PathLike[str] | None = None) -> Path:
    """A zip of the running installation's ``streamer`` package (code and package data, no
    caches), for ``addPyFile`` / ``spark.submit.pyFiles``. In a checkout ``streamer/sources``
    and ``streamer/transforms`` are links to the top-level folders: they are followed, so the
    zip holds their files under ``streamer/sources/...`` as the wheel does.

    Named by a hash of its contents (an edited checkout gives a new zip; an unchanged one
    reuses it) and written atomically into ``out_dir`` (default: a folder in the temp dir).
    Executors need the same third-party packages (pyarrow, pydantic, ...) installed: the
    zip carries only this project's code.
    """
    import importlib

    files: list[tuple[str, Path]] = []
    for name in SHIPPED_PACKAGES:
        root = Path(importlib.import_module(name).__file__ or "").parent
        for here, dirs, names in os.walk(root, followlinks=True):
            dirs[:] = [d for d in dirs if d != "__pycache__"]
            for file_name in names:
                path = Path(here) / file_name
                if path.is_file() and path.suffix not in (".pyc", ".pyo"):
                    files.append((path.relative_to(root.parent).as_posix(), path))
    files.sort()
    digest = hashlib.sha256()
    for arcname, path in files:
        digest.update(arcname.encode() + b"\0" + path.read_bytes() + b"\0")
    folder = Path(out_dir) if out_dir is not None else Path(tempfile.gettempdir()) / "mor-streamer-pyfiles"
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / f"mor_streamer-{digest.hexdigest()[:16]}.zip"
    if target.is_file():
        return target
    fd, tmp = tempfile.mkstemp(dir=folder, suffix=".zip.tmp")
    os.close(fd)
    try:
        with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_DEFLATED) as zf:
            for arcname, path in files:
                info = zipfile.ZipInfo(arcname, date_time=(1980, 1, 1, 0, 0, 0))
                info.compress_type = zipfile.ZIP_DEFLATED
                info.external_attr = 0o644 << 16
                zf.writestr(info, path.read_bytes())
        os.replace(tmp, target)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
    return target


#: Set (session conf) once :func:`get_spark` registered the ``morhudi`` source in a session.
READER_REGISTERED_CONF = "spark.morstreamer.readerRegistered"


def get_spark(
    master: str | None = None,
    app_name: str = "mor-streamer",
    conf: Mapping[str, str] | None = None,
    with_kafka: bool = True,
    *,
    register_reader: bool = True,
) -> SparkSession:
    """Return the active SparkSession, creating it with our defaults if needed.

    ``conf`` overrides any default. JVM-level settings (jars, driver options) only take
    effect for the first session of a process, as in Spark itself.

    ``register_reader``: make ``spark.read.format("morhudi")`` (and SQL ``USING morhudi``)
    available, in a new or the active session. Its first registration in a JVM costs
    ~1.5 CPU-s and as much start-up time: Spark then looks for installed Python data
    sources, in a Python process of its own. A caller that reads no table through Spark
    (a pipeline whose transforms cannot name one) passes False.
    """
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        return _with_reader(active) if register_reader else active
    builder = SparkSession.builder.appName(app_name)
    settings = spark_conf(master, conf, with_kafka)
    ship = ships_package(settings)
    for key, value in settings.items():
        builder = builder.config(key, value)
    session = start_noticing_interrupts(builder.getOrCreate)
    session.sparkContext.setLogLevel("WARN")
    if ship:
        # before any job: every task's Python worker puts the zip on its path, ahead of site-packages
        session.sparkContext.addPyFile(str(package_zip()))
    return _with_reader(session) if register_reader else session


def _with_reader(session: SparkSession) -> SparkSession:
    """``session`` with the ``morhudi`` source registered (once per session)."""
    if session.conf.get(READER_REGISTERED_CONF, "false") != "true":
        from streamer.read.spark_source import register

        register(session)
        session.conf.set(READER_REGISTERED_CONF, "true")
    return session


T = TypeVar("T")


class StartInterrupted(KeyboardInterrupt):
    """Ctrl-C (or SIGTERM) arrived while the JVM was starting: stop before any work."""


def start_noticing_interrupts(start: Callable[[], T]) -> T:
    """Run ``start`` (the JVM start-up, seconds long) and raise :class:`StartInterrupted`
    after it if SIGINT/SIGTERM arrived meanwhile.

    ``streamer run`` answers a first Ctrl-C with "finish the running batch, then stop":
    a handler that only sets a flag. During start-up no batch runs yet, but nothing looked
    at that flag before the first batch, so a Ctrl-C there still ran a full batch. Here
    the signal is passed on to the handler that was installed (the flag is still set, a
    second Ctrl-C still abandons) and remembered; once the JVM is up, we stop.
    Off the main thread (where signals cannot be handled) ``start`` simply runs.

    **Spark's own SIGINT handler never replaces the caller's.** A new ``SparkContext``
    made on the main thread installs one (cancel every job, raise KeyboardInterrupt): a
    single Ctrl-C during the rest of the start-up then abandoned the run (exit 130)
    instead of stopping it. With a handler of the caller's installed (not Python's
    default, which interrupts at once anyway), ``start`` runs on a helper thread, where
    Spark installs nothing, while the main thread waits and keeps answering signals; a
    second Ctrl-C abandons the start-up there and then (the helper is a daemon thread).
    """
    if threading.current_thread() is not threading.main_thread():
        return start()
    from streamer import faults

    seen: list[int] = []
    previous: dict[int, Callable] = {}

    def on_signal(signum: int, frame: object) -> None:
        seen.append(signum)
        previous[signum](signum, frame)  # e.g. run's "stop after this batch" (or KeyboardInterrupt)

    for sig in (signal.SIGINT, signal.SIGTERM):
        handler = signal.getsignal(sig)
        if not callable(handler):
            continue  # ignored, or the OS default (terminate): stays as it was
        previous[sig] = handler
        signal.signal(sig, on_signal)

    def paused_start() -> T:
        faults.pause_point("spark start")  # tests: a signal at a known point of the start-up
        return start()

    own = previous.get(signal.SIGINT) not in (None, signal.default_int_handler)
    try:
        result = _on_helper_thread(paused_start) if own else paused_start()
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    if seen:
        raise StartInterrupted(f"interrupted while Spark was starting ({signal.Signals(seen[0]).name}); "
                               "nothing was run")
    return result


def _on_helper_thread(start: Callable[[], T]) -> T:
    """``start()`` on a daemon thread; the calling (main) thread waits, handling signals."""
    out: list[T] = []
    failed: list[BaseException] = []

    def run() -> None:
        try:
            out.append(start())
        except BaseException as e:  # handed to the caller
            failed.append(e)

    helper = threading.Thread(target=run, name="spark-start", daemon=True)
    helper.start()
    while helper.is_alive():
        helper.join(0.2)  # returns to the interpreter: signal handlers run in between
    _let_handlers_run()
    if failed:
        raise failed[0]
    result = out[0]
    _make_active_here(result)
    return result


def _let_handlers_run() -> None:
    """A call: Python runs pending signal handlers on entering one (a signal that came
    just before the helper thread finished is seen before the caller checks for it)."""


def _make_active_here(session: object) -> None:
    """The session as the calling thread's active one (it was made on another thread;
    ``SparkSession.getActiveSession`` is per thread)."""
    jsession = getattr(session, "_jsparkSession", None)
    jvm = getattr(session, "_jvm", None)
    if jsession is None or jvm is None:
        return
    with contextlib.suppress(Exception):  # an optimisation: getOrCreate finds the session anyway
        # the JVM class pyspark's own getActiveSession asks
        type(session)._get_j_spark_session_class(jvm).setActiveSession(jsession)  # type: ignore[attr-defined]


class SparkSqlSyntax:
    """Spark's own SQL parser, for checks that must not need a table: parse, never resolve.

    Uses the active session's parser when there is one; otherwise it starts a bare JVM
    gateway on first use (no SparkContext: seconds, not a cluster) and stops it in
    :meth:`close`. If that JVM cannot start, :attr:`unavailable` says why and every text
    passes (the caller notes that SQL went unchecked). Implements
    :class:`streamer.config.preflight.SqlSyntax`.
    """

    def __init__(self) -> None:
        self._parser: JavaObject | None = None
        self._gateway: JavaGateway | None = None
        #: Why the parser could not start (None: it started, or was not needed yet).
        self.unavailable: str | None = None

    def _get(self) -> JavaObject | None:
        if self._parser is None and self.unavailable is None:
            from pyspark.sql import SparkSession

            active = SparkSession.getActiveSession()
            if active is not None:
                self._parser = active._jsparkSession.sessionState().sqlParser()
            else:
                self._parser = self._start_gateway()
        return self._parser

    def _start_gateway(self) -> JavaObject | None:
        import tempfile

        from pyspark import SparkConf
        from pyspark.java_gateway import launch_gateway

        conf = SparkConf(loadDefaults=False)
        for key in ("spark.driver.extraJavaOptions", "spark.master"):
            conf.set(key, spark_conf(with_kafka=False)[key])
        # the JVM's start-up chatter (module warnings) is kept out of the report; shown on failure
        with tempfile.TemporaryFile(mode="w+") as err:
            try:
                self._gateway = gateway = launch_gateway(conf, popen_kwargs={"stderr": err})
            except Exception as e:
                err.seek(0)
                said = [line for line in err.read().splitlines() if line.strip()]
                self.unavailable = f"the JVM did not start: {said[-1] if said else e}"
                return None
        parser_pkg = gateway.jvm.org.apache.spark.sql.catalyst.parser
        return getattr(getattr(parser_pkg, "CatalystSqlParser$"), "MODULE$")

    def _error(self, method: str, text: str) -> str | None:
        from py4j.protocol import Py4JJavaError
        from pyspark.errors.exceptions.captured import CapturedException

        parser = self._get()
        if parser is None:
            return None
        try:
            getattr(parser, method)(text)
        except (Py4JJavaError, CapturedException) as e:  # the latter once a session converts errors
            java = getattr(e, "java_exception", None)
            message = str(java.getMessage() or java.toString()) if java is not None else str(e)
            first = next((line for line in message.splitlines() if line.strip()), message)
            return " ".join(re.sub(r" ?SQLSTATE: \w+", "", first).split())
        return None

    def query(self, sql: str) -> str | None:
        return self._error("parsePlan", sql)

    def expression(self, text: str) -> str | None:
        return self._error("parseExpression", text)

    def data_type(self, text: str) -> str | None:
        return self._error("parseDataType", text)

    def table_schema(self, ddl: str) -> str | None:
        return self._error("parseTableSchema", ddl)

    def close(self) -> None:
        gateway, self._gateway, self._parser = self._gateway, None, None
        if gateway is not None:
            gateway.shutdown()
            proc = getattr(gateway, "proc", None)
            if proc is not None:
                proc.stdin.close()  # the JVM exits when its stdin closes (PySpark's own protocol)
                proc.wait(timeout=30)


def spark_unavailable() -> str | None:
    """Why Spark's parser cannot run here (no PySpark, no Java), or None when it can."""
    try:
        import pyspark  # noqa: F401
    except ImportError:
        return "PySpark is not installed"
    from streamer.jvm import java_executable

    try:
        java_executable()
    except Exception as e:  # EnvironmentSetupError with how to fix it
        return first_line(e)
    return None
