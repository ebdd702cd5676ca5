"""A real S3-compatible server (s3proxy) for the object-storage tests and a local S3 demo.

Why a real server rather than a mock: what breaks on object stores is their semantics -
no rename, no append, conditional PUTs (``If-None-Match: *``) the locks depend on, the
AWS SDK's checksums and signing - and only a server speaking the S3 protocol exercises
them. s3proxy (``org.gaul:s3proxy``, resolved from Maven Central by ``jvm/s3proxy/pom.xml``
into ``.jvm/s3proxy``) keeps the objects in its memory (jclouds ``transient``; or a local
folder with ``filesystem-nio2`` - the plain ``filesystem`` provider lists folders as
4096-byte files) on a free 127.0.0.1 port with fixed local credentials; nothing leaves
the machine. 3.0.0 honours conditional PUTs (check-then-write, see streamer/fs_s3.py).

:meth:`LocalS3.environ` returns the variables that point our filesystem, boto3 and
hudi-rs at it (``AWS_ENDPOINT_URL``, keys, region, ``AWS_ALLOW_HTTP``); every wait is
bounded and a failed start quotes the server's log.
"""

from __future__ import annotations

import contextlib
import logging
import time
from dataclasses import dataclass, field
from typing import ClassVar

from pydantic import SecretStr

from streamer.errors import StreamerError
from streamer.fs_s3 import S3Settings
from streamer.jvm import classpath, java_executable
from streamer.local.kafka import free_port
from streamer.local.process import ManagedProcess

log = logging.getLogger(__name__)


ACCESS_KEY = "local-identity"
SECRET_KEY = "local-credential"
REGION = "us-east-1"

_LOGBACK = """<configuration>
  <appender name="OUT" class="ch.qos.logback.core.ConsoleAppender">
    <encoder><pattern>%d{HH:mm:ss.SSS} %-5level %logger{20} - %msg%n</pattern></encoder>
  </appender>
  <root level="WARN"><appender-ref ref="OUT"/></root>
</configuration>
"""


def store_environ(endpoint: str, access_key: str, secret_key: str) -> dict[str, str]:
    """The AWS variables that point our filesystem, boto3 and hudi-rs at a local store."""
    return {
        "AWS_ENDPOINT_URL": endpoint,
        "AWS_ACCESS_KEY_ID": access_key,
        "AWS_SECRET_ACCESS_KEY": secret_key,
        "AWS_REGION": REGION,
        "AWS_DEFAULT_REGION": REGION,
        "AWS_ALLOW_HTTP": "true",  # hudi-rs (object_store) refuses http:// otherwise
        # s3proxy rejects the AWS SDK's default streaming checksums (pyarrow 26)
        "AWS_REQUEST_CHECKSUM_CALCULATION": "WHEN_REQUIRED",
        "AWS_RESPONSE_CHECKSUM_VALIDATION": "WHEN_REQUIRED",
    }


def create_buckets(endpoint: str, access_key: str, secret_key: str, buckets: tuple[str, ...]) -> None:
    import boto3

    client = boto3.client("s3", endpoint_url=endpoint, region_name=REGION,
                          aws_access_key_id=access_key, aws_secret_access_key=secret_key)
    for bucket in buckets:
        with contextlib.suppress(client.exceptions.BucketAlreadyOwnedByYou):  # a restarted server
            client.create_bucket(Bucket=bucket)


class LocalS3Error(StreamerError):
    """The local S3 server could not be started or reached in time."""


