"""A real PostgreSQL server for the change-data-capture tests, in a temporary folder.

``initdb`` then ``postgres`` from the machine's PostgreSQL (15 here; Debian's
``postgresql`` package elsewhere), listening on a loopback port with ``wal_level=logical``
so Debezium's Postgres connector can stream its changes through ``pgoutput``. Trust
authentication on loopback only; durability settings off, as a test server needs.

PostgreSQL refuses to run as root: under root the server runs as the ``postgres`` system
user (or ``nobody``), which then owns the data folder. Statements go through ``psql``, so
the tests need no Python driver.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from streamer.errors import StreamerError
from streamer.local.kafka import free_port
from streamer.local.process import ManagedProcess


class PostgresError(StreamerError):
    """The test PostgreSQL server could not be started or refused a statement."""


def postgres_bin(name: str) -> str:
    """A PostgreSQL program: on ``PATH``, else the newest ``/usr/lib/postgresql/*/bin``."""
    found = shutil.which(name)
    if found:
        return found
    candidates = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))
    if candidates:
        return candidates[-1]
    raise PostgresError(f"PostgreSQL's {name} not found: install PostgreSQL 15+ (Debian/Ubuntu: "
                        "apt-get install postgresql) for the change-data-capture tests")


def _run_as() -> str | None:
    """The system user the server runs as when we are root (PostgreSQL refuses root)."""
    if os.geteuid() != 0:
        return None
    for name in ("postgres", "nobody"):
        try:
            pwd.getpwnam(name)
            return name
        except KeyError:
            continue
    raise PostgresError("running as root and no 'postgres' or 'nobody' user to run PostgreSQL as")


@dataclass
class LocalPostgres(ManagedProcess):
    """One PostgreSQL server on ``127.0.0.1:port``, superuser ``postgres``."""

    port: int = 0

    LOG_NAME: ClassVar[str] = "postgres.log"
    START_TIMEOUT_S: ClassVar[float] = 60.0

    def describe(self) -> str:
        return f"PostgreSQL at 127.0.0.1:{self.port}"

    @property
    def dsn(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def _launch(self, timeout_s: float) -> None:
        workdir = self._own_workdir("mor-postgres-")
        user = _run_as()
        if user is not None:
            shutil.chown(workdir, user)
        data = workdir / "data"
        self.port = self.port or free_port()
        if not (data / "PG_VERSION").exists():
            self._initdb(data, user)
        self._spawn([postgres_bin("postgres"), "-D", str(data), "-p", str(self.port)], user=user)
        self._wait_for_port(self.port, timeout_s, PostgresError)
        deadline = time.monotonic() + timeout_s
        while self.sql("SELECT 1", check=False) != "1":  # the port opens before it takes queries
            if time.monotonic() > deadline:
                raise PostgresError(f"{self.describe()} took no query within {timeout_s:.0f}s:\n{self.log_tail()}")
            time.sleep(0.2)

    def _initdb(self, data: Path, user: str | None) -> None:
        out = subprocess.run(
            [postgres_bin("initdb"), "-D", str(data), "-U", "postgres", "--auth=trust", "-E", "UTF8",
             "--no-sync"], capture_output=True, text=True, timeout=120, user=user)
        if out.returncode != 0:
            raise PostgresError(f"initdb failed: {out.stderr.strip() or out.stdout.strip()}")
        settings = {
            "listen_addresses": "'127.0.0.1'",
            "unix_socket_directories": f"'{data}'",
            "wal_level": "logical",
            # one slot (and a sender while its connector runs) per database the session's
            # CDC tests capture: a test server, not a budget
            "max_wal_senders": "24",
            "max_replication_slots": "24",
            "fsync": "off",
            "synchronous_commit": "off",
            "full_page_writes": "off",
            "shared_buffers": "32MB",
            "max_connections": "80",
        }
        with open(data / "postgresql.conf", "a", encoding="utf-8") as f:
            f.writelines(f"{k} = {v}\n" for k, v in settings.items())

    def sql(self, statements: str, *, database: str = "postgres", check: bool = True) -> str:
        """Run ``statements`` with ``psql`` (one transaction per statement unless the text
        says BEGIN); the last result as unaligned text, fields separated by ``|``."""
        out = subprocess.run(
            ["psql", "-h", "127.0.0.1", "-p", str(self.port), "-U", "postgres", "-d", database,
             "-v", "ON_ERROR_STOP=1", "-X", "-q", "-A", "-t", "-c", statements],
            capture_output=True, text=True, timeout=60, env={**os.environ, "PGCONNECT_TIMEOUT": "5"})
        if out.returncode != 0:
            if not check:
                return ""
            raise PostgresError(f"psql failed on {statements[:200]!r}: {out.stderr.strip()}")
        return out.stdout.strip()

    def rows(self, query: str, *, database: str = "postgres") -> list[tuple[str | None, ...]]:
        """The rows of ``query`` as text (SQL NULL as None), through ``psql``'s CSV output."""
        import csv
        import io

        out = subprocess.run(
            ["psql", "-h", "127.0.0.1", "-p", str(self.port), "-U", "postgres", "-d", database,
             "-v", "ON_ERROR_STOP=1", "-X", "-q", "--csv", "-P", "null=\\N", "-c", query],
            capture_output=True, text=True, timeout=60)
        if out.returncode != 0:
            raise PostgresError(f"psql failed on {query[:200]!r}: {out.stderr.strip()}")
        parsed = list(csv.reader(io.StringIO(out.stdout)))
        return [tuple(None if v == "\\N" else v for v in row) for row in parsed[1:]]

    def stop(self, timeout_s: float | None = None) -> None:
        """Fast shutdown (SIGINT): SIGTERM would wait for every client, replication included."""
        proc = self._proc
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(self.STOP_TIMEOUT_S if timeout_s is None else timeout_s)
        super().stop(timeout_s)
