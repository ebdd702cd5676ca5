"""What one micro-batch did, as a typed record and as the progress line users watch.

The same record feeds the log line, the JSON progress event and the Prometheus metrics
(``streamer.observe``), so the three can never disagree about a batch.
"""

from __future__ import annotations

from dataclasses import dataclass

from streamer.sources.base import PartitionLag
from streamer.table.layout import TableLayout


@dataclass(frozen=True)
class PhaseTimes:
    """Seconds one batch spent in each step of ``PipelineRunner._process``.

    ``read``: the source producing the batch (listing files, planning offsets;
    Spark reads lazily, so decoding is mostly counted in ``prepare``); ``prepare``:
    decode, transforms and the split into good and bad records; ``write_errors``: the
    error-table commit; ``commit``: the data commit; ``services``: inline table services
    and compaction back-pressure after the commit.
    """

    read: float = 0.0
    prepare: float = 0.0
    write_errors: float = 0.0
    commit: float = 0.0
    services: float = 0.0

    NAMES = ("read", "prepare", "write_errors", "commit", "services")

    def items(self) -> list[tuple[str, float]]:
        return [(n, getattr(self, n)) for n in self.NAMES]


@dataclass(frozen=True)
class ServiceRun:
    """One table service the pipeline ran after a commit (or scheduled for later).

    ``outcome``: ``scheduled``, an executor status (``completed``, ``busy``, ...),
    ``cleaned`` or ``archived``. ``seconds`` is the time of that service's step (None
    for a later run of the same step, e.g. the execution after the scheduling it was
    timed with).
    """

    action: str
    instant: str | None
    outcome: str
    seconds: float | None
    detail: str = ""
    #: ``inline``: run by the writer after the commit (its time is in the batch's
    #: ``services`` phase); ``async``: run by the pipeline's background service thread
    #: since the previous batch (reported with the next batch; the writer did not wait).
    mode: str = "inline"

    def line(self) -> str:
        inst = f" {self.instant}" if self.instant else ""
        took = f" in {self.seconds:.2f}s" if self.seconds is not None else ""
        extra = f" ({self.detail})" if self.detail else ""
        bg = " [async]" if self.mode == "async" else ""
        return f"{self.action}{inst} {self.outcome}{took}{extra}{bg}"


@dataclass(frozen=True)
class BatchReport:
    """Counts of one batch. ``read == written + errored + filtered`` always holds.

    ``written`` counts records handed to the writer (after transforms), ``errored``
    the records sent to the error table, ``filtered`` those a transform dropped.
    The fields after ``skipped`` are observations for metrics and progress events.
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
    #: Wall-clock start (seconds since the epoch) and the position the batch read after.
    started_at: float = 0.0
    start_position: str | None = None
    phases: PhaseTimes = PhaseTimes()
    #: Bytes and files the data commit wrote (its write stats).
    bytes_written: int = 0
    files_written: int = 0
    #: Seconds from the newest input the source can date (file mtime, record timestamp)
    #: to the commit; None when the source cannot date its input.
    freshness_s: float | None = None
    lag: tuple[PartitionLag, ...] = ()
    services: tuple[ServiceRun, ...] = ()
    #: The table's file layout after the commit (only collected when metrics are on).
    layout: TableLayout | None = None
    #: A batch that commits deletes on their own after its other rows
    #: (:mod:`streamer.pipeline.held_back`): the commit of those rows; ``instant`` is the
    #: deletes', and ``bytes_written``/``files_written`` count both.
    first_instant: str | None = None

    @property
    def status(self) -> str:
        """``committed``, ``skipped`` (nothing new) or ``no_commit`` (nothing to commit to)."""
        if self.skipped:
            return "skipped"
        return "committed" if self.instant else "no_commit"

    def line(self) -> str:
        head = f"[{self.pipeline}] batch {self.batch_id}"
        if self.skipped:
            return f"{head}: skipped ({self.skipped})"
        commit = f"deltacommit {self.instant}" if self.instant else "no commit"
        if self.first_instant:
            commit = f"deltacommits {self.first_instant} and {self.instant} (its deletes of changed keys)"
        if not self.instant and self.error_instant and not self.written:
            commit = f"errors only: error table commit {self.error_instant}"  # it holds the position
        return (
            f"{head}: in {self.read} -> written {self.written}, errors {self.errored}, "
            f"filtered {self.filtered} | {commit} | {self.latency_s:.2f}s"
        )
