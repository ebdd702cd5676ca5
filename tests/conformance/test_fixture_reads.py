"""Every Hudi-written fixture reads exactly as `expected/` says, via the Python API and the CLI.

The canonical form is the fixtures README's: meta columns `_hoodie_commit_seqno` and
`_hoodie_file_name` dropped, keys sorted, values through `json.dumps(default=str)`, rows
sorted by (partition path, record key, line). :func:`canonical_lines` is the one
canonicaliser every conformance and integration test uses.
"""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import pytest

from tests.conftest import FIXTURES, fixture_table_path

pytestmark = pytest.mark.conformance

FIXTURE_NAMES = sorted(p.stem for p in FIXTURES.glob("*.zip"))
QUERIES = ("snapshot", "read_optimized")
_DROPPED = ("_hoodie_commit_seqno", "_hoodie_file_name")


def canonical_lines(rows: list[dict]) -> list[str]:
    """Rows (as `to_pylist()` gives them) in the README's canonical JSONL form."""
    keyed = []
    for row in rows:
        row = {k: v for k, v in row.items() if k not in _DROPPED}
        line = json.dumps(row, sort_keys=True, default=str)
        if "_hoodie_record_key" in row:
            keyed.append((str(row.get("_hoodie_partition_path")), str(row["_hoodie_record_key"]), line))
        else:
            keyed.append(("", "", line))
    return [line for *_, line in sorted(keyed)]


def expected_lines(name: str, query: str) -> list[str]:
    return (FIXTURES / "expected" / f"{name}.{query}.jsonl").read_text().splitlines()


def table_path(fixtures_dir: Path, name: str) -> str:
    return str(fixture_table_path(fixtures_dir, name))


@pytest.mark.parametrize("query", QUERIES)
@pytest.mark.parametrize("name", FIXTURE_NAMES)
def test_python_api_matches_expected(hudi_fixtures_dir, name, query):
    from streamer.read import Table

    result = Table.open(table_path(hudi_fixtures_dir, name)).scan(query=query)
    assert result.stats.corrupt_block_count == 0
    assert canonical_lines(result.table.to_pylist()) == expected_lines(name, query)


@pytest.mark.parametrize("query", QUERIES)
@pytest.mark.parametrize("name", FIXTURE_NAMES)
def test_cli_jsonl_matches_expected(hudi_fixtures_dir, name, query):
    from streamer.cli import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        rc = main(["read", table_path(hudi_fixtures_dir, name), "--query", query, "--format", "jsonl"])
    assert rc == 0
    rows = [json.loads(line) for line in out.getvalue().splitlines()]
    assert canonical_lines(rows) == expected_lines(name, query)


def test_every_fixture_is_covered():
    assert len(FIXTURE_NAMES) >= 16
    for name in FIXTURE_NAMES:
        for q in QUERIES:
            assert (FIXTURES / "expected" / f"{name}.{q}.jsonl").exists()


def test_projection_and_filter_pushdown(hudi_fixtures_dir):
    import pyarrow.compute as pc

    from streamer.read import Table

    t = Table.open(table_path(hudi_fixtures_dir, "quickstart_trips_table__mor__avro__v6_trips_8i1u"))
    full = t.read()
    got = t.read(columns=["uuid", "fare"], filter=pc.field("city") == "sao_paulo")
    assert got.column_names == ["uuid", "fare"]
    want = full.filter(pc.field("city") == "sao_paulo").select(["uuid", "fare"])
    assert sorted(got.to_pylist(), key=str) == sorted(want.to_pylist(), key=str)
    plan = t.plan(filter=pc.field("city") == "sao_paulo")
    assert {s.partition_path for s in plan.slices} == {"city=sao_paulo"}  # partitions pruned


def test_filter_on_int_partition_column_prunes(hudi_fixtures_dir):
    import pyarrow.compute as pc

    from streamer.read import Table

    t = Table.open(table_path(hudi_fixtures_dir, "sample_table__mor__parquet__v6_simplekeygen_nonhivestyle"))
    plan = t.plan(filter=pc.field("byteField") == 10)
    assert {s.partition_path for s in plan.slices} == {"10"}
    assert t.read(filter=pc.field("byteField") == 10).column("byteField").to_pylist() == [10] * len(
        t.read(filter=pc.field("byteField") == 10)
    )
