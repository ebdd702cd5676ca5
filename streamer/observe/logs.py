"""Logging for ``streamer``: set up by the CLI, one line per batch, empty polls summarised.

Modules log through ``logging.getLogger(__name__)``; :func:`configure_logging` (called
by the CLI before a sub-command runs) gives them a handler, a level and a format
(``text``, or ``json``: one object per line with ``ts``, ``level``, ``logger``,
``message`` and the ``pipeline``/``batch`` fields a record carries).

:class:`BatchLog` turns batch reports into log lines. A continuous pipeline polling an
idle source would otherwise log "no new data" every interval, burying everything else:
the first empty poll is logged, then at most one summary per ``summary_every_s``
("no new data for 60 s (12 polls)"), and one when data resumes.
"""

from __future__ import annotations

import json
import logging
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import IO

from streamer.pipeline.report import BatchReport

LOG_FORMATS = ("text", "json")
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")
#: Record attributes copied into JSON lines when a log call passes them (``extra=``).
_FIELDS = ("pipeline", "batch", "instant", "service")
#: Loggers of libraries that are noisy at INFO (py4j logs every JVM call).
_QUIET = ("py4j", "urllib3")

log = logging.getLogger("streamer.run")


class JsonFormatter(logging.Formatter):
    """One JSON object per line: ts, level, logger, message (+ pipeline/batch fields, exc)."""

    def format(self, record: logging.LogRecord) -> str:
        out = {
            "ts": datetime.fromtimestamp(record.created, tz=timezone.utc).isoformat(timespec="milliseconds")
            .replace("+00:00", "Z"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        for key in _FIELDS:
            value = getattr(record, key, None)
            if value is not None:
                out[key] = value
        if record.exc_info:
            out["exc"] = self.formatException(record.exc_info)
        return json.dumps(out, default=str)


_TEXT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


class _CurrentStderr(logging.StreamHandler):
    """Writes to whatever ``sys.stderr`` is when a record is emitted, not when the handler
    was made: ``main()`` called in-process (tests, notebooks) may run under a replaced
    stderr that is closed afterwards, and later records must not fail on it."""

    def __init__(self) -> None:
        super().__init__(sys.stderr)

    @property
    def stream(self) -> IO[str]:
        return sys.stderr

    @stream.setter
    def stream(self, _value: IO[str]) -> None:
        pass


def configure_logging(level: str = "INFO", fmt: str = "text", stream: IO[str] | None = None) -> None:
    """Configure the root logger once per CLI invocation (replaces handlers set before).

    Logs go to standard error, so standard output stays for command results (and for
    progress events with ``--progress-json``).
    """
    handler = logging.StreamHandler(stream) if stream is not None else _CurrentStderr()
    handler.setFormatter(JsonFormatter() if fmt == "json" else logging.Formatter(_TEXT))
    root = logging.getLogger()
    for h in list(root.handlers):
        if getattr(h, "_streamer", False):
            root.removeHandler(h)
    setattr(handler, "_streamer", True)  # noqa: B010 - our mark, read back with getattr above
    root.addHandler(handler)
    root.setLevel(level.upper())
    for name in _QUIET:
        logging.getLogger(name).setLevel(max(logging.WARNING, root.level))


@dataclass
class _Idle:
    """Empty polls of one pipeline since it last had data."""

    since: float
    polls: int = 0
    summarised_at: float = 0.0


@dataclass
class RunTotals:
    """What a run did, for its end-of-run summary: a tally per counter of the line."""

    counts: Counter[str] = field(default_factory=Counter)
    failed: list[str] = field(default_factory=list)

    def line(self, seconds: float) -> str:
        c = self.counts
        failed = f", {len(self.failed)} failed ({', '.join(self.failed)})" if self.failed else ""
        return (
            f"run finished in {seconds:.1f}s: {c['batches']} batch(es) ({c['empty_polls']} empty poll(s)), "
            f"read {c['read']}, written {c['written']}, errors {c['errored']}, "
            f"filtered {c['filtered']}, {c['commits']} commit(s), {c['bytes_written']} bytes, "
            f"{c['services']} table service run(s){failed}"
        )


class BatchLog:
    """Logs each batch report at INFO, summarising runs of empty polls (see module doc)."""

    def __init__(self, summary_every_s: float = 60.0, clock: Callable[[], float] = time.monotonic) -> None:
        self.summary_every_s = summary_every_s
        self.clock = clock
        self.totals = RunTotals()
        self._idle: dict[str, _Idle] = {}
        self._lock = threading.Lock()
        self._started = clock()

    def __call__(self, report: BatchReport) -> None:
        with self._lock:
            self._count(report)
            if report.skipped:
                self._empty(report)
                return
            idle = self._idle.pop(report.pipeline, None)
        if idle is not None and idle.polls > 1:
            self._idle_line(report.pipeline, idle, "data resumed after")
        log.info("%s", report.line(), extra={"pipeline": report.pipeline, "batch": report.batch_id,
                                             "instant": report.instant})

    def _count(self, r: BatchReport) -> None:
        if r.skipped:
            self.totals.counts["empty_polls"] += 1
            return
        self.totals.counts.update(batches=1, read=r.read, written=r.written, errored=r.errored,
                                  filtered=r.filtered, commits=int(bool(r.instant)),
                                  bytes_written=r.bytes_written, services=len(r.services))

    def _empty(self, report: BatchReport) -> None:
        now = self.clock()
        idle = self._idle.get(report.pipeline)
        if idle is None:
            self._idle[report.pipeline] = _Idle(since=now, polls=1, summarised_at=now)
            log.info("[%s] batch %d: no new data (waiting; idle polls are summarised every %.0fs)",
                     report.pipeline, report.batch_id, self.summary_every_s,
                     extra={"pipeline": report.pipeline, "batch": report.batch_id})
            return
        idle.polls += 1
        if now - idle.summarised_at >= self.summary_every_s:
            idle.summarised_at = now
            self._idle_line(report.pipeline, idle, "no new data for")

    def _idle_line(self, pipeline: str, idle: _Idle, what: str) -> None:
        log.info("[%s] %s %.0f s (%d polls)", pipeline, what, self.clock() - idle.since, idle.polls,
                 extra={"pipeline": pipeline})

    def failed(self, pipeline: str) -> None:
        with self._lock:
            self.totals.failed.append(pipeline)

    def summary(self) -> str:
        """The end-of-run line (also logged at INFO)."""
        line = self.totals.line(self.clock() - self._started)
        log.info("%s", line)
        return line
