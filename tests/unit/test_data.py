"""Splitting a batch's rows by a column's values (streamer.data.rows_by_value), short keys as integers (short_keys), numbered strings (numbered_strings)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import given
from hypothesis import strategies as st

from streamer.data import numbered_strings, rows_by_value, short_keys, stable_order


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


def test_short_keys_order_and_compare_as_the_strings_do():
    """Random keys of 1-8 UTF-8 bytes (one another's prefixes, multi-byte characters, a
    sliced array): the integers sort as Arrow sorts the strings, and are equal exactly when
    the strings are; a key that does not fit makes the whole column None."""
    rng = np.random.default_rng(7)
    alphabet = [chr(c) for c in range(1, 128)] + ["é", "ü", "€"]
    for trial in range(100):
        drawn = ["".join(rng.choice(alphabet, size=int(rng.integers(1, 4)))) for _ in range(int(rng.integers(2, 200)))]
        keys = pa.array([k if len(k.encode()) <= 8 else k[:2] for k in drawn])
        if trial % 2:
            keys = keys.slice(1)
        short = short_keys(keys)
        assert short is not None
        assert (np.argsort(short, kind="stable") == pc.sort_indices(keys).to_numpy()).all()
        values = keys.to_pylist()
        same_string = np.array(values)[:, None] == np.array(values)[None, :]
        assert ((short[:, None] == short[None, :]) == same_string).all()
    assert short_keys(pa.chunked_array([["12", "3"], ["45678901"]])).tolist() == [
        int.from_bytes(k.encode().ljust(8, b"\0"), "big") for k in ["12", "3", "45678901"]]
    for unfit in (["123456789"], ["a\x00b"], ["", "a"], ["a", None]):
        assert short_keys(pa.array(unfit, pa.string())) is None
    assert short_keys(pa.array([1, 2])) is None
    assert len(short_keys(pa.array([], pa.string()))) == 0


@pytest.mark.parametrize("prefix", ["", "a", "1234567", "12345678", "123456789",
                                    "20261202113000123_7_", "é_ü_"])
def test_numbered_strings_are_the_prefix_and_each_row_number(prefix):
    """Built as bytes (see :func:`numbered_strings`): the same array as Arrow's cast and
    join, at every digit-count edge, for prefixes whose length is and is not a multiple of
    the 8-, 4-, 2- and 1-byte words it is written in."""
    for n in (0, 1, 9, 10, 11, 99, 100, 101, 1000, 10001, 123_457):
        got = numbered_strings(prefix, n)
        got.validate(full=True)
        assert got.type == pa.string() and len(got) == n
        assert got.equals(pa.array([f"{prefix}{i}" for i in range(n)], pa.string())), (prefix, n)


@pytest.mark.parametrize("bound", [1, 2, 255, 256, 257, 65_536, 65_537, 1 << 20])
def test_stable_order_is_numpys_stable_argsort(bound):
    """Codes sorted as 8- or 16-bit integers when they fit, as they are otherwise: the
    same order, ties in input order."""
    codes = np.random.default_rng(bound).integers(0, bound, 5_000).astype(np.int32)
    assert np.array_equal(stable_order(codes, bound), np.argsort(codes, kind="stable"))


def test_rows_by_value_takes_a_dictionary_with_narrow_indices_and_nulls():
    """A caller's own dictionary array (int8 indices, 128 values, nulls): the nulls' code
    past the last value does not fit int8, and still groups them last."""
    names = [f"p{i}" for i in range(128)]
    idx = pa.array([127, None, 0, 127, None], pa.int8())
    arr = pa.DictionaryArray.from_arrays(idx, pa.array(names))
    assert [(v, r.tolist()) for v, r in rows_by_value(arr)] == [("p0", [2]), ("p127", [0, 3]), (None, [1, 4])]
