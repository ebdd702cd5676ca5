"""Session-wide fixtures: one SparkSession and one Kafka broker per test session.

Both are created lazily on first use, never at import time, so the fast subset
(``-m "not integration and not kafka"``) starts no JVM at all.
"""

from __future__ import annotations

import os
import shutil
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from streamer.table import instant

if TYPE_CHECKING:
    from tests.support.hudi import HudiSpark

# Plain helpers live in tests.support; the names stay importable from here as before.
from tests.support.fixture_tables import FIXTURES, REPO, SHARED, fixture_table_path  # noqa: F401

# Every local Spark JVM of the run (this session's and each ``streamer run`` child's, which
# inherit the variable) starts from the class-data archive ``make test`` made, if it is
# there (tests/support/jvm_archive.py); without it they start as users' do, only slower.
os.environ.setdefault("MOR_STREAMER_JVM_ARCHIVE", str(REPO / ".cache" / "spark-classes.jsa"))
# And runs the client compiler and the serial collector: the suite is thousands of small
# jobs on 2 cores, where C2's compile threads and G1 cost more CPU than they win back
# (three Spark integration modules: 109 -> 64 CPU-s).
os.environ.setdefault("MOR_STREAMER_JVM_OPTIONS", "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC")


@pytest.fixture(autouse=True)
def _instant_floor_kept_per_test(monkeypatch) -> None:
    """Each test starts from the in-process instant floor the one before it found.

    ``new_instant_time`` never goes below the latest time this process generated; a test
    that writes after an instant in the future (a savepoint completed an hour ahead, say)
    would otherwise push every later test's instants of the same worker into the future,
    and a test that reasons about "now" then fails depending on which worker ran it.
    """
    monkeypatch.setattr(instant, "_last_generated", instant._last_generated)


@pytest.fixture(scope="session")
def spark():
    from streamer.spark import get_spark

    # 2 GB driver heap: the session serves the whole suite, whose oversized-record tests
    # move 50 MB Kafka values through the driver (several copies on the way to Arrow); at
    # Spark's default 1 GB, with the state earlier tests left, the JVM ran out of heap.
    session = get_spark(app_name="mor-streamer-tests", conf={"spark.driver.memory": "2g"})
    yield session
    session.stop()


@pytest.fixture(scope="session")
def schema_registry() -> Iterator[object]:
    """A real Confluent-compatible registry: $SCHEMA_REGISTRY_URL, else local Apicurio
    (started on first use, ~7 s)."""
    from tests.support.kafka import schema_registry_for_tests

    with schema_registry_for_tests() as registry:
        yield registry


@pytest.fixture(scope="session")
def hudi_sessions() -> Iterator[dict[str, HudiSpark]]:
    """Apache Hudi's own Spark bundles (0.15, 1.0 and 1.2), one child session each per test
    session: started by the first test that asks, stopped at the end. Under ``make test``
    (``MOR_REQUIRE_HUDI=1``) a missing Hudi environment fails the run; a developer running
    pytest by hand without ``make hudi-env`` gets a skip that says why. The JVM tier and the
    whole-database CDC campaign share them (one scheduling unit, so one worker starts them)."""
    from tests.support import hudi as oracle

    missing = oracle.available()
    if missing:
        if os.environ.get("MOR_REQUIRE_HUDI") == "1":
            pytest.fail(f"the Hudi JVM tier is required here but cannot run: {missing}")
        pytest.skip(f"Hudi JVM tier not set up: {missing}")
    started: dict[str, oracle.HudiSpark] = {}
    try:
        for version in oracle.VERSIONS:
            started[version] = oracle.HudiSpark(version).start()
        yield started
    finally:
        for s in started.values():
            s.stop()


def thrown_away(server: object) -> None:
    """At the session's end, SIGKILL a test server we started (then its context's exit only
    removes its folder): a JVM server's clean shutdown - a broker's controlled shutdown, a
    Connect worker stopping its connectors - serves nobody here, and took ~15 s of the
    run's end. A server we did not start (``$KAFKA_BOOTSTRAP_SERVERS``) has no ``kill``."""
    kill = getattr(server, "kill", None)
    if callable(kill):
        kill()


@pytest.fixture(scope="session")
def kafka() -> Iterator[object]:
    """A real Kafka broker: $KAFKA_BOOTSTRAP_SERVERS, else testcontainers, else local KRaft."""
    from tests.support.kafka import kafka_for_tests

    with kafka_for_tests() as broker:
        yield broker
        thrown_away(broker)


@pytest.fixture(scope="session")
def postgres() -> Iterator[object]:
    """A real PostgreSQL server with ``wal_level=logical`` (the change-data-capture tests)."""
    from tests.support.postgres import LocalPostgres

    with LocalPostgres() as server:
        yield server


