"""Fixtures for the source tests: one real schema registry per test session.

Kept here (not in ``tests/conftest.py``) because only Avro source tests need it; it
starts lazily on first use, so nothing else pays its start-up (~7 s).
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
def postgres() -> Iterator[object]:
    """A real PostgreSQL server with ``wal_level=logical`` (the change-data-capture tests)."""
    from tests.support.postgres import LocalPostgres

    with LocalPostgres() as server:
        yield server


@pytest.fixture(scope="session")
def kafka_connect(kafka) -> Iterator[object]:
    """A real Kafka Connect worker with Debezium's Postgres connector, on the session's broker."""
    from tests.support.connect import LocalConnect

    with LocalConnect(bootstrap_servers=kafka.bootstrap_servers) as worker:
        yield worker
