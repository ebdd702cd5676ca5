"""``streamer show PATH``: what a table holds — stats of its latest file slices and a sample."""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pyarrow as pa

    from streamer.read.table import Table


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("show", help="a table's stats (partitions, file groups, logs) and a snapshot sample")
    p.add_argument("path", help="table path or URI")
    p.add_argument("--limit", type=int, default=5, help="sample rows to print (default 5)")
    p.add_argument("--columns", help="comma-separated columns for the sample (default: all data columns)")
    p.add_argument("--layout", metavar="PNG", help="also draw the file groups, base and log files (sized by "
                   "bytes) and pending compactions into this PNG (needs matplotlib: the 'charts' extra)")
    p.set_defaults(func=run)


@dataclass(frozen=True)
class TableStats:
    name: str
    version: int
    table_type: str
    records: int
    partitions: int
    file_groups: int
    base_files: int
    log_files: int
    completed_instants: int
    pending_instants: int

    def lines(self) -> list[str]:
        return [
            f"table {self.name} (Hudi {self.table_type}, table version {self.version})",
            f"  records (snapshot): {self.records}",
            f"  partitions: {self.partitions}   file groups: {self.file_groups}   "
            f"base files: {self.base_files}   log files: {self.log_files}",
            f"  instants: {self.completed_instants} completed, {self.pending_instants} pending",
        ]


def table_stats(table: Table, snapshot: pa.Table) -> TableStats:
    slices = table.fsview.latest_merged_slices()
    return TableStats(
        name=table.properties.name,
        version=table.properties.version,
        table_type=table.properties.table_type,
        records=snapshot.num_rows,
        partitions=len({s.partition_path for s in slices}),
        file_groups=len(slices),
        base_files=sum(1 for s in slices if s.base_file is not None),
        log_files=sum(len(s.log_files) for s in slices),
        completed_instants=len(table.timeline.completed()),
        pending_instants=len(table.timeline.pending()),
    )


def format_sample(snapshot: pa.Table, limit: int, columns: list[str] | None = None) -> list[str]:
    """A few rows as ``key=value`` lines, meta columns left out unless asked for."""
    if columns is None:
        columns = [c for c in snapshot.column_names if not c.startswith("_hoodie_")] or snapshot.column_names
    sample = snapshot.select(columns).slice(0, limit).to_pylist()
    return ["  " + ", ".join(f"{k}={v}" for k, v in row.items()) for row in sample]


def _index_line(table: Table) -> str:
    from streamer.table.identity import table_index

    return f"  index: {table_index(table.properties.raw).describe()}"


def _handover_line(table: Table, path: str) -> str:
    from streamer.services.handover import log_insert_groups
    from streamer.table.identity import table_index

    index = table_index(table.properties.raw)
    if index.is_bucket:  # Hudi's writers resolve the same file groups when configured alike
        opts = " ".join(f"{k}={v}" for k, v in index.hudi_write_options().items())
        return f"  Hudi writers: can continue this table when configured with {opts}"
    groups = log_insert_groups(table)
    configured = ""
    if index.is_global:
        configured = " configured with " + " ".join(f"{k}={v}" for k, v in index.hudi_write_options().items())
    if not groups:
        return f"  Hudi writers: can continue this table (every key is in a base file){configured}"
    return (f"  Hudi writers: {len(groups)} file group(s) hold keys only in log blocks; run "
            f"`streamer handover {path}` before a Hudi writer (bloom/simple index) continues it{configured}")


def run(args: argparse.Namespace) -> int:
    from streamer.read import Table
    from streamer.write.repair import table_problems

    table = Table.open(args.path)
    for problem in table_problems(table.fs, table.base_path):
        sys.stderr.write(
            f"warning: {args.path}: {problem}; run `streamer repair {args.path}` "
            "(the next write repairs it too)\n"
        )
    snapshot = table.read()
    out = sys.stdout
    for line in table_stats(table, snapshot).lines():
        out.write(line + "\n")
    out.write(_index_line(table) + "\n")
    out.write(_handover_line(table, args.path) + "\n")
    from streamer.services.handover import version_advice

    out.write(f"  Hudi versions: {version_advice(table.properties.version)}\n")
    cols = args.columns.split(",") if args.columns else None
    out.write(f"sample ({min(args.limit, snapshot.num_rows)} of {snapshot.num_rows} rows):\n")
    for line in format_sample(snapshot, args.limit, cols):
        out.write(line + "\n")
    if args.layout:
        out.write(draw(table, args.layout) + "\n")
    return 0


def draw(table: Table, png: str) -> str:
    """Draw the table's layout to ``png``; the line saying what was drawn where."""
    from streamer.errors import EnvironmentSetupError
    from streamer.viz.layout import draw_layout, table_layout

    layout = table_layout(table)
    try:
        draw_layout(layout, png)
    except ImportError as e:
        raise EnvironmentSetupError(f"--layout needs matplotlib ({e}); pip install 'mor-streamer[charts]'") from None
    return (f"layout: {len(layout.groups)} file group(s), {layout.log_files} log file(s), "
            f"{len(layout.pending)} pending instant(s) -> {png}")
