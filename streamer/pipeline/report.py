"""What one micro-batch did, as a typed record and as the progress line users watch."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class BatchReport:
    """Counts of one batch. ``read == written + errored + filtered`` always holds.

    ``written`` counts records handed to the writer (after transforms), ``errored``
    the records sent to the error table, ``filtered`` those a transform dropped.
    """

    pipeline: str
    batch_id: int
    read: int
    written: int
    errored: int
    filtered: int
    instant: str | None
    error_instant: str | None
    latency_s: float
    position: str
    skipped: str | None = None

    def line(self) -> str:
        head = f"[{self.pipeline}] batch {self.batch_id}"
        if self.skipped:
            return f"{head}: skipped ({self.skipped})"
        commit = f"deltacommit {self.instant}" if self.instant else "no commit"
        return (
            f"{head}: in {self.read} -> written {self.written}, errors {self.errored}, "
            f"filtered {self.filtered} | {commit} | {self.latency_s:.2f}s"
        )
