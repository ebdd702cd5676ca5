"""Fault injection for crash and storage-error tests: die, or fail one write, at an I/O step.

Reliability tests must kill a *real* writer process at arbitrary points (after some
blocks are written, before the completed instant...) and prove the next writer
recovers. The writer calls :func:`step` at every I/O step of a commit; when
``MOR_STREAMER_KILL_AT_STEP=N`` is set, the N-th call kills the process on the spot —
no cleanup, no ``finally`` blocks, exactly like ``kill -9`` or a lost node.
``MOR_STREAMER_KILL_AT_LABEL=PREFIX`` kills at the first step whose label starts with
``PREFIX`` instead (``rollback``, ``compaction marker``, ``clean requested``...): a crash
campaign can then land a kill inside a chosen phase whatever its step number is.
Unset (production), :func:`step` costs one integer increment.

Storage errors (a full disk, a quota) are the other way a run stops half-way - one the
process survives, so its error handling runs: ``MOR_STREAMER_FAIL_AT_STEP=N`` makes the
N-th step raise ``OSError(ENOSPC, "No space left on device (injected)", <label>)`` once
instead of killing (``MOR_STREAMER_FAIL_AT_LABEL=PREFIX``: the first step whose label starts
with ``PREFIX``, or with both the N-th such step; ``MOR_STREAMER_FAIL_ERRNO`` picks another
errno, ``EDQUOT``, ``EIO``...). ``MOR_STREAMER_FAIL_TIMES=K`` keeps failing: the disk stays
full, every step from the first failure on fails until K errors were injected - the
error handling's own writes (an undo, a rollback) fail too. :func:`fail_at` arms the same
within a process, so a fault campaign needs no process start per fault. What the injected
error stands for depends on where the step is marked, because a step marks a point
*between* writes:

* a step marked just before a write (``before log file X``, ``before base file X``,
  ``compaction marker X`` - after X's marker, before X itself, ``markers X`` - before log
  file X, ``<action> before complete`` - before the completed instant) stands for *that*
  write failing before a byte of it landed;
* a step marked after a write completed (``<action> inflight``, ``compaction wrote X``,
  ``after log file X``) stands for the *next* write of the run failing (the next marker,
  the writers' lock, the completed instant...): the write that completed stays.

The error is a bare ``OSError`` with ``errno`` set and the step's label as its
``filename`` - what ``open``/pyarrow raise for a marker, a lock or a timeline file. Writes
through :meth:`streamer.fs.FileSystem.write_atomic` re-raise it as a
:class:`~streamer.errors.StorageError` naming the file, which *is* an ``OSError``: code
that handles a full disk must catch ``OSError``, and the bare one injected here checks it
does (a handler of ``StorageError`` alone misses a full disk met by a marker or a lock).
A step after the last write of a run (``<action> completed``) stands for no write at all
(nothing follows in the run): a campaign should not fail there.

``MOR_STREAMER_PAUSE_AT_LABEL=PREFIX`` with ``MOR_STREAMER_PAUSE_FILE=PATH`` pauses instead:
at the first step (or :func:`pause_point`, which marks a point that is not an I/O step:
``spark start``, ``batch read``) whose label starts with ``PREFIX``, the process writes
the label to ``PATH`` and waits until a test deletes it (at most ``PAUSE_MAX_S``). A test
can then act on a process at a known point - send it a signal mid-commit - and let it go.
"""

from __future__ import annotations

import errno as _errno
import os
import signal
import threading
import time

