"""The lifecycle the local servers (broker, schema registry, metastore, S3) share.

Each is one child JVM with a log file in a work folder (a temp one unless given):
spawned in its own session (so a test can kill the whole group), stopped with SIGTERM
then SIGKILL after a bounded wait, and able to quote its log when something goes wrong.
"""

from __future__ import annotations

import logging
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, ClassVar, TypeVar

from streamer.errors import StreamerError

log = logging.getLogger(__name__)

_P = TypeVar("_P", bound="ManagedProcess")

#: The fields a server keeps its listening ports in (0: picked by its start).
PORT_FIELDS = ("port", "controller_port")
#: How many times a start with ports of its own picking is tried (see ``ManagedProcess.start``).
BIND_ATTEMPTS = 3
#: What Java's ``BindException``, Python's ``OSError`` and PostgreSQL say of a taken port.
_PORT_TAKEN = "Address already in use"


@dataclass
class ManagedProcess:
    """Base of the local servers' dataclasses: the work folder and the process's state.

    The fields are keyword-only, so a server's own fields keep their positions.
    """

    #: Log file name inside ``workdir``.
    LOG_NAME: ClassVar[str] = "process.log"
    #: How long :meth:`start` waits for the server to answer.
    START_TIMEOUT_S: ClassVar[float] = 120.0
    #: How long :meth:`stop` waits for a clean exit before it kills the server.
    STOP_TIMEOUT_S: ClassVar[float] = 15.0

    #: Where the server keeps its files and log (``None``: a temp folder, removed on stop).
    workdir: Path | None = field(default=None, kw_only=True)
    _proc: subprocess.Popen[bytes] | None = field(default=None, repr=False, kw_only=True)
    _owns_workdir: bool = field(default=False, repr=False, kw_only=True)
    _log_file: IO[bytes] | None = field(default=None, repr=False, kw_only=True)

    def describe(self) -> str:
        """How error and log messages name this process (e.g. its address)."""
        return type(self).__name__

    def _raise_if_exited(self, error: type[StreamerError]) -> None:
        """Raise ``error`` naming the exit code and quoting the log if the process has died,
        so a health check says why instead of timing out on a closed port."""
        code = self.exit_code()
        if code is not None:
            raise error(f"{self.describe()} has exited with code {code}; log tail:\n{self.log_tail()}")

    def start(self: _P, timeout_s: float | None = None) -> _P:
        """Start the server unless it runs, and wait up to ``timeout_s`` (by default
        :attr:`START_TIMEOUT_S`) until it answers; a server that does not is stopped.

        A port the start picks itself (a ``port`` field left 0) is free when picked but may
        be taken by another process before the server binds it: such a start that fails
        with "Address already in use" is retried with fresh ports, up to
        :data:`BIND_ATTEMPTS` times. Ports given by the caller are never changed."""
        if self._proc is None:
            picked = [name for name in PORT_FIELDS if getattr(self, name, None) == 0]
            for attempt in range(1, BIND_ATTEMPTS + 1):
                try:
                    self._launch(self.START_TIMEOUT_S if timeout_s is None else timeout_s)
                    break
                except StreamerError as e:
                    if not picked or attempt == BIND_ATTEMPTS or _PORT_TAKEN not in str(e):
                        raise
                    log.warning("%s: a port picked for it was taken before it bound it; picking others "
                                "(attempt %d of %d)", self.describe(), attempt + 1, BIND_ATTEMPTS)
                    for name in picked:
                        setattr(self, name, 0)
        return self

    def _launch(self, timeout_s: float) -> None:
        """Each server's own start: its configuration, :meth:`_spawn`, then its wait."""
        raise NotImplementedError

    def __enter__(self: _P) -> _P:
        return self.start()

    def _own_workdir(self, prefix: str) -> Path:
        """The work folder: the one given, else a new temp folder that stop removes."""
        if self.workdir is None:
            self.workdir = Path(tempfile.mkdtemp(prefix=prefix))
            self._owns_workdir = True
        return self.workdir

    def _spawn(self, cmd: list[str], **popen: Any) -> None:
        assert self.workdir is not None
        self._log_file = open(self.workdir / self.LOG_NAME, "ab")  # noqa: SIM115 - lives with the process
        self._proc = subprocess.Popen(
            cmd,
            stdout=self._log_file,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            **popen,
        )

    def stop(self, timeout_s: float | None = None) -> None:
        """SIGTERM and wait (the server shuts down cleanly) up to ``timeout_s``, by default
        :attr:`STOP_TIMEOUT_S`; SIGKILL if it overruns; then drop the log handle and temp folder."""
        timeout_s = self.STOP_TIMEOUT_S if timeout_s is None else timeout_s
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                log.warning("%s did not stop in %ss; killing", self.describe(), timeout_s)
                proc.kill()
                proc.wait(10)
        if self._log_file is not None:
            self._log_file.close()
            self._log_file = None
        if self._owns_workdir and self.workdir is not None:
            shutil.rmtree(self.workdir, ignore_errors=True)
            self.workdir = None

    def _wait_for_port(self, port: int, timeout_s: float, error: type[StreamerError]) -> None:
        """Until the server accepts connections on ``port`` (see :meth:`_wait_until`)."""

        def connect() -> None:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                pass

        self._wait_until(connect, timeout_s, error, retry_on=(OSError,), waits_for="accept connections")

    def _wait_until(self, probe: Callable[[], None], timeout_s: float, error: type[StreamerError], *,
                    retry_on: tuple[type[BaseException], ...], waits_for: str,
                    hint: Callable[[str], str] = lambda tail: "") -> None:
        """Until ``probe()`` returns (an exception of ``retry_on``: not yet); else stop the
        server and raise ``error`` quoting its log. A server that died during start-up is
        not waited for; ``hint(log tail)`` may add what the log suggests."""
        deadline = time.monotonic() + timeout_s
        last: BaseException | None = None
        while time.monotonic() < deadline:
            code = self.exit_code()
            if code is not None:
                tail = self.log_tail()
                self.stop()
                raise error(f"{self.describe()} exited during start-up (code {code}){hint(tail)}; "
                            f"log tail:\n{tail}")
            try:
                probe()
                return
            except retry_on as e:
                last = e.__cause__ or e
                time.sleep(0.2)
        tail = self.log_tail()
        self.stop()
        raise error(f"{self.describe()} did not {waits_for} within {timeout_s:.0f}s; last error: {last}; "
                    f"log tail:\n{tail}")

    def kill(self) -> None:
        """SIGKILL, keeping the work folder and log (for fault tests)."""
        if self._proc is not None and self._proc.poll() is None:
            self._proc.kill()
            self._proc.wait(10)

    def crash(self) -> None:
        """SIGKILL (a lost node), keeping the work folder, data and port: ``start()`` then
        brings the same server back, as a supervisor restarts it."""
        self.kill()
        self._proc = None
        if self._log_file is not None:
            self._log_file.close()
            self._log_file = None

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def exit_code(self) -> int | None:
        """The exit code if the process has died, else None."""
        if self._proc is not None and self._proc.poll() is not None:
            return self._proc.returncode
        return None

    def log_tail(self, lines: int = 30) -> str:
        if self.workdir is None:
            return ""
        path = self.workdir / self.LOG_NAME
        if not path.exists():
            return ""
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])

    def __exit__(self, *exc: object) -> None:
        self.stop()
