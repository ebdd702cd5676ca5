"""Reading the next batch while this one commits (continuous polling with a backlog).

Why: a micro-batch alternates two kinds of work that use different processes. Its Spark
job (read, decode, collect) runs in the JVM while the driver's Python waits; its commit
(index lookup, log blocks, the timeline) runs in Python while the JVM idles. With a
backlog, the next batch's Spark job can run during this batch's commit, so the two
overlap instead of taking turns (issue 14, benchmarks/RESULTS.md).

Exactly once is untouched: a batch read ahead starts at this batch's end and is used
only if that is where the table's committed position is when it is wanted, i.e. after
this batch committed; otherwise (a failed commit, a stop) it is released unwritten and
the next batch is read from the committed position as always. Nothing is read ahead
unless a batch at least as large waits (when keeping up, each batch waits for its trigger
and reads what arrived meanwhile, so freshness is unchanged), nor
when a batch's preparation depends on the table (an inferred schema takes the table's
column types after the commit), nor for batches Spark writes (their work is the commit).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from sources.base import Batch
from sources.position import Position, position_to_json
from streamer.pipeline.batch import PreparedBatch

log = logging.getLogger(__name__)


@dataclass
class Ahead:
    """A batch read and prepared ahead: what :meth:`ReadAhead.take` hands back."""

    batch: Batch
    prepared: PreparedBatch | None  # None: nothing new, or its preparation failed
    started_at: float  # wall clock when its read started
    read_s: float
    prepare_s: float
    error: BaseException | None = None

    def release(self) -> None:
        if self.prepared is not None:
            self.prepared.release()
        self.batch.release()


class ReadAhead:
    """At most one batch being read ahead, from a known start position."""

    def __init__(self) -> None:
        self._start: str | None = None
        self._thread: threading.Thread | None = None
        self._result: Ahead | None = None
        self._read_error: BaseException | None = None

    @property
    def pending(self) -> bool:
        return self._thread is not None

    def start(self, start: Position, read: Callable[[], Batch],
              prepare: Callable[[Batch], PreparedBatch]) -> None:
        """Read and prepare the batch after ``start`` on a background thread."""
        self.discard()
        self._start = position_to_json(start)

        def work() -> None:
            started_at, t0 = time.time(), time.monotonic()
            try:
                batch = read()
            except BaseException as e:  # noqa: BLE001 - the batch is read again, and fails there
                self._read_error = e
                return
            read_s = time.monotonic() - t0
            prepared = error = None
            if batch.has_new_data:
                try:
                    prepared = prepare(batch)
                except BaseException as e:  # noqa: BLE001 - prepared again on the caller's thread
                    error = e
            self._result = Ahead(batch, prepared, started_at, read_s, time.monotonic() - t0 - read_s, error)

        self._thread = threading.Thread(target=work, name="mor-read-ahead", daemon=True)
        self._thread.start()

    def _wait(self) -> Ahead | None:
        thread, self._thread = self._thread, None
        if thread is None:
            return None
        thread.join()
        result, self._result = self._result, None
        if self._read_error is not None:
            log.debug("read ahead failed (the batch is read again): %s", self._read_error)
            self._read_error = None
        return result

    def take(self, position: Position | None) -> Ahead | None:
        """The batch read ahead if it starts at ``position`` and was prepared; else None
        (it is released: the caller reads from ``position`` itself)."""
        start, self._start = self._start, None
        ahead = self._wait()
        if ahead is None:
            return None
        if position is None or position_to_json(position) != start or ahead.prepared is None:
            if ahead.error is not None:
                log.debug("batch read ahead failed to prepare (prepared again): %s", ahead.error)
            ahead.release()
            return None
        return ahead

    def discard(self) -> None:
        """Wait for a batch under way and release it unwritten."""
        self._start = None
        ahead = self._wait()
        if ahead is not None:
            ahead.release()
