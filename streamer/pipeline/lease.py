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

import logging
import posixpath
import threading
from collections.abc import Callable

from streamer.errors import LeaseHeldError
from streamer.fs import resolve
from streamer.fs_s3 import S3Settings
from streamer.write.lock import FileLock, LockInfo

log = logging.getLogger(__name__)

LEASE_FILE = "_lease.json"

#: Who holds a lease: the lock record every lock of the project writes.
Holder = LockInfo

__all__ = ["LEASE_FILE", "Holder", "LeaseHeldError", "PipelineLease"]


class PipelineLease:
    """The lease of one pipeline, in its checkpoint folder.

    Built on :class:`~streamer.write.lock.FileLock`, the one lock primitive of the project
    (the table's writer lock and the services' plan locks are the same thing): exclusive
    create, a heartbeat thread, and takeover of a dead or expired holder guarded so two
    standbys cannot both win.
    """

    def __init__(self, folder: str, pipeline: str, expiry_s: float = 30.0,
                 s3: S3Settings | None = None) -> None:
        self.fs, folder = resolve(folder, s3)
        self.path = posixpath.join(folder, LEASE_FILE)
        self.pipeline = pipeline
        self.expiry_s = expiry_s
        self._lock = FileLock(self.fs, self.path, expiry_s=expiry_s, purpose=f"pipeline {pipeline}")

    def holder(self) -> Holder | None:
        """The current holder (``None``: nobody)."""
        return self._lock.current()

    def try_acquire(self) -> Holder | None:
        """Take the lease; returns None on success, else the live holder."""
        if self._lock.held:
            return None
        if self._lock.try_acquire():
            if self._lock.took_over is not None:
                log.warning("[%s] took over the lease of %s (gone)", self.pipeline,
                            self._lock.took_over.describe())
            return None
        held_by = self.holder()
        if held_by is None:  # the file is being written by its creator this instant
            held_by = LockInfo("?", "?", -1, 0.0, "a process creating the lease")
        return held_by

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
        self._lock.release()
