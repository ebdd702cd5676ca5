"""Time in tests: bounded polls of conditions, and the one allowed elapsed-time check.

No test asserts how long something took: on a loaded CI machine any threshold is a coin
toss (tests/unit/structure/test_no_wall_clock.py fails on such an assertion anywhere in
tests/). What a test may do instead:

* **Wait for a condition**, bounded in count and time: :func:`poll_until`. The timeout is
  how long to keep asking, never a claim about speed; on expiry it fails naming what it
  waited for and the last value seen.
* **Guard against a hang**: :func:`hang_guard`. This is the *only* marked place where
  elapsed time is compared: a block that should return (it has its own timeout, or it must
  not block at all) runs under a generous limit (minutes, not fractions of a second); past
  the limit the test fails with the stacks of every thread, taken when the limit passed, so
  the report says what was running. Use it as ``with hang_guard(120, "the standby acquire"):``.

A hang guard never proves "fast": pick a limit no loaded machine reaches unless the code
really hangs (at least 10x what the block normally takes, and at least 30 s).
"""

from __future__ import annotations

import contextlib
import io
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from typing import TypeVar

import pytest

T = TypeVar("T")

#: The smallest limit a hang guard accepts: below it the guard would be a speed check.
MIN_HANG_LIMIT_S = 30.0


def _thread_stacks() -> str:
    names = {t.ident: t.name for t in threading.enumerate()}
    out = io.StringIO()
    for ident, frame in sys._current_frames().items():
        out.write(f"--- thread {names.get(ident, ident)} ---\n")
        out.write("".join(traceback.format_stack(frame)))
    return out.getvalue()


@contextlib.contextmanager
def hang_guard(limit_s: float, what: str) -> Iterator[None]:
    """Fail if the block is still running ``limit_s`` seconds after it started (a hang).

    At the limit a watchdog records every thread's stack; when the block returns (it must
    return eventually: give the code under test its own timeout, pytest-timeout is the
    last resort) the test fails with ``what`` and those stacks."""
    if limit_s < MIN_HANG_LIMIT_S:
        raise ValueError(f"hang_guard({limit_s}, {what!r}): a limit under {MIN_HANG_LIMIT_S:.0f} s "
                         "is a speed check, not a hang guard")
    fired: list[str] = []
    done = threading.Event()

    def watch() -> None:
        if not done.wait(limit_s):
            fired.append(_thread_stacks())

    watchdog = threading.Thread(target=watch, name=f"hang-guard: {what}", daemon=True)
    watchdog.start()
    try:
        yield
    finally:
        done.set()
        watchdog.join(5)
    if fired:
        pytest.fail(f"hang: {what} was still running after {limit_s:.0f} s; threads at that moment:\n"
                    + fired[0])


def poll_until(probe: Callable[[], T], *, what: str, timeout_s: float = 60.0, interval_s: float = 0.05,
               max_polls: int = 100_000) -> T:
    """Call ``probe`` until it returns a truthy value and return that value.

    Bounded twice: ``max_polls`` calls and ``timeout_s`` seconds; on either, fail naming
    ``what`` and the last value. The timeout is a patience, not an assertion on speed."""
    deadline = time.monotonic() + timeout_s
    last: T | None = None
    for _ in range(max_polls):
        last = probe()
        if last:
            return last
        if time.monotonic() >= deadline:
            break
        time.sleep(interval_s)
    pytest.fail(f"gave up waiting for {what} after {timeout_s:.0f} s / {max_polls} polls; last value: {last!r}")
