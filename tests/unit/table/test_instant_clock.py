"""Issue 32 (clock): the wall clock is a seam, and a clock that steps back never yields an
instant time at or before the table's last instant - in one process, in a new process
(the in-process floor lost) and from a timeline snapshot older than storage."""

from __future__ import annotations

import datetime as dt

import pytest

import streamer.table.instant as instant_mod
from streamer.fs import FileSystem
from streamer.table.instant import Action, format_instant_time, new_instant_time, parse_instant_time
from streamer.table.properties import load_properties, new_table_properties, write_properties
from streamer.table.timeline import Timeline

UTC = dt.timezone.utc


class SteppingClock:
    """A wall clock the test sets; every read advances it by ``tick``."""

    def __init__(self, start: dt.datetime, tick: dt.timedelta = dt.timedelta(0)) -> None:
        self.now = start
        self.tick = tick
        self.reads = 0

    def __call__(self) -> dt.datetime:
        self.reads += 1
        self.now += self.tick
        return self.now


@pytest.fixture
def clock(monkeypatch):
    c = SteppingClock(dt.datetime(2030, 6, 1, 12, 0, 0, tzinfo=UTC))
    monkeypatch.setattr(instant_mod, "wall_clock", c)
    monkeypatch.setattr(instant_mod, "_last_generated", "")
    return c


def new_process(monkeypatch) -> None:
    """What a restart loses: the in-process floor."""
    monkeypatch.setattr(instant_mod, "_last_generated", "")


def _timeline(tmp_path) -> Timeline:
    fs = FileSystem()
    base = str(tmp_path / "t")
    write_properties(fs, base, new_table_properties("t", record_key_fields=["id"]))
    return Timeline.load(fs, base, load_properties(fs, base))


def test_wall_clock_is_the_real_utc_clock():
    before = dt.datetime.now(UTC)
    got = instant_mod.wall_clock()
    assert got.tzinfo is not None and before <= got <= dt.datetime.now(UTC)


def test_new_instant_time_reads_the_seam(clock):
    assert new_instant_time() == "20300601120000000"
    assert clock.reads == 1


def test_step_back_in_one_process_keeps_increasing(clock):
    first = new_instant_time()
    clock.now -= dt.timedelta(hours=3)
    second = new_instant_time()
    assert second > first
    assert parse_instant_time(second) - parse_instant_time(first) == dt.timedelta(milliseconds=1)


def test_step_back_in_a_new_process_is_floored_by_after(clock, monkeypatch):
    last = new_instant_time()
    new_process(monkeypatch)
    clock.now = dt.datetime(1999, 1, 1, tzinfo=UTC)  # before the table's first instant
    assert new_instant_time() < last  # no floor: what the clock says
    new_process(monkeypatch)
    assert new_instant_time(after=last) > last


def test_a_clock_ahead_of_the_floor_is_used_as_is(clock):
    assert new_instant_time(after="20200101000000000") == "20300601120000000"


def test_seconds_only_legacy_floor(clock, monkeypatch):
    clock.now = dt.datetime(2000, 1, 1, tzinfo=UTC)
    got = new_instant_time(after="20240101000000")
    assert got == "20240101000000001" and got > "20240101000000"


def test_same_millisecond_twice_is_bumped(clock):
    a, b = new_instant_time(), new_instant_time()
    assert b > a == format_instant_time(clock.now)


def test_timeline_instant_after_its_last_even_before_its_first(clock, monkeypatch, tmp_path):
    tl = _timeline(tmp_path)
    made = []
    for step_back in (dt.timedelta(0), dt.timedelta(milliseconds=5), dt.timedelta(days=400)):
        clock.now -= step_back
        new_process(monkeypatch)
        inst = tl.create_requested(Action.DELTA_COMMIT)
        made.append(inst.timestamp)
    assert made == sorted(made) and len(set(made)) == len(made)


def test_stale_timeline_snapshot_gets_a_time_after_storage(clock, monkeypatch, tmp_path):
    """Two handles on one table (two processes): the older snapshot must not reuse or
    undercut the time the newer one wrote, when the clock has stepped back."""
    stale = _timeline(tmp_path)
    fresh = stale.reload()
    clock.now -= dt.timedelta(minutes=10)
    written = fresh.create_requested(Action.DELTA_COMMIT).timestamp
    new_process(monkeypatch)
    clock.now -= dt.timedelta(minutes=10)
    assert stale.new_instant_time() <= written  # the snapshot alone cannot know
    new_process(monkeypatch)
    made = stale.create_requested(Action.CLEAN)
    assert made.timestamp > written
    names = sorted(f.name for f in stale.fs.list_dir(stale.folder) if f.name[0].isdigit())
    assert names == [f"{written}.deltacommit.requested", f"{made.timestamp}.clean.requested"]


def test_new_instant_time_on_storage_sees_instants_written_elsewhere(clock, monkeypatch, tmp_path):
    stale = _timeline(tmp_path)
    other = stale.reload()
    other.create_requested(Action.DELTA_COMMIT)
    top = other.create_requested(Action.COMPACTION).timestamp
    new_process(monkeypatch)
    clock.now = dt.datetime(1990, 1, 1, tzinfo=UTC)
    assert stale.new_instant_time(on_storage=True) > top