@pytest.fixture(scope="session")
def kafka_connect(kafka) -> Iterator[object]:
    """A real Kafka Connect worker with Debezium's Postgres and MariaDB connectors, on the session's broker."""
    from tests.support.connect import LocalConnect

    with LocalConnect(bootstrap_servers=kafka.bootstrap_servers) as worker:
        yield worker
        thrown_away(worker)


@pytest.fixture(scope="session")
def local_s3() -> Iterator[object]:
    """A real S3-compatible server (s3proxy, bucket ``lake-bucket``), one per session.

    While it runs, the AWS variables point this process and its children at it
    (``AWS_ENDPOINT_URL``, keys, region): ``s3://lake-bucket/...`` then resolves there."""
    import os
    from unittest import mock

    from streamer.local.s3 import LocalS3

    with LocalS3() as server, mock.patch.dict(os.environ, server.environ()):
        yield server


@pytest.fixture(scope="session")
def minio() -> Iterator[object]:
    """MinIO through testcontainers (bucket ``lake-bucket``), one per session; skipped,
    with the reason, where no Docker engine answers."""
    from tests.support.minio import docker_unavailable, minio_for_tests

    reason = docker_unavailable()
    if reason is not None:
        pytest.skip(f"MinIO (testcontainers) needs Docker: {reason}")
    with minio_for_tests() as store:
        yield store


#: The S3 stores the object-storage tests run over: s3proxy always, MinIO where Docker is.
S3_STORES = ("s3proxy", "minio")


@pytest.fixture(params=S3_STORES)
def s3_store(request) -> Iterator[object]:
    """Each S3 store in turn (``local_s3`` or ``minio``), the AWS variables pointing at it
    for the test: ``s3://lake-bucket/...`` resolves there, in this process and its children."""
    import os
    from unittest import mock

    store = request.getfixturevalue("local_s3" if request.param == "s3proxy" else "minio")
    with mock.patch.dict(os.environ, store.environ()):
        yield store


@pytest.fixture(scope="session")
def hudi_fixtures_dir(tmp_path_factory) -> Path:
    """All Hudi-written fixture tables unzipped once: <dir>/<zip stem>/<table folder>."""
    if not FIXTURES.is_dir():
        pytest.fail(f"Hudi fixtures not found at {FIXTURES}")
    out = tmp_path_factory.mktemp("hudi_fixtures")
    for z in sorted(FIXTURES.glob("*.zip")):
        dest = out / z.stem
        with zipfile.ZipFile(z) as zf:
            names = [n for n in zf.namelist() if not n.startswith("__MACOSX/")]
            zf.extractall(dest, members=names)
        junk = dest / "__MACOSX"
        if junk.exists():
            shutil.rmtree(junk)
    return out



# --- No silent skip -------------------------------------------------------------------
# Under ``make test`` (MOR_NO_SKIP=1) every test runs: a skip is a missing set-up step and
# fails the session, naming the test and its reason. The one exception is an engine that is
# truly optional here, Docker (MinIO through testcontainers): those skips are allowed and
# listed in the summary, so a run says exactly what it did not do.
#: A skip reason containing one of these is an optional external engine, not a failure.
OPTIONAL_ENGINES = ("needs Docker", "a Docker engine answers here")
ENV_NO_SKIP = "MOR_NO_SKIP"


def _skips(terminalreporter) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    optional, other = [], []
    for rep in terminalreporter.stats.get("skipped", []):
        reason = rep.longrepr[2] if isinstance(rep.longrepr, tuple) else str(rep.longrepr)
        target = optional if any(e in reason for e in OPTIONAL_ENGINES) else other
        target.append((rep.nodeid, reason))
    return optional, other


def pytest_terminal_summary(terminalreporter, exitstatus, config) -> None:
    import os

    optional, other = _skips(terminalreporter)
    if optional:
        terminalreporter.write_line(
            f"optional engines not run ({len(optional)} tests, Docker-only): "
            + ", ".join(sorted({nodeid.split('[')[0] for nodeid, _ in optional})))
    if other and os.environ.get(ENV_NO_SKIP) == "1":
        terminalreporter.write_line(
            f"{len(other)} tests skipped under {ENV_NO_SKIP}=1 (a missing set-up step fails the run):",
            red=True)
        for nodeid, reason in other:
            terminalreporter.write_line(f"  {nodeid}: {reason}", red=True)


def pytest_sessionfinish(session, exitstatus) -> None:
    import os

    if os.environ.get(ENV_NO_SKIP) != "1":
        return
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is None:
        return
    _, other = _skips(reporter)
    if other and session.exitstatus == 0:
        session.exitstatus = 1


