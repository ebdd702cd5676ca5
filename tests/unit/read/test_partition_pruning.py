"""Filters that mix partition and data columns still prune partitions (issue 13).

A data column's value is unknown per partition; under Kleene logic ``city = 'sf' AND
ts > N`` is false for every other city, so only ``sf`` slices are planned. Filters whose
functions do not treat null as "unknown" (``is_null``, ``is_in``) prune on partition
columns alone. Whatever is planned, the rows equal filtering the whole table.
"""

from __future__ import annotations

import pyarrow.compute as pc
import pytest

from streamer.read import Table
from tests.support import block_tables as tg

CITY, TS = pc.field("city"), pc.field("ts")


@pytest.fixture(scope="module")
def table(tmp_path_factory) -> Table:
    p = str(tmp_path_factory.mktemp("prune") / "t")
    tg.build(p, 4)
    return Table.open(p)


def _planned_partitions(t: Table, expr: pc.Expression) -> set[str]:
    return {s.partition_path for s in t.plan("snapshot", filter=expr).slices}


CASES = [
    ((CITY == "sf") & (TS > 50), {"sf"}),
    ((TS > 50) & (CITY == "nyc"), {"nyc"}),
    (~(CITY == "sf") & (TS > 50), {"nyc", "oslo"}),
    ((CITY == "sf") | (TS > 50), {"sf", "nyc", "oslo"}),  # nyc rows with ts > 50 match
    ((CITY == "sf") & TS.is_null(), {"sf", "nyc", "oslo"}),  # is_null of a data column: not trusted, kept
    ((CITY == "sf") | TS.is_null(), {"sf", "nyc", "oslo"}),  # is_null of a data column: not trusted, kept
    (CITY.isin(["sf"]) | TS.isin([1, 2]), {"sf", "nyc", "oslo"}),  # is_in of a data column: kept
    (CITY.isin(["sf", "oslo"]) & (TS > 50), {"sf", "oslo"}),
    ((TS + 1 > 50) & (CITY != "oslo"), {"sf", "nyc"}),
]


@pytest.mark.parametrize(("expr", "partitions"), CASES, ids=[str(c[0]) for c in CASES])
def test_pruning_keeps_exactly_the_partitions_that_can_match(table, expr, partitions):
    assert _planned_partitions(table, expr) == partitions
    whole = table.read()
    expected = tg.canon(whole.filter(expr))
    assert tg.canon(table.read(filter=expr)) == expected


def test_the_benchmark_query_plans_only_its_partition(tmp_path):
    """Acceptance 3 of issue 13, at a small size: ``city = 'sf' AND fare > 50`` over the
    benchmark's table plans the ``sf`` slices only, and projects to the 2 columns asked."""
    from benchmarks.bench_read_filtered import COLUMNS, generate, query

    path = str(tmp_path / "t")
    generate(path, 16_000, 8_000, 1, upsert_rows=2_000, deletes=200)
    t = Table.open(path)
    every = t.fsview.latest_merged_slices()
    sf = [s for s in every if s.partition_path == "sf"]
    planned = t.plan("snapshot", columns=COLUMNS, filter=query()).slices
    assert {s.partition_path for s in planned} == {"sf"} and len(planned) == len(sf) < len(every)
    result = t.scan(columns=COLUMNS, filter=query())
    assert result.stats.file_slices == len(sf) and result.table.column_names == COLUMNS
    expected = t.read().filter(query()).select(COLUMNS)
    assert sorted(result.table.to_pylist(), key=lambda r: r["id"]) == sorted(expected.to_pylist(), key=lambda r: r["id"])


def test_a_formatted_partition_path_does_not_prune_its_column(tmp_path):
    """A timestamp key generator writes ``day = '2024-01-15'`` under ``2024/01/15``: the
    path's value is not the column's, so a filter on ``day`` must read the data (it once
    compared the path's value and returned no rows)."""
    import pyarrow as pa

    from streamer.table.identity import KeyGenType, TimestampKeyGenConfig, TimestampType
    from streamer.write import HudiWriter, TableConfig, WriteOptions

    cfg = TableConfig("t", ("id",), ("day",), None, keygen=KeyGenType.TIMESTAMP,
                      timestamp=TimestampKeyGenConfig(timestamp_type=TimestampType.DATE_STRING,
                                                      input_format="yyyy-MM-dd", output_format="yyyy/MM/dd"))
    w = HudiWriter.create(str(tmp_path / "t"), cfg, options=WriteOptions(engine="local"))
    w.upsert(pa.table({"id": [1, 2], "day": ["2024-01-15", "2024-01-16"]}))
    t = Table.open(str(tmp_path / "t"))
    assert t.properties.formatted_partition_fields == {"day"}
    day = pc.field("day")
    assert t.read(columns=["id"], filter=day == "2024-01-15").column("id").to_pylist() == [1]
    assert t.read(columns=["id"], filter=day == "2024/01/15").num_rows == 0
    assert len(t.plan("snapshot", filter=day == "2024-01-16").slices) == 2  # nothing decided by the path
