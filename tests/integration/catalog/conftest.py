"""A real Hive metastore for the catalog tests: one per session, on a free port."""

from __future__ import annotations

from collections.abc import Iterator

import pytest


@pytest.fixture(scope="session")
def hive_metastore() -> Iterator[object]:
    """Hive's standalone metastore 3.1.3 with embedded Derby (streamer/local/hive.py)."""
    from streamer.local.hive import LocalHiveMetastore

    with LocalHiveMetastore() as hms:
        yield hms
        hms.kill()  # the session is over: a clean shutdown serves nobody (tests/conftest.py)