# --- Two workers ------------------------------------------------------------------------
# ``make test`` runs the suite on two pytest-xdist workers (``-n 2 --dist loadgroup
# --no-loadscope-reorder``): the second worker fills the waits on JVM starts, servers and
# killed processes (the suite is CPU-bound on 2 cores all the same: `MOR_TEST_CPU` shows
# where). Each worker is its own pytest session with its own SparkSession and servers,
# started lazily as before.
#
# A test module is one unit of work, so its module fixtures are built once; Apache Hudi's
# JVM tier, the modules using the schema registry and the whole-database CDC campaign (which
# reads with those Hudi JVMs and decodes through that Apicurio JVM) are one unit, so those
# JVMs start on one worker only; so are the modules using the Hive metastore (one
# Derby-backed metastore JVM), which each worker would otherwise start for itself. The units start costliest
# first (``LONGEST_FIRST``, then campaigns, slow and server tests): a long unit picked up
# last would leave one worker running alone at the end.
#
# The units are made by the scheduler below rather than by ``xdist_group`` marks: pytest 9
# keeps a node's id where pytest-xdist 3.8 no longer renames it, so the marks are ignored.
#: One unit: Apache Hudi's JVM tier (its Hudi sessions), the modules using the schema registry
#: (one Apicurio JVM) and the whole-database CDC campaign, which uses both.
JVM_SERVERS = "hudi_and_registry"
GROUPS_BY_DIR = {
    "tests/hudi_jvm/": JVM_SERVERS,
    "tests/integration/catalog/": "hive_metastore",
    "tests/integration/sources/test_error_only_batches.py": JVM_SERVERS,
    "tests/integration/sources/test_kafka_avro_pipeline.py": JVM_SERVERS,
    "tests/integration/sources/test_kafka_avro_registry.py": JVM_SERVERS,
    "tests/integration/sources/test_kafka_debezium.py": JVM_SERVERS,
    "tests/integration/sources/test_debezium_postgres_avro.py": JVM_SERVERS,
    # reads its tables with the tier's Hudi sessions and decodes Avro through the registry
    "tests/reliability/test_cdc_database_kill.py": JVM_SERVERS,
}


def _unit(nodeid: str) -> str:
    path = nodeid.split("::", 1)[0]
    for prefix, group in GROUPS_BY_DIR.items():
        if path.startswith(prefix):
            return group
    return path


#: The longest units, longest first, from a run with ``MOR_TEST_CPU`` (at both campaign
#: sizes the poison campaign is the longest single test, then the other kill campaigns;
#: the Hudi JVM tier is the suite's largest CPU consumer).
#: Only the order depends on this list; a unit missing from it still runs.
LONGEST_FIRST = (
    "tests/reliability/test_streamer_poison_kill.py",
    "tests/reliability/test_shared_table_kill.py",
    "tests/reliability/test_streamer_kill.py",
    "tests/reliability/test_services_concurrency.py",
    JVM_SERVERS,
    "tests/integration/pipeline/test_signals.py",
)


def _rank(item) -> tuple[int, int]:
    unit = _unit(item.nodeid)
    if unit in LONGEST_FIRST:
        return (0, LONGEST_FIRST.index(unit))
    return (1 + _kind(item), 0)


def _kind(item) -> int:
    if item.get_closest_marker("campaign"):
        return 0
    if item.get_closest_marker("slow"):
        return 1
    if item.get_closest_marker("integration") or item.get_closest_marker("kafka"):
        return 2
    return 3


@pytest.hookimpl(tryfirst=True)
def pytest_xdist_make_scheduler(config, log):
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class Units(LoadScopeScheduling):
        """Work units of whole modules (and the JVM tier), in the workers' collection order."""

        def _split_scope(self, nodeid: str) -> str:
            return _unit(nodeid)

    return Units(config, log)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items) -> None:
    # on an xdist worker ``dist`` reads "no" and ``loadgroup`` says how the run is split
    if not getattr(config.option, "loadgroup", False):
        return
    first: dict[str, int] = {}
    rank: dict[str, tuple[int, int]] = {}
    for i, item in enumerate(items):
        unit = _unit(item.nodeid)
        first.setdefault(unit, i)
        rank[unit] = min(rank.get(unit, (9, 0)), _rank(item))
    items.sort(key=lambda it: (rank[_unit(it.nodeid)], first[_unit(it.nodeid)]))


def pytest_configure(config) -> None:
    from tests.support.cpu_profile import register

    register(config)  # CPU seconds per test under MOR_TEST_CPU=<prefix> (off otherwise)
