"""The writer lock, on every storage the tests have: a local folder, and S3 (s3proxy; MinIO
where Docker answers). Exclusive create, so racing writers (threads or processes) never
both hold it; a busy lock is waited for up to ``lock_timeout_s``, then named in a
retryable :class:`CommitConflictError`; a dead holder is taken over at once; on S3 a holder
that stalled past its expiry cannot overwrite its successor's lock (``If-Match`` on the
ETag it read). The pipeline lease is the same lock, checked here on each storage too."""

from __future__ import annotations

import errno
import multiprocessing as mp
import os
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from streamer.errors import CommitConflictError
from streamer.fs import FileSystem, resolve
from streamer.services.compaction import CompactionConflict, service_transaction
from streamer.table.timeline import HUDI_HEARTBEAT_EXPIRY_S
from streamer.write import lock as lock_module
from streamer.write.lock import FileLock, LockInfo, PlanLock, WriterLock
from tests.support.timing import poll_until

_S3 = [pytest.mark.s3, pytest.mark.integration]


@dataclass
class Store:
    """Where a lock lives: ``uri`` for child processes, ``fs`` and ``base`` for this one."""

    kind: str
    uri: str
    fs: FileSystem
    base: str


@pytest.fixture(params=["local", pytest.param("s3proxy", marks=_S3), pytest.param("minio", marks=_S3)])
def store(request, tmp_path) -> Iterator[Store]:
    """A fresh lock folder on each storage in turn; for S3 the AWS variables point at the
    server for the test (this process and spawned children)."""
    if request.param == "local":
        uri = str(tmp_path / "table")
        os.makedirs(uri)
        fs, base = resolve(uri)
        yield Store("local", uri, fs, base)
        return
    from unittest import mock

    server = request.getfixturevalue("local_s3" if request.param == "s3proxy" else "minio")
    with mock.patch.dict(os.environ, server.environ()):
        uri = f"s3://lake-bucket/lock-{uuid.uuid4().hex[:8]}"
        fs, base = resolve(uri)
        yield Store(request.param, uri, fs, base)


def test_fs_create_exclusive(store):
    p = f"{store.base}/a/b"
    assert store.fs.create_exclusive(p, b"x")
    assert not store.fs.create_exclusive(p, b"y")
    assert store.fs.read_bytes(p) == b"x"


def _critical(uri: str, inside: str, timeout_s: float, rounds: int, hold_s: float) -> int:
    """Take the lock ``rounds`` times; inside, claim a local marker file exclusively (fails
    if another holder is inside). Returns the number of overlaps seen."""
    fs, base = resolve(uri)
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


def test_threads_racing_one_holder_at_a_time(store, tmp_path):
    results: list[int] = []
    errors: list[BaseException] = []
    barrier = threading.Barrier(8)
    inside = str(tmp_path / "inside")

    def go():
        barrier.wait()
        try:
            results.append(_critical(store.uri, inside, 120, 3, 0.005))
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=go) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert results == [0] * 8  # everyone got it (waited), nobody overlapped
    assert not store.fs.exists(f"{store.base}/.hoodie/.streamer_writer.lock")


def test_processes_racing_one_holder_at_a_time(store, tmp_path):
    """Spawned processes (they inherit the AWS variables pointing at the S3 server)."""
    ctx = mp.get_context("spawn")
    with ctx.Pool(2) as pool:
        overlaps = pool.starmap(_critical, [(store.uri, str(tmp_path / "inside"), 120, 8, 0.01)] * 2)
    assert overlaps == [0] * 2
    assert not store.fs.exists(f"{store.base}/.hoodie/.streamer_writer.lock")


