"""Apache Hudi's own Spark bundles (0.15, 1.0 and 1.2), one child session each per test run.

Started lazily by the first test that asks, stopped at the end of the session. Under
``make test`` (``MOR_REQUIRE_HUDI=1``) a missing Hudi environment fails the run; a
developer running pytest by hand without ``make hudi-env`` gets a skip that says why.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from tests.support import hudi as oracle


def pytest_collection_modifyitems(items):
    here = os.path.dirname(__file__)
    for item in items:
        if str(item.fspath).startswith(here):
            item.add_marker(pytest.mark.hudi_jvm)


@pytest.fixture(scope="session")
def hudi_sessions() -> Iterator[dict[str, oracle.HudiSpark]]:
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


@pytest.fixture(scope="session")
def hudi015(hudi_sessions) -> oracle.HudiSpark:
    return hudi_sessions["0.15"]


@pytest.fixture(scope="session")
def hudi10(hudi_sessions) -> oracle.HudiSpark:
    return hudi_sessions["1.0"]


@pytest.fixture(scope="session")
def hudi12(hudi_sessions) -> oracle.HudiSpark:
    """Hudi 1.2 (it writes table version 9): the tier reads our tables with it, never writes them."""
    return hudi_sessions[oracle.LATEST]
