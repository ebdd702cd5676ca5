"""The writer lock on S3 (a real S3-compatible server): two writers racing for 10 rounds
never both hold it, a busy lock is waited for then named, and a holder that stalled past
its expiry cannot overwrite its successor's lock (``If-Match`` on the ETag it read)."""

from __future__ import annotations

import multiprocessing as mp
import os
import time
import uuid

import pytest

from streamer.errors import CommitConflictError
from streamer.fs import resolve
from streamer.write.lock import LockInfo, WriterLock

pytestmark = [pytest.mark.s3, pytest.mark.integration]


def _critical(uri: str, inside: str, rounds: int, hold_s: float) -> int:
    """Take the S3 lock ``rounds`` times; inside, claim a local marker exclusively (fails if
    the other holder is inside too). Returns the number of overlaps seen."""
    fs, base = resolve(uri)
    overlaps = 0
    for _ in range(rounds):
        with WriterLock(fs, base, expiry_s=30, timeout_s=120):
            try:
                fd = os.open(inside, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
            except FileExistsError:
                overlaps += 1
                continue
            os.close(fd)
            time.sleep(hold_s)
            os.unlink(inside)
    return overlaps


def _uri() -> str:
    return f"s3://lake-bucket/lock-{uuid.uuid4().hex[:8]}"


def test_two_writer_processes_racing_ten_rounds_never_overlap(s3_store, tmp_path):
    uri = _uri()
    ctx = mp.get_context("spawn")  # children inherit the AWS variables pointing at the server
    with ctx.Pool(2) as pool:
        overlaps = pool.starmap(_critical, [(uri, str(tmp_path / "inside"), 10, 0.05)] * 2)
    assert overlaps == [0, 0]
    fs, base = resolve(uri)
    assert not fs.exists(f"{base}/.hoodie/.streamer_writer.lock")


def test_busy_lock_waits_then_names_the_holder(s3_store):
    fs, base = resolve(_uri())
    holder = WriterLock(fs, base, purpose="writer").acquire()
    try:
        with pytest.raises(CommitConflictError) as e:
            WriterLock(fs, base, timeout_s=0.5).acquire()
        assert e.value.retryable and holder.owner in str(e.value)
    finally:
        holder.release()
    with WriterLock(fs, base) as again:  # released: free at once
        assert again.still_owner()


def test_a_stalled_holder_cannot_overwrite_its_successor(s3_store):
    fs, base = resolve(_uri())
    stalled = WriterLock(fs, base, expiry_s=0.5).acquire()
    stalled._stop.set()  # its heartbeat pauses, as in a long GC pause or a frozen VM...
    stalled._thread.join(5)
    before = fs.read_tagged(stalled.path)  # ...right after reading the lock for its next beat
    time.sleep(0.7)  # past expiry: a successor takes over
    successor = WriterLock(fs, base, expiry_s=0.5)
    assert successor.try_acquire() and successor.took_over.owner == stalled.owner
    try:
        assert not fs.replace_if(stalled.path, stalled._me(), before.tag)  # the stale beat: refused
        assert successor.still_owner() and not stalled.still_owner()
        stalled.release()  # not the owner: leaves the successor's lock alone
        assert successor.still_owner()
    finally:
        successor.release()


def test_dead_writer_is_taken_over_at_once(s3_store):
    fs, base = resolve(_uri())
    lock = WriterLock(fs, base)
    fs.write_bytes(lock.path, LockInfo("ghost", lock.host, 2**22 + 12345, time.time(), "writer").to_bytes())
    with lock:
        assert lock.took_over is not None and lock.took_over.owner == "ghost"


def test_pipeline_lease_on_s3_admits_one_instance(s3_store):
    from streamer.errors import LeaseHeldError
    from streamer.pipeline.lease import PipelineLease

    folder = f"{_uri()}/_checkpoints/p"
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
