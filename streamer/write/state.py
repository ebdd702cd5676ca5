"""What a writer reads about the table before a commit: one consistent snapshot.

Properties, timeline, file listing, the latest committed schema, the average record
size of recent commits (for routing) and the highest log version of every slice
(so a new log file never reuses a name, even one a failed write left behind).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cached_property

import pyarrow as pa

from streamer.fs import FileSystem
from streamer.index.slice_members import is_committed_fn
from streamer.table.fsview import FileSlice, FileSystemView
from streamer.table.properties import TableProperties
from streamer.table.snapshot import TableSnapshot
from streamer.table.timeline import Timeline


class TableState:
    """The writer's view of one :class:`~streamer.table.snapshot.TableSnapshot`."""

    def __init__(self, snapshot: TableSnapshot) -> None:
        self.snapshot = snapshot
        self.fs: FileSystem = snapshot.fs
        self.base_path = snapshot.base_path
        self.props: TableProperties = snapshot.properties
        self.timeline: Timeline = snapshot.timeline

    @classmethod
    def load(cls, fs: FileSystem, base_path: str) -> TableState:
        return cls(TableSnapshot.load(fs, base_path))

    @property
    def fsview(self) -> FileSystemView:
        return self.snapshot.fsview

    @cached_property
    def slices(self) -> list[FileSlice]:
        """Latest slices (merged with a pending compaction's predecessor)."""
        return self.fsview.latest_merged_slices()

    @cached_property
    def append_slices(self) -> dict[tuple[str, str], FileSlice]:
        """File groups in a pending compaction plan -> the slice writes append to: the new
        one whose base instant is the plan's instant (Hudi's async compaction)."""
        pending = self.fsview.pending_compaction_file_groups()
        if not pending:
            return {}
        return {
            (s.partition_path, s.file_id): s
            for s in self.fsview.latest_file_slices()
            if pending.get((s.partition_path, s.file_id)) == s.base_instant
        }

    @cached_property
    def completed(self) -> frozenset[str]:
        return frozenset(i.timestamp for i in self.timeline.completed())

    @property
    def first_active(self) -> str | None:
        return self.timeline.instants[0].timestamp if self.timeline.instants else None

    def is_committed(self) -> Callable[[str], bool]:
        return is_committed_fn(self.completed, self.first_active)

    @cached_property
    def log_versions(self) -> dict[tuple[str, str, str], int]:
        """(partition, file id, base instant) -> highest log version on storage."""
        out: dict[tuple[str, str, str], int] = {}
        for g in self.fsview.file_groups():
            for lf in g.log_files:
                key = (g.partition_path, lf.file_id, lf.base_instant)
                out[key] = max(out.get(key, 0), lf.version)
        return out

    def latest_schema(self) -> pa.Schema | None:
        """Data schema of the latest completed write (else the create schema)."""
        return self.snapshot.latest_schema()

    def avg_record_size(self, default: int, lookback: int = 5) -> int:
        """Bytes per record written by recent commits (Hudi's estimate for sizing)."""
        total_bytes = total_recs = 0
        for inst in list(reversed(self.timeline.completed_writes()))[:lookback]:
            for s in self.fsview.commit_metadata(inst).write_stats():
                if s.num_writes > 0 and s.total_write_bytes > 0:
                    total_bytes += s.total_write_bytes
                    total_recs += s.num_writes
        if total_recs == 0:
            return default
        return max(1, total_bytes // total_recs)