@dataclass
class LocalS3(ManagedProcess):
    """s3proxy on a loopback port; a context manager.

    ``buckets`` are created on start (bucket names must be DNS-valid: ``lake-bucket``).
    ``backend``: jclouds ``transient`` (in the server's memory, the default) or
    ``filesystem-nio2`` (``workdir/data``). Why in memory: s3proxy 3.0's filesystem
    backend lists a folder inconsistently while objects are written into it (existing
    files missing from a listing, as many as hundreds of 400), which a reader of a table
    being written would take for lost files; AWS S3 lists consistently.
    """

    buckets: tuple[str, ...] = ("lake-bucket",)
    backend: str = "transient"
    #: The credentials the server accepts (a test may give a recognisable secret).
    access_key: str = ACCESS_KEY
    secret_key: str = field(default=SECRET_KEY, repr=False)
    port: int = 0
    heap: str = "768m"  # the transient backend holds every object

    LOG_NAME: ClassVar[str] = "s3proxy.log"
    #: Start-up is ~6-10 s on an idle 2-core machine; more when other JVMs compete.
    START_TIMEOUT_S: ClassVar[float] = 120.0

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def describe(self) -> str:
        return f"local S3 server at {self.endpoint}"

    def environ(self) -> dict[str, str]:
        """What a process needs to reach this server through the usual AWS variables."""
        return store_environ(self.endpoint, self.access_key, self.secret_key)

    def settings(self) -> S3Settings:
        """The same as YAML would give them (``storage.s3``), for :func:`streamer.fs.resolve`."""
        return S3Settings(endpoint=self.endpoint, region=REGION, access_key_id=self.access_key,
                          secret_access_key=SecretStr(self.secret_key), source="the local S3 server")

    # -- lifecycle ------------------------------------------------------------------
    def _launch(self, timeout_s: float) -> None:
        jars = classpath("s3proxy")
        workdir = self._own_workdir("mor-s3-")
        data = workdir / "data"
        data.mkdir(parents=True, exist_ok=True)
        self.port = self.port or free_port()
        conf = workdir / "s3proxy.conf"
        conf.write_text("\n".join([
            f"s3proxy.endpoint={self.endpoint}",
            "s3proxy.authorization=aws-v2-or-v4",
            f"s3proxy.identity={self.access_key}",
            f"s3proxy.credential={self.secret_key}",
            f"jclouds.provider={self.backend}",
            f"jclouds.identity={self.access_key}",
            f"jclouds.credential={self.secret_key}",
            f"jclouds.filesystem.basedir={data}",
        ]) + "\n")
        logback = workdir / "logback.xml"
        logback.write_text(_LOGBACK)
        cmd = [
            java_executable(), f"-Xmx{self.heap}", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
            f"-Dlogback.configurationFile={logback}", f"-Djava.io.tmpdir={workdir}",
            "-cp", ":".join(jars), "org.gaul.s3proxy.Main", "--properties", str(conf),
        ]
        started = time.monotonic()
        self._spawn(cmd, cwd=workdir)
        self._wait_for_port(self.port, timeout_s, LocalS3Error)
        self._create_buckets()
        log.info("local S3 ready at %s in %.1fs", self.endpoint, time.monotonic() - started)

    def _create_buckets(self) -> None:
        create_buckets(self.endpoint, self.access_key, self.secret_key, self.buckets)


def main(argv: list[str] | None = None) -> int:
    """``python -m streamer.local.s3``: the local S3 server in the foreground, for the
    demo against S3 (``configs/demo_s3.yaml``) or any pipeline; Ctrl-C stops it."""
    import argparse
    import signal
    import threading

    parser = argparse.ArgumentParser(prog="python -m streamer.local.s3", description=main.__doc__)
    parser.add_argument("--port", type=int, default=9000, help="loopback port (default 9000; 0 = any free one)")
    parser.add_argument("--bucket", action="append", help="bucket to create (repeatable; default lake-bucket)")
    parser.add_argument("--duration", type=float, default=None, help="stop after this many seconds")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    with LocalS3(buckets=tuple(args.bucket or ("lake-bucket",)), port=args.port) as server:
        print(f"local S3 server at {server.endpoint}, bucket(s) {', '.join(server.buckets)}; "
              f"credentials {ACCESS_KEY} / {SECRET_KEY} (local only). Ctrl-C stops it.", flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            stop.wait(args.duration)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
