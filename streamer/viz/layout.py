"""A picture of a table's file layout: ``streamer show TABLE --layout out.png``.

Why a picture: whether a MOR table needs compaction is a question of shape — how many
log files pile up behind each base file, how big they are next to it, and which file
groups a pending plan already covers. One row per file group (grouped by partition),
the base file and then each log file as a box whose width is its size in bytes, and
file groups named by a pending compaction or log compaction highlighted.

:func:`table_layout` builds the data (tested on its own); :func:`draw_layout` only
draws it (matplotlib, the ``charts`` extra, imported when drawing).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from streamer.errors import CorruptDataError

if TYPE_CHECKING:
    from streamer.read.table import Table


@dataclass(frozen=True, slots=True)
class FileBox:
    name: str
    kind: Literal["base", "log"]
    bytes: int


@dataclass(frozen=True, slots=True)
class GroupRow:
    """One file group's latest slice as a snapshot reads it, and the pending plans naming it."""

    partition: str
    file_id: str
    files: tuple[FileBox, ...]
    pending: tuple[str, ...]  # "compaction <instant>", "logcompaction <instant>"

    @property
    def log_files(self) -> int:
        return sum(1 for f in self.files if f.kind == "log")

    @property
    def bytes(self) -> int:
        return sum(f.bytes for f in self.files)


@dataclass(frozen=True)
class TableLayout:
    name: str
    groups: tuple[GroupRow, ...]
    pending: tuple[str, ...]  # every pending instant, "action timestamp"

    @property
    def log_files(self) -> int:
        return sum(g.log_files for g in self.groups)

    @property
    def partitions(self) -> int:
        return len({g.partition for g in self.groups})


_PLANNED = ("compaction", "logcompaction")


def table_layout(table: Table) -> TableLayout:
    """The layout of a :class:`streamer.read.Table` now (one listing of its files)."""
    planned: dict[tuple[str, str], list[str]] = {}
    pending = []
    for inst in table.timeline.pending():
        label = f"{inst.action} {inst.timestamp}"
        pending.append(label)
        if inst.action in _PLANNED:
            try:
                ops = table.fsview.compaction_plan(inst).operations
            except (CorruptDataError, OSError):
                continue  # still listed as pending; `streamer check` reports the damage
            for op in ops:
                planned.setdefault((op.partition_path or "", op.file_id), []).append(label)
    rows = []
    for s in sorted(table.fsview.latest_merged_slices(), key=lambda s: (s.partition_path, s.file_id)):
        files = [FileBox(s.base_file.name, "base", s.base_file.size)] if s.base_file else []
        files += [FileBox(lf.name, "log", lf.size) for lf in s.log_files]
        rows.append(GroupRow(s.partition_path, s.file_id, tuple(files),
                             tuple(planned.get((s.partition_path, s.file_id), ()))))
    return TableLayout(table.properties.name, tuple(rows), tuple(pending))


_COLORS = {"base": "#4c72b0", "log": "#dd8452"}


#: Rows drawn at most: a picture of thousands of file groups is unreadable (and too tall to
#: render); beyond this the groups with the most log files (then bytes) are shown.
MAX_ROWS = 120


def drawn_groups(layout: TableLayout) -> tuple[GroupRow, ...]:
    """The rows a picture shows, in partition order: all, or the :data:`MAX_ROWS` busiest."""
    if len(layout.groups) <= MAX_ROWS:
        return layout.groups
    busiest = sorted(layout.groups, key=lambda g: (bool(g.pending), g.log_files, g.bytes), reverse=True)
    keep = {(g.partition, g.file_id) for g in busiest[:MAX_ROWS]}
    return tuple(g for g in layout.groups if (g.partition, g.file_id) in keep)


def draw_layout(layout: TableLayout, path: str | Path) -> Path:
    """Draw ``layout`` as a PNG at ``path``."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.patches import Patch

    path = Path(path)
    groups = drawn_groups(layout)
    n = max(len(groups), 1)
    fig = Figure(figsize=(11, 1.4 + 0.32 * n), layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    widest = max((g.bytes for g in groups), default=1) or 1
    least = widest * 0.004  # a 1 KiB log beside a 100 MiB base file must still show
    for y, g in enumerate(groups):
        if g.pending:
            ax.axhspan(y - 0.5, y + 0.5, color="#f6d7d7", zorder=0)
            ax.text(1.005, y, ", ".join(g.pending), transform=ax.get_yaxis_transform(),
                    va="center", fontsize=7, color="#a02020")
        x = 0.0
        for f in g.files:
            w = max(f.bytes, least)
            ax.barh(y, w, left=x, height=0.7, color=_COLORS[f.kind], edgecolor="white", linewidth=0.8)
            x += w
    for y in range(1, len(groups)):  # a line between partitions
        if groups[y].partition != groups[y - 1].partition:
            ax.axhline(y - 0.5, color="#999999", linewidth=0.6)
    ax.set_yticks(range(len(groups)),
                  [f"{g.partition or '(none)'} / {g.file_id[:8]}" for g in groups], fontsize=7)
    ax.set_ylim(len(groups) - 0.5, -0.5)
    ax.set_xlabel("bytes (latest file slice; each box one file)")
    handles = [Patch(color=_COLORS["base"], label="base file"), Patch(color=_COLORS["log"], label="log file")]
    if any(g.pending for g in groups):
        handles.append(Patch(color="#f6d7d7", label="in a pending plan"))
    fig.legend(handles=handles, loc="outside lower center", ncols=len(handles), fontsize=7)
    shown = "" if len(groups) == len(layout.groups) else f" (the {len(groups)} with most logs shown)"
    pending = f"; pending: {', '.join(layout.pending)}" if layout.pending else ""
    ax.set_title(f"{layout.name}: {len(layout.groups)} file groups in {layout.partitions} partitions, "
                 f"{layout.log_files} log files{shown}{pending}", fontsize=9, loc="left")
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    return path
