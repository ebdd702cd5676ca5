"""The writer lock: exclusive create, so racing writers (threads or processes) never
both hold it; a busy lock is waited for up to ``lock_timeout_s``, then named in a
retryable :class:`CommitConflictError`."""

from __future__ import annotations

import multiprocessing as mp
import os
import threading
import time

import pytest

from streamer.errors import CommitConflictError
from streamer.fs import FileSystem
from streamer.services.compaction import CompactionConflict, writer_lock
from streamer.services.lock import PlanLock
from streamer.write.lock import FileLock, LockInfo, WriterLock


def test_fs_create_exclusive(tmp_path):
    fs = FileSystem()
    p = str(tmp_path / "a" / "b")
    assert fs.create_exclusive(p, b"x")
    assert not fs.create_exclusive(p, b"y")
    assert fs.read_bytes(p) == b"x"


def _critical(base: str, timeout_s: float, rounds: int, hold_s: float) -> int:
    """Take the lock ``rounds`` times; inside, claim a marker file exclusively (fails if
    another holder is inside). Returns the number of overlaps seen."""
    fs = FileSystem()
    inside = os.path.join(base, "inside")
    overlaps = 0
    for _ in range(rounds):
        with WriterLock(fs, base, expiry_s=30, timeout_s=timeout_s):
            try:
                fd = os.open(inside, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
            except FileExistsError:
                overlaps += 1
                continue
            os.close(fd)
            time.sleep(hold_s)
            os.unlink(inside)
    return overlaps


def test_threads_racing_one_holder_at_a_time(tmp_path):
    base = str(tmp_path)
    results: list[int] = []
    errors: list[BaseException] = []
    barrier = threading.Barrier(8)

    def go():
        barrier.wait()
        try:
            results.append(_critical(base, 60, 3, 0.005))
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=go) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert results == [0] * 8  # everyone got it (waited), nobody overlapped
    assert not os.path.exists(os.path.join(base, ".hoodie", ".streamer_writer.lock"))


def test_processes_racing_one_holder_at_a_time(tmp_path):
    ctx = mp.get_context("spawn")
    with ctx.Pool(4) as pool:
        overlaps = pool.starmap(_critical, [(str(tmp_path), 60, 3, 0.01)] * 4)
    assert overlaps == [0] * 4


def test_busy_lock_waits_then_names_the_holder(tmp_path):
    fs = FileSystem()
    holder = WriterLock(fs, str(tmp_path), purpose="writer").acquire()
    try:
        started = time.monotonic()
        with pytest.raises(CommitConflictError) as e:
            WriterLock(fs, str(tmp_path), timeout_s=0.5).acquire()
        assert time.monotonic() - started >= 0.5
        assert e.value.retryable
        assert f"pid {os.getpid()}" in str(e.value) and holder.owner in str(e.value)
        # a table service gives up the same way (as its own conflict type)
        with pytest.raises(CompactionConflict), writer_lock(_T(fs, str(tmp_path)), 0.2):
            pass
    finally:
        holder.release()


def test_waiter_gets_the_lock_once_released(tmp_path):
    fs = FileSystem()
    holder = WriterLock(fs, str(tmp_path)).acquire()
    threading.Timer(0.3, holder.release).start()
    started = time.monotonic()
    with WriterLock(fs, str(tmp_path), timeout_s=10) as lock:
        assert lock.still_owner()
        assert 0.2 <= time.monotonic() - started < 10


def test_dead_writer_is_taken_over_at_once(tmp_path):
    fs = FileSystem()
    lock = WriterLock(fs, str(tmp_path))
    fs.write_bytes(lock.path, LockInfo("ghost", lock.host, 2**22 + 12345, time.time(), "writer").to_bytes())
    with lock:
        assert lock.took_over is not None and lock.took_over.owner == "ghost"


def test_writer_and_plan_locks_are_one_implementation():
    assert issubclass(WriterLock, FileLock) and issubclass(PlanLock, FileLock)
    import streamer.services.lock as slock
    import streamer.write.lock as wlock

    assert slock.pid_alive is wlock.pid_alive and slock.LockInfo is wlock.LockInfo


class _T:
    """Just what :func:`writer_lock` needs of a table."""

    def __init__(self, fs, base_path):
        self.fs, self.base_path = fs, base_path


def _delete_together(fs: FileSystem, path: str, n: int) -> list[BaseException]:
    errors: list[BaseException] = []
    barrier = threading.Barrier(n)

    def go():
        barrier.wait()
        try:
            fs.delete_dir(path)
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=go) for _ in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return errors


def test_fs_delete_dir_tolerates_a_concurrent_deleter(tmp_path):
    """Two cleaners of one marker folder (a writer's sweep, a service's own cleanup)."""
    fs = FileSystem()
    for round_ in range(3):
        d = tmp_path / f"m{round_}"
        for i in range(200):
            fs.write_bytes(str(d / f"p{i % 7}" / f"f{i}.marker"), b"")
        assert _delete_together(fs, str(d), 4) == [] and not d.exists()


class _Peeking(WriterLock):
    """A taker whose reads of the lock file let the world move on: its first read sees
    the holder release, and after every read a rival gets one ``try_acquire``."""

    def __init__(self, fs, base, holder, rival):
        super().__init__(fs, base, expiry_s=30)
        self.holder, self.rival, self.reads = holder, rival, 0

    def current(self):
        info = super().current()
        self.reads += 1
        if self.reads == 1:
            self.holder.release()
            info = None  # what we read was the lock as it was being deleted
        elif not self.rival.held:
            self.rival.try_acquire()
        return info


def test_a_lock_released_under_a_taker_is_never_taken_from_a_fresh_holder(tmp_path):
    """The race behind a one-in-many CI overlap: a taker read "no lock" (the holder had just
    released it), went for a takeover, and its delete removed the lock a rival had created
    meanwhile - so both held it. A vanished lock is now competed for by exclusive create only."""
    fs = FileSystem()
    base = str(tmp_path)
    holder = WriterLock(fs, base, expiry_s=30).acquire()
    rival = WriterLock(fs, base, expiry_s=30)
    taker = _Peeking(fs, base, holder, rival)
    try:
        got = taker.try_acquire()
        if not rival.held:
            rival.try_acquire()
        assert taker.reads >= 1
        assert not (got and rival.held), "two holders of one lock"
        assert got or rival.held
        owner = LockInfo.from_bytes(fs.read_bytes(taker.path)).owner
        assert owner == (taker.owner if got else rival.owner)
    finally:
        taker.release()
        rival.release()
