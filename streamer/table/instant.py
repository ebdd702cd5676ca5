"""Instants: one action on the timeline at one time, in one state.

An instant is named by its *requested* time (``yyyyMMddHHmmssSSS``); tables of
version 8+ also record a *completion* time in the completed file's name. The
action a pending instant carries can differ from the one it completes as:
a compaction completes as a ``commit``, a log compaction as a ``deltacommit`` and
a clustering as a ``replacecommit`` - readers only ever see the completed name.
"""

from __future__ import annotations

import datetime as _dt
import re
import threading
from dataclasses import dataclass
from enum import Enum


class State(str, Enum):
    REQUESTED = "requested"
    INFLIGHT = "inflight"
    COMPLETED = "completed"

    @property
    def rank(self) -> int:
        return _STATE_RANK[self]


_STATE_RANK = {State.REQUESTED: 0, State.INFLIGHT: 1, State.COMPLETED: 2}


class Action:
    """Timeline action names, exactly as they appear in file names."""

    COMMIT = "commit"
    DELTA_COMMIT = "deltacommit"
    COMPACTION = "compaction"
    LOG_COMPACTION = "logcompaction"
    ROLLBACK = "rollback"
    CLEAN = "clean"
    REPLACE_COMMIT = "replacecommit"
    CLUSTERING = "clustering"
    SAVEPOINT = "savepoint"
    RESTORE = "restore"
    INDEXING = "indexing"
    SCHEMA_COMMIT = "schemacommit"

    #: Actions that write data files readers must see.
    WRITE_ACTIONS = frozenset({COMMIT, DELTA_COMMIT, REPLACE_COMMIT})
    #: Pending action -> the action its completed file carries.
    COMPLETES_AS = {COMPACTION: COMMIT, LOG_COMPACTION: DELTA_COMMIT, CLUSTERING: REPLACE_COMMIT}


INSTANT_FORMAT = "%Y%m%d%H%M%S%f"  # trimmed to milliseconds by format_instant_time
_INSTANT_RE = re.compile(r"^\d{14}(\d{3})?(\d{3})?$")


def format_instant_time(when: _dt.datetime) -> str:
    """``yyyyMMddHHmmssSSS`` (UTC) for a datetime."""
    return when.astimezone(_dt.timezone.utc).strftime(INSTANT_FORMAT)[:17]


def parse_instant_time(ts: str) -> _dt.datetime:
    """The UTC datetime an instant time names (seconds-only legacy instants accepted)."""
    if not _INSTANT_RE.match(ts):
        raise ValueError(f"not an instant time: {ts!r}")
    padded = (ts + "000000")[:20]
    return _dt.datetime.strptime(padded, INSTANT_FORMAT).replace(tzinfo=_dt.timezone.utc)


def wall_clock() -> _dt.datetime:
    """The wall clock (UTC) every new instant time is read from - the test seam.

    Only :func:`new_instant_time` reads it. Tests replace it
    (``monkeypatch.setattr(streamer.table.instant, "wall_clock", fake)``) to make the
    clock step back; resetting ``_last_generated`` to ``""`` as well simulates a new
    process, which has lost the in-process floor.
    """
    return _dt.datetime.now(_dt.timezone.utc)


#: The in-process floor: the last time this process generated. A new process starts from
#: ``""``, so across processes only ``after`` (the table's last instant) orders instants.
_last_generated = ""
_gen_lock = threading.Lock()


def new_instant_time(after: str | None = None) -> str:
    """A fresh instant time, strictly later than ``after`` and any generated before.

    Hudi instants must be unique and increasing; two writers in one process (or a
    clock that steps back) must never reuse a time. The clock is :func:`wall_clock`; when
    it is at or behind the floor (``after``, or this process's last), the time is the
    floor plus one millisecond.
    """
    global _last_generated
    with _gen_lock:
        candidate = format_instant_time(wall_clock())
        floor = max(_last_generated, after or "")
        if candidate <= floor:
            bumped = parse_instant_time(floor[:17].ljust(17, "0")) + _dt.timedelta(milliseconds=1)
            candidate = format_instant_time(bumped)
        _last_generated = candidate
        return candidate


@dataclass(frozen=True)
class Instant:
    """One action at one time. ``action`` is the name its *current* state's file carries.

    ``pending_action`` remembers what a completed instant was while pending (so a
    completed ``commit`` that was a ``compaction`` can be told apart).
    """

    timestamp: str
    action: str
    state: State
    completion_time: str | None = None
    pending_action: str | None = None

    @property
    def is_completed(self) -> bool:
        return self.state is State.COMPLETED

    @property
    def is_pending(self) -> bool:
        return self.state is not State.COMPLETED

    @property
    def is_requested(self) -> bool:
        return self.state is State.REQUESTED

    @property
    def is_inflight(self) -> bool:
        return self.state is State.INFLIGHT

    @property
    def is_compaction(self) -> bool:
        return Action.COMPACTION in (self.action, self.pending_action)

    @property
    def is_log_compaction(self) -> bool:
        return Action.LOG_COMPACTION in (self.action, self.pending_action)

    @property
    def completed_action(self) -> str:
        """The action this instant completes (or completed) as."""
        if self.is_completed:
            return self.action
        return Action.COMPLETES_AS.get(self.action, self.action)

    def file_name(self, layout_version: int = 1) -> str:
        """The timeline file that represents this instant in its current state."""
        if self.state is State.COMPLETED:
            if layout_version >= 2:
                if not self.completion_time:
                    raise ValueError(f"layout 2 needs a completion time for {self}")
                return f"{self.timestamp}_{self.completion_time}.{self.action}"
            return f"{self.timestamp}.{self.action}"
        if self.state is State.INFLIGHT and self.action == Action.COMMIT:
            return f"{self.timestamp}.inflight"  # Hudi's historic exception for commits
        return f"{self.timestamp}.{self.action}.{self.state.value}"

    def with_state(self, state: State, action: str | None = None, completion_time: str | None = None) -> Instant:
        pending = self.pending_action
        if state is State.COMPLETED and self.is_pending:
            pending = self.action
        return Instant(
            self.timestamp,
            action or self.action,
            state,
            completion_time if completion_time is not None else self.completion_time,
            pending,
        )

    def __str__(self) -> str:
        return f"[{self.timestamp}__{self.action}__{self.state.value.upper()}]"


# ``<ts>[_<completion>].<action>[.<state>]`` or the bare ``<ts>.inflight`` of a commit.
_FILE_RE = re.compile(
    r"^(?P<ts>\d{14,20})(?:_(?P<done>\d{14,20}))?\.(?P<action>[a-z_]+)(?:\.(?P<state>requested|inflight))?$"
)


@dataclass(frozen=True)
class TimelineFile:
    """One parsed timeline file name."""

    timestamp: str
    action: str
    state: State
    completion_time: str | None
    name: str


def parse_timeline_file(name: str) -> TimelineFile | None:
    """Parse a timeline file name; ``None`` for anything else in the folder."""
    m = _FILE_RE.match(name)
    if not m:
        return None
    ts, done, action, state = m.group("ts"), m.group("done"), m.group("action"), m.group("state")
    if action in ("requested", "inflight") and state is None:
        # "<ts>.inflight": a commit's inflight file (no action in the name).
        if action == "inflight":
            return TimelineFile(ts, Action.COMMIT, State.INFLIGHT, None, name)
        return None
    if action in ("properties", "crc", "tmp"):
        return None
    st = State(state) if state else State.COMPLETED
    return TimelineFile(ts, action, st, done, name)
