"""What a commit returns to its caller: a typed summary, not a bag of strings."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from streamer.index.slice_members import LookupStats
from streamer.table.metadata import WriteStat
from streamer.write.rollback import RollbackOutcome
from streamer.write.tagging import EngineStats

if TYPE_CHECKING:
    from streamer.table.snapshot import TableSnapshot


@dataclass(frozen=True)
class CommitResult:
    """One completed deltacommit (``instant``) and what it wrote."""

    instant: str
    operation: str
    engine: str
    stats: list[WriteStat]
    input_rows: int
    duration_s: float
    rollbacks: list[RollbackOutcome] = field(default_factory=list)
    lookup: LookupStats | None = None
    #: Where the plan was decided and what the driver held for it (bounded-driver checks).
    engine_stats: EngineStats | None = None
    #: Global index: rows moved to a new partition (their old row deleted), and incoming
    #: rows dropped because the stored row was newer by the ordering field.
    moved: int = 0
    stale: int = 0
    #: The table right after this commit (hand it to inline services: no re-read).
    snapshot: TableSnapshot | None = field(default=None, repr=False, compare=False)

    @property
    def num_inserts(self) -> int:
        return sum(s.num_inserts for s in self.stats)

    @property
    def num_updates(self) -> int:
        return sum(s.num_update_writes for s in self.stats)

    @property
    def num_deletes(self) -> int:
        return sum(s.num_deletes for s in self.stats)

    @property
    def new_file_groups(self) -> int:
        return sum(1 for s in self.stats if not s.is_log)

    @property
    def bytes_written(self) -> int:
        return sum(s.total_write_bytes for s in self.stats)

    @property
    def is_empty(self) -> bool:
        return not self.stats