ENV_KILL_AT = "MOR_STREAMER_KILL_AT_STEP"
ENV_KILL_AT_LABEL = "MOR_STREAMER_KILL_AT_LABEL"
ENV_FAIL_AT = "MOR_STREAMER_FAIL_AT_STEP"
ENV_FAIL_AT_LABEL = "MOR_STREAMER_FAIL_AT_LABEL"
ENV_FAIL_ERRNO = "MOR_STREAMER_FAIL_ERRNO"
ENV_FAIL_TIMES = "MOR_STREAMER_FAIL_TIMES"
ENV_TRACE = "MOR_STREAMER_TRACE_STEPS"
ENV_PAUSE_AT = "MOR_STREAMER_PAUSE_AT_LABEL"
ENV_PAUSE_FILE = "MOR_STREAMER_PAUSE_FILE"
#: The longest a paused process waits for its pause file to go (a test that died).
PAUSE_MAX_S = 300.0
#: The message of an injected error (``strerror``): says it was injected, so a log or an
#: error line of a test run is never taken for a real full disk.
INJECTED = "No space left on device (injected)"


def _errno_of(raw: str | None) -> int:
    """``28``, ``ENOSPC`` or unset (ENOSPC); anything else is a setup error naming the variable."""
    raw = (raw or "").strip()
    if not raw:
        return _errno.ENOSPC
    if raw.isdigit():
        return int(raw)
    code = getattr(_errno, raw.upper(), None)
    if not isinstance(code, int):
        raise ValueError(f"{ENV_FAIL_ERRNO}={raw!r}: expected an errno number or name (ENOSPC, EDQUOT, EIO)")
    return code


_lock = threading.Lock()
_count = 0
_kill_at = int(os.environ.get(ENV_KILL_AT, "0") or 0)
_kill_at_label = os.environ.get(ENV_KILL_AT_LABEL) or None
_fail_at = int(os.environ.get(ENV_FAIL_AT, "0") or 0)
_fail_at_label = os.environ.get(ENV_FAIL_AT_LABEL) or None
_fail_errno = _errno_of(os.environ.get(ENV_FAIL_ERRNO)) if (_fail_at or _fail_at_label) else _errno.ENOSPC
_fail_seen = 0  # steps matching _fail_at_label so far (the N-th of them fails)
_fail_left = max(1, int(os.environ.get(ENV_FAIL_TIMES, "1") or 1))  # errors still to inject
_failing = False  # the first error was injected: every step fails while _fail_left
_trace = os.environ.get(ENV_TRACE)
_pause_at = os.environ.get(ENV_PAUSE_AT) or None
_pause_file = os.environ.get(ENV_PAUSE_FILE) or None
_paused = False
#: In-process trace (:func:`record`): every step's label is appended while it is a list.
_record: list[str] | None = None
#: Labels of the steps where an error was injected (:func:`injected`).
_injected: list[str] = []
#: Any fault armed: the one test :func:`step` makes on the unarmed path.
_armed = bool(_kill_at or _kill_at_label or _fail_at or _fail_at_label)


def step(label: str) -> None:
    """Mark one I/O step; may SIGKILL the process, or raise one injected ``OSError``,
    when fault injection is armed (see the module)."""
    global _count
    with _lock:
        _count += 1
        n = _count
    if _trace:
        with open(_trace, "a") as f:
            f.write(f"{n}\t{label}\n")
    if _record is not None:
        _record.append(label)
    if _armed:
        _fire(n, label)
    pause_point(label)


def _fire(n: int, label: str) -> None:
    global _fail_at, _fail_at_label, _fail_seen, _fail_left, _failing, _armed
    if (_kill_at and n == _kill_at) or (_kill_at_label and label.startswith(_kill_at_label)):
        os.kill(os.getpid(), signal.SIGKILL)
    if not (_fail_at or _fail_at_label):
        return
    with _lock:  # steps run on several threads (a compaction's slices): exactly one fails first
        if not _failing:
            if _fail_at_label is not None:
                if not label.startswith(_fail_at_label):
                    return
                _fail_seen += 1
                if _fail_seen < max(_fail_at, 1):
                    return
            elif n != _fail_at:
                return
            _failing = True
        _fail_left -= 1
        if _fail_left <= 0:  # done: the next run goes through
            _fail_at, _fail_at_label, _failing = 0, None, False
            _armed = bool(_kill_at or _kill_at_label)
        _injected.append(label)
        code = _fail_errno
    raise OSError(code, INJECTED if code == _errno.ENOSPC else f"{os.strerror(code)} (injected)", label)


