"""The single-writer lock: one live writer per table, stale locks taken over.

We assume one writer at a time (as Hudi does without a lock provider), so the lock
only has to *detect* a second live writer, not arbitrate fairly. The lock file
``.hoodie/.streamer_writer.lock`` names its owner (uuid, host, pid) and is refreshed by
a heartbeat thread. Another writer may take it over when the owner's heartbeat is
older than ``expiry_s`` or, on the same host, when the owner's process is gone — so a
writer killed with ``kill -9`` does not block its successor for a whole expiry.
A live owner makes :meth:`WriterLock.acquire` raise :class:`CommitConflictError`.

Hudi's own per-instant heartbeat (``.hoodie/.heartbeat/<instant>``) is written too,
so Hudi tooling sees our inflight instants as alive while we write them.
"""

from __future__ import annotations

import json
import os
import posixpath
import socket
import threading
import time
import uuid
from dataclasses import dataclass

from streamer.errors import CommitConflictError, MissingFileError
from streamer.fs import FileSystem
from streamer.table.properties import METAFOLDER
from streamer.table.timeline import HEARTBEAT_FOLDER

LOCK_FILE = ".streamer_writer.lock"


@dataclass(frozen=True)
class LockOwner:
    owner: str
    host: str
    pid: int
    heartbeat: float

    def to_bytes(self) -> bytes:
        return json.dumps(self.__dict__).encode()

    @classmethod
    def from_bytes(cls, data: bytes) -> LockOwner | None:
        try:
            d = json.loads(data)
            return cls(str(d["owner"]), str(d["host"]), int(d["pid"]), float(d["heartbeat"]))
        except (ValueError, KeyError, TypeError):
            return None


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class WriterLock:
    """Hold the table's writer lock; use as a context manager."""

    def __init__(self, fs: FileSystem, base_path: str, expiry_s: float = 60.0) -> None:
        self.fs = fs
        self.base_path = base_path
        self.path = posixpath.join(base_path, METAFOLDER, LOCK_FILE)
        self.expiry_s = expiry_s
        self.owner = uuid.uuid4().hex
        self.host = socket.gethostname()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._instant: str | None = None

    # -- lock ------------------------------------------------------------------------
    def _current(self) -> LockOwner | None:
        try:
            return LockOwner.from_bytes(self.fs.read_bytes(self.path))
        except MissingFileError:
            return None

    def _is_live(self, other: LockOwner) -> bool:
        if other.owner == self.owner:
            return False
        if time.time() - other.heartbeat > self.expiry_s:
            return False
        if other.host == self.host:
            return _pid_alive(other.pid)
        return True

    def _write(self) -> None:
        me = LockOwner(self.owner, self.host, os.getpid(), time.time())
        self.fs.write_atomic(self.path, me.to_bytes())

    def acquire(self) -> WriterLock:
        current = self._current()
        if current is not None and self._is_live(current):
            raise CommitConflictError(
                f"another writer (pid {current.pid} on {current.host}) holds the table's "
                f"writer lock {self.path}; retry when it finishes"
            )
        self._write()
        check = self._current()
        if check is None or check.owner != self.owner:
            raise CommitConflictError(f"lost the race for the writer lock {self.path}")
        self._stop.clear()
        self._thread = threading.Thread(target=self._beat, name="writer-heartbeat", daemon=True)
        self._thread.start()
        return self

    def release(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None
        current = self._current()
        if current is not None and current.owner == self.owner:
            self.fs.delete_file(self.path)

    def __enter__(self) -> WriterLock:
        return self.acquire()

    def __exit__(self, *exc) -> None:
        self.release()

    # -- heartbeats ------------------------------------------------------------------
    def heartbeat_path(self, instant: str) -> str:
        return posixpath.join(self.base_path, METAFOLDER, HEARTBEAT_FOLDER, instant)

    def start_instant(self, instant: str) -> None:
        """Begin Hudi's heartbeat for ``instant`` (refreshed with the lock)."""
        self._instant = instant
        self.fs.write_bytes(self.heartbeat_path(instant), str(time.time()).encode())

    def end_instant(self, instant: str) -> None:
        self._instant = None
        self.fs.delete_file(self.heartbeat_path(instant))

    def _beat(self) -> None:
        interval = max(0.5, self.expiry_s / 4)
        while not self._stop.wait(interval):
            try:
                self._write()
                if self._instant:
                    self.fs.write_bytes(self.heartbeat_path(self._instant), str(time.time()).encode())
            except OSError:
                # A missed beat is not fatal; the next one (or expiry) settles it.
                continue
