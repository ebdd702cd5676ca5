"""``streamer read PATH``: query a Hudi table from the shell.

``--format jsonl`` prints one JSON object per row with every column (meta columns
included), values as ``pyarrow.Table.to_pylist()`` gives them and anything JSON cannot
hold through ``str()`` - the form the conformance expectations use.
"""

from __future__ import annotations

import argparse
import json
import sys

import pyarrow as pa


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("read", help="query a Hudi table (snapshot, read-optimized, incremental)")
    p.add_argument("path", help="table path or URI")
    p.add_argument("--query", choices=("snapshot", "read_optimized", "incremental"), default="snapshot")
    p.add_argument("--as-of", dest="as_of", help="time travel: the table as of this instant")
    p.add_argument("--begin", help="incremental: changes after this instant (exclusive)")
    p.add_argument("--end", help="incremental: changes up to this instant (inclusive)")
    p.add_argument("--columns", help="comma-separated columns to return")
    p.add_argument("--limit", type=int, help="at most this many rows")
    p.add_argument("--format", choices=("table", "jsonl", "parquet"), default="table")
    p.add_argument("--output", "-o", help="file for --format parquet (default: stdout)")
    p.add_argument("--allow-corrupt", dest="allow_corrupt", action="store_true",
                   help="read past corrupt committed log blocks (their rows are missing; each is reported)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from streamer.read import Table

    columns = [c.strip() for c in args.columns.split(",") if c.strip()] if args.columns else None
    result = Table.open(args.path).scan(
        query=args.query, as_of=args.as_of, begin=args.begin, end=args.end, columns=columns,
        allow_corrupt=args.allow_corrupt,
    )
    table = result.table
    if args.limit is not None:
        table = table.slice(0, max(args.limit, 0))
    out = sys.stdout
    if args.format == "jsonl":
        for row in table.to_pylist():
            out.write(json.dumps(row, default=str) + "\n")
    elif args.format == "parquet":
        import pyarrow.parquet as pq

        if args.output:
            pq.write_table(table, args.output)
        else:
            sink = pa.BufferOutputStream()
            pq.write_table(table, sink)
            sys.stdout.buffer.write(sink.getvalue().to_pybytes())
    else:
        _print_table(table, out)
    if result.stats.corrupt_blocks:
        print(f"warning: {result.stats.corrupt_block_count} corrupt log block(s) skipped", file=sys.stderr)
        for cb in result.stats.corrupt_blocks:
            print(f"warning: skipped {cb.path} at offset {cb.offset}", file=sys.stderr)
    out.flush()
    return 0


def _print_table(table: pa.Table, out) -> None:
    """A plain aligned text table (long values cut), then the row count."""
    names = table.column_names
    rows = [[_cell(v) for v in r.values()] for r in table.to_pylist()]
    widths = [max([len(n)] + [len(r[i]) for r in rows]) for i, n in enumerate(names)]
    out.write(" | ".join(n.ljust(w) for n, w in zip(names, widths, strict=True)) + "\n")
    out.write("-+-".join("-" * w for w in widths) + "\n")
    for r in rows:
        out.write(" | ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) + "\n")
    out.write(f"({len(rows)} row{'s' if len(rows) != 1 else ''})\n")


def _cell(v: object, limit: int = 40) -> str:
    s = "null" if v is None else str(v)
    return s if len(s) <= limit else s[: limit - 3] + "..."
