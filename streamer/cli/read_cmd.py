"""``streamer read PATH``: query a Hudi table from the shell.

``--format jsonl`` prints one JSON object per row with every column (meta columns
included), values as ``pyarrow.Table.to_pylist()`` gives them and anything JSON cannot
hold through ``str()`` - the form the conformance expectations use.

The text table is for eyes: it shows the first :data:`DEFAULT_TABLE_ROWS` rows (as
Spark's ``show()`` does) and says how many more there are; ``--limit N`` shows N,
``--limit 0`` all. ``jsonl`` and ``parquet`` are for programs and keep every row unless
``--limit`` is given. Flags that do not fit the query are refused by name rather than
ignored, and a ``--as-of`` before the table's first commit is an error naming that
commit instead of an empty answer (``Table.plan`` refuses it, for every caller).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import IO

import pyarrow as pa

from streamer.cli.arguments import add_table_path
from streamer.errors import QueryError

#: Rows the text table shows by default (Spark's ``DataFrame.show()`` shows 20 too).
DEFAULT_TABLE_ROWS = 20


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("read", help="query a Hudi table (snapshot, read-optimized, incremental)")
    add_table_path(p)
    p.add_argument("--query", choices=("snapshot", "read_optimized", "incremental"), default="snapshot")
    p.add_argument("--as-of", dest="as_of", help="time travel: the table as of this instant")
    p.add_argument("--begin", help="incremental: changes after this instant (exclusive)")
    p.add_argument("--end", help="incremental: changes up to this instant (inclusive)")
    p.add_argument("--columns", help="comma-separated columns to return")
    p.add_argument("--limit", type=int,
                   help=f"at most this many rows; 0 = all (default: {DEFAULT_TABLE_ROWS} for --format table, "
                   "all for jsonl and parquet)")
    p.add_argument("--format", choices=("table", "jsonl", "parquet"), default="table",
                   help="table: aligned text for a terminal; jsonl: one JSON object per row; parquet: a file")
    p.add_argument("--output", "-o", help="file for --format parquet (default: stdout)")
    p.add_argument("--allow-corrupt", dest="allow_corrupt", action="store_true",
                   help="read past corrupt committed log blocks (their rows are missing; each is reported)")
    p.add_argument("--key", action="append", dest="keys", metavar="KEY",
                   help="only the rows of this record key (repeatable): read through the bloom index, "
                        "only the file groups that may hold them (snapshot query)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from streamer.read import Table
    from streamer.read.table import ReadResult

    check_flags(args)
    columns = [c.strip() for c in args.columns.split(",") if c.strip()] if args.columns else None
    hudi = Table.open(args.path)
    if args.keys:
        found = hudi.lookup(args.keys, columns=columns)
        print(f"{found.rows.num_rows} row(s) of {len(args.keys)} key(s), from {found.slices_read} of "
              f"{found.slices_total} file group(s)", file=sys.stderr)
        result = ReadResult(found.rows)
    else:
        result = hudi.scan(
            query=args.query, as_of=args.as_of, begin=args.begin, end=args.end, columns=columns,
            allow_corrupt=args.allow_corrupt,
        )
    table = result.table
    limit = args.limit if args.limit is not None else (DEFAULT_TABLE_ROWS if args.format == "table" else 0)
    if limit:
        table = table.slice(0, limit)
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
        _print_table(table, out, result.table.num_rows)
    if result.stats.corrupt_blocks:
        print(f"warning: {result.stats.corrupt_block_count} corrupt log block(s) skipped", file=sys.stderr)
        for cb in result.stats.corrupt_blocks:
            print(f"warning: skipped {cb.path} at offset {cb.offset}", file=sys.stderr)
    out.flush()
    return 0


def check_flags(args: argparse.Namespace) -> None:
    """Refuse flags the chosen query would silently ignore (naming them)."""
    if args.query != "incremental":
        given = [f for f, v in (("--begin", args.begin), ("--end", args.end)) if v]
        if given:
            raise QueryError(f"{' and '.join(given)} only appl{'y' if len(given) > 1 else 'ies'} to --query incremental "
                             f"(this is a {args.query} query); add --query incremental, or use --as-of "
                             "for the table as of an instant")
    elif args.as_of:
        raise QueryError("--as-of does not apply to --query incremental; its range is --begin/--end")
    if args.output and args.format != "parquet":
        raise QueryError(f"--output is for --format parquet, not --format {args.format} (redirect stdout instead)")
    keys = getattr(args, "keys", None)
    if keys and (args.query != "snapshot" or args.as_of or args.allow_corrupt):
        raise QueryError("--key reads the snapshot: it does not combine with --query, --as-of or --allow-corrupt")
    if args.limit is not None and args.limit < 0:
        raise QueryError(f"--limit must be 0 (all rows) or more, not {args.limit}")


def _print_table(table: pa.Table, out: IO[str], total: int) -> None:
    """A plain aligned text table (long values cut), then the row count (and how many are not shown)."""
    names = table.column_names
    rows = [[_cell(v) for v in r.values()] for r in table.to_pylist()]
    widths = [max([len(n)] + [len(r[i]) for r in rows]) for i, n in enumerate(names)]
    out.write(" | ".join(n.ljust(w) for n, w in zip(names, widths, strict=True)) + "\n")
    out.write("-+-".join("-" * w for w in widths) + "\n")
    for r in rows:
        out.write(" | ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) + "\n")
    if total > len(rows):
        out.write(f"(showing {len(rows)} of {total} rows; --limit N for more, --limit 0 for all)\n")
    else:
        out.write(f"({len(rows)} row{'s' if len(rows) != 1 else ''})\n")


def _cell(v: object, limit: int = 40) -> str:
    s = "null" if v is None else str(v)
    return s if len(s) <= limit else s[: limit - 3] + "..."
