"""The MinIO fixture's code path without Docker: the "is Docker there" decision and its skip
reason, the container as configured for testcontainers, and the store it yields.

Where Docker answers, the ``minio`` variants of the S3 tests run against the real thing
(``s3_store`` in tests/conftest.py); here they skip, so what can be checked without a
Docker engine is checked here, with testcontainers' own classes.
"""

from __future__ import annotations

import contextlib
import sys

import pytest

import tests.support.minio as minio_mod
from tests.support.minio import (
    DEFAULT_IMAGE,
    IMAGE_ENV,
    MinioStore,
    docker_unavailable,
    endpoint_of,
    minio_container,
    minio_for_tests,
)


def test_no_docker_engine_gives_a_clear_reason(monkeypatch):
    monkeypatch.setenv("DOCKER_HOST", "tcp://127.0.0.1:1")  # loopback, nothing listens
    reason = docker_unavailable(timeout_s=1.0)
    assert reason is not None and reason.startswith("no Docker engine answers (")


def test_a_missing_minio_module_is_named(monkeypatch):
    monkeypatch.setitem(sys.modules, "testcontainers.community.minio", None)  # import fails
    reason = docker_unavailable()
    assert reason is not None and "testcontainers[minio]" in reason


def test_an_answering_engine_means_available(monkeypatch):
    import docker

    class Client:
        closed = False

        def ping(self) -> bool:
            return True

        def close(self) -> None:
            Client.closed = True

    monkeypatch.setattr(docker, "from_env", lambda timeout: Client())
    assert docker_unavailable() is None and Client.closed


class _NoDocker:
    """Stands in for testcontainers' DockerClient: the container is only configured."""

    def __init__(self, **kwargs) -> None:
        pass


def test_the_container_as_testcontainers_gets_it(monkeypatch):
    import testcontainers.core.container as tc

    monkeypatch.setattr(tc, "DockerClient", _NoDocker)
    monkeypatch.delenv(IMAGE_ENV, raising=False)
    c = minio_container()
    assert c.image == DEFAULT_IMAGE and "RELEASE.2025" in c.image  # If-None-Match: * honoured
    assert c.env["MINIO_ROOT_USER"] == c.access_key and c.env["MINIO_ROOT_PASSWORD"] == c.secret_key
    assert c.env["MINIO_ACCESS_KEY"] == c.access_key  # testcontainers' own (deprecated) spelling
    assert len(c.secret_key) >= 8  # MinIO refuses shorter root passwords
    assert "9000" in {str(p) for p in c.ports} and c._command == "server /data --address :9000"
    monkeypatch.setenv(IMAGE_ENV, "minio/minio:custom")
    assert minio_container().image == "minio/minio:custom"


def test_the_store_yielded(monkeypatch):
    """minio_for_tests: get_config()'s host:port becomes the endpoint, buckets are created,
    the container is stopped on exit."""
    events: list[str] = []

    class Container:
        def __enter__(self):
            events.append("start")
            return self

        def __exit__(self, *exc) -> None:
            events.append("stop")

        def get_config(self) -> dict:
            return {"endpoint": "localhost:32768", "access_key": "ak", "secret_key": "sk-12345678"}

    monkeypatch.setattr(minio_mod, "minio_container", lambda image=None: Container())
    monkeypatch.setattr(minio_mod, "create_buckets",
                        lambda endpoint, ak, sk, buckets: events.append(f"buckets {endpoint} {buckets}"))
    with minio_for_tests(buckets=("lake-bucket",)) as store:
        assert store == MinioStore("http://localhost:32768", "ak", "sk-12345678", ("lake-bucket",))
        env = store.environ()
        assert env["AWS_ENDPOINT_URL"] == "http://localhost:32768" and env["AWS_SECRET_ACCESS_KEY"] == "sk-12345678"
        s = store.settings()
        assert (s.endpoint, s.access_key_id, s.secret_access_key.get_secret_value()) == \
            ("http://localhost:32768", "ak", "sk-12345678")
        assert "sk-12345678" not in repr(store) and "sk-12345678" not in repr(s)
    assert events == ["start", "buckets http://localhost:32768 ('lake-bucket',)", "stop"]
    assert endpoint_of({"endpoint": "https://h:1"}) == "https://h:1"


def test_the_session_fixture_skips_without_docker():
    """What the ``minio`` fixture does where Docker is missing: skip, naming why."""
    reason = docker_unavailable(timeout_s=1.0)
    if reason is None:
        pytest.skip("a Docker engine answers here: the minio variants run for real")
    from tests import conftest

    gen = conftest.minio.__wrapped__()
    with pytest.raises(pytest.skip.Exception, match="MinIO \\(testcontainers\\) needs Docker: "):
        next(gen)
    with contextlib.suppress(StopIteration):
        next(gen)
