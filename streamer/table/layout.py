"""The table's file layout after a commit, for the layout gauges.

Read from the writer's post-commit snapshot: its file listing is the one inline
services already made to plan compaction (shared through the snapshot), so with
services on this costs nothing more; with every service off it is one listing of the
data folders per commit. Log blocks come from the commits' write stats
(``totalLogBlocks``), whose metadata the snapshot caches per instant (completed
instants never change), so each commit file is read once per process.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from streamer.table.instant import Action

if TYPE_CHECKING:
    from streamer.table.snapshot import TableSnapshot


@dataclass(frozen=True)
class TableLayout:
    """Counts over the latest file slice of every live file group."""

    file_groups: int
    log_files: int
    log_blocks: int
    max_log_files_per_slice: int
    max_log_blocks_per_slice: int
    pending_compactions: int
    pending_log_compactions: int

    @property
    def mean_log_files_per_slice(self) -> float:
        return self.log_files / self.file_groups if self.file_groups else 0.0

    @property
    def mean_log_blocks_per_slice(self) -> float:
        return self.log_blocks / self.file_groups if self.file_groups else 0.0


def table_layout(snapshot: TableSnapshot) -> TableLayout:
    """Layout of the table in ``snapshot`` (see module doc for what it reads)."""
    slices = snapshot.fsview.latest_file_slices()
    blocks = _blocks_by_log_file(snapshot, min((s.base_instant for s in slices if s.log_files), default=None))
    per_slice_blocks = [sum(blocks.get(lf.name, 1) for lf in s.log_files) for s in slices]
    timeline = snapshot.timeline
    return TableLayout(
        file_groups=len(slices),
        log_files=sum(len(s.log_files) for s in slices),
        log_blocks=sum(per_slice_blocks),
        max_log_files_per_slice=max((len(s.log_files) for s in slices), default=0),
        max_log_blocks_per_slice=max(per_slice_blocks, default=0),
        pending_compactions=len(timeline.pending_compactions()),
        pending_log_compactions=len(timeline.pending_log_compactions()),
    )


def _blocks_by_log_file(snapshot: TableSnapshot, since: str | None) -> dict[str, int]:
    """Log file name -> blocks appended to it by completed delta commits at or after ``since``.

    A log file a write stat does not name (e.g. written before the active timeline)
    counts one block (see :func:`table_layout`).
    """
    if since is None:
        return {}
    out: dict[str, int] = {}
    for inst in snapshot.timeline.completed():
        if inst.action != Action.DELTA_COMMIT or inst.timestamp < since:
            continue
        meta = snapshot.commit_metadata(inst)
        for stats in meta.partition_to_write_stats.values():
            for st in stats:
                if st.is_log and st.path:
                    name = st.path.rsplit("/", 1)[-1]
                    out[name] = out.get(name, 0) + max(st.total_log_blocks, 1)
    return out
