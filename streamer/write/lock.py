"""Locks on the table's own storage: one implementation for writers and table services.

A lock is a file created *exclusively* (:meth:`FileSystem.create_exclusive`) by the one
process that wins. It names its owner (uuid, host, pid, purpose) and a heartbeat the
owner refreshes from a thread. A lock is *stale* - and may be taken over - when its
heartbeat is older than ``expiry_s`` or, on the same host, when its owner's process is
gone, its pid unused or used by a process that started at another time (so a holder
killed with ``kill -9`` does not block its successor for a whole expiry), or when this very process gave it up without being able to delete it (a
release that the store failed: the next run in the same process, a supervisor's
restart of a pipeline, must not wait out its own predecessor's lock).

Takeover must not let two takers both win: a taker first creates ``<lock>.takeover``
exclusively (itself expiring), re-checks that the lock is still the stale one it saw,
deletes it and creates its own. Only then does the lock count as held.

* :class:`FileLock` - the lock itself (``try_acquire`` never blocks; ``acquire`` waits
  up to a timeout with backoff, then raises :class:`CommitConflictError` naming the
  holder).
* :class:`WriterLock` - the table's writer lock ``.hoodie/.streamer_writer.lock``: one
  writer (or a table service between two commits) at a time. It also writes Hudi's
  per-instant heartbeat (``.hoodie/.heartbeat/<instant>``), so Hudi tooling sees our
  inflight instants as alive while we write them.
* :class:`PlanLock` - the same lock on ``.hoodie/.aux/.locks/<name>`` (one runner per
  plan: several compactors may run, each plan executes exactly once). Hudi leaves "which
  compactor runs which plan" to an external coordinator (ZooKeeper); the table's own
  storage does here, and a taker of a dead run's lock finds the plan inflight and rolls
  the dead run back before executing it again.

This is the project's one lock module: writers, table services and the pipeline's lease
all build on :class:`FileLock`, and the commit protocol takes its locks through
:class:`streamer.write.transaction.Transaction`.

On S3 the exclusive create is a conditional PUT (``If-None-Match: *``) and a heartbeat
replaces the lock only if it is still the version the holder read (``If-Match``), so a
stalled holder cannot overwrite its successor; a store that honours neither is refused
(see :mod:`streamer.fs_s3`). Limits: on HDFS the create is best effort (see
:meth:`FileSystem.create_exclusive`). A holder stalled past ``expiry_s`` (not dead) loses
the lock; its heartbeat thread notices and stops, and callers re-check
:meth:`FileLock.still_owner` before publishing.
"""

from __future__ import annotations

import json
import logging
import os
import posixpath
import random
import socket
import sys
import threading
import time
import uuid
from dataclasses import asdict, dataclass

from streamer.errors import CommitConflictError, MissingFileError
from streamer.fs import FileSystem
from streamer.table.properties import METAFOLDER
from streamer.table.timeline import HEARTBEAT_FOLDER, HUDI_HEARTBEAT_EXPIRY_S

log = logging.getLogger(__name__)

LOCK_FILE = ".streamer_writer.lock"
#: Where plan locks live, under ``.hoodie/``.
LOCKS_DIR = posixpath.join(".aux", ".locks")


#: Owners whose release failed in this process (the store refused the delete): their
#: lock files are stale to any later taker here, whatever their heartbeat says.
_abandoned: set[str] = set()
#: This process's start time by pid (a forked child has a pid, and a start, of its own).
_own_starts: dict[int, int | None] = {}
#: When this process first saw each (lock, owner, heartbeat): see FileLock._unchanged_for.
_seen: dict[tuple[str, str, float], float] = {}
_seen_lock = threading.Lock()


