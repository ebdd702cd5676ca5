"""``streamer repair PATH``: fix what earlier versions of this project wrote wrongly.

Today that is ``hoodie.table.log.file.format`` (Apache Hudi skipped every log file of
such a table), empty clean inflight files (Hudi's archiver failed on them) and archive
files of our former format (Hudi failed to load the archived timeline). The writer repairs a table when it opens it; this command does it
without writing data, e.g. before Hudi, Trino or Spark read a table nobody writes.
"""

from __future__ import annotations

import argparse
import logging


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "repair",
        help="fix hoodie.properties of a table written by an earlier mor-streamer (Hudi compatibility)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("path", help="table path or URI (/abs, relative, file:/abs, s3://bucket/key)")
    p.add_argument("--dry-run", action="store_true", help="only report what would be repaired")
    p.add_argument("--lock-timeout", type=float, default=30.0,
                   help="seconds to wait for the table's writer lock (default 30)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
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


def _upgrade_archive(fs, path: str) -> list[str]:
    """Archive files of the former format, rewritten in Hudi's (under the archive's lock)."""
    from streamer.errors import CommitConflictError
    from streamer.read import Table
    from streamer.services.archive import upgrade_legacy_archives
    from streamer.services.lock import PlanLock

    lock = PlanLock(fs, path, "archive", purpose="repair")
    if not lock.try_acquire():
        raise CommitConflictError(f"{path}: the archive is being written; run `streamer repair` again")
    try:
        return upgrade_legacy_archives(Table.open(path, fs=fs))
    finally:
        lock.release()
