"""The lifecycle the local broker and the local schema registry share.

Both are one child JVM with a log file in a temp folder: spawned in its own session
(so a test can kill the whole group), stopped with SIGTERM then SIGKILL after a
bounded wait, and able to quote its log when something goes wrong.
"""

from __future__ import annotations

import logging
import shutil
import subprocess
from pathlib import Path
from typing import IO, Any, ClassVar

log = logging.getLogger(__name__)


class ManagedProcess:
    """Mixin for dataclasses with ``workdir``, ``_proc``, ``_log_file``, ``_owns_workdir``."""

    #: Log file name inside ``workdir``.
    LOG_NAME: ClassVar[str] = "process.log"

    workdir: Path | None
    _proc: subprocess.Popen[bytes] | None
    _log_file: IO[bytes] | None
    _owns_workdir: bool

    def describe(self) -> str:
        """How error and log messages name this process (e.g. its address)."""
        return type(self).__name__

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

    def _shutdown(self, timeout_s: float) -> None:
        """SIGTERM and wait; SIGKILL if it overruns; then drop the log handle and temp folder."""
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
        self.stop()  # type: ignore[attr-defined]
