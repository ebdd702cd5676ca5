"""Issue 32 (clock): clean and log compaction make their instants holding the writers'
lock, from the timeline as stored - as compaction does - so neither can reuse or undercut
an instant a writer made meanwhile, however the clock stepped back."""

from __future__ import annotations

import datetime as dt

import pytest

import streamer.table.instant as instant_mod
from streamer.config.policies import CleanPolicy, CompactionPolicy, LogCompactionPolicy
from streamer.read import Table
from streamer.services import clean as clean_mod
from streamer.services import log_compaction as lc_mod
from streamer.services.compaction import schedule_compaction_safely
from streamer.services.executor import execute_pending
from streamer.table.instant import Action
from streamer.write.lock import WriterLock
from tests.support import block_tables as tg

UTC = dt.timezone.utc
LC = LogCompactionPolicy(min_blocks=2)
CLEAN = CleanPolicy(retain_commits=1)


@pytest.fixture
def clock(monkeypatch):
    """The wall clock, pinned far before any instant the table holds once it is built."""
    now = {"t": dt.datetime(2031, 1, 1, tzinfo=UTC)}
    monkeypatch.setattr(instant_mod, "wall_clock", lambda: now["t"])
    monkeypatch.setattr(instant_mod, "_last_generated", "")
    return now


def _stored(path: str) -> list[str]:
    return [i.timestamp for i in Table.open(path).timeline]


def _cleanable(path: str):
    w, gen, model = tg.build(path, 3)
    assert schedule_compaction_safely(Table.open(path), CompactionPolicy(), force=True)
    execute_pending(Table.open(path), Action.COMPACTION)
    tg.step(w, gen, model)
    return w, gen, model


def _step_back_and_restart(clock, monkeypatch):
    clock["t"] = dt.datetime(2001, 1, 1, tzinfo=UTC)  # before the table's first instant
    monkeypatch.setattr(instant_mod, "_last_generated", "")  # a new process


def _writer_lock_free(path: str) -> bool:
    probe = WriterLock(Table.open(path).fs, path, purpose="probe")
    if probe.try_acquire():
        probe.release()
        return True
    return False


def test_log_compaction_plans_and_requests_holding_the_writer_lock(tmp_path, clock, monkeypatch):
    p = str(tmp_path / "t")
    w, gen, model = tg.build(p, 4)
    stale = Table.open(p)
    tg.step(tg.open_writer(p), gen, model)  # another handle commits after `stale` was read
    last = _stored(p)[-1]
    _step_back_and_restart(clock, monkeypatch)
    seen = []
    real = lc_mod.plan_log_compaction

    def plan(table, policy):
        seen.append(_writer_lock_free(p))
        monkeypatch.setattr(instant_mod, "_last_generated", "")
        return real(table, policy)

    monkeypatch.setattr(lc_mod, "plan_log_compaction", plan)
    inst = lc_mod.schedule_log_compaction(stale, LC)
    assert seen == [False]
    assert inst is not None and inst.timestamp > last
    assert _stored(p)[-1] == inst.timestamp and _writer_lock_free(p)
    assert tg.read_ours(p) == model.snapshot()


def test_clean_plans_and_requests_holding_the_writer_lock(tmp_path, clock, monkeypatch):
    p = str(tmp_path / "t")
    _, gen, model = _cleanable(p)
    stale = Table.open(p)
    tg.step(tg.open_writer(p), gen, model)
    last = _stored(p)[-1]
    _step_back_and_restart(clock, monkeypatch)
    seen = []
    real = clean_mod.plan_clean

    def plan(table, policy):
        seen.append(_writer_lock_free(p))
        monkeypatch.setattr(instant_mod, "_last_generated", "")
        return real(table, policy)

    monkeypatch.setattr(clean_mod, "plan_clean", plan)
    out = clean_mod.run_clean(stale, CLEAN)
    assert seen == [False]
    assert out.instant is not None and out.instant > last
    assert out.instant == _stored(p)[-1] and Table.open(p).timeline.is_completed(out.instant)
    assert tg.read_ours(p) == model.snapshot()


def test_busy_writer_lock_schedules_nothing(tmp_path):
    p = str(tmp_path / "t")
    _cleanable(p)
    before = _stored(p)
    holder = WriterLock(Table.open(p).fs, p, purpose="a live writer")
    assert holder.try_acquire()
    try:
        assert lc_mod.schedule_log_compaction(Table.open(p), LC, lock_timeout_s=0.05) is None
        out = clean_mod.run_clean(Table.open(p), CLEAN, lock_expiry_s=0.05)
        assert out.instant is None and out.files_deleted == 0
    finally:
        holder.release()
    assert _stored(p) == before
    assert clean_mod.run_clean(Table.open(p), CLEAN).instant is not None
