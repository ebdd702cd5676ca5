"""Projected reads read only the needed column chunks of base files and log blocks (issue 13),
and return exactly the projection of a full read - deletes, event-time ordering and all."""

from __future__ import annotations

import pytest

from streamer.read import Table
from tests.support import block_tables as tg


@pytest.mark.parametrize("block_format", ["parquet", "avro"])
def test_projection_equals_full_read_projected(tmp_path, block_format):
    p = str(tmp_path / "t")
    tg.build(p, 8, deletes_every=3, block_format=block_format)
    t = Table.open(p)
    full = t.read()
    for cols in (["value"], ["id", "ts"], ["city", "value", "_hoodie_commit_time"]):
        got = t.read(columns=cols)
        assert got.column_names == cols
        key = sorted(zip(*(full.column(c).to_pylist() for c in cols), strict=True), key=repr)
        assert sorted(zip(*(got.column(c).to_pylist() for c in cols), strict=True), key=repr) == key
    first = t.timeline.completed_writes()[2].timestamp
    inc = t.read("incremental", begin=first, columns=["id", "value"])
    inc_full = t.read("incremental", begin=first)
    assert sorted(inc.to_pylist(), key=repr) == sorted(inc_full.select(["id", "value"]).to_pylist(), key=repr)
