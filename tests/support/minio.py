"""MinIO through testcontainers, where a Docker engine answers: a second real S3 store.

s3proxy (:mod:`streamer.local.s3`) runs everywhere Java does; MinIO is the store many
users run, and it decides conditional PUTs (``If-None-Match: *``, ``If-Match``)
atomically where s3proxy checks then writes. The object-storage tests run over both
(the ``s3_store`` fixture of tests/conftest.py); without Docker the MinIO variants skip
with the reason :func:`docker_unavailable` gives.

testcontainers' :class:`~testcontainers.community.minio.MinioContainer` (the
``testcontainers[minio]`` extra, which brings the ``minio`` client it imports) starts the
image with ``server /data``, waits for ``/minio/health/live`` and reports the mapped port
through ``get_config()`` (``{"endpoint": "host:port", "access_key", "secret_key"}``).
Its default image (2022) predates MinIO's ``If-None-Match: *`` support, which the
project's locks require, so a 2025 release is pinned (``MOR_STREAMER_MINIO_IMAGE``
overrides it). The credentials go in as both the old (``MINIO_ACCESS_KEY``, set by
testcontainers) and the current (``MINIO_ROOT_USER``/``MINIO_ROOT_PASSWORD``) variables.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from pydantic import SecretStr

from streamer.fs_s3 import S3Settings
from streamer.local.s3 import REGION, create_buckets, store_environ

if TYPE_CHECKING:
    from testcontainers.community.minio import MinioContainer

#: A MinIO release that honours ``If-None-Match: *`` on PUT (2024-08 and later).
DEFAULT_IMAGE = "minio/minio:RELEASE.2025-04-22T22-12-26Z"
IMAGE_ENV = "MOR_STREAMER_MINIO_IMAGE"

ACCESS_KEY = "minio-identity"
SECRET_KEY = "minio-credential"  # MinIO wants at least 8 characters


def docker_unavailable(timeout_s: float = 3.0) -> str | None:
    """``None`` when MinIO can be started here, else why not (a test's skip reason)."""
    try:
        import docker
    except ImportError:
        return "the docker package is missing (pip install -e '.[test]')"
    try:
        from testcontainers.community.minio import MinioContainer  # noqa: F401 - imports `minio`
    except ImportError as e:
        return f"testcontainers' MinIO module does not import ({e}); pip install 'testcontainers[minio]'"
    client = None
    try:
        client = docker.from_env(timeout=timeout_s)
        client.ping()
    except Exception as e:  # docker raises DockerException, requests' and OS errors alike
        first = (str(e).strip().splitlines() or [""])[0][:200]
        return f"no Docker engine answers ({type(e).__name__}: {first})"
    finally:
        if client is not None:
            with contextlib.suppress(Exception):
                client.close()
    return None


@dataclass(frozen=True)
class MinioStore:
    """A running MinIO: what the tests need of any S3 store (as :class:`LocalS3` offers)."""

    endpoint: str
    access_key: str = ACCESS_KEY
    secret_key: str = field(default=SECRET_KEY, repr=False)
    buckets: tuple[str, ...] = ("lake-bucket",)

    def describe(self) -> str:
        return f"MinIO at {self.endpoint}"

    def environ(self) -> dict[str, str]:
        return store_environ(self.endpoint, self.access_key, self.secret_key)

    def settings(self) -> S3Settings:
        return S3Settings(endpoint=self.endpoint, region=REGION, access_key_id=self.access_key,
                          secret_access_key=SecretStr(self.secret_key), source="MinIO")


def minio_container(image: str | None = None, access_key: str = ACCESS_KEY,
                    secret_key: str = SECRET_KEY) -> MinioContainer:
    """testcontainers' MinioContainer, configured (not started)."""
    from testcontainers.community.minio import MinioContainer

    container = MinioContainer(image=image or os.environ.get(IMAGE_ENV) or DEFAULT_IMAGE,
                               access_key=access_key, secret_key=secret_key)
    # MinIO since 2021 reads its root credentials from these; the MINIO_ACCESS_KEY pair
    # testcontainers sets is the deprecated spelling
    container.with_env("MINIO_ROOT_USER", access_key).with_env("MINIO_ROOT_PASSWORD", secret_key)
    return container


def endpoint_of(config: dict) -> str:
    """``get_config()["endpoint"]`` (``host:port``) as the URL our settings take."""
    host_port = str(config["endpoint"])
    return host_port if "://" in host_port else f"http://{host_port}"


@contextlib.contextmanager
def minio_for_tests(buckets: tuple[str, ...] = ("lake-bucket",), image: str | None = None) -> Iterator[MinioStore]:
    """Start MinIO in Docker, create ``buckets``, yield it; removed on exit.

    Call :func:`docker_unavailable` first: this raises if Docker does not answer."""
    with minio_container(image) as container:
        config = container.get_config()
        store = MinioStore(endpoint_of(config), str(config["access_key"]), str(config["secret_key"]), buckets)
        create_buckets(store.endpoint, store.access_key, store.secret_key, buckets)
        yield store
