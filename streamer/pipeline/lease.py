"""One running instance per pipeline: a lease file, and hot standbys that wait for it.

Why: two processes running the same pipeline would both read from the same stored
position and both commit the same records (the writer lock only serialises the
commits, it cannot know they overlap). So ``streamer run`` takes the pipeline's lease
first and fails fast, naming the holder, when another live process has it; with
``--standby`` it waits instead, with its Spark session already up, and takes over
within a poll interval of the holder dying (same host: its pid is gone; elsewhere:
its heartbeat is older than ``expiry_s``).

The lease is a guard, not the proof: the runner also checks, before each commit,
that the table's newest checkpoint is still the one it started from.
"""

from __future__ import annotations

import json
import logging
import os
import posixpath
import socket
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass

from streamer.errors import MissingFileError, StreamerError
from streamer.fs import FileSystem, resolve
from streamer.write.lock import pid_alive

log = logging.getLogger(__name__)

LEASE_FILE = "_lease.json"


class LeaseHeldError(StreamerError):
    """Another live process runs this pipeline."""


@dataclass(frozen=True)
class Holder:
    owner: str
    host: str
    pid: int
    heartbeat: float

    def describe(self) -> str:
        return f"pid {self.pid} on {self.host}"


class PipelineLease:
    """The lease of one pipeline, in its checkpoint folder. Use as a context manager."""

    def __init__(self, folder: str, pipeline: str, expiry_s: float = 30.0) -> None:
        self.fs: FileSystem
        self.fs, folder = resolve(folder)
        self.path = posixpath.join(folder, LEASE_FILE)
        self.pipeline = pipeline
        self.expiry_s = expiry_s
        self.me = Holder(uuid.uuid4().hex, socket.gethostname(), os.getpid(), 0.0)
        self._stop = threading.Event()
        self._beat: threading.Thread | None = None

    # -- who holds it ----------------------------------------------------------------
    def holder(self) -> Holder | None:
        try:
            data = json.loads(self.fs.read_bytes(self.path))
            return Holder(str(data["owner"]), str(data["host"]), int(data["pid"]), float(data["heartbeat"]))
        except MissingFileError:
            return None
        except (ValueError, KeyError, TypeError):  # being written right now: treat as held
            return Holder("?", "?", -1, time.time())

    def _alive(self, h: Holder) -> bool:
        if time.time() - h.heartbeat > self.expiry_s:
            return False
        if h.host == self.me.host and h.pid > 0:
            return pid_alive(h.pid)
        return True

    def _record(self) -> bytes:
        return json.dumps(asdict(Holder(self.me.owner, self.me.host, self.me.pid, time.time()))).encode()

    # -- taking it -------------------------------------------------------------------
    def try_acquire(self) -> Holder | None:
        """Take the lease; returns None on success, else the live holder."""
        if self.fs.create_exclusive(self.path, self._record()):
            self._start_heartbeat()
            return None
        current = self.holder()
        if current is None or current.owner == self.me.owner:
            return self.try_acquire() if current is None else None
        if self._alive(current):
            return current
        log.warning("[%s] taking over the lease of %s (gone)", self.pipeline, current.describe())
        self._remove_stale(current)
        return self.try_acquire()

    def _remove_stale(self, stale: Holder) -> None:
        """Delete the stale lease, unless another standby already replaced it.

        Two standbys may see the same dead holder; a plain "check, then delete" would let
        the slower one delete the lease the faster one just took. Only the standby that
        creates the takeover marker for this holder may delete, and only while the lease
        still is the stale one; the new lease itself is then won by ``create_exclusive``.
        """
        marker = f"{self.path}.takeover-{stale.owner}"
        if not self.fs.create_exclusive(marker, b""):
            return
        try:
            if self.holder() == stale:
                self.fs.delete_file(self.path)
        finally:
            self.fs.delete_file(marker)

    def acquire(self, standby: bool = False, stop: threading.Event | None = None,
                on_wait: Callable[[Holder], None] | None = None, poll_s: float = 0.2) -> bool:
        """Take the lease; fail fast unless ``standby`` (then wait; False if ``stop`` was set)."""
        stop = stop or threading.Event()
        waited_for: Holder | None = None
        while not stop.is_set():
            holder = self.try_acquire()
            if holder is None:
                return True
            if not standby:
                raise LeaseHeldError(
                    f"pipeline {self.pipeline} is already running ({holder.describe()}, lease {self.path}); "
                    "stop it first, or run with --standby to take over when it stops"
                )
            if waited_for is None or waited_for.owner != holder.owner:
                waited_for = holder
                log.warning("[%s] standby: waiting for %s to stop", self.pipeline, holder.describe())
                if on_wait is not None:
                    on_wait(holder)
            stop.wait(poll_s)
        return False

    def release(self) -> None:
        self._stop.set()
        if self._beat is not None:
            self._beat.join(timeout=5)
            self._beat = None
        current = self.holder()
        if current is not None and current.owner == self.me.owner:
            self.fs.delete_file(self.path)

    def _start_heartbeat(self) -> None:
        self._stop.clear()
        self._beat = threading.Thread(target=self._heartbeat, name=f"lease-{self.pipeline}", daemon=True)
        self._beat.start()

    def _heartbeat(self) -> None:
        while not self._stop.wait(max(0.5, self.expiry_s / 4)):
            try:
                current = self.holder()
                if current is not None and current.owner != self.me.owner:
                    log.error("[%s] lost the pipeline lease to %s", self.pipeline, current.describe())
                    return
                self.fs.write_atomic(self.path, self._record())
            except OSError:
                continue  # a missed beat is not fatal; expiry is generous
