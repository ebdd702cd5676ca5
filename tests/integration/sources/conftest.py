"""Fixtures for the source tests: one real schema registry and one MariaDB server per test session.

Kept here (not in ``tests/conftest.py``) because only source tests need them (the Avro ones
the registry, the MySQL change-data-capture ones MariaDB); each starts lazily on first use,
so nothing else pays its start-up (~7 s, ~2 s).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest


@pytest.fixture(scope="session")
def schema_registry() -> Iterator[object]:
    """A real Confluent-compatible registry: $SCHEMA_REGISTRY_URL, else local Apicurio."""
    from tests.support.kafka import schema_registry_for_tests

    with schema_registry_for_tests() as registry:
        yield registry


@pytest.fixture(scope="session")
def mariadb() -> Iterator[object]:
    """A real MariaDB server with its binary log in row format (the MySQL change-data-capture
    tests), one per test session, started on first use (~2 s)."""
    from tests.support.mariadb import LocalMariaDB

    with LocalMariaDB() as server:
        yield server
