"""A real MariaDB server for the MySQL change-data-capture tests, in a temporary folder.

``mariadb-install-db`` then ``mariadbd`` from the machine's MariaDB (10.11 here: Debian's
``mariadb-server``, which ``make setup`` installs; Debian packages no Oracle MySQL), with
``--no-defaults`` so no ``/etc/mysql`` file applies, listening on a loopback port with the
binary log on in row format and full row images, as Debezium's binlog connectors need.
``root`` has no password and connects through the server's socket in the work folder;
the connector's user (:attr:`LocalMariaDB.user`) has the replication grants and a password,
over TCP on 127.0.0.1. Durability settings off, as a test server needs.

``mariadbd`` refuses root unless told: under root it runs as root (``--user=root``) in the
folder it owns. Statements go through the ``mariadb`` client, so the tests need no Python
driver; results come back as its XML, which keeps NULL apart from the text ``NULL``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from streamer.errors import StreamerError
from streamer.local.kafka import free_port
from streamer.local.process import ManagedProcess

_SBIN = ("/usr/sbin", "/usr/local/sbin", "/usr/local/mysql/bin")
_NIL = "{http://www.w3.org/2001/XMLSchema-instance}nil"


class MariaDBError(StreamerError):
    """The test MariaDB server could not be started or refused a statement."""


def mariadb_bin(*names: str) -> str:
    """The first of ``names`` on ``PATH`` or in the sbin folders (servers live in /usr/sbin)."""
    for name in names:
        found = shutil.which(name) or shutil.which(name, path=os.pathsep.join(_SBIN))
        if found:
            return found
    raise MariaDBError(f"MariaDB's {names[0]} not found: run `make mariadb` (as root it installs Debian's "
                       "mariadb-server), or install MariaDB 10.11+ (apt-get install mariadb-server) for the "
                       "MySQL change-data-capture tests")


@dataclass
class LocalMariaDB(ManagedProcess):
    """One MariaDB server on ``127.0.0.1:port`` with its binary log in row format."""

    port: int = 0
    #: The connector's user: replication grants, password authentication over TCP.
    user: str = "debezium"
    password: str = "dbz-secret"

    LOG_NAME: ClassVar[str] = "mariadb.log"
    START_TIMEOUT_S: ClassVar[float] = 60.0
    #: How long one client call may take.
    CLIENT_TIMEOUT_S: ClassVar[float] = 60.0

    def describe(self) -> str:
        return f"MariaDB at 127.0.0.1:{self.port}"

    @property
    def socket_path(self) -> Path:
        assert self.workdir is not None
        return self.workdir / "mariadb.sock"

    def _launch(self, timeout_s: float) -> None:
        workdir = self._own_workdir("mor-mariadb-")
        data = workdir / "data"
        self.port = self.port or free_port()
        as_root = ["--user=root"] if os.geteuid() == 0 else []
        if not (data / "mysql").is_dir():
            self._install_db(data, as_root)
        self._spawn([
            mariadb_bin("mariadbd", "mysqld"), "--no-defaults", *as_root,
            f"--datadir={data}", f"--socket={self.socket_path}", f"--pid-file={workdir / 'mariadb.pid'}",
            f"--port={self.port}", "--bind-address=127.0.0.1", "--skip-name-resolve",
            f"--log-bin={data / 'binlog'}", "--binlog-format=ROW", "--binlog-row-image=FULL",
            "--server-id=1",  # the replicas (connectors) take other ids
            "--character-set-server=utf8mb4", "--collation-server=utf8mb4_bin",
            "--innodb-buffer-pool-size=32M", "--innodb-flush-log-at-trx-commit=0", "--sync-binlog=0",
            "--max-connections=40",
        ], cwd=workdir)
        self._wait_for_port(self.port, timeout_s, MariaDBError)
        deadline = time.monotonic() + timeout_s
        while self.sql("SELECT 1", check=False) != "1":  # the port opens before root's socket answers
            self._raise_if_exited(MariaDBError)
            if time.monotonic() > deadline:
                tail = self.log_tail()
                self.stop()
                raise MariaDBError(f"{self.describe()} took no query within {timeout_s:.0f}s:\n{tail}")
            time.sleep(0.2)
        self.sql(f"CREATE USER IF NOT EXISTS '{self.user}'@'127.0.0.1' IDENTIFIED BY '{self.password}';"
                 # what Debezium's MariaDB/MySQL connectors read: the tables (snapshot), the
                 # binlog (a replica's stream) and the server's binlog state
                 "GRANT SELECT, RELOAD, SHOW DATABASES, LOCK TABLES, REPLICATION SLAVE, REPLICATION CLIENT, "
                 f"BINLOG MONITOR ON *.* TO '{self.user}'@'127.0.0.1'")

    def _install_db(self, data: Path, as_root: list[str]) -> None:
        try:
            out = subprocess.run(
                [mariadb_bin("mariadb-install-db", "mysql_install_db"), "--no-defaults", *as_root,
                 f"--datadir={data}", "--auth-root-authentication-method=normal", "--skip-test-db",
                 "--skip-name-resolve"],
                capture_output=True, text=True, timeout=120)
        except subprocess.TimeoutExpired as e:
            raise MariaDBError(f"mariadb-install-db took more than {e.timeout:.0f}s") from e
        if out.returncode != 0:
            raise MariaDBError(f"mariadb-install-db failed (code {out.returncode}): "
                               f"{(out.stderr.strip() or out.stdout.strip())[-2000:]}")

    def _client(self, args: list[str], statements: str, database: str | None) -> subprocess.CompletedProcess[str]:
        cmd = [mariadb_bin("mariadb", "mysql"), "--no-defaults", f"--socket={self.socket_path}", "-u", "root",
               "--connect-timeout=5", *args]
        if database is not None:
            cmd += ["-D", database]
        try:
            return subprocess.run([*cmd, "-e", statements], capture_output=True, text=True,
                                  timeout=self.CLIENT_TIMEOUT_S)
        except subprocess.TimeoutExpired as e:
            raise MariaDBError(f"mariadb client took more than {e.timeout:.0f}s on {statements[:200]!r}") from e

    def sql(self, statements: str, *, database: str | None = None, check: bool = True) -> str:
        """Run ``statements`` (``;``-separated, one session: ``BEGIN; ...; COMMIT`` is one
        transaction) as root; the last result as tab-separated text without column names."""
        out = self._client(["--batch", "--skip-column-names"], statements, database)
        if out.returncode != 0:
            if not check:
                return ""
            raise MariaDBError(f"mariadb failed on {statements[:200]!r}: {out.stderr.strip()}")
        return out.stdout.strip()

    def rows(self, query: str, *, database: str | None = None) -> list[dict[str, str | None]]:
        """The rows of ``query``, each ``{column: text}`` as the server prints the value
        (SQL NULL as None), in the server's order."""
        out = self._client(["--xml"], query, database)
        if out.returncode != 0:
            raise MariaDBError(f"mariadb failed on {query[:200]!r}: {out.stderr.strip()}")
        root = ET.fromstring(out.stdout)
        return [{f.attrib["name"]: (None if f.get(_NIL) == "true" else (f.text or "")) for f in row.iter("field")}
                for row in root.iter("row")]
