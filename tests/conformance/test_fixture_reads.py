"""Every Hudi-written fixture reads exactly as `expected/` says, via the Python API and the CLI.

The canonical form and its helpers live in :mod:`tests.support.fixture_tables`.
"""

from __future__ import annotations

import contextlib
import io
import json

import pytest

from tests.support.fixture_tables import (
    FIXTURE_NAMES,
    FIXTURES,
    QUERIES,
    canonical_lines,
    expected_lines,
    table_path,
)

pytestmark = pytest.mark.conformance


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
