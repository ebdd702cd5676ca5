"""Fixtures for the source tests: one MariaDB server per test session.

Kept here (not in ``tests/conftest.py``) because only source tests need it (the MySQL
change-data-capture ones); it starts lazily on first use, so nothing else pays its
start-up (~2 s). The schema registry is ``tests/conftest.py``'s (a campaign uses it too).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest


@pytest.fixture(scope="session")
def mariadb() -> Iterator[object]:
    """A real MariaDB server with its binary log in row format (the MySQL change-data-capture
    tests), one per test session, started on first use (~2 s)."""
    from tests.support.mariadb import LocalMariaDB

    with LocalMariaDB() as server:
        yield server
