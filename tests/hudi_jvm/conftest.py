"""Apache Hudi's JVM tier: its marker, and each release's session by name (the sessions
themselves are ``tests/conftest.py``'s ``hudi_sessions``)."""

from __future__ import annotations

import os

import pytest

from tests.support import hudi as oracle


def pytest_collection_modifyitems(items):
    here = os.path.dirname(__file__)
    for item in items:
        if str(item.fspath).startswith(here):
            item.add_marker(pytest.mark.hudi_jvm)


@pytest.fixture(scope="session")
def hudi015(hudi_sessions) -> oracle.HudiSpark:
    return hudi_sessions["0.15"]


@pytest.fixture(scope="session")
def hudi10(hudi_sessions) -> oracle.HudiSpark:
    return hudi_sessions["1.0"]


@pytest.fixture(scope="session")
def hudi12(hudi_sessions) -> oracle.HudiSpark:
    """Hudi 1.2 (it writes table version 9): the tier mostly reads our tables with it; the
    tests that let it write one (its upgrade, its global index) know it becomes version 9."""
    return hudi_sessions[oracle.LATEST]