def pause_point(label: str) -> None:
    """Pause here once if ``MOR_STREAMER_PAUSE_AT_LABEL`` names ``label`` (see the module)."""
    global _paused
    if _pause_at is None or _pause_file is None or _paused or not label.startswith(_pause_at):
        return
    with _lock:
        if _paused or _pause_file is None:
            return
        _paused = True
        path = _pause_file  # this pause's file, whatever :func:`pause_at` arms meanwhile
    tmp = f"{path}.tmp"
    with open(tmp, "w") as f:
        f.write(label)
    os.replace(tmp, path)  # whole: the test reads the label it names
    deadline = time.monotonic() + PAUSE_MAX_S
    while os.path.exists(path) and time.monotonic() < deadline:
        time.sleep(0.05)


def pause_at(prefix: str | None, path: str | os.PathLike | None = None) -> None:
    """Arm (or with ``None`` disarm) one pause in this process, as ``MOR_STREAMER_PAUSE_AT_LABEL``
    and ``MOR_STREAMER_PAUSE_FILE`` do for a child: at the next step or :func:`pause_point`
    whose label starts with ``prefix`` the calling thread writes the label to ``path`` and
    waits until it is deleted - for a test that runs a pipeline on a thread of its own and
    acts on the world (kills a broker) at a known point of the run, not after a guessed sleep."""
    global _pause_at, _pause_file, _paused
    if prefix is not None and path is None:
        raise ValueError(f"pause_at({prefix!r}) needs the pause file's path")
    with _lock:
        _pause_at = prefix
        _pause_file = None if prefix is None or path is None else str(os.fspath(path))
        _paused = False


def steps_taken() -> int:
    return _count


def fail_at(n: int = 0, *, label: str | None = None, err: int = _errno.ENOSPC, times: int = 1) -> None:
    """Arm an injected ``OSError(err)`` in this process (see the module for what it stands for).

    ``fail_at(n)``: the n-th step from now; ``fail_at(label=PREFIX)``: the first step whose
    label starts with ``PREFIX``; ``fail_at(n, label=PREFIX)``: the n-th such step. It fires
    once, then the process runs on unarmed - or, with ``times=K``, the disk stays full:
    every step from that one on fails (whatever its label) until K errors were injected.
    :func:`reset` disarms it."""
    global _fail_at, _fail_at_label, _fail_seen, _fail_errno, _fail_left, _failing, _armed
    if n < 0 or (n == 0 and label is None) or times < 1:
        raise ValueError(f"fail_at needs a step number >= 1 or a label prefix, and times >= 1 "
                         f"(got n={n}, label={label!r}, times={times})")
    with _lock:
        _fail_at_label = label
        _fail_at = n if label is not None else _count + n
        _fail_seen = 0
        _fail_errno = err
        _fail_left, _failing = times, False
        _armed = True


def injected() -> list[str]:
    """Labels of the steps an error was injected at since the last :func:`reset` (oldest first)."""
    return list(_injected)


def record(labels: list[str] | None) -> None:
    """Append every step's label to ``labels`` from now on (``None``: stop) - a trace
    without a file, for a test that learns a run's steps in its own process."""
    global _record
    _record = labels


def reset(kill_at: int = 0) -> None:
    """Re-arm within a process (tests that run several writers in one interpreter): the
    step count restarts, an unfired :func:`fail_at` is disarmed, recording stops."""
    global _count, _kill_at, _fail_at, _fail_at_label, _fail_seen, _fail_left, _failing, _record, _armed
    with _lock:
        _count = 0
        _kill_at = kill_at
        _fail_at, _fail_at_label, _fail_seen, _fail_left, _failing = 0, None, 0, 1, False
        _record = None
        _injected.clear()
        _armed = bool(_kill_at or _kill_at_label)
