"""Table services policies: ``policies: {log_compaction, compaction, clean, archive}``.

Every service has ``mode: inline|async|off``. ``inline`` runs it in the writer right
after a commit whose trigger fires (simple, delays the next batch); ``async`` runs it
beside the writer: in a background thread of the same ``streamer run`` (and/or a separate
worker, ``streamer services``), while the writer only schedules compaction plans;
``off`` never schedules it. Defaults are Hudi's where Hudi has one.

Compaction and log compaction left unset are ``async`` in a continuous pipeline (as
HoodieStreamer's continuous mode: a compaction must not stall ingestion for seconds
every few commits) and ``inline`` for ``once`` and ``available_now`` runs (a job that
stops should leave its table compacted); :func:`for_run` applies this.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BeforeValidator, Field, model_validator

from streamer.config.base import StrictModel
from streamer.config.units import Duration, Size


def _yaml_off(value: object) -> object:
    # YAML 1.1 reads a bare `off` as the boolean false; `mode: off` must still mean "off".
    return "off" if value is False else value


Mode = Annotated[Literal["inline", "async", "off"], BeforeValidator(_yaml_off)]
PositiveInt = Annotated[int, Field(gt=0)]


class LogCompactionPolicy(StrictModel):
    """RFC-48: merge runs of small log blocks in a file slice into one block."""

    #: Unset: ``async`` in a continuous pipeline, ``inline`` in ``once``/``available_now`` runs.
    mode: Mode = "inline"
    #: A file slice qualifies once it has at least this many small consecutive blocks.
    min_blocks: Annotated[int, Field(ge=2)] = 5
    #: Blocks up to this size count as "small" (larger ones are never rewritten again).
    small_block_bytes: Size = 16 * 1024**2
    #: Upper bound of one merged block; a longer run is split.
    max_block_bytes: Size = 256 * 1024**2

    @model_validator(mode="after")
    def _sizes(self) -> LogCompactionPolicy:
        if self.small_block_bytes > self.max_block_bytes:
            raise ValueError("small_block_bytes cannot exceed max_block_bytes")
        return self


class CompactionTrigger(StrictModel):
    """When to schedule compaction: after N delta commits and/or T since the last one."""

    #: Hudi ``hoodie.compact.inline.max.delta.commits``.
    delta_commits: PositiveInt | None = 5
    #: Hudi ``hoodie.compact.inline.max.delta.seconds``.
    seconds: Duration | None = None
    #: ``any``: either threshold fires; ``all``: both must.
    combine: Literal["any", "all"] = "any"

    @model_validator(mode="after")
    def _one_threshold(self) -> CompactionTrigger:
        if self.delta_commits is None and self.seconds is None:
            raise ValueError("set delta_commits and/or seconds")
        if self.seconds is not None and self.seconds.total_seconds() <= 0:
            raise ValueError("seconds must be positive")
        return self


class CompactionPolicy(StrictModel):
    """Full compaction: merge a file slice's base file and logs into a new base file."""

    #: Unset: ``async`` in a continuous pipeline (a background thread of the run: ingestion
    #: never waits for a compaction), ``inline`` in ``once``/``available_now`` runs.
    mode: Mode = "inline"
    trigger: CompactionTrigger = CompactionTrigger()
    #: Which file slices a plan takes first (Hudi's compaction strategies).
    strategy: Literal["log_file_size", "bounded_io", "day_based"] = "log_file_size"
    #: ``bounded_io``: stop adding slices once this many bytes would be read+written.
    io_budget_bytes: Size = 500 * 1024**3
    #: ``day_based``: number of most recent day partitions to compact.
    day_partitions: PositiveInt = 10
    #: Do not schedule another plan while this many are pending.
    max_pending: PositiveInt = 1


