"""A real standalone Hive metastore for the catalog-sync tests and a local catalog demo.

Why a real server: what catalog sync must get right is what the metastore accepts and
hands back to engines - thrift structs, partition values, the table and serde parameters
Spark turns into a data source table - and only the metastore itself checks that. The
server is Apache Hive's standalone metastore 3.1.3 (``jvm/hive-metastore/pom.xml``,
resolved from Maven Central into ``.jvm/hive-metastore``) with an embedded Derby database
in a temp folder, its schema created on first start (``datanucleus.schema.autoCreateAll``).

Why 3.1.3: Hive 4's metastore dropped the thrift call ``get_table`` that the Hive 2.3
client inside Spark 3.5/4.x uses. 3.1.3 has no bind-host setting, so its port listens on
every interface of the machine (a random free port, for the life of the test session);
everything here reaches it on 127.0.0.1. Two settings stand in for parts of Hive the
standalone jar lacks: the partition-expression proxy and the housekeeping task list
(their defaults name ``hive-exec`` classes).

Every wait is bounded, and a failed start quotes the server's log.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar
from xml.sax.saxutils import escape

from streamer.errors import StreamerError
from streamer.jvm import classpath, java_executable
from streamer.local.kafka import free_port
from streamer.local.process import ManagedProcess

log = logging.getLogger(__name__)


_MAIN = "org.apache.hadoop.hive.metastore.HiveMetaStore"

_LOG4J2 = """status = error
appender.console.type = Console
appender.console.name = out
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{HH:mm:ss.SSS} %-5p %c{1} - %m%n
rootLogger.level = warn
rootLogger.appenderRef.out.ref = out
"""


class LocalHiveMetastoreError(StreamerError):
    """The local Hive metastore could not be started or reached in time."""


def _site_xml(settings: dict[str, str]) -> str:
    props = "\n".join(
        f"  <property><name>{escape(k)}</name><value>{escape(v)}</value></property>"
        for k, v in settings.items()
    )
    return f"<?xml version=\"1.0\"?>\n<configuration>\n{props}\n</configuration>\n"


@dataclass
class LocalHiveMetastore(ManagedProcess):
    """Hive's standalone metastore (thrift, embedded Derby); a context manager."""

    port: int = 0
    heap: str = "512m"

    LOG_NAME: ClassVar[str] = "metastore.log"
    #: Start-up is ~6 s on an idle 2-core machine (Derby schema creation included); more when
    #: other JVMs compete.
    START_TIMEOUT_S: ClassVar[float] = 120.0

    @property
    def uri(self) -> str:
        """What ``target.catalog.uri`` and ``hive.metastore.uris`` take."""
        return f"thrift://127.0.0.1:{self.port}"

    @property
    def warehouse(self) -> Path:
        assert self.workdir is not None
        return self.workdir / "warehouse"

    def describe(self) -> str:
        return f"local Hive metastore at {self.uri}"

    def settings(self) -> dict[str, str]:
        """The metastore's configuration (written as ``metastore-site.xml``)."""
        assert self.workdir is not None
        return {
            "javax.jdo.option.ConnectionURL": f"jdbc:derby:;databaseName={self.workdir / 'metastore_db'};create=true",
            "javax.jdo.option.ConnectionDriverName": "org.apache.derby.jdbc.EmbeddedDriver",
            "datanucleus.schema.autoCreateAll": "true",
            "metastore.schema.verification": "false",
            "metastore.warehouse.dir": self.warehouse.as_uri(),
            # the defaults name hive-exec classes, absent from the standalone jar
            "metastore.expression.proxy": "org.apache.hadoop.hive.metastore.DefaultPartitionExpressionProxy",
            "metastore.task.threads.always": "org.apache.hadoop.hive.metastore.events.EventCleanerTask",
            "metastore.event.db.notification.api.auth": "false",
        }

    # -- lifecycle ------------------------------------------------------------------
    def _launch(self, timeout_s: float) -> None:
        jars = classpath("hive-metastore")
        workdir = self._own_workdir("mor-hms-")
        conf = workdir / "conf"
        conf.mkdir(parents=True, exist_ok=True)
        self.warehouse.mkdir(parents=True, exist_ok=True)
        (conf / "metastore-site.xml").write_text(_site_xml(self.settings()))
        (conf / "log4j2.properties").write_text(_LOG4J2)
        self.port = self.port or free_port()
        cmd = [
            java_executable(), f"-Xmx{self.heap}", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
            f"-Dlog4j.configurationFile={conf / 'log4j2.properties'}",
            f"-Djava.io.tmpdir={workdir}", f"-Dderby.system.home={workdir}",
            "-cp", ":".join([str(conf), *jars]), _MAIN, "-p", str(self.port),
        ]
        started = time.monotonic()
        self._spawn(cmd, cwd=workdir)
        self._wait_for_port(self.port, timeout_s, LocalHiveMetastoreError)
        log.info("local Hive metastore ready at %s in %.1fs", self.uri, time.monotonic() - started)
