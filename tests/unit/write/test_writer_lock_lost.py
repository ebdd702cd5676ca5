"""A writer that lost its lock mid-write (stalled past the expiry, or judged dead by a
host whose clock is ahead) never publishes its instant: its successor may be rolling it
back, and a completed instant over deleted files would be a torn commit."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from streamer.errors import CommitConflictError
from streamer.read import Table
from streamer.write.lock import LockInfo, WriterLock
from tests.support import block_tables as tg
from tests.support.heartbeat_lapse import hudi_takes_over_at


def test_a_writer_that_lost_its_lock_does_not_complete_its_instant(tmp_path, monkeypatch):
    path = str(tmp_path / "t")
    w, gen, model = tg.build(path, 2)
    before = [i.timestamp for i in Table.open(path).timeline.completed()]
    owns = WriterLock.still_owner

    def taken_over(self: WriterLock) -> bool:
        # a successor took the lock while we wrote (then died: a gone pid, for the next write)
        ghost = LockInfo("successor", self.host, 2**22 + 4321, time.time(), "writer")
        self.fs.write_bytes(self.path, ghost.to_bytes())
        return owns(self)

    with monkeypatch.context() as m:
        m.setattr(WriterLock, "still_owner", taken_over)
        with pytest.raises(CommitConflictError, match="lost the writer lock"):
            w.upsert(gen.upserts(12))  # not applied to the model: not committed
    t = Table.open(path)
    assert [i.timestamp for i in t.timeline.completed()] == before
    assert tg.read_ours(path) == model.snapshot()
    tg.step(tg.open_writer(path), gen, model)  # the next write rolls the orphan back
    assert not Table.open(path).timeline.pending()
    assert tg.read_ours(path) == model.snapshot() == tg.read_hudi_rs(path)


@pytest.mark.parametrize("stalled", ["refused", "held"])
def test_a_writer_whose_heartbeat_lapsed_does_not_complete_its_instant(tmp_path, stalled):
    """Apache Hudi's writers take no lock of ours: one judges our inflight write by its
    heartbeat's age alone and rolls back a write whose heartbeat expired. A writer of
    ours whose heartbeat went unrefreshed long enough (storage refusing or holding its
    writes, a stall) kept its lock, so it refreshed the heartbeat again and completed the
    instant Hudi was rolling back. Now a lapsed heartbeat is neither refreshed nor deleted,
    and the batch is not committed."""
    path = str(tmp_path / "t")
    w, gen, model = tg.build(path, 2)
    before = [i.timestamp for i in Table.open(path).timeline.completed()]
    with (hudi_takes_over_at(w.fs, "inflight", path, stalled=stalled) as taken_over,
          pytest.raises(CommitConflictError, match="went unrefreshed")):
        w.upsert(gen.upserts(12))  # not applied to the model: not committed
    [taken] = taken_over
    assert stalled == "held" or taken.read_bytes() == b"", "the heartbeat of Hudi's rollback was overwritten"
    assert [i.timestamp for i in Table.open(path).timeline.completed()] == before
    assert tg.read_ours(path) == model.snapshot()
    stopped = taken.stat().st_mtime - 121  # Hudi died too: the next write of ours rolls it back
    os.utime(taken, (stopped, stopped))
    tg.step(tg.open_writer(path), gen, model)
    assert not Table.open(path).timeline.pending()
    assert tg.read_ours(path) == model.snapshot() == tg.read_hudi_rs(path)


def test_a_writers_heartbeat_comes_before_its_instant_and_an_orphan_of_ours_is_swept(tmp_path, monkeypatch):
    """A Hudi writer's lazy clean counts a pending instant without a heartbeat as a dead
    one to roll back, and Hudi's writers begin theirs before their instant. Ours began
    after ``deltacommit.requested``, so Hudi could roll back our write in between. Now
    the heartbeat comes first; one a crash left without its instant (ours: it holds a
    time) is swept by the next commit, while Hudi's (empty) of an instant still to come
    is left."""
    from streamer import faults
    from streamer.write.transaction import Transaction

    path = str(tmp_path / "t")
    w, gen, model = tg.build(path, 1)
    beats = Path(path, ".hoodie", ".heartbeat")
    seen: list[bool] = []
    step = faults.step

    def at_requested(label: str) -> None:
        if label == "requested":
            pending = [i.timestamp for i in Table.open(path).timeline.pending()]
            seen.append(bool(pending) and all((beats / ts).is_file() and (beats / ts).read_bytes() for ts in pending))
        step(label)

    monkeypatch.setattr(faults, "step", at_requested)
    tg.step(w, gen, model)
    assert seen == [True], "no heartbeat of ours when the instant was requested"
    monkeypatch.setattr(faults, "step", step)

    def dies(self: Transaction, *args: object, **kw: object) -> None:
        raise RuntimeError("killed between the heartbeat and the requested instant")

    with monkeypatch.context() as m:
        m.setattr(Transaction, "request", dies)
        with pytest.raises(RuntimeError):
            w.upsert(gen.upserts(5))  # not applied to the model
    [orphan] = [p for p in beats.iterdir() if p.read_bytes()]
    hudis = beats / "29991231235959999"
    hudis.write_bytes(b"")  # a Hudi writer's, begun before its instant
    tg.step(tg.open_writer(path), gen, model)
    assert not orphan.exists() and hudis.exists()
    assert tg.read_ours(path) == model.snapshot()
