"""A real Confluent-compatible schema registry (Apicurio Registry) for trying the project out and for tests.

Why not a fake HTTP server: the Kafka Avro source must work against what producers
really do — ``confluent_kafka``'s ``AvroSerializer`` registering schema versions under
``<topic>-value`` and framing records with the ids the registry hands out — so the
tests talk to a real registry through its Confluent-compatible API
(``/apis/ccompat/v7``), the same endpoints a Confluent Schema Registry serves.

Apicurio comes from Maven Central (``jvm/apicurio/pom.xml`` unpacks its ``all`` tar.gz
into ``.jvm/apicurio``) and runs with the machine's Java on a free 127.0.0.1 port,
with in-memory H2 storage (nothing survives a stop), small heap, quiet logs, auth and
multitenancy off — nothing in it calls out of the machine.

``streamer kafka-local --registry`` starts it; the tests use ``SCHEMA_REGISTRY_URL`` if
set, else this registry (``tests/support/kafka.py``).

Every wait is bounded: a registry that does not answer raises
:class:`SchemaRegistryError` naming the URL and the tail of its log, never a hang.
"""

from __future__ import annotations

import logging
import os
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from streamer.errors import EnvironmentSetupError, StreamerError
from streamer.jvm import java_executable, jvm_dir
from streamer.local.kafka import free_port
from streamer.local.process import ManagedProcess

log = logging.getLogger(__name__)

#: Path of the Confluent-compatible API under the registry's root.
CCOMPAT_PATH = "/apis/ccompat/v7"

_HTTP_TIMEOUT_S = 5.0


class SchemaRegistryError(StreamerError):
    """The schema registry could not be started, reached or stopped in time."""


@dataclass
class RegistryClient:
    """The ccompat base URL of any registry, with a bounded liveness check."""

    url: str
    timeout_s: float = _HTTP_TIMEOUT_S

    def ping(self) -> None:
        """Raise :class:`SchemaRegistryError` unless ``GET {url}/subjects`` answers 200."""
        self.subjects()

    def subjects(self) -> list[str]:
        """Registered subjects (the call clients make first, so it doubles as a health check).

        Asked through ``confluent_kafka``'s own client, the one the Avro source uses.
        """
        from confluent_kafka.schema_registry import SchemaRegistryClient

        client = SchemaRegistryClient(
            {"url": self.url, "timeout": max(1, round(self.timeout_s)), "max.retries": 0}
        )
        try:
            body: Any = client.get_subjects()
        except Exception as e:  # httpx transport errors, SchemaRegistryError, bad JSON
            raise SchemaRegistryError(
                f"schema registry at {self.url} did not answer GET /subjects within "
                f"{self.timeout_s:.0f}s (is it stopped?): {e}"
            ) from e
        if not isinstance(body, list):
            raise SchemaRegistryError(
                f"schema registry at {self.url}: GET /subjects returned {body!r}"
            )
        return [str(s) for s in body]


def apicurio_home() -> Path:
    """Where ``make jars`` unpacks Apicurio (``$MOR_STREAMER_JVM_DIR/apicurio`` if set)."""
    return jvm_dir("apicurio") / "apicurio"


def _runner_jar(home: Path) -> Path:
    """The app's launcher: ``quarkus-run.jar`` (3.1+ fast-jar) or ``*-runner.jar`` (2.x, 3.0)."""
    fast = home / "quarkus-run.jar"
    if fast.is_file():
        return fast
    legacy = sorted(home.glob("*-runner.jar"))
    if legacy:
        return legacy[-1]
    raise EnvironmentSetupError(
        f"no Apicurio Registry in {home}; run `make jars` (Maven unpacks "
        "io.apicurio:apicurio-registry-app:tar.gz:all from jvm/apicurio/pom.xml) or set MOR_STREAMER_JVM_DIR"
    )


