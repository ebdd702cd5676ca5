"""The parser pieces the sub-commands share, worded once so every command says the same."""

from __future__ import annotations

import argparse

#: How every command that takes one table names it.
TABLE_PATH_HELP = "table path or URI (/abs, relative, file:/abs, s3://bucket/key)"


def documented_parser(sub: argparse._SubParsersAction, name: str, *, help: str, doc: str | None
                      ) -> argparse.ArgumentParser:
    """A sub-command whose ``--help`` quotes its module's docstring with its line breaks."""
    return sub.add_parser(name, help=help, description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)


def add_table_path(p: argparse.ArgumentParser) -> None:
    """The ``path`` of the table a command works on."""
    p.add_argument("path", help=TABLE_PATH_HELP)


def add_lock_timeout(p: argparse.ArgumentParser, *, default_s: float) -> None:
    """``--lock-timeout``: how long a command that writes waits for the table's writer lock."""
    p.add_argument("--lock-timeout", type=float, default=default_s,
                   help=f"seconds to wait for the table's writer lock (default {default_s:g})")
