"""Bloom filter unit tests: Java semantics of the hash, row growth, serialization."""

from __future__ import annotations

import base64
import struct

import numpy as np
import pyarrow as pa
import pytest

from streamer.errors import CorruptDataError
from streamer.table.bloom import (
    DYNAMIC_V0,
    SIMPLE,
    BloomFilter,
    bit_size,
    hash_positions,
    num_hashes,
)
from tests.support.java_hash import java_positions

KEYS = ["1", "ab", "abc", "abcd", "TXN-001", "id:1,name:Alice", "ünïcødé-κλειδί", "\u00ff\u00fe\u00fd", "x" * 37]


def test_sizes_match_hudi_defaults() -> None:
    bits = bit_size(60_000, 1e-9)
    assert bits == 2_587_966  # the vector size in every fixture footer
    assert num_hashes(bits, 60_000) == 30


def test_vectorised_hash_matches_scalar_java_semantics() -> None:
    pos = hash_positions(KEYS, 30, 2_587_966)
    for i, key in enumerate(KEYS):
        assert pos[i].tolist() == java_positions(key, 30, 2_587_966), key


def test_add_then_might_contain_and_no_false_negatives() -> None:
    bf = BloomFilter.new_dynamic()
    bf.add_many(pa.array(KEYS))
    assert all(bf.might_contain(k) for k in KEYS)
    assert not bf.might_contain("definitely-not-there")


def test_dynamic_rows_grow_then_round_robin() -> None:
    bf = BloomFilter.new_dynamic(num_entries=10, fpp=0.01, max_entries=25)
    keys = [f"k{i}" for i in range(45)]
    bf.add_many(keys[:7])
    bf.add_many(keys[7:])  # split adds must behave like one sequential add
    assert len(bf.rows) == 3  # 10 + 10 + 10 >= 25 -> bound reached at the third row
    ref = BloomFilter.new_dynamic(num_entries=10, fpp=0.01, max_entries=25)
    for k in keys:
        ref.add(k)
    assert ref.serialize() == bf.serialize()
    assert bf.might_contain_many(keys).all()
    # after the bound: key 30 -> row 0, then round robin 0,1,2,0...
    p30 = hash_positions([keys[30]], bf.nb_hash, bf.vector_size)[0]
    assert bf.rows[0].bits[p30].all()


def test_serialization_layout_and_roundtrip() -> None:
    bf = BloomFilter.new_dynamic(num_entries=100, fpp=0.01, max_entries=1000)
    bf.add_many(["a", "b", "c"])
    raw = base64.b64decode(bf.serialize())
    ver, k, ht, vs, nr, cur, rows = struct.unpack_from(">iibiiii", raw, 0)
    assert (ver, k, ht, vs, nr, cur, rows) == (-1, bf.nb_hash, 1, bf.vector_size, 100, 3, 1)
    back = BloomFilter.from_footer(bf.serialize(), DYNAMIC_V0)
    assert back.serialize() == bf.serialize()
    assert back.might_contain("b")


def test_simple_filter_roundtrip() -> None:
    bf = BloomFilter.new_simple(1000, 0.001)
    bf.add_many(KEYS)
    raw = base64.b64decode(bf.serialize())
    assert len(raw) == 13 + (bf.vector_size + 7) // 8
    back = BloomFilter.from_footer(bf.serialize(), SIMPLE)
    assert back.might_contain_many(KEYS).all()
    # bit i lives in byte i // 8 at 1 << (i % 8)
    pos = hash_positions(["1"], bf.nb_hash, bf.vector_size)[0]
    bits = np.frombuffer(raw[13:], dtype=np.uint8)
    assert all(bits[p // 8] & (1 << (p % 8)) for p in pos)


@pytest.mark.parametrize("bad", ["not base64!", base64.b64encode(b"\x00\x00\x00\x01").decode(), ""])
def test_corrupt_filter_raises_corrupt_data(bad: str) -> None:
    with pytest.raises(CorruptDataError):
        BloomFilter.from_footer(bad, DYNAMIC_V0)


def test_empty_and_null_keys_rejected() -> None:
    bf = BloomFilter.new_simple(10, 0.1)
    with pytest.raises(ValueError):
        bf.add("")
    with pytest.raises(ValueError):
        bf.add_many(pa.array(["a", None]))


def test_bits_stay_packed_in_memory() -> None:
    """Issue 13: a parsed filter keeps its bits packed, as serialized (an eighth of a byte
    per bit), so the footer cache holds 8x the filters; adds and tests are unchanged."""
    bf = BloomFilter.new_dynamic(num_entries=1_000, fpp=1e-6, max_entries=2_500)
    keys = [f"key-{i}" for i in range(3_000)]
    bf.add_many(keys[:5])  # few positions: set in place
    bf.add_many(keys[5:])  # many: one scatter into the unpacked bits
    back = BloomFilter.from_footer(bf.serialize(), DYNAMIC_V0)
    assert back.serialize() == bf.serialize()
    assert back.nbytes == sum((r.vector_size + 7) // 8 for r in back.rows) == len(back.rows) * ((bf.vector_size + 7) // 8)
    assert back.might_contain_many(keys).all()
    # a bool vector's row reads like one: position lookups, slices, numpy conversion
    pos = hash_positions(keys[:50], bf.nb_hash, bf.vector_size)
    row = back.rows[0]
    assert row.bits[pos].shape == pos.shape
    full = np.asarray(row.bits)
    assert full.dtype == bool and len(full) == bf.vector_size
    assert (row.bits[pos] == full[pos]).all() and row.bits[int(pos[0, 0])] == full[pos[0, 0]]
    row.bits[pos[0]] = False
    assert not row.bits[pos[0]].any()
    row.bits[:] = False
    assert not row.bits.any()


def test_padding_bits_of_a_parsed_vector_are_cleared() -> None:
    """Bits past the vector's size in its last byte re-serialize as zero (as before)."""
    bf = BloomFilter.new_simple(num_entries=10, fpp=0.05)
    assert bf.vector_size % 8
    raw = bytearray(bf.to_bytes())
    raw[-1] |= 0xFF
    back = BloomFilter.from_footer(base64.b64encode(bytes(raw)).decode(), "SIMPLE")
    assert back.to_bytes()[-1] == (1 << (bf.vector_size % 8)) - 1


def test_keys_added_in_any_order_are_all_in_the_filter():
    """``in_order=False`` (block filters): keys of several lengths hash in groups by word
    count; every key added answers present, the dynamic rows fill to the same counts, and
    keys of one word count give the very filter an in-order add gives."""
    words = [f"k{i}" for i in range(0, 30_000, 3)] + [f"key-{i:09d}" for i in range(5_000)]
    mixed = pa.array(np.random.default_rng(3).permutation(np.array(words, dtype=object)).tolist())
    for keys in (mixed, pa.array([f"{i:07d}" for i in range(7_000)])):
        ordered = BloomFilter.new_dynamic(3_000, 1e-6, 12_000)
        ordered.add_many(keys)
        grouped = BloomFilter.new_dynamic(3_000, 1e-6, 12_000)
        grouped.add_many(keys, in_order=False)
        assert grouped.might_contain_many(keys).all()
        assert len(grouped.rows) == len(ordered.rows) and grouped.current_count == ordered.current_count
        same = len({len(k) // 4 for k in keys.to_pylist()}) == 1
        assert (grouped.serialize() == ordered.serialize()) == same
