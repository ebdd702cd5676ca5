"""Probing with keys prepared once equals probing the keys themselves (issue 13: a lookup
probes a slice's candidates against every member's filter, preparing them once)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from streamer.table.bloom import BloomFilter, PreparedKeys


@settings(max_examples=40, deadline=None)
@given(st.lists(st.text(min_size=1, max_size=14), min_size=1, max_size=300, unique=True),
       st.integers(0, 2**32 - 1))
def test_prepared_subsets_probe_like_the_keys(keys, seed):
    rng = np.random.default_rng(seed)
    arr = pa.array(keys, pa.string())
    bloom = BloomFilter.new_dynamic(16, 1e-3, 64)  # several rows: the dynamic path too
    bloom.add_many(arr.filter(pa.array(rng.random(len(keys)) < 0.5)))
    prepared = PreparedKeys(arr)
    for _ in range(3):
        idx = np.flatnonzero(rng.random(len(keys)) < 0.6)
        expected = bloom.might_contain_many(arr.take(pa.array(idx, pa.int64())))
        assert bloom.might_contain_many(prepared.subset(idx)).tolist() == expected.tolist()
