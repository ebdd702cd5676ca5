"""A footer's bloom filter is decoded only where it is probed (``streamer.table.bloom_bits``):
the bytes it reads equal a full decode's, a parsed filter answers as the filter written,
and it decodes everything once its probes would have paid for that."""

from __future__ import annotations

import base64

import numpy as np
import pytest

from streamer.errors import CorruptDataError
from streamer.table.bloom import DYNAMIC_V0, SIMPLE, BloomFilter
from streamer.table.bloom_bits import Base64Text, LazyBits


@pytest.mark.parametrize("length", [0, 1, 2, 3, 4, 5, 97, 1000])
def test_base64_text_reads_the_bytes_a_full_decode_reads(length: int) -> None:
    rng = np.random.default_rng(length)
    raw = rng.integers(0, 256, length, dtype=np.uint8).tobytes()
    text = Base64Text(base64.b64encode(raw))
    assert len(text) == length
    for start in range(0, length + 1, max(1, length // 7)):
        for stop in (start, min(length, start + 1), min(length, start + 5), length):
            assert text.range(start, stop) == raw[start:stop]
    if length:
        idx = rng.integers(0, length, 500)
        assert text.gather(idx).tobytes() == bytes(raw[i] for i in idx)
    with pytest.raises(ValueError, match="outside"):
        text.range(0, length + 1)


@pytest.mark.parametrize("bad", [b"abc", b"ab!d", b"a===", b"ab=d", b"\xffbcd", b"ab\ncd==="])
def test_base64_text_refuses_what_a_strict_decode_refuses(bad: bytes) -> None:
    with pytest.raises(ValueError):
        Base64Text(bad)


@pytest.mark.parametrize("type_code", [SIMPLE, DYNAMIC_V0])
def test_a_parsed_filter_probes_lazily_and_answers_as_written(type_code: str) -> None:
    if type_code == SIMPLE:
        bf = BloomFilter.new_simple(num_entries=5_000, fpp=1e-6)
    else:
        bf = BloomFilter.new_dynamic(num_entries=2_000, fpp=1e-6, max_entries=5_000)
    members = [f"key-{i}" for i in range(6_000)]
    bf.add_many(members)
    others = [f"other-{i}" for i in range(3_000)]
    back = BloomFilter.from_footer(bf.serialize(), type_code)
    assert all(isinstance(r.bits, LazyBits) for r in back.rows)

    probe = members[:10] + others[:100]
    assert (back.might_contain_many(probe) == bf.might_contain_many(probe)).all()
    assert back.might_contain_many(members[:10]).all()
    # a few probes read a few bytes: the vectors are still undecoded
    assert all(r.bits._packed is None for r in back.rows)

    # many probes: decoded once, and the answers do not change
    for _ in range(8):
        assert (back.might_contain_many(members + others) == bf.might_contain_many(members + others)).all()
    assert all(r.bits._packed is not None for r in back.rows)
    assert back.serialize() == bf.serialize()


def test_lazy_bits_equal_the_packed_bits_they_stand_for() -> None:
    rng = np.random.default_rng(7)
    size = 8 * 1000 + 5  # a last byte with padding bits
    packed = rng.integers(0, 256, (size + 7) // 8, dtype=np.uint8)
    header = b"\x01\x02\x03\x04\x05"  # the vector starts mid-group
    text = Base64Text(base64.b64encode(header + packed.tobytes()))
    lazy = LazyBits(size, text, len(header))
    expected = np.unpackbits(packed, count=size, bitorder="little").view(bool)
    pos = rng.integers(0, size, 200)  # a fifth of the bytes: still read lazily
    assert (lazy.test(pos) == expected[pos]).all()
    assert lazy._packed is None
    assert (lazy.unpacked() == expected).all()  # a full read decodes once
    assert lazy.packed[-1] == packed[-1] & 0x1F  # padding bits past the vector cleared
    with pytest.raises(ValueError, match="past the end"):
        LazyBits(size, text, len(header) + 1)


def test_a_damaged_footer_filter_is_still_refused_when_parsed() -> None:
    bf = BloomFilter.new_simple(num_entries=100, fpp=1e-3)
    bf.add_many(["a", "b"])
    text = bytearray(bf.serialize().encode())
    text[len(text) // 2] = ord("*")
    with pytest.raises(CorruptDataError, match="bloom"):
        BloomFilter.from_footer(bytes(text), SIMPLE)


def test_a_single_position_reads_like_packed_bits() -> None:
    """Indexing one bit of an undecoded vector answers a bool, as ``PackedBits`` does."""
    bf = BloomFilter.new_simple(num_entries=1_000, fpp=1e-3)
    bf.add_many(["a", "b"])
    back = BloomFilter.from_footer(bf.serialize(), SIMPLE)
    bits = back.rows[0].bits
    pos = np.flatnonzero(np.asarray(bf.rows[0].bits))
    assert bits._packed is None
    assert bits[int(pos[0])] is True and bits[int(pos[0]) + 1] == bool(np.asarray(bf.rows[0].bits)[pos[0] + 1])
    assert bits[np.array([[pos[0], pos[1]]])].shape == (1, 2)
    assert bits._packed is None  # still undecoded: a few bytes read
    # the cache counts what it holds: the text until decoded (4 characters per 3 bytes)
    assert back.held_bytes >= back.nbytes * 4 // 3