class CleanPolicy(StrictModel):
    """Delete file slices no longer needed by readers: keep N commits or N versions per group."""

    #: ``inline``: after a commit, in the writer (Hudi ``hoodie.clean.automatic``); ``async``: in the
    #: background service (``hoodie.clean.async.enabled``); ``off``: never.
    mode: Mode = "inline"
    #: Hudi ``hoodie.cleaner.commits.retained`` (``KEEP_LATEST_COMMITS``): the last N writes stay
    #: queryable (time travel, incremental), and every write since the earliest pending write
    #: or table service plan. Default when neither rule is set: 10.
    retain_commits: PositiveInt | None = None
    #: Hudi ``hoodie.cleaner.fileversions.retained`` (``KEEP_LATEST_FILE_VERSIONS``): keep each file
    #: group's N newest slices. Exclusive with ``retain_commits``.
    retain_file_versions: PositiveInt | None = None

    @model_validator(mode="after")
    def _one_rule(self) -> CleanPolicy:
        if self.retain_commits is not None and self.retain_file_versions is not None:
            raise ValueError("set retain_commits or retain_file_versions, not both")
        return self

    @property
    def rule(self) -> tuple[Literal["commits", "file_versions"], int]:
        """The retention in force (Hudi's default: keep 10 commits)."""
        if self.retain_file_versions is not None:
            return "file_versions", self.retain_file_versions
        return "commits", self.retain_commits if self.retain_commits is not None else 10


class ArchivePolicy(StrictModel):
    """Move old instants out of the active timeline once it exceeds ``max_commits``."""

    #: ``inline``: after a commit, in the writer (Hudi ``hoodie.archive.automatic``); ``async``: in the
    #: background service (``hoodie.archive.async``); ``off``: never.
    mode: Mode = "inline"
    #: Hudi ``hoodie.keep.min.commits`` / ``hoodie.keep.max.commits``.
    min_commits: PositiveInt = 20
    #: Archive once more than this many completed writes are on the active timeline, down to ``min_commits``.
    max_commits: PositiveInt = 30
    #: Table versions 8 and 9: once this many files of one layer of the archive's LSM history
    #: wait, the oldest are merged into one file of the next layer (Hudi
    #: ``hoodie.timeline.compaction.batch.size``): a long-running pipeline's history stays a
    #: few files per layer instead of a file per archive run.
    history_merge_batch: int = Field(default=10, ge=2)

    @model_validator(mode="after")
    def _range(self) -> ArchivePolicy:
        if self.min_commits >= self.max_commits:
            raise ValueError("min_commits must be less than max_commits")
        return self


class PoliciesConfig(StrictModel):
    log_compaction: LogCompactionPolicy = LogCompactionPolicy()
    compaction: CompactionPolicy = CompactionPolicy()
    clean: CleanPolicy = CleanPolicy()
    archive: ArchivePolicy = ArchivePolicy()

    @model_validator(mode="after")
    def _archive_after_clean(self) -> PoliciesConfig:
        # Archiving an instant the cleaner still needs would lose the files it names.
        kind, retained = self.clean.rule
        if (
            self.archive.mode != "off"
            and self.clean.mode != "off"
            and kind == "commits"
            and self.archive.min_commits <= retained
        ):
            raise ValueError(
                f"archive.min_commits ({self.archive.min_commits}) must exceed "
                f"clean.retain_commits ({retained}), as in Hudi"
            )
        return self


#: Services whose unset ``mode`` depends on how the pipeline runs (see the module doc).
RUN_DEPENDENT = ("log_compaction", "compaction")


def for_run(policies: PoliciesConfig, continuous: bool) -> PoliciesConfig:
    """``policies`` as a run uses them: an unset compaction/log-compaction ``mode`` is
    ``async`` when the run is continuous, ``inline`` otherwise; set ones stay."""
    if not continuous:
        return policies
    update = {}
    for name in RUN_DEPENDENT:
        policy = getattr(policies, name)
        if "mode" not in policy.model_fields_set:
            update[name] = policy.model_copy(update={"mode": "async"})
    return policies.model_copy(update=update) if update else policies
