"""``streamer timeline PATH``: the active timeline as a readable table.

One line per instant, oldest first: time, action as it is now and as it was scheduled
(a finished compaction shows ``commit (compaction)``), state, and what the instant is
about - files written, plan size, files cleaned, what a rollback undid - followed by a
summary of pending table services, so an operator sees at a glance what is stuck. Hudi's
savepoints are listed after the commit whose time they share.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING

from streamer.cli.arguments import add_table_path
from streamer.errors import StreamerError

if TYPE_CHECKING:
    from streamer.read.table import Table
    from streamer.table.instant import Instant


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("timeline", help="show pending and completed instants, table services included")
    add_table_path(p)
    p.add_argument("--pending", action="store_true", help="only pending instants")
    p.add_argument("--limit", type=int, help="only the newest N instants")
    p.add_argument("--format", choices=("table", "jsonl"), default="table")
    p.set_defaults(func=run)


def describe(table: Table, inst: Instant) -> str:
    """A short, human summary of one instant's metadata (never raises)."""
    from streamer.table.instant import Action
    from streamer.table.metadata import CleanerPlan, CleanMetadata, CompactionPlan, RollbackMetadata

    tl = table.timeline
    if inst.action == Action.SAVEPOINT:
        return "keeps this commit's files (clean) and the timeline from it (archive)"
    try:
        if inst.is_pending:
            if inst.action in (Action.COMPACTION, Action.LOG_COMPACTION):
                compaction = CompactionPlan.from_bytes(tl.read_plan(inst))
                return f"plan: {len(compaction.operations)} file slice(s)"
            if inst.action == Action.CLEAN:
                cleaner = CleanerPlan.from_bytes(tl.read_plan(inst))
                return f"plan: {sum(len(v) for v in cleaner.files_per_partition.values())} file(s)"
            return ""
        if inst.action in Action.WRITE_ACTIONS:
            meta = table.fsview.commit_metadata(inst)
            stats = list(meta.write_stats())
            return (f"{meta.operation_type.lower()}: {len(stats)} file(s), "
                    f"{sum(s.total_write_bytes for s in stats)} bytes")
        if inst.action == Action.CLEAN:
            cleaned = CleanMetadata.from_bytes(tl.read_details(inst))
            return f"deleted {cleaned.total_files_deleted} file(s), retains from {cleaned.earliest_commit_to_retain}"
        if inst.action == Action.ROLLBACK:
            rolled = RollbackMetadata.from_bytes(tl.read_details(inst))
            return f"rolled back {', '.join(rolled.commits_rollback)}"
    except (StreamerError, OSError, ValueError, KeyError) as e:
        return f"(unreadable: {e})"
    return ""


def rows(path: str, pending_only: bool = False, limit: int | None = None) -> list[dict]:
    from streamer.read import Table

    table = Table.open(path)
    out = []
    # a savepoint shares its commit's time: listed just after that commit
    listed = sorted([*table.timeline.instants, *table.timeline.savepoints],
                    key=lambda i: (i.timestamp, i in table.timeline.savepoints))
    for inst in listed:
        if pending_only and not inst.is_pending:
            continue
        action = inst.action
        if inst.is_completed and inst.pending_action and inst.pending_action != inst.action:
            action = f"{inst.action} ({inst.pending_action})"
        row = {"instant": inst.timestamp, "action": action, "state": inst.state.value,
               "details": describe(table, inst)}
        if table.timeline.layout_version >= 2:  # table version 8+: when it completed, too
            row["completed"] = inst.completion_time or ""
        out.append(row)
    return out[-limit:] if limit else out


def run(args: argparse.Namespace) -> int:
    data = rows(args.path, args.pending, args.limit)
    out = sys.stdout
    if args.format == "jsonl":
        for r in data:
            out.write(json.dumps(r) + "\n")
        return 0
    headers = ["instant", "action", "state", *(["completed"] if data and "completed" in data[0] else []), "details"]
    widths = {h: max([len(h)] + [len(str(r[h])) for r in data]) for h in headers}
    out.write("  ".join(h.ljust(widths[h]) for h in headers).rstrip() + "\n")
    for r in data:
        out.write("  ".join(str(r[h]).ljust(widths[h]) for h in headers).rstrip() + "\n")
    pending = [r for r in data if r["state"] != "completed"]
    services = [r for r in pending if r["action"] in ("compaction", "logcompaction", "clean", "rollback")]
    out.write(f"\n{len(data)} instant(s); {len(pending)} pending"
              + (f", of which table services: {', '.join(r['action'] + '@' + r['instant'] for r in services)}"
                 if services else "") + "\n")
    return 0
