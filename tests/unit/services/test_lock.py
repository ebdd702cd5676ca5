"""Plan locks: one holder at a time, stale holders (dead pid, silent heartbeat) taken over."""

from __future__ import annotations

import json
import threading

from streamer.fs import FileSystem
from streamer.write.lock import LockInfo, PlanLock


def test_create_exclusive_only_once(tmp_path):
    fs = FileSystem()
    p = str(tmp_path / "x" / "lock")
    assert fs.create_exclusive(p, b"a")
    assert not fs.create_exclusive(p, b"b")
    assert fs.read_bytes(p) == b"a"


def test_second_holder_refused_until_release(tmp_path):
    fs = FileSystem()
    a, b = PlanLock(fs, str(tmp_path), "i1"), PlanLock(fs, str(tmp_path), "i1")
    assert a.try_acquire()
    assert not b.try_acquire()
    a.release()
    assert b.try_acquire()
    b.release()


def test_dead_owner_is_taken_over(tmp_path):
    fs = FileSystem()
    lock = PlanLock(fs, str(tmp_path), "i2")
    fs.mkdirs(str(tmp_path / ".hoodie/.aux/.locks"))
    dead = LockInfo("ghost", lock.host, 2**22 + 12345, 1e18)  # fresh heartbeat, pid gone
    fs.write_bytes(lock.path, dead.to_bytes())
    assert lock.try_acquire()
    assert lock.took_over is not None and lock.took_over.owner == "ghost"
    assert json.loads(fs.read_bytes(lock.path))["owner"] == lock.owner
    lock.release()


def test_silent_heartbeat_is_stale(tmp_path):
    fs = FileSystem()
    lock = PlanLock(fs, str(tmp_path), "i3", expiry_s=5)
    fs.mkdirs(str(tmp_path / ".hoodie/.aux/.locks"))
    fs.write_bytes(lock.path, LockInfo("other-host-owner", "elsewhere", 1, 0.0).to_bytes())
    assert lock.try_acquire()
    lock.release()


def test_racing_takers_one_wins(tmp_path):
    fs = FileSystem()
    base = str(tmp_path)
    fs.mkdirs(str(tmp_path / ".hoodie/.aux/.locks"))
    PlanLock(fs, base, "i4")  # path
    fs.write_bytes(str(tmp_path / ".hoodie/.aux/.locks/i4"), LockInfo("x", "elsewhere", 1, 0.0).to_bytes())
    locks = [PlanLock(fs, base, "i4", expiry_s=5) for _ in range(8)]
    barrier = threading.Barrier(len(locks))
    wins = []

    def go(lk):
        barrier.wait()
        if lk.try_acquire():
            wins.append(lk)

    threads = [threading.Thread(target=go, args=(lk,)) for lk in locks]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(wins) == 1
    wins[0].release()
