"""``streamer check PATH``: verify a table end to end and report every damaged thing.

Timeline first (every completed instant's file decodes; an emptied commit file is
damage), then every live slice: the files completed instants wrote are present, no
corrupt log block lies inside committed bytes, every block and base file decodes (page
checksums verified where the file has them), and ``hoodie.properties`` carries Hudi's
table checksum. Exit 0 when intact, 1 when damage was found (one line per item: file,
what is wrong, the instant whose data it held), 2 when the table cannot be opened.
Damage that ``streamer repair --drop-damaged`` dropped knowingly (in a slice its
compaction superseded) is listed as dropped, not as damage.
"""

from __future__ import annotations

import argparse
import json
import sys

from streamer.cli.arguments import add_table_path


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("check", help="verify a table (timeline, files, log blocks, base files) and report damage")
    add_table_path(p)
    p.add_argument("--quick", action="store_true",
                   help="footers and block headers only (skip decoding every page and block)")
    p.add_argument("--json", action="store_true", help="one JSON object instead of text")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from streamer.integrity import Damage, check_table
    from streamer.read import Table

    table = Table.open(args.path)
    report = check_table(table.fs, table.fsview, table.timeline, deep=not args.quick)
    props = table.properties
    if props.checksum is not None and not props.checksum_valid():
        report.damage.insert(0, Damage(f"{table.base_path}/.hoodie/hoodie.properties",
                                       f"hoodie.table.checksum is {props.checksum}, "
                                       f"expected {props.expected_checksum()} for table {props.name!r}"))
    if args.json:
        print(json.dumps({"ok": report.ok, "instants": report.instants, "slices": report.slices,
                          "files": report.files,
                          "damage": [{"path": d.path, "reason": d.reason, "instant": d.instant}
                                     for d in report.damage],
                          "dropped": [{"path": d.path, "reason": d.reason, "instant": d.instant, "by": by}
                                      for d, by in report.dropped]}))
    else:
        for d in report.damage:
            print(f"damaged: {d}")
        for d, by in report.dropped:
            print(f"dropped knowingly by compaction {by} (`streamer repair --drop-damaged`): {d}")
        state = "intact" if report.ok else f"{len(report.damage)} damaged item(s)"
        print(f"{table.base_path}: {state} ({report.instants} instants, {report.slices} slices, "
              f"{report.files} files checked)", file=sys.stdout if report.ok else sys.stderr)
    return 0 if report.ok else 1
