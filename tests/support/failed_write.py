"""A write of ours that dies after writing its files, before completing its instant.

What a crashed writer leaves (markers, data and log files, an inflight instant), made
in-process: ``faults.step`` raises at the ``before complete`` step instead of the process
being killed. The next writer (ours or Hudi's) must roll it back.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from streamer import faults


class WriteDied(Exception):
    """Raised where the writer would have been killed."""


def fail_before_complete(write: Callable[[], Any]) -> None:
    """Run ``write`` (e.g. ``lambda: w.upsert(batch)``) so that it dies before completing."""
    real = faults.step

    def failing(label: str) -> None:
        if label == "before complete":
            raise WriteDied(label)
        real(label)

    faults.step = failing
    try:
        write()
    except WriteDied:
        return
    finally:
        faults.step = real
    raise AssertionError("the write completed: it never reached the 'before complete' step")
