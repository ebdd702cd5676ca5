"""Property tests: Hudi bloom filters (``SIMPLE`` and ``DYNAMIC_V0``).

For any keys (any Unicode, any length, so every hash word-count group and tail length
occurs) and any filter shape (small ``num_entries`` and ``max_entries``, so dynamic
filters open rows - up to 80, more than one 64-row mask word - and then go round-robin):

* every added key tests positive, one at a time and vectorised, however the keys were
  added (all at once, in chunks, one by one);
* the footer string parses back to a filter that serialises to the same bytes and gives
  the same answers;
* the vectorised hash positions equal a scalar transliteration of Hadoop's MurmurHash.
"""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from streamer.table.bloom import DYNAMIC_V0, SIMPLE, BloomFilter, hash_positions
from tests.support.java_hash import java_positions

KEY = st.text(min_size=1, max_size=40)  # Hudi rejects empty keys
KEYS = st.lists(KEY, min_size=1, max_size=150)
FPP = st.sampled_from([0.1, 0.01, 1e-4, 1e-9])


@st.composite
def filters(draw) -> BloomFilter:
    n = draw(st.integers(min_value=1, max_value=60))
    fpp = draw(FPP)
    if draw(st.sampled_from([SIMPLE, DYNAMIC_V0])) == SIMPLE:
        return BloomFilter.new_simple(n, fpp)
    return BloomFilter.new_dynamic(n, fpp, max_entries=n * draw(st.integers(min_value=1, max_value=80)))


def _add(f: BloomFilter, keys: list[str], how: str, chunk: int) -> None:
    if how == "all":
        f.add_many(keys)
    elif how == "chunks":
        for i in range(0, len(keys), chunk):
            f.add_many(keys[i : i + chunk])
    else:
        for k in keys:
            f.add(k)


ADDING = st.tuples(st.sampled_from(["all", "chunks", "one"]), st.integers(min_value=1, max_value=40))


@settings(max_examples=50, deadline=None)
@given(filters(), KEYS, ADDING)
def test_every_added_key_tests_positive(f, keys, adding):
    _add(f, keys, *adding)
    assert f.might_contain_many(keys).all()
    assert all(f.might_contain(k) for k in keys[:20])


@settings(max_examples=50, deadline=None)
@given(filters(), KEYS, ADDING, st.lists(KEY, max_size=50))
def test_serialise_then_parse_is_the_same_filter(f, keys, adding, probes):
    _add(f, keys, *adding)
    again = BloomFilter.from_footer(f.serialize(), f.type_code)
    assert again.type_code == f.type_code
    assert (again.vector_size, again.nb_hash, len(again.rows)) == (f.vector_size, f.nb_hash, len(f.rows))
    assert again.to_bytes() == f.to_bytes()
    assert again.serialize() == f.serialize()
    assert again.might_contain_many(keys).all()
    if probes:
        assert (again.might_contain_many(probes) == f.might_contain_many(probes)).all()


@settings(max_examples=50, deadline=None)
@given(filters(), KEYS, ADDING, st.lists(KEY, min_size=1, max_size=50))
def test_membership_is_all_k_bits_set_in_some_row(f, keys, adding, probes):
    """The early-exit vectorised test answers exactly as the definition does."""
    _add(f, keys, *adding)
    pos = hash_positions(probes, f.nb_hash, f.vector_size)  # (n, k)
    want = np.array([any(row.bits[p].all() for row in f.rows) for p in pos])
    assert (f.might_contain_many(probes) == want).all()


@settings(max_examples=50, deadline=None)
@given(st.lists(KEY, min_size=1, max_size=20), st.integers(min_value=1, max_value=12),
       st.integers(min_value=1, max_value=2**31 - 1))
def test_vectorised_positions_equal_scalar_java(keys, nb_hash, vector_size):
    pos = hash_positions(keys, nb_hash, vector_size)
    for i, k in enumerate(keys):
        assert pos[i].tolist() == java_positions(k, nb_hash, vector_size), k


SHORT_KEY = st.text(min_size=1, max_size=8).filter(lambda k: len(k.encode()) <= 8)


@settings(max_examples=80, deadline=None)
@given(st.lists(SHORT_KEY, min_size=1, max_size=40), st.integers(min_value=1, max_value=12),
       st.integers(min_value=1, max_value=2**31 - 1))
def test_keys_of_at_most_8_bytes_hash_as_scalar_java(keys, nb_hash, vector_size):
    """Keys of 1-8 bytes take the short path (words from the packed integers, NUL and
    non-ASCII bytes included: Java sign-extends the tail's bytes)."""
    pos = hash_positions(keys, nb_hash, vector_size)
    for i, k in enumerate(keys):
        assert pos[i].tolist() == java_positions(k, nb_hash, vector_size), k