@dataclass(frozen=True)
class LockInfo:
    owner: str
    host: str
    pid: int
    heartbeat: float
    purpose: str = ""
    #: When the holder's process started (:func:`process_start`), so that another process
    #: given the same pid later is not taken for the holder. None: not known (another OS,
    #: or a lock written by an earlier version), then the pid alone decides.
    started: int | None = None

    def to_bytes(self) -> bytes:
        return json.dumps(asdict(self)).encode()

    @classmethod
    def from_bytes(cls, data: bytes) -> LockInfo | None:
        try:
            d = json.loads(data)
            started = d.get("started")
            return cls(str(d["owner"]), str(d["host"]), int(d["pid"]), float(d["heartbeat"]),
                       str(d.get("purpose", "")), None if started is None else int(started))
        except (ValueError, KeyError, TypeError):
            return None

    def holder_alive(self) -> bool:
        """Whether the holding process (on this host) still runs: its pid exists and, where
        the start time is known on both sides, belongs to the same process."""
        if not pid_alive(self.pid):
            return False
        if self.started is None:
            return True
        now = process_start(self.pid)
        return now is None or now == self.started

    def describe(self, now: float | None = None) -> str:
        age = (now or time.time()) - self.heartbeat
        what = f"{self.purpose} " if self.purpose else ""
        return f"{what}pid {self.pid} on {self.host} (owner {self.owner}, heartbeat {age:.1f}s ago)"