@dataclass
class LocalSchemaRegistry(ManagedProcess, RegistryClient):
    """Apicurio Registry started from ``.jvm/apicurio`` with in-memory storage.

    Use as a context manager, or call :meth:`start` / :meth:`stop`. ``url`` is the
    Confluent-compatible base URL (``http://127.0.0.1:PORT/apis/ccompat/v7``).
    """

    url: str = ""
    port: int = 0
    home: Path | None = None
    heap: str = "256m"

    LOG_NAME: ClassVar[str] = "registry.log"
    # The default START_TIMEOUT_S (120 s) covers a cold start: ~7 s on an idle 2-core
    # machine, 10-15 s when other JVMs compete for it.
    #: SIGTERM lets Quarkus shut down (storage is in memory: nothing survives a stop).
    STOP_TIMEOUT_S: ClassVar[float] = 20.0

    def describe(self) -> str:
        return f"schema registry at {self.url}"

    # -- lifecycle ------------------------------------------------------------------
    def _launch(self, timeout_s: float) -> None:
        jar = _runner_jar(self.home or apicurio_home())
        workdir = self._own_workdir("mor-registry-")
        self.port = self.port or free_port()
        self.url = f"http://127.0.0.1:{self.port}{CCOMPAT_PATH}"
        started = time.monotonic()
        self._spawn(self._java_cmd(jar), cwd=workdir, env=self._env())
        self._wait_until_ready(timeout_s)
        log.info("schema registry ready at %s in %.1fs", self.url, time.monotonic() - started)

    def ping(self) -> None:
        self._raise_if_exited(SchemaRegistryError)
        super().ping()

    # -- internals ------------------------------------------------------------------
    def _java_cmd(self, jar: Path) -> list[str]:
        """JVM flags tuned for a short-lived test server, then Quarkus/Apicurio settings.

        C1-only JIT and SerialGC cut start-up roughly in half on small machines (the
        server runs for one test session; peak throughput does not matter). Settings are
        given both plain and ``%prod.``-prefixed because Apicurio 2.x sets several of them
        per profile in its bundled application.properties, which would otherwise win.
        """
        assert self.workdir is not None
        settings = {
            "quarkus.http.host": "127.0.0.1",
            "quarkus.http.port": str(self.port),
            # 3.x serves health/metrics on a separate management port (default 0.0.0.0:9000).
            "quarkus.management.host": "127.0.0.1",
            "quarkus.management.port": str(free_port()),
            "quarkus.http.access-log.enabled": "false",
            "quarkus.log.level": "WARN",
            'quarkus.log.category."io.apicurio".level': "WARN",
            # In-memory H2, one database per process; a small pool (the default opens 20).
            "quarkus.datasource.jdbc.url": f"jdbc:h2:mem:registry_{uuid.uuid4().hex}",
            "quarkus.datasource.jdbc.initial-size": "2",
            "quarkus.datasource.jdbc.min-size": "2",
            "quarkus.datasource.jdbc.max-size": "16",
            # No identity provider, tenant manager or event sink: nothing leaves the machine.
            "quarkus.oidc.tenant-enabled": "false",
            "registry.auth.enabled": "false",
            "registry.enable.multitenancy": "false",
            "registry.events.ksink": "",
            "apicurio.storage.snapshot.location": str(self.workdir),
            "apicurio.import.work-dir": str(self.workdir),
        }
        props = [f"-D{k}={v}" for k, v in settings.items()]
        props += [f"-D%prod.{k}={v}" for k, v in settings.items()]
        return [
            java_executable(),
            f"-Xmx{self.heap}",
            "-Xms64m",
            "-XX:+UseSerialGC",
            "-XX:TieredStopAtLevel=1",
            "-Djava.awt.headless=true",
            f"-Djava.io.tmpdir={self.workdir}",
            *props,
            "-jar",
            str(jar),
        ]

    def _env(self) -> dict[str, str]:
        """Apicurio 2.x reads these env vars in its %prod profile; set them to match."""
        env = dict(os.environ)
        env.update(
            {
                "HTTP_PORT": str(self.port),
                "LOG_LEVEL": "WARN",
                "REGISTRY_LOG_LEVEL": "WARN",
                "ENABLE_ACCESS_LOG": "false",
                "AUTH_ENABLED": "false",
            }
        )
        for key in ("REGISTRY_DATASOURCE_URL", "KAFKA_BOOTSTRAP_SERVERS", "K_SINK"):
            env.pop(key, None)  # a caller's settings must not switch storage or add sinks
        return env

    def _wait_until_ready(self, timeout_s: float) -> None:
        probe = RegistryClient(self.url, timeout_s=2)
        self._wait_until(probe.ping, timeout_s, SchemaRegistryError, retry_on=(SchemaRegistryError,),
                         waits_for="answer GET /subjects", hint=_hint)


def _hint(log_tail: str) -> str:
    if "UnsupportedClassVersionError" in log_tail:
        return " — this Apicurio build needs a newer Java than the one on PATH/JAVA_HOME"
    if "Port already bound" in log_tail or "Address already in use" in log_tail:
        return " — its port was taken between choosing and binding it; retry"
    return ""
