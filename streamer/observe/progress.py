"""Progress events: one JSON object per micro-batch, one line each (JSON Lines).

Modelled on Spark's ``StreamingQueryProgress`` (``batchId``, ``numInputRows``,
``durationMs`` per phase, start/end offsets) so log shippers and dashboards built for
Structured Streaming read them with few changes. The schema is in docs/operations.md;
keys are only ever added, never renamed.
"""

from __future__ import annotations

import json
import sys
import threading
from datetime import datetime, timezone
from typing import IO, Any

from streamer.pipeline.report import BatchReport

#: Bumped only if a key changes meaning (adding keys does not bump it).
EVENT_VERSION = 1


def _iso(epoch_s: float) -> str:
    return datetime.fromtimestamp(epoch_s, tz=timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _ms(seconds: float) -> int:
    return round(seconds * 1000)


def _position(text: str | None) -> Any:
    return None if text is None else json.loads(text)


def progress_event(report: BatchReport, table: str) -> dict[str, Any]:
    """The JSON-ready event of one batch (a dict only because it is about to be serialised)."""
    layout = report.layout
    return {
        "version": EVENT_VERSION,
        "pipeline": report.pipeline,
        "table": table,
        "batchId": report.batch_id,
        "status": report.status,
        "timestamp": _iso(report.started_at),
        "endTimestamp": _iso(report.started_at + report.latency_s),
        "numInputRows": report.read,
        "numOutputRows": report.written,
        "numErrorRows": report.errored,
        "numFilteredRows": report.filtered,
        "durationMs": {**{name: _ms(s) for name, s in report.phases.items()}, "total": _ms(report.latency_s)},
        "instant": report.instant,
        "firstInstant": report.first_instant,
        "errorInstant": report.error_instant,
        "startOffset": _position(report.start_position),
        "endOffset": _position(report.position),
        "bytesWritten": report.bytes_written,
        "filesWritten": report.files_written,
        "freshnessMs": None if report.freshness_s is None else _ms(report.freshness_s),
        "lag": [{"partition": lag.partition, "records": lag.records} for lag in report.lag],
        "services": [
            {"action": s.action, "instant": s.instant, "outcome": s.outcome,
             "durationMs": None if s.seconds is None else _ms(s.seconds), "detail": s.detail,
             "mode": s.mode}
            for s in report.services
        ],
        "tableLayout": None if layout is None else {
            "fileGroups": layout.file_groups,
            "logFiles": layout.log_files,
            "logBlocks": layout.log_blocks,
            "maxLogFilesPerSlice": layout.max_log_files_per_slice,
            "maxLogBlocksPerSlice": layout.max_log_blocks_per_slice,
            "pendingCompactions": layout.pending_compactions,
            "pendingLogCompactions": layout.pending_log_compactions,
        },
    }


class ProgressWriter:
    """Writes events as JSON Lines to a file (appended, flushed per line) or stdout (``-``).

    Thread-safe: the pipelines of a run share one writer, and a line is never interleaved.
    """

    def __init__(self, path: str) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._out: IO[str] = sys.stdout if path == "-" else open(path, "a", encoding="utf-8")  # noqa: SIM115

    def write(self, report: BatchReport, table: str) -> None:
        line = json.dumps(progress_event(report, table), separators=(",", ":"))
        with self._lock:
            self._out.write(line + "\n")
            self._out.flush()

    def close(self) -> None:
        if self._out is not sys.stdout:
            self._out.close()