LockOwner = LockInfo  # the writer lock's former name for the same record


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def process_start(pid: int) -> int | None:
    """When process ``pid`` started, in clock ticks since boot (Linux ``/proc/PID/stat``,
    field 22), or None where that cannot be read.

    Why: pids are reused. Linux hands out at most ``pid_max`` (32,768 by default) and
    every thread of every JVM takes one, so on a busy host the pid of a writer killed with
    ``kill -9`` can belong to another process seconds later; a lock that trusted the pid
    alone would wait out the whole expiry for a holder long dead (or, for a pipeline's
    lease, refuse to run it)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
        # the command name (field 2) is in parentheses and may hold spaces or parentheses
        return int(stat[stat.rindex(b")") + 2:].split()[19])
    except (OSError, ValueError, IndexError):
        return None


def _own_start(pid: int) -> int | None:
    if pid not in _own_starts:
        _own_starts[pid] = process_start(pid)
    return _own_starts[pid]


class FileLock:
    """Exclusive, heartbeated ownership of one lock file (see module doc)."""

    def __init__(self, fs: FileSystem, path: str, *, expiry_s: float = 30.0, purpose: str = "") -> None:
        self.fs = fs
        self.path = path
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
        if info.owner in _abandoned:
            return True
        if time.time() - info.heartbeat > self.expiry_s:
            return True
        if self._unchanged_for(info) > self.expiry_s:
            return True  # a heartbeat "from the future" (our clock stepped back) stopped moving
        return info.host == self.host and not info.holder_alive()

    def _unchanged_for(self, info: LockInfo) -> float:
        """How long (this process's monotonic clock) the lock has shown this same heartbeat.

        The wall-clock test above fails when clocks disagree: after our clock stepped back
        (or on a host behind the holder's) a dead holder's last heartbeat lies in the
        future and would not look expired until the clock caught up - hours, with every
        writer blocked. A heartbeat we have watched stand still for a whole expiry is a dead
        holder's whatever the clocks say (a live one rewrites it every ``expiry_s / 5``)."""
        key = (self.path, info.owner, info.heartbeat)
        now = time.monotonic()
        with _seen_lock:
            first = _seen.setdefault(key, now)
            if len(_seen) > 1024:  # bounded: forget the oldest observations
                for k in sorted(_seen, key=_seen.__getitem__)[:512]:
                    if k != key:
                        del _seen[k]
        return now - first

    @property
    def held(self) -> bool:
        return self._held

    def still_owner(self) -> bool:
        info = self.current()
        return info is not None and info.owner == self.owner

    @property
    def guard_path(self) -> str:
        return self.path + ".takeover"

    # ------------------------------------------------------------------ acquire/release
    def _me(self) -> bytes:
        pid = os.getpid()
        return LockInfo(self.owner, self.host, pid, time.time(), self.purpose, _own_start(pid)).to_bytes()

    def _fresh_file(self, path: str) -> bool:
        """``path`` exists and was modified within one expiry."""
        try:
            st = self.fs.status(path)
        except MissingFileError:
            return False
        mtime_ns = st.mtime_ns
        if not mtime_ns:  # no modification time known: not fresh
            return False
        return time.time() - mtime_ns / 1e9 < self.expiry_s

    def try_acquire(self) -> bool:
        """Take the lock if free or stale; never blocks."""
        if self._held:
            raise RuntimeError(f"lock {self.path} is already held by this object")
        if self.fs.create_exclusive(self.path, self._me()):
            return self._start()
        seen = self.current()
        if seen is not None and not self.is_stale(seen):
            return False
        if seen is None:
            if not self.fs.exists(self.path):
                # Released between our create and our read. Compete through the
                # exclusive create again - never through a takeover, whose delete could
                # remove the lock a faster taker has just created.
                return self.fs.create_exclusive(self.path, self._me()) and self._start()
            if self._fresh_file(self.path):
                return False  # present but unreadable: its creator is mid-write
        if not self.fs.create_exclusive(self.guard_path, self._me()):
            if self.fs.exists(self.guard_path) and not self._fresh_file(self.guard_path):
                self.fs.delete_file(self.guard_path)  # a taker died mid-takeover; retry later
            return False
        try:
            again = self.current()
            if again != seen or (again is not None and not self.is_stale(again)):
                return False
            if again is None and not self.fs.exists(self.path):
                return False  # the unreadable lock went away meanwhile: not ours to delete
            self.fs.delete_file(self.path)
            if not self.fs.create_exclusive(self.path, self._me()):
                return False
            self.took_over = seen
            return self._start()
        finally:
            self.fs.delete_file(self.guard_path)

    def acquire(self, timeout_s: float = 0.0) -> FileLock:
        """Take the lock, retrying with backoff for up to ``timeout_s`` seconds.

        Raises :class:`CommitConflictError` (retryable) naming the holder on timeout.
        """
        deadline = time.monotonic() + max(0.0, timeout_s)
        delay = 0.02
        while True:
            if self.try_acquire():
                return self
            left = deadline - time.monotonic()
            if left <= 0:
                break
            time.sleep(min(left, delay * (0.5 + random.random())))
            delay = min(1.0, delay * 1.6)
        holder = self.current()
        who = holder.describe() if holder is not None else "another process (lock file being written)"
        raise CommitConflictError(
            f"lock {self.path} is held by {who}; waited {timeout_s:.1f}s - retry when it is released"
        )

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
        try:
            if self._held and self.still_owner():
                self.fs.delete_file(self.path)
        except OSError:
            _abandoned.add(self.owner)  # left behind by a failing store: known dead here
            raise
        finally:
            self._held = False

    def __enter__(self) -> FileLock:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()

    # ------------------------------------------------------------------ heartbeat
    def _on_beat(self) -> None:
        """Hook for subclasses: more to refresh with each heartbeat."""

    def _interval(self) -> float:
        """Seconds between two beats: a live holder's heartbeat is never near expiry."""
        return max(0.2, self.expiry_s / 5)

    def _beat(self) -> None:
        interval = self._interval()
        while not self._stop.wait(interval):
            try:
                seen = self.fs.read_tagged(self.path)
                info = None if seen is None else LockInfo.from_bytes(seen.data)
                if info is None or info.owner != self.owner:
                    return  # taken over after a stall: stop pretending to own it
                if not self.fs.replace_if(self.path, self._me(), seen.tag if seen else None):
                    return  # replaced since we read it (S3 If-Match): a successor owns it
                self._on_beat()
            except Exception as e:  # noqa: BLE001 - an SDK's own error types too: the thread must live on
                # A missed beat is not fatal; the next one (or expiry) settles it.
                log.debug("missed a beat of %s: %s", self.path, e)
                continue


def _awake_seconds() -> float:
    """A clock of elapsed time that also runs while the host sleeps (a laptop's suspend):
    Hudi, elsewhere, judges our heartbeat's age through that sleep too."""
    return time.clock_gettime(_AWAKE_CLOCK) if _AWAKE_CLOCK is not None else time.monotonic()


#: Linux's CLOCK_BOOTTIME; macOS's CLOCK_MONOTONIC counts sleep too (its time.monotonic does not).
_AWAKE_CLOCK: int | None = getattr(time, "CLOCK_BOOTTIME", None) or (
    getattr(time, "CLOCK_MONOTONIC", None) if sys.platform == "darwin" else None)


class InstantHeartbeat(FileLock):
    """A lock that also keeps Hudi's heartbeat of the instant its holder is making,
    ``.hoodie/.heartbeat/<instant>``, refreshed with the lock's own beat. Apache Hudi
    judges a heartbeat by its file's age alone: it neither rolls back nor runs an
    instant whose heartbeat is fresh. Ours hold the time they were written, so a crashed
    run of ours is told from Hudi's (empty) ones (:meth:`Timeline.hudi_heartbeat_age`).

    A heartbeat left unrefreshed for longer than :meth:`trusted_s` (the process stalled,
    storage refused or hung its writes, the host slept) is *lapsed* for good: Hudi may
    have judged the run dead meanwhile and be rolling it back, or running the plan
    itself. Our lock cannot tell (Hudi takes none of ours), so a lapsed heartbeat is
    never refreshed again nor deleted, and the holder must not publish, nor undo its run
    (:meth:`lapsed_for`). A refresh replaces only the heartbeat we wrote last (``If-Match``
    on S3): one Hudi rewrote or deleted is lapsed too."""

    def __init__(self, fs: FileSystem, path: str, base_path: str, *, expiry_s: float, purpose: str) -> None:
        super().__init__(fs, path, expiry_s=expiry_s, purpose=purpose)
        self.base_path = base_path
        self._instant: str | None = None
        self._written = b""  # the heartbeat's content as we wrote it last
        self._pending = b""  # as we are writing it (a write that failed may have landed)
        self._kept_at = 0.0  # when that write was sent (:func:`_awake_seconds`): the file is no older
        self._lapsed: float | None = None  # the gap that lapsed it
        # the beat thread's refresh and the holder's start and end, one at a time: a
        # refresh racing the end would write the heartbeat again after its delete
        self._beating = threading.Lock()

    def heartbeat_path(self, instant: str) -> str:
        return posixpath.join(self.base_path, METAFOLDER, HEARTBEAT_FOLDER, instant)

    @staticmethod
    def trusted_s() -> float:
        """How long the heartbeat may go unrefreshed before it is lapsed: half of Hudi's
        expiry (Hudi's clock, and the store's modification times, may run ahead of ours).
        Our own lock's expiry does not matter here: a successor of ours taking the lock
        over is seen by :meth:`FileLock.still_owner`."""
        return HUDI_HEARTBEAT_EXPIRY_S / 2

    def _interval(self) -> float:
        return min(super()._interval(), self.trusted_s() / 5)

    def start_instant(self, instant: str) -> None:
        """Begin Hudi's heartbeat for ``instant`` (refreshed with the lock)."""
        with self._beating:
            self._instant, self._lapsed = instant, None
            # atomically: a heartbeat cut short by a kill would read as empty, which is
            # how Apache Hudi's heartbeats look (:meth:`Timeline.live_hudi_writes`)
            data, sent = str(time.time()).encode(), _awake_seconds()
            self.fs.write_atomic(self.heartbeat_path(instant), data)
            self._written = self._pending = data
            self._kept_at = sent

    def _refresh(self, instant: str) -> None:  # holding self._beating
        path = self.heartbeat_path(instant)
        seen = self.fs.read_tagged(path)
        if seen is None or seen.data not in (self._written, self._pending):  # Hudi took it over, or ended it
            self._lapsed = _awake_seconds() - self._kept_at
            return
        self._pending, sent = str(time.time()).encode(), _awake_seconds()
        replaced = self.fs.replace_if(path, self._pending, seen.tag)
        landed = _awake_seconds()
        if not replaced or landed - self._kept_at > self.trusted_s():  # replaced since, or landed late
            self._lapsed = landed - self._kept_at
        self._written, self._kept_at = self._pending, sent

    def lapsed_for(self) -> float | None:
        """Seconds the heartbeat of the instant went unrefreshed, when that lapsed it (see
        the class doc); ``None`` while it is kept, or when no instant is."""
        with self._beating:
            return self._lapse()

    def _lapse(self) -> float | None:  # holding self._beating
        if self._instant is not None and self._lapsed is None:
            gap = _awake_seconds() - self._kept_at
            if gap > self.trusted_s():
                self._lapsed = gap
        return self._lapsed if self._instant is not None else None

    def end_instant(self, instant: str) -> None:
        """End the heartbeat of ``instant``, published: deleted unless it lapsed meanwhile
        (it may be Hudi's by now)."""
        with self._beating:
            try:
                if self._lapse() is None:
                    self.fs.delete_file(self.heartbeat_path(instant))
            finally:
                self._instant = None  # no beat refreshes it again, deleted or not

    def end_heartbeat(self) -> None:
        """End the heartbeat :meth:`start_instant` began, if one is still kept and the lock
        is still ours: after a stall past its expiry a successor runs the plan and keeps
        the heartbeat now, and a lapsed one may be Hudi's by now. A store refusing the
        delete leaves it to the sweep of completed instants' heartbeats."""
        instant = self._instant
        if instant is None:
            return
        try:
            if self.still_owner():
                self.end_instant(instant)
        except OSError as e:
            log.warning("could not delete the heartbeat of %s: %s", self.base_path, e)
        self._instant = None

    def _on_beat(self) -> None:
        with self._beating:
            if self._instant is not None and self._lapse() is None:
                self._refresh(self._instant)


class WriterLock(InstantHeartbeat):
    """The table's writer lock; a context manager that acquires on enter.

    ``timeout_s``: how long :meth:`acquire` waits for a live holder (a writer or a table
    service between two commits) before raising :class:`CommitConflictError`.
    """

    def __init__(self, fs: FileSystem, base_path: str, expiry_s: float = 60.0, timeout_s: float = 0.0,
                 purpose: str = "writer") -> None:
        super().__init__(fs, posixpath.join(base_path, METAFOLDER, LOCK_FILE), base_path, expiry_s=expiry_s,
                         purpose=purpose)
        self.timeout_s = timeout_s

    def acquire(self, timeout_s: float | None = None) -> WriterLock:
        super().acquire(self.timeout_s if timeout_s is None else timeout_s)
        return self

    def __enter__(self) -> WriterLock:
        return self.acquire()


def locks_dir(base_path: str) -> str:
    return posixpath.join(base_path, METAFOLDER, LOCKS_DIR)


class PlanLock(InstantHeartbeat):
    """Exclusive, heartbeated ownership of one named thing (usually a plan's instant); a
    run of the plan keeps Hudi's heartbeat of it too (:meth:`start_instant`)."""

    def __init__(self, fs: FileSystem, base_path: str, name: str, *, expiry_s: float = 30.0,
                 purpose: str = "", path: str | None = None) -> None:
        super().__init__(fs, path or posixpath.join(locks_dir(base_path), name), base_path, expiry_s=expiry_s,
                         purpose=purpose)

    def __enter__(self) -> PlanLock:
        return self