class _Counting(WriterLock):
    """A waiter that counts its attempts and says when one has failed."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.attempts = 0
        self.refused = threading.Event()

    def try_acquire(self) -> bool:
        self.attempts += 1
        got = super().try_acquire()
        if not got:
            self.refused.set()
        return got


def test_busy_lock_waits_then_names_the_holder(store):
    fs, base = store.fs, store.base
    holder = WriterLock(fs, base, purpose="writer").acquire()
    try:
        waiter = _Counting(fs, base, timeout_s=1.0)
        with pytest.raises(CommitConflictError) as e:
            waiter.acquire()
        # it asked, and says how long it waited (that it waits and retries, without a clock in
        # the test: test_waiter_gets_the_lock_once_released)
        assert waiter.attempts >= 1 and "waited 1.0s" in str(e.value)
        assert e.value.retryable
        assert f"pid {os.getpid()}" in str(e.value) and holder.owner in str(e.value)
        # a table service gives up the same way (as its own conflict type)
        with pytest.raises(CompactionConflict), service_transaction(_T(fs, base), 0.2):
            pass
    finally:
        holder.release()
    with WriterLock(fs, base) as again:  # released: free at once
        assert again.still_owner()


def test_waiter_gets_the_lock_once_released(store):
    """The holder lets go only after the waiter has been refused once: the waiter waited,
    then got it, with no clock in the test."""
    fs, base = store.fs, store.base
    holder = WriterLock(fs, base).acquire()
    waiter = _Counting(fs, base, timeout_s=120)

    def release_after_a_refusal() -> None:
        waiter.refused.wait(120)
        holder.release()

    releaser = threading.Thread(target=release_after_a_refusal)
    releaser.start()
    try:
        with waiter as lock:
            assert lock.still_owner()
            assert waiter.attempts >= 2 and not holder.held
    finally:
        releaser.join(120)
        if holder.held:
            holder.release()


def test_dead_writer_is_taken_over_at_once(store):
    lock = WriterLock(store.fs, store.base)
    store.fs.write_bytes(lock.path, LockInfo("ghost", lock.host, 2**22 + 12345, time.time(), "writer").to_bytes())
    assert lock.try_acquire()  # at once: one attempt, no waiting for expiry
    try:
        assert lock.took_over is not None and lock.took_over.owner == "ghost"
    finally:
        lock.release()


@pytest.mark.skipif(not os.path.exists("/proc/self/stat"), reason="process start times are read from /proc")
def test_a_dead_holders_pid_reused_by_another_process_does_not_keep_the_lock(tmp_path):
    """A writer killed with ``kill -9`` whose pid the system has since given to another
    process (a JVM's thread is enough, on a busy host) is gone all the same: its lock is
    taken over at once, not after the expiry. The lock records the holder's start time."""
    import subprocess

    from streamer.write.lock import process_start

    fs, base = resolve(str(tmp_path))
    other = subprocess.Popen(["sleep", "60"])  # the process now holding the dead writer's pid
    try:
        started = process_start(other.pid)
        assert started is not None
        lock = WriterLock(fs, base)
        fs.write_bytes(lock.path, LockInfo("ghost", lock.host, other.pid, time.time(), "writer",
                                           started - 1).to_bytes())
        assert lock.try_acquire(), "a reused pid kept a dead holder's lock"
        assert lock.took_over is not None and lock.took_over.owner == "ghost"
        lock.release()
        # the same pid *and* start time: that process is the holder, alive
        fs.write_bytes(lock.path, LockInfo("live", lock.host, other.pid, time.time(), "writer", started).to_bytes())
        assert not WriterLock(fs, base).try_acquire()
        # a lock of an earlier version (no start time): the pid alone decides, as before
        fs.write_bytes(lock.path, LockInfo("old", lock.host, other.pid, time.time(), "writer").to_bytes())
        assert not WriterLock(fs, base).try_acquire()
    finally:
        other.kill()
        other.wait(10)


def test_a_lock_names_its_holders_start_time(tmp_path):
    from streamer.write.lock import process_start

    fs, base = resolve(str(tmp_path))
    info = LockInfo.from_bytes(FileLock(fs, f"{base}/lock")._me())
    assert info is not None and info.pid == os.getpid()
    assert info.started == process_start(os.getpid())


def test_pipeline_lease_admits_one_instance(store):
    from streamer.errors import LeaseHeldError
    from streamer.pipeline.lease import PipelineLease

    folder = f"{store.uri}/_checkpoints/p"
    first = PipelineLease(folder, "p")
    assert first.acquire()
    try:
        with pytest.raises(LeaseHeldError) as e:
            PipelineLease(folder, "p").acquire()
        assert "already running" in str(e.value)
    finally:
        first.release()
    second = PipelineLease(folder, "p")
    assert second.acquire()  # released: the next instance takes it at once
    second.release()


def test_a_stalled_holder_cannot_overwrite_its_successor(s3_store):
    """S3 only: local disk has no conditional put (a re-read then an atomic write)."""
    fs, base = resolve(f"s3://lake-bucket/lock-{uuid.uuid4().hex[:8]}")
    stalled = WriterLock(fs, base, expiry_s=0.5).acquire()
    stalled._stop.set()  # its heartbeat pauses, as in a long GC pause or a frozen VM...
    stalled._thread.join(5)
    before = fs.read_tagged(stalled.path)  # ...right after reading the lock for its next beat
    successor = WriterLock(fs, base, expiry_s=0.5)
    # past expiry a successor takes over: poll for that, not a fixed sleep
    poll_until(successor.try_acquire, what="the successor taking over the expired lock", timeout_s=120)
    assert successor.took_over is not None and successor.took_over.owner == stalled.owner
    try:
        assert not fs.replace_if(stalled.path, stalled._me(), before.tag)  # the stale beat: refused
        assert successor.still_owner() and not stalled.still_owner()
        stalled.release()  # not the owner: leaves the successor's lock alone
        assert successor.still_owner()
    finally:
        successor.release()


def test_writer_and_plan_locks_are_one_implementation():
    assert issubclass(WriterLock, FileLock) and issubclass(PlanLock, FileLock)
    import importlib.util

    assert importlib.util.find_spec("streamer.services.lock") is None  # one lock module


class _T:
    """Just what :func:`service_transaction` needs of a table."""

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


def test_a_lock_this_process_failed_to_release_is_taken_over_at_once(tmp_path, monkeypatch):
    """A release the store refused leaves the lock file behind with a fresh heartbeat and a
    live pid (ours): the next run in this process (a supervisor's restart) takes it at once
    instead of waiting out its own predecessor's expiry."""
    os.makedirs(tmp_path / "t")
    fs, base = resolve(str(tmp_path / "t"))
    first = WriterLock(fs, base).acquire()

    def refused(path: str) -> None:
        raise OSError(5, "Input/output error (injected)", path)

    with monkeypatch.context() as m:
        m.setattr(type(fs), "delete_file", lambda self, path: refused(path))
        with pytest.raises(OSError):
            first.release()
    assert not first.held and LockInfo.from_bytes(fs.read_bytes(first.path)).owner == first.owner
    second = WriterLock(fs, base)
    assert second.try_acquire()  # at once: one attempt, no expiry waited
    try:
        assert second.took_over is not None and second.took_over.owner == first.owner
    finally:
        second.release()
    other = WriterLock(fs, base).acquire()  # a live holder that released nothing stays respected
    try:
        assert not WriterLock(fs, base).try_acquire()
    finally:
        other.release()


def test_a_dead_holder_from_the_future_expires_by_our_own_clock(tmp_path):
    """Our clock stepped back (or the holder's host is ahead): a dead holder on another host
    left a heartbeat an hour in the future. It is taken over once it stood still for one
    expiry as this process watched it, not when the wall clock catches up."""
    os.makedirs(tmp_path / "t")
    fs, base = resolve(str(tmp_path / "t"))
    lock = WriterLock(fs, base, 0.5)
    ghost = LockInfo("ghost-from-the-future", "another-host", 4242, time.time() + 3600, "writer")
    fs.write_bytes(lock.path, ghost.to_bytes())
    assert not lock.try_acquire()  # fresh by the wall clock: first seen now
    poll_until(lock.try_acquire, timeout_s=60, what="the stalled heartbeat to expire")
    try:
        assert lock.took_over is not None and lock.took_over.owner == "ghost-from-the-future"
    finally:
        lock.release()


def test_a_plan_run_keeps_hudis_heartbeat_only_while_it_holds_the_plan(tmp_path, monkeypatch):
    """A plan run keeps Hudi's heartbeat of its plan with its plan lock
    (:class:`~streamer.write.lock.InstantHeartbeat`). Two ways it used to outlive its
    keeping or end another's: a beat whose slow write (a PUT on S3) raced the end wrote
    the heartbeat again after its delete; and a run that stalled past its lock's expiry,
    whose successor took the plan over, deleted the successor's heartbeat when it ended."""
    uri = str(tmp_path / "table")
    os.makedirs(uri)
    fs, base = resolve(uri)
    ts = "20250101000000000"
    write, beating = fs.write_atomic, threading.Event()

    def slow_beat(path: str, data: bytes) -> None:
        if ".heartbeat" in path and threading.current_thread() is not threading.main_thread():
            beating.set()
            time.sleep(0.3)
        write(path, data)

    monkeypatch.setattr(fs, "write_atomic", slow_beat)
    run = PlanLock(fs, base, ts, expiry_s=1.0)  # a beat every 0.2 s
    assert run.try_acquire()
    run.start_instant(ts)
    assert beating.wait(5)
    run.end_heartbeat()
    run.release()
    assert not os.path.exists(run.heartbeat_path(ts)), "a racing beat wrote the heartbeat again"
    monkeypatch.setattr(fs, "write_atomic", write)

    stalled = PlanLock(fs, base, ts, expiry_s=0.5)
    assert stalled.try_acquire()
    stalled.start_instant(ts)
    stalled._stop.set()  # stalls: beats no more
    stalled._thread.join()
    successor = PlanLock(fs, base, ts, expiry_s=0.5)
    poll_until(successor.try_acquire, timeout_s=10, what="the stalled run's plan lock taken over")
    successor.start_instant(ts)
    stalled.end_heartbeat()
    stalled.release()
    assert successor.still_owner() and os.path.exists(successor.heartbeat_path(ts)), \
        "the stalled run deleted its successor's heartbeat"
    successor.end_heartbeat()
    successor.release()
    assert not os.path.exists(successor.heartbeat_path(ts))


def test_a_long_lock_expiry_beats_hudis_heartbeat_within_hudis_expiry(tmp_path):
    """``streamer services --lock-expiry 600`` made a plan run beat every 120 s (a fifth of
    its lock's expiry), while Apache Hudi counts a heartbeat expired after 120 s: between
    two beats Hudi could take the run for dead and roll it back. A lock keeping Hudi's
    heartbeat now beats within a tenth of Hudi's expiry, whatever its own."""
    fs, base = resolve(str(tmp_path))
    waits: list[float] = []

    class Recorded(threading.Event):
        def wait(self, timeout: float | None = None) -> bool:
            waits.append(timeout or 0.0)
            return True  # stop at once

    for lock in (PlanLock(fs, base, "p", expiry_s=600), WriterLock(fs, base, expiry_s=600)):
        lock._stop = Recorded()
        assert lock.try_acquire()
        lock.release()
    assert len(waits) == 2 and max(waits) <= HUDI_HEARTBEAT_EXPIRY_S / 10, waits


def _beats_by_hand(fs: FileSystem, base: str, ts: str) -> PlanLock:
    """A plan lock keeping the heartbeat of ``ts``, its beats taken by the test."""
    run = PlanLock(fs, base, ts, expiry_s=30.0)
    assert run.try_acquire()
    run._stop.set()
    run._thread.join()
    run.start_instant(ts)
    return run


def test_a_heartbeat_lapses_as_hudi_would_judge_it_and_only_then(tmp_path, monkeypatch):
    """Hudi judges our heartbeat by its file's age (here: a Hudi expiry of 2 s, so a lapse
    after 1 s). Four ways a review found the judgement off: a refresh that landed but
    reported an error (a lost reply) lapsed the run at the next beat, though the file was
    fresh; a refresh whose reply was held counted the file fresh from the reply, not from
    the write; the end of a published instant deleted a heartbeat that had lapsed meanwhile
    (Hudi's by then); and an error that is not an ``OSError`` (an SDK's own) ended the beat
    thread for good."""
    monkeypatch.setattr(lock_module, "HUDI_HEARTBEAT_EXPIRY_S", 2.0)
    os.makedirs(tmp_path / "t")
    fs, base = resolve(str(tmp_path / "t"))
    write = fs.write_atomic

    lost_reply = _beats_by_hand(fs, base, "20250101000000001")

    def landed_then_failed(path: str, data: bytes) -> None:
        write(path, data)
        raise OSError(errno.EIO, "reply lost after the write was applied", path)

    monkeypatch.setattr(fs, "write_atomic", landed_then_failed)
    with pytest.raises(OSError):
        lost_reply._on_beat()
    monkeypatch.setattr(fs, "write_atomic", write)
    lost_reply._on_beat()
    assert lost_reply.lapsed_for() is None
    lost_reply.release()

    held = _beats_by_hand(fs, base, "20250101000000002")

    def reply_held(path: str, data: bytes) -> None:
        write(path, data)
        time.sleep(0.75)

    time.sleep(0.2)
    monkeypatch.setattr(fs, "write_atomic", reply_held)
    held._on_beat()  # the file's age counts from the write: 0.75 s old as the beat returns
    monkeypatch.setattr(fs, "write_atomic", write)
    time.sleep(0.4)
    assert held.lapsed_for() is not None, "a file over a second old was trusted"
    beat = held.heartbeat_path("20250101000000002")
    with open(beat, "wb"):  # Hudi's run keeps it now
        pass
    held.end_instant("20250101000000002")
    assert os.path.exists(beat), "the end of the instant deleted Hudi's heartbeat"
    held.release()

    surviving = PlanLock(fs, base, "20250101000000003", expiry_s=1.0)  # a beat every 0.2 s
    read, failed = fs.read_tagged, []

    def sdk_error_once(path: str):
        if not failed:
            failed.append(path)
            raise RuntimeError("an SDK's own error, not an OSError")
        return read(path)

    monkeypatch.setattr(fs, "read_tagged", sdk_error_once)
    assert surviving.try_acquire()
    surviving.start_instant("20250101000000003")
    first = os.stat(surviving.heartbeat_path("20250101000000003")).st_mtime_ns
    poll_until(lambda: os.stat(surviving.heartbeat_path("20250101000000003")).st_mtime_ns > first, timeout_s=10,
               what="a beat after the failed one")
    assert failed and surviving.lapsed_for() is None
    surviving.end_heartbeat()
    surviving.release()
