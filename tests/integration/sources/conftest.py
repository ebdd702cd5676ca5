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

