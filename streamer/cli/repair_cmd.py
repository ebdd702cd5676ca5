"""``streamer repair PATH``: fix what earlier versions of this project wrote wrongly.

Today that is ``hoodie.table.log.file.format`` (Apache Hudi skipped every log file of
such a table), empty clean inflight files (Hudi's archiver failed on them) and archive
files of our former format (Hudi failed to load the archived timeline). The writer repairs a table when it opens it; this command does it
without writing data, e.g. before Hudi, Trino or Spark read a table nobody writes.

``--drop-damaged`` is different: it goes on **without** the rows of a lost committed log
file or a corrupt committed log block, knowingly. Every read, compaction and write of
such a table refuses until the file is restored; when no copy exists, this compacts each
damaged file group's slice with that damage accepted, lists exactly what was dropped
(file, reason, the instant that wrote it, the record and delete counts its write
recorded) and records it in the compaction's commit. Restore the file instead whenever
you can. ``--dry-run`` lists what would be dropped.
"""

from __future__ import annotations

import argparse
import logging
from typing import TYPE_CHECKING

from streamer.cli.arguments import add_lock_timeout, add_table_path, documented_parser

if TYPE_CHECKING:
    from streamer.fs import FileSystem


def register(sub: argparse._SubParsersAction) -> None:
    p = documented_parser(
        sub, "repair", doc=__doc__,
        help="fix hoodie.properties of a table written by an earlier mor-streamer (Hudi compatibility)")
    add_table_path(p)
    p.add_argument("--dry-run", action="store_true", help="only report what would be repaired")
    p.add_argument("--drop-damaged", dest="drop_damaged", action="store_true",
                   help="compact damaged file groups WITHOUT the rows of their missing committed log files "
                        "and corrupt committed log blocks (loss made permanent; reports what was dropped)")
    add_lock_timeout(p, default_s=30.0)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if getattr(args, "drop_damaged", False):
        return _drop_damaged(args)
    from streamer.fs import resolve
    from streamer.write.repair import repair_table_format

    fs, path = resolve(args.path)
    # the repair logs one warning line for writers that repair on open; here we print instead
    quiet = logging.getLogger("streamer.write.repair")
    level, quiet.level = quiet.level, logging.ERROR
    try:
        problems = repair_table_format(fs, path, lock_timeout_s=args.lock_timeout, dry_run=args.dry_run)
    finally:
        quiet.setLevel(level)
    verb = "would repair" if args.dry_run else "repaired"
    for p in problems:
        print(f"{args.path}: {verb}: {p}")
    rewritten = [] if args.dry_run else _upgrade_archive(fs, path)
    for p in rewritten:
        print(f"{args.path}: repaired: rewrote {p} in Hudi's archived-timeline format "
              "(Hudi failed to load the former one)")
    if not problems and not rewritten:
        print(f"{args.path}: nothing to repair")
    return 0


def _upgrade_archive(fs: FileSystem, path: str) -> list[str]:
    """Archive files of the former format, rewritten in Hudi's (under the archive's lock)."""
    from streamer.errors import CommitConflictError
    from streamer.read import Table
    from streamer.services.archive import upgrade_legacy_archives
    from streamer.write.lock import PlanLock

    lock = PlanLock(fs, path, "archive", purpose="repair")
    if not lock.try_acquire():
        raise CommitConflictError(f"{path}: the archive is being written; run `streamer repair` again")
    try:
        return upgrade_legacy_archives(Table.open(path, fs=fs))
    finally:
        lock.release()


def _drop_damaged(args: argparse.Namespace) -> int:
    """Exit 0: nothing damaged, or every damaged item dropped (each listed); 1: damage
    this cannot drop (listed; restore it), nothing done for it."""
    import sys

    from streamer.read import Table
    from streamer.services.drop_damage import drop_damaged

    table = Table.open(args.path)
    rep = drop_damaged(table, dry_run=args.dry_run, lock_timeout_s=args.lock_timeout)
    for d in rep.refused:
        print(f"{args.path}: cannot drop (restore it, or roll the table back): {d}", file=sys.stderr)
    if args.dry_run or rep.refused:
        for items in rep.found.values():
            for d in items:
                print(f"{args.path}: would drop: {d}")
    for item in rep.dropped:
        print(f"{args.path}: dropped: {item}")
    if not rep.found and not rep.refused:
        print(f"{args.path}: no damaged file in any slice a read serves: nothing to drop")
    elif rep.dropped and not rep.refused:
        print(f"{args.path}: the table reads again without the dropped rows; `streamer check` lists them as dropped")
    return 1 if rep.refused else 0
