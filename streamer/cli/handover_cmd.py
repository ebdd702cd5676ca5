"""``streamer handover PATH``: make a table safe for Apache Hudi's own writers to continue.

Our writer inserts into indexed log blocks; Hudi's BLOOM/SIMPLE indexes read base files
only and would write those keys again. The hand-over finishes pending work and compacts
every file slice with logs, so every key is in a base file (see
``streamer.services.handover``). Stop this table's pipelines first; run it again before
each switch from our writer to a Hudi writer. ``--check`` only reports.
"""

from __future__ import annotations

import argparse

from streamer.cli.arguments import add_lock_timeout, add_table_path, documented_parser


def register(sub: argparse._SubParsersAction) -> None:
    p = documented_parser(
        sub, "handover", doc=__doc__,
        help="compact so Apache Hudi's writers (bloom/simple index) can continue the table without duplicates")
    add_table_path(p)
    p.add_argument("--check", action="store_true",
                   help="only report file groups whose keys a base-file index cannot see")
    add_lock_timeout(p, default_s=120.0)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from streamer.read import Table
    from streamer.services.handover import handover_to_hudi, log_insert_groups

    if args.check:
        groups = log_insert_groups(Table.open(args.path))
        if not groups:
            print(f"{args.path}: every key is in a base file; Hudi writers can continue it")
            return 0
        print(f"{args.path}: {len(groups)} file group(s) hold keys a Hudi bloom/simple index cannot see:")
        for g in groups[:20]:
            print(f"  {g.partition_path or '(non-partitioned)'}/{g.file_id}: {g.reason}")
        print(f"run `streamer handover {args.path}` before a Hudi writer continues this table")
        return 1
    for line in handover_to_hudi(args.path, lock_timeout_s=args.lock_timeout).lines():
        print(f"{args.path}: {line}")
    return 0
