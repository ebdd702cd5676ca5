"""Session-wide fixtures: one SparkSession and one Kafka broker per test session.

Both are created lazily on first use, never at import time, so the fast subset
(``-m "not integration and not kafka"``) starts no JVM at all.
"""

from __future__ import annotations

import shutil
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

# Plain helpers live in tests.support; the names stay importable from here as before.
from tests.support.fixture_tables import FIXTURES, REPO, SHARED, fixture_table_path  # noqa: F401


@pytest.fixture(scope="session")
def spark():
    from streamer.spark import get_spark

    session = get_spark(app_name="mor-streamer-tests")
    yield session
    session.stop()


@pytest.fixture(scope="session")
def kafka() -> Iterator[object]:
    """A real Kafka broker: $KAFKA_BOOTSTRAP_SERVERS, else testcontainers, else local KRaft."""
    from streamer.testing.kafka import kafka_for_tests

    with kafka_for_tests() as broker:
        yield broker


@pytest.fixture(scope="session")
def local_s3() -> Iterator[object]:
    """A real S3-compatible server (s3proxy, bucket ``lake-bucket``), one per session.

    While it runs, the AWS variables point this process and its children at it
    (``AWS_ENDPOINT_URL``, keys, region): ``s3://lake-bucket/...`` then resolves there."""
    import os
    from unittest import mock

    from streamer.testing.s3 import LocalS3

    with LocalS3() as server, mock.patch.dict(os.environ, server.environ()):
        yield server


@pytest.fixture(scope="session")
def minio() -> Iterator[object]:
    """MinIO through testcontainers (bucket ``lake-bucket``), one per session; skipped,
    with the reason, where no Docker engine answers."""
    from streamer.testing.minio import docker_unavailable, minio_for_tests

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

