"""Splitting a batch's rows by a column's values (streamer.data.rows_by_value)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from hypothesis import given
from hypothesis import strategies as st

from streamer.data import rows_by_value


@given(st.lists(st.one_of(st.none(), st.sampled_from(["sf", "nyc", "", "a/b=1", "é"])), max_size=60))
def test_each_value_gets_exactly_its_rows_in_order(values):
    arr = pa.array(values, pa.string())
    got = rows_by_value(arr)
    every = np.concatenate([r for _, r in got]).tolist() if got else []
    assert sorted(every) == list(range(len(values)))
    for value, rows in got:
        assert list(rows) == sorted(rows)
        assert all(values[i] == value for i in rows)
    assert len({v for v, _ in got}) == len(got)


def test_chunked_and_dictionary_input():
    chunked = pa.chunked_array([["p", "q"], ["p"]])
    assert [(v, r.tolist()) for v, r in rows_by_value(chunked)] == [("p", [0, 2]), ("q", [1])]
    enc = pc.dictionary_encode(pa.array(["x", "y", "x"]))
    assert [(v, r.tolist()) for v, r in rows_by_value(enc)] == [("x", [0, 2]), ("y", [1])]
    assert rows_by_value(pa.array([], pa.string())) == []
