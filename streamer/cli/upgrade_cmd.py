"""``streamer upgrade PATH --to 9``: take a version-6 table to table version 8 or 9.

As Apache Hudi 1.x's upgrade does (see ``streamer.services.upgrade``): failed writes rolled
back, pending plans finished, every file slice with logs compacted, the timeline rewritten
in layout 2 and ``hoodie.properties`` switched last. Stop the table's pipelines first.
Readers that know only version 6 (see docs/table-versions.md) cannot read the table after.
"""

from __future__ import annotations

import argparse

from streamer.cli.arguments import add_lock_timeout, add_table_path, documented_parser


def register(sub: argparse._SubParsersAction) -> None:
    p = documented_parser(sub, "upgrade", doc=__doc__, help="upgrade a table-version-6 table to version 8 or 9")
    add_table_path(p)
    p.add_argument("--to", type=int, choices=(8, 9), required=True, help="the table version to upgrade to")
    add_lock_timeout(p, default_s=120.0)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from streamer.services.upgrade import upgrade_table

    for line in upgrade_table(args.path, to=args.to, lock_timeout_s=args.lock_timeout).lines():
        print(f"{args.path}: {line}")
    return 0
