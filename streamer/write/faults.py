"""Fault injection for crash tests: die with SIGKILL at the N-th I/O step of a commit.

Reliability tests must kill a *real* writer process at arbitrary points (after some
blocks are written, before the completed instant...) and prove the next writer
recovers. The writer calls :func:`step` at every I/O step of a commit; when
``MOR_STREAMER_KILL_AT_STEP=N`` is set, the N-th call kills the process on the spot —
no cleanup, no ``finally`` blocks, exactly like ``kill -9`` or a lost node.
``MOR_STREAMER_KILL_AT_LABEL=PREFIX`` kills at the first step whose label starts with
``PREFIX`` instead (``rollback``, ``compaction marker``, ``clean requested``...): a crash
campaign can then land a kill inside a chosen phase whatever its step number is.
Unset (production), :func:`step` costs one integer increment.

``MOR_STREAMER_PAUSE_AT_LABEL=PREFIX`` with ``MOR_STREAMER_PAUSE_FILE=PATH`` pauses instead:
at the first step (or :func:`pause_point`, which marks a point that is not an I/O step:
``spark start``, ``batch read``) whose label starts with ``PREFIX``, the process writes
the label to ``PATH`` and waits until a test deletes it (at most ``PAUSE_MAX_S``). A test
can then act on a process at a known point - send it a signal mid-commit - and let it go.
"""

from __future__ import annotations

import os
import signal
import threading
import time

ENV_KILL_AT = "MOR_STREAMER_KILL_AT_STEP"
ENV_KILL_AT_LABEL = "MOR_STREAMER_KILL_AT_LABEL"
ENV_TRACE = "MOR_STREAMER_TRACE_STEPS"
ENV_PAUSE_AT = "MOR_STREAMER_PAUSE_AT_LABEL"
ENV_PAUSE_FILE = "MOR_STREAMER_PAUSE_FILE"
#: The longest a paused process waits for its pause file to go (a test that died).
PAUSE_MAX_S = 300.0

_lock = threading.Lock()
_count = 0
_kill_at = int(os.environ.get(ENV_KILL_AT, "0") or 0)
_kill_at_label = os.environ.get(ENV_KILL_AT_LABEL) or None
_trace = os.environ.get(ENV_TRACE)
_pause_at = os.environ.get(ENV_PAUSE_AT) or None
_pause_file = os.environ.get(ENV_PAUSE_FILE) or None
_paused = False


def step(label: str) -> None:
    """Mark one I/O step; may SIGKILL the process when fault injection is armed."""
    global _count
    with _lock:
        _count += 1
        n = _count
    if _trace:
        with open(_trace, "a") as f:
            f.write(f"{n}\t{label}\n")
    if (_kill_at and n == _kill_at) or (_kill_at_label and label.startswith(_kill_at_label)):
        os.kill(os.getpid(), signal.SIGKILL)
    pause_point(label)


def pause_point(label: str) -> None:
    """Pause here once if ``MOR_STREAMER_PAUSE_AT_LABEL`` names ``label`` (see the module)."""
    global _paused
    if _pause_at is None or _pause_file is None or _paused or not label.startswith(_pause_at):
        return
    with _lock:
        if _paused:
            return
        _paused = True
    tmp = f"{_pause_file}.tmp"
    with open(tmp, "w") as f:
        f.write(label)
    os.replace(tmp, _pause_file)  # whole: the test reads the label it names
    deadline = time.monotonic() + PAUSE_MAX_S
    while os.path.exists(_pause_file) and time.monotonic() < deadline:
        time.sleep(0.05)


def steps_taken() -> int:
    return _count


def reset(kill_at: int = 0) -> None:
    """Re-arm within a process (tests that run several writers in one interpreter)."""
    global _count, _kill_at
    with _lock:
        _count = 0
        _kill_at = kill_at
