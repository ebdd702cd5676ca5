"""A real Kafka Connect worker (standalone mode) with Debezium's connectors, for the tests.

The worker runs from ``.jvm/connect`` (``connect-runtime``, resolved by ``make jars``) with
``plugin.path`` at ``.jvm/connect-plugins``, where Debezium's plugin archive is unpacked,
as a user installs a connector. Standalone mode keeps the source offsets in a file in the
work folder, so a worker killed and started again resumes where its last flush left it,
as a production worker does from its offsets topic. Connectors are created through the
REST API on a loopback port.
"""

from __future__ import annotations

import json
import os
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from importlib import resources
from typing import Any, ClassVar

from streamer.errors import StreamerError
from streamer.jvm import classpath, java_executable, jvm_dir
from streamer.local.kafka import free_port
from streamer.local.process import ManagedProcess


class ConnectError(StreamerError):
    """The Kafka Connect worker could not be started or refused a request."""


@dataclass
class LocalConnect(ManagedProcess):
    """One standalone Connect worker against ``bootstrap_servers``, REST on ``port``."""

    bootstrap_servers: str = ""
    port: int = 0
    heap: str = "512m"
    #: Converters for keys and values; ``schemas`` embeds the Connect schema in JSON.
    converter: str = "org.apache.kafka.connect.json.JsonConverter"
    schemas: bool = False

    LOG_NAME: ClassVar[str] = "connect.log"
    START_TIMEOUT_S: ClassVar[float] = 120.0

    def describe(self) -> str:
        return f"Kafka Connect at 127.0.0.1:{self.port}"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _launch(self, timeout_s: float) -> None:
        workdir = self._own_workdir("mor-connect-")
        self.port = self.port or free_port()
        settings = {
            "bootstrap.servers": self.bootstrap_servers,
            "key.converter": self.converter,
            "value.converter": self.converter,
            "key.converter.schemas.enable": str(self.schemas).lower(),
            "value.converter.schemas.enable": str(self.schemas).lower(),
            "offset.storage.file.filename": str(workdir / "offsets"),
            "offset.flush.interval.ms": "500",
            "plugin.path": str(jvm_dir("connect-plugins") / "connect-plugins"),
            "listeners": f"http://127.0.0.1:{self.port}",
        }
        worker = workdir / "worker.properties"
        worker.write_text("".join(f"{k}={v}\n" for k, v in settings.items()), encoding="utf-8")
        log4j = resources.files("streamer.resources").joinpath("log4j2.properties")
        cmd = [
            java_executable(), f"-Xmx{self.heap}", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
            "-Djava.awt.headless=true", f"-Dlog4j2.configurationFile=file:{log4j}",
            "-cp", os.pathsep.join(classpath("connect")),
            "org.apache.kafka.connect.cli.ConnectStandalone", str(worker),
        ]
        self._spawn(cmd, cwd=workdir)
        self._wait_for_port(self.port, timeout_s, ConnectError)
        deadline = time.monotonic() + timeout_s
        while True:  # the REST server answers before the worker has loaded its plugins
            try:
                self._request("GET", "/connector-plugins")
                return
            except ConnectError:
                if time.monotonic() > deadline:
                    raise
                self._raise_if_exited(ConnectError)
                time.sleep(0.5)

    def ping(self) -> None:
        self._raise_if_exited(ConnectError)
        self._request("GET", "/")

    def _request(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.url + path, data=data, method=method,
                                     headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=30) as resp:
                text = resp.read().decode()
        except urllib.error.HTTPError as e:
            raise ConnectError(f"{method} {path}: HTTP {e.code}: {e.read().decode(errors='replace')[:500]}") from e
        except OSError as e:
            raise ConnectError(f"{method} {path}: {e}") from e
        return json.loads(text) if text else None

    def create(self, name: str, config: dict[str, str]) -> None:
        """Create (or reconfigure) connector ``name``."""
        self._request("PUT", f"/connectors/{name}/config", config)

    def delete(self, name: str) -> None:
        """Stop and remove connector ``name`` (its offsets stay in the worker's file)."""
        self._request("DELETE", f"/connectors/{name}")

    def wait_running(self, name: str, timeout_s: float = 60.0) -> None:
        """Until the connector and its task run; a failed task raises with its trace."""
        deadline = time.monotonic() + timeout_s
        state: Any = None
        while time.monotonic() < deadline:
            try:
                state = self._request("GET", f"/connectors/{name}/status")
            except ConnectError:
                state = None
            if state:
                tasks = state.get("tasks") or []
                failed = [t for t in tasks if t.get("state") == "FAILED"]
                if failed:
                    raise ConnectError(f"connector {name} failed: {failed[0].get('trace', '')[:2000]}")
                if state["connector"]["state"] == "RUNNING" and tasks and all(
                        t.get("state") == "RUNNING" for t in tasks):
                    return
            time.sleep(0.5)
        raise ConnectError(f"connector {name} not running after {timeout_s:.0f}s: {state}")


def postgres_connector(*, port: int, database: str, prefix: str, tables: str, slot: str,
                       publication: str = "filtered") -> dict[str, str]:
    """Debezium's Postgres connector on a loopback server (``pgoutput``, no extra plug-in).

    ``publication``: ``filtered`` publishes the tables that exist when the connector starts;
    ``all_tables`` also those created later (a whole database's new tables)."""
    return {
        "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
        "database.hostname": "127.0.0.1",
        "database.port": str(port),
        "database.user": "postgres",
        "database.password": "unused",  # trust authentication on loopback
        "database.dbname": database,
        "topic.prefix": prefix,
        "plugin.name": "pgoutput",
        "slot.name": slot,
        "publication.name": f"{slot}_pub",
        "publication.autocreate.mode": publication,
        "table.include.list": tables,
        "snapshot.mode": "initial",
        "tasks.max": "1",
        "decimal.handling.mode": "string",
        "time.precision.mode": "connect",
    }


#: Debezium's connector classes for a binlog database: MySQL's, and MariaDB's (its own
#: connector since Debezium 2.7; the MySQL connector no longer takes a MariaDB server).
BINLOG_CONNECTORS = {
    "mysql": "io.debezium.connector.mysql.MySqlConnector",
    "mariadb": "io.debezium.connector.mariadb.MariaDbConnector",
}


def binlog_connector(*, flavour: str, port: int, user: str, password: str, server_id: int, database: str,
                     prefix: str, tables: str, history_servers: str) -> dict[str, str]:
    """Debezium's MySQL or MariaDB connector (``flavour``) on a loopback server, reading
    ``database``'s binary log as a replica with id ``server_id`` (unique among the server's
    replicas); the schema history (the DDL it replays on a restart) in a Kafka topic of
    ``history_servers``."""
    return {
        "connector.class": BINLOG_CONNECTORS[flavour],
        "database.hostname": "127.0.0.1",
        "database.port": str(port),
        "database.user": user,
        "database.password": password,
        "database.server.id": str(server_id),
        "database.ssl.mode": {"mysql": "disabled", "mariadb": "disable"}[flavour],
        "topic.prefix": prefix,
        "database.include.list": database,
        "table.include.list": tables,
        "schema.history.internal.kafka.bootstrap.servers": history_servers,
        "schema.history.internal.kafka.topic": f"{prefix}.schema-history",
        "include.schema.changes": "false",
        "snapshot.mode": "initial",
        "snapshot.locking.mode": "minimal",
        "tasks.max": "1",
        "decimal.handling.mode": "string",
    }
