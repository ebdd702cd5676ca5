"""A real Kafka broker and schema registry for the tests, wherever one is to be had.

Order of preference (:func:`kafka_for_tests`): ``KAFKA_BOOTSTRAP_SERVERS`` if set;
testcontainers' Kafka when a Docker engine answers; else the local broker of
:mod:`streamer.local.kafka`. For the registry (:func:`schema_registry_for_tests`):
``SCHEMA_REGISTRY_URL`` if set (the ccompat base URL clients use), else the local
Apicurio of :mod:`streamer.local.registry`.

Test-only: testcontainers is an extra of the tests, never imported by ``streamer``.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Sequence

from streamer.errors import KafkaBrokerError
from streamer.local.kafka import KafkaClient, LocalKafkaBroker
from streamer.local.registry import LocalSchemaRegistry, RegistryClient, SchemaRegistryError


def docker_available(timeout_s: float = 3.0) -> bool:
    """True when a Docker engine answers (testcontainers can then run Kafka)."""
    try:
        import docker  # testcontainers depends on it

        client = docker.from_env(timeout=timeout_s)
        client.ping()
        return True
    except Exception:
        return False


@contextlib.contextmanager
def kafka_for_tests(prefer: Sequence[str] = ("env", "docker", "local")) -> Iterator[KafkaClient]:
    """Yield a client for a real broker, choosing the first available of ``prefer``."""
    for kind in prefer:
        if kind == "env" and os.environ.get("KAFKA_BOOTSTRAP_SERVERS"):
            client = KafkaClient(os.environ["KAFKA_BOOTSTRAP_SERVERS"])
            client.ping()
            yield client
            return
        if kind == "docker" and docker_available():
            from testcontainers.kafka import KafkaContainer

            with KafkaContainer() as container:
                yield KafkaClient(container.get_bootstrap_server())
            return
        if kind == "local":
            with LocalKafkaBroker() as broker:
                yield broker
            return
    raise KafkaBrokerError(f"no Kafka broker available (tried {', '.join(prefer)})")


@contextlib.contextmanager
def schema_registry_for_tests(prefer: Sequence[str] = ("env", "local")) -> Iterator[RegistryClient]:
    """Yield a client for a real registry, choosing the first available of ``prefer``."""
    for kind in prefer:
        if kind == "env" and os.environ.get("SCHEMA_REGISTRY_URL"):
            client = RegistryClient(os.environ["SCHEMA_REGISTRY_URL"].rstrip("/"))
            client.ping()
            yield client
            return
        if kind == "local":
            with LocalSchemaRegistry() as registry:
                yield registry
            return
    raise SchemaRegistryError(f"no schema registry available (tried {', '.join(prefer)})")
