"""``streamer read``: a row limit for eyes, everything for programs, no silently ignored flag."""

from __future__ import annotations

import json

import pytest

from streamer.cli import main
from streamer.read import Table
from tests.support import block_tables as tg


@pytest.fixture(scope="module")
def table(tmp_path_factory) -> str:
    path = str(tmp_path_factory.mktemp("read") / "t")
    tg.build(path, 3)
    return path


def _rows(table: str) -> int:
    return Table.open(table).scan().table.num_rows


def test_table_output_shows_20_rows_and_says_how_many_more(table, capsys):
    total = _rows(table)
    assert total > 20
    assert main(["read", table]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 2 + 20 + 1  # header, rule, rows, footer
    assert lines[-1] == f"(showing 20 of {total} rows; --limit N for more, --limit 0 for all)"


def test_limit_n_and_limit_0_for_all(table, capsys):
    total = _rows(table)
    assert main(["read", table, "--limit", "3"]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == f"(showing 3 of {total} rows; --limit N for more, --limit 0 for all)"
    assert main(["read", table, "--limit", "0"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 2 + total + 1 and lines[-1] == f"({total} rows)"


def test_jsonl_keeps_every_row_unless_limited(table, capsys):
    total = _rows(table)
    assert main(["read", table, "--format", "jsonl"]) == 0
    assert len(capsys.readouterr().out.splitlines()) == total
    assert main(["read", table, "--format", "jsonl", "--limit", "5"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 5 and all(json.loads(line)["id"] is not None for line in out)


@pytest.mark.parametrize("args, named", [
    (["--begin", "20200101000000000"], "--begin only applies to --query incremental"),
    (["--end", "20200101000000000"], "--end only applies to --query incremental"),
    (["--query", "read_optimized", "--begin", "1", "--end", "2"], "--begin and --end only apply"),
    (["--query", "incremental", "--as-of", "20200101000000000"], "--as-of does not apply to --query incremental"),
    (["--output", "x.parquet"], "--output is for --format parquet"),
    (["--limit", "-1"], "--limit must be 0"),
])
def test_contradictory_flags_are_refused_by_name(table, capsys, args, named):
    assert main(["read", table, *args]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and named in err


def test_as_of_before_the_first_commit_names_it(table, capsys):
    first = Table.open(table).timeline.completed_writes()[0].timestamp
    assert main(["read", table, "--as-of", "20000101000000000"]) == 2
    err = capsys.readouterr().err
    assert f"before the first commit {first}" in err and "did not exist yet" in err
    assert main(["read", table, "--as-of", first, "--format", "jsonl"]) == 0
    assert len(capsys.readouterr().out.splitlines()) > 0


def test_incremental_with_begin_is_fine(table, capsys):
    first = Table.open(table).timeline.completed_writes()[0].timestamp
    assert main(["read", table, "--query", "incremental", "--begin", first, "--format", "jsonl"]) == 0
    assert 0 < len(capsys.readouterr().out.splitlines()) <= _rows(table)
