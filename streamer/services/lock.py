"""Per-plan locks: several compactors may run, each plan executes exactly once.

Hudi leaves "which compactor runs which plan" to an external coordinator (ZooKeeper).
We use the table's own storage: ``.hoodie/.aux/.locks/<name>`` is created *exclusively*
by the one process that wins; it names its owner (uuid, host, pid) and a heartbeat the
owner refreshes. A lock whose heartbeat is older than ``expiry_s`` — or whose owner
process is gone on this host (``kill -9``) — is stale and may be taken over; the taker
then finds the plan inflight and rolls the dead run back before executing it again.

Takeover must not let two takers both win: a taker first creates ``<name>.takeover``
exclusively (itself expiring), re-checks that the lock is still the stale one it saw,
deletes it and creates its own. Only then does the lock count as held.
"""

from __future__ import annotations

import json
import os
import posixpath
import socket
import threading
import time
import uuid
from dataclasses import asdict, dataclass

from streamer.errors import MissingFileError
from streamer.fs import FileSystem
from streamer.table.properties import METAFOLDER

LOCKS_DIR = posixpath.join(".aux", ".locks")


@dataclass(frozen=True)
class LockInfo:
    owner: str
    host: str
    pid: int
    heartbeat: float
    purpose: str = ""

    def to_bytes(self) -> bytes:
        return json.dumps(asdict(self)).encode()

    @classmethod
    def from_bytes(cls, data: bytes) -> LockInfo | None:
        try:
            d = json.loads(data)
            return cls(str(d["owner"]), str(d["host"]), int(d["pid"]), float(d["heartbeat"]),
                       str(d.get("purpose", "")))
        except (ValueError, KeyError, TypeError):
            return None


def locks_dir(base_path: str) -> str:
    return posixpath.join(base_path, METAFOLDER, LOCKS_DIR)


def create_exclusive(fs: FileSystem, path: str, data: bytes) -> bool:
    """Create ``path`` holding ``data`` only if it does not exist; ``True`` if we created it.

    The FS seam has no exclusive create yet: locally we use ``O_CREAT|O_EXCL`` (atomic);
    elsewhere we fall back to write-if-absent then read back, which narrows but does
    not close the race (object stores need conditional PUT).
    """
    fn = getattr(fs, "create_exclusive", None)
    if callable(fn):
        return bool(fn(path, data))
    parent = posixpath.dirname(path)
    fs.mkdirs(parent)
    if fs.is_local:
        try:
            fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            return False
        try:
            os.write(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        return True
    if fs.exists(path):
        return False
    fs.write_bytes(path, data)
    return fs.read_bytes(path) == data


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class PlanLock:
    """Exclusive, heartbeated ownership of one named thing (usually a plan's instant)."""

    def __init__(self, fs: FileSystem, base_path: str, name: str, *, expiry_s: float = 30.0,
                 purpose: str = "", path: str | None = None) -> None:
        self.fs = fs
        self.path = path or posixpath.join(locks_dir(base_path), name)
        self.expiry_s = expiry_s
        self.purpose = purpose
        self.owner = uuid.uuid4().hex
        self.host = socket.gethostname()
        self.took_over: LockInfo | None = None  # the stale owner we replaced, if any
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._held = False

    # ------------------------------------------------------------------ inspection
    def current(self) -> LockInfo | None:
        try:
            return LockInfo.from_bytes(self.fs.read_bytes(self.path))
        except MissingFileError:
            return None

    def is_stale(self, info: LockInfo | None) -> bool:
        if info is None:
            return True
        if time.time() - info.heartbeat > self.expiry_s:
            return True
        return info.host == self.host and not pid_alive(info.pid)

    @property
    def held(self) -> bool:
        return self._held

    def still_owner(self) -> bool:
        info = self.current()
        return info is not None and info.owner == self.owner

    # ------------------------------------------------------------------ acquire/release
    def _me(self) -> bytes:
        return LockInfo(self.owner, self.host, os.getpid(), time.time(), self.purpose).to_bytes()

    def try_acquire(self) -> bool:
        """Take the lock if free or stale; never blocks."""
        if create_exclusive(self.fs, self.path, self._me()):
            return self._start()
        seen = self.current()
        if seen is not None and not self.is_stale(seen):
            return False
        if seen is None and self.fs.exists(self.path):
            # Present but unreadable: a writer is mid-create; give it one expiry.
            st = self.fs.status(self.path)
            if st.mtime_ns and time.time() - st.mtime_ns / 1e9 < self.expiry_s:
                return False
        guard = self.path + ".takeover"
        if not create_exclusive(self.fs, guard, self._me()):
            g = self.fs.status(guard) if self.fs.exists(guard) else None
            if g is not None and g.mtime_ns and time.time() - g.mtime_ns / 1e9 > self.expiry_s:
                self.fs.delete_file(guard)  # a taker died mid-takeover; next attempt retries
            return False
        try:
            again = self.current()
            if again != seen or (again is not None and not self.is_stale(again)):
                return False
            self.fs.delete_file(self.path)
            if not create_exclusive(self.fs, self.path, self._me()):
                return False
            self.took_over = seen
            return self._start()
        finally:
            self.fs.delete_file(self.guard_path)

    @property
    def guard_path(self) -> str:
        return self.path + ".takeover"

    def _start(self) -> bool:
        self._held = True
        self._stop.clear()
        self._thread = threading.Thread(target=self._beat, name=f"lock-{posixpath.basename(self.path)}",
                                        daemon=True)
        self._thread.start()
        return True

    def release(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None
        if self._held and self.still_owner():
            self.fs.delete_file(self.path)
        self._held = False

    def __enter__(self) -> PlanLock:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()

    def _beat(self) -> None:
        interval = max(0.2, self.expiry_s / 5)
        while not self._stop.wait(interval):
            try:
                if not self.still_owner():
                    return  # taken over after a stall: stop pretending to own it
                self.fs.write_atomic(self.path, self._me())
            except OSError:
                continue
