"""Hudi-compatible bloom filters (``SIMPLE`` and ``DYNAMIC_V0``), byte for byte.

Why byte-compatible: the filter lives in Parquet footers (``org.apache.hudi.bloomfilter``)
that Hudi's own bloom index reads, and our index reads the footers Hudi wrote. So the
hash, the bit layout and the Java ``DataOutput`` serialization must match exactly.

The format, as observed in fixture footers and Hudi's public sources:

* hash: Hadoop's MurmurHash2 variant (hash type 1) over the key's UTF-8 bytes. The ``k``
  positions of a key are chained: ``h_i = murmur(key, seed=h_{i-1})`` starting from seed 0,
  position ``abs(h_i % vector_size)`` with Java's truncating ``%`` on a signed int.
* sizes: ``bits = ceil(n * -ln(p) / ln(2)^2)``, ``k = ceil(ln(2) * bits / n)``.
* a standard filter serializes as ``int32 -1, int32 k, int8 hash_type, int32 bits`` and the
  bit vector packed little-endian within each byte (bit ``i`` -> byte ``i//8``, ``1<<(i%8)``).
* ``DYNAMIC_V0`` = that header, then ``int32 rows_capacity, int32 current_row_count,
  int32 n_rows`` and each row as a standard filter. A new row opens every ``num_entries``
  keys until ``rows * num_entries >= max_entries``; then keys go round-robin over the rows.
* the whole thing is base64 (standard alphabet, padded).

Hashing is vectorised with numpy over keys of equal word count (one group per count); the
seed-independent part of the hash is computed once per key, not once per hash function.
"""

from __future__ import annotations

import base64
import math
import struct
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from streamer.data import packed_bytes
from streamer.errors import CorruptDataError
from streamer.table.bloom_bits import Base64Text, LazyBits, PackedBits

SIMPLE = "SIMPLE"
DYNAMIC_V0 = "DYNAMIC_V0"
MURMUR_HASH = 1

#: Hudi's defaults (``hoodie.index.bloom.num_entries``, ``.fpp``,
#: ``hoodie.bloom.index.filter.dynamic.max.entries``).
DEFAULT_NUM_ENTRIES = 60_000
DEFAULT_FPP = 1e-9
DEFAULT_MAX_ENTRIES = 100_000

_M = np.uint32(0x5BD1E995)
_FILTER_VERSION = -1


def bit_size(num_entries: int, fpp: float) -> int:
    return int(math.ceil(num_entries * (-math.log(fpp) / (math.log(2) * math.log(2)))))


def num_hashes(bits: int, num_entries: int) -> int:
    return int(math.ceil(math.log(2) * bits / num_entries))


# -- hashing ----------------------------------------------------------------------------------
# Hadoop's MurmurHash over a key mixes each 4-byte word with constants only
# (``k = w*m; k ^= k>>>24; k *= m``) before folding it into the running hash, and the
# tail bytes fold in as one xor; neither depends on the seed. The k hashes of a key are
# chained (the seed of hash i is hash i-1), so we mix the words and the tail once per
# key and each further hash costs two uint32 operations per word plus the finalizer.
# All of it is numpy over keys of equal word count (one group per count), read
# straight from the Arrow offsets/data buffers: no per-key Python.

_CHUNK = 1 << 15  # keys per membership-test chunk (bounds the (key, row) pair arrays)


@dataclass
class _LengthGroup:
    """Keys with the same number of whole 4-byte words: their positions and the
    seed-independent part of their hash."""

    idx: np.ndarray  # positions of these keys in the input (int64)
    length: np.ndarray | np.uint32  # byte length, per key (or one for all)
    kmix: np.ndarray  # (words, m) uint32: mixed words, one contiguous row per word
    tail: np.ndarray | None  # (m,) uint32: the tail bytes' xor term; None: no key has a tail
    has_tail: np.ndarray | None  # (m,) bool when only some keys have a tail

    def take(self, sel: np.ndarray) -> _LengthGroup:
        length = self.length[sel] if isinstance(self.length, np.ndarray) else self.length
        tail = None if self.tail is None else self.tail[sel]
        has_tail = None if self.has_tail is None else self.has_tail[sel]
        return _LengthGroup(self.idx[sel], length, self.kmix[:, sel], tail, has_tail)


def _length_groups(keys: Sequence[str] | pa.Array | pa.ChunkedArray,
                   short: np.ndarray | None = None) -> tuple[int, list[_LengthGroup]]:
    """The input's keys grouped by word count, mixed and ready to hash (``short``: the
    same keys as :func:`streamer.data.short_keys` integers, when the caller has them).

    Each key's words are read as little-endian uint32 at any byte offset of the data (an
    unaligned view), one gather per word rather than one per byte; the tail's bytes come
    from one more word read past the key's whole words (the data is padded for the last key).
    """
    arr = _as_binary(keys)
    n = len(arr)
    if n == 0:
        return 0, []
    offsets = np.frombuffer(arr.buffers()[1], dtype=np.int32, count=n + 1, offset=arr.offset * 4)
    if short is not None and len(short) == n:
        return n, _short_groups(short, np.diff(offsets))
    packed = packed_bytes(arr)
    if packed is not None:
        return n, _short_groups(*packed[:2])
    data = np.frombuffer(arr.buffers()[2], dtype=np.uint8) if arr.buffers()[2] else np.empty(0, np.uint8)
    lengths = np.diff(offsets)
    if (lengths == 0).any():
        raise ValueError("bloom filter keys must not be empty (Hudi rejects zero-length keys)")
    padded = np.zeros(int(offsets[-1]) + 4, dtype=np.uint8)
    padded[: int(offsets[-1])] = data[: int(offsets[-1])]
    words_at = np.ndarray(shape=(len(padded) - 3,), dtype="<u4", buffer=padded, strides=(1,))
    starts_all = offsets[:-1]
    words_all = lengths >> 2
    lo, hi = int(words_all.min()), int(words_all.max())
    uniq = [lo] if lo == hi else [int(w) for w in np.flatnonzero(np.bincount(words_all))]
    groups = []
    for nwords in uniq:
        idx = np.arange(n, dtype=np.int64) if len(uniq) == 1 else np.flatnonzero(words_all == nwords)
        m = len(idx)
        starts = starts_all if len(uniq) == 1 else starts_all[idx]
        lens = lengths if len(uniq) == 1 else lengths[idx]
        kmix = np.empty((nwords, m), dtype=np.uint32)
        with np.errstate(over="ignore"):
            for j in range(nwords):
                k = kmix[j]
                np.take(words_at, starts + 4 * j, out=k)
                k *= _M
                k ^= k >> np.uint32(24)
                k *= _M
        left = lens - nwords * 4
        tail = has_tail = None
        if left.any():
            tail = _tail_terms(words_at[starts + nwords * 4], left)
            if not left.all():
                has_tail = left > 0
        length = np.uint32(lens[0]) if (lens == lens[0]).all() else lens.astype(np.uint32)
        groups.append(_LengthGroup(idx, length, kmix, tail, has_tail))
    return n, groups


def _short_groups(packed: np.ndarray, lengths: np.ndarray) -> list[_LengthGroup]:
    """:func:`_length_groups` of keys of at most 8 bytes given as
    :func:`streamer.data.packed_bytes` (big-endian, zero-padded): their two little-endian
    words are the halves byte-swapped, read for all keys at once (the general path gathers
    each word from the bytes, at a few times the cost)."""
    halves = (packed >> np.uint64(32)).astype(np.uint32).byteswap(), packed.astype(np.uint32).byteswap()
    words_all = lengths >> 2
    present = np.flatnonzero(np.bincount(words_all))
    groups = []
    for nwords in present.tolist():
        idx = np.arange(len(lengths), dtype=np.int64) if len(present) == 1 else np.flatnonzero(words_all == nwords)
        whole = len(present) == 1
        lens = lengths if whole else lengths[idx]
        kmix = np.empty((nwords, len(idx)), dtype=np.uint32)
        for j in range(nwords):
            k = kmix[j]
            np.copyto(k, halves[j] if whole else halves[j][idx])
            k *= _M
            k ^= k >> np.uint32(24)
            k *= _M
        left = lens - nwords * 4
        tail = has_tail = None
        if nwords < 2 and left.any():
            tail = _tail_terms(halves[nwords] if whole else halves[nwords][idx], left)
            if not left.all():
                has_tail = left > 0
        length = np.uint32(lens[0]) if (lens == lens[0]).all() else lens.astype(np.uint32)
        groups.append(_LengthGroup(idx, length, kmix, tail, has_tail))
    return groups


def _tail_terms(word: np.ndarray, left: np.ndarray) -> np.ndarray:
    """The tail's xor term per key, from the word that starts at its tail (uint32, little
    endian: byte ``i`` of the tail is ``word >> 8i``) and the tail's length (0-3).

    Hadoop's MurmurHash folds sign-extended tail bytes in as ``b0 << 16 ^ b1 << 8 ^ b2``
    for three bytes, ``b0 << 8 ^ b1`` for two and ``b0`` for one.
    """
    # all in uint32, which wraps as Java's int does: byte i sign-extended is
    # (b ^ 0x80) - 0x80, and it goes in shifted by 8 * (left - 1 - i) when i < left
    word = word.astype(np.uint32, copy=False)
    left = left.astype(np.uint32, copy=False)
    out = np.zeros(len(word), dtype=np.uint32)
    for i in range(3):
        b = (word >> np.uint32(8 * i)) & np.uint32(0xFF)
        signed = (b ^ np.uint32(0x80)) - np.uint32(0x80)
        inside = left > np.uint32(i)
        shift = np.where(inside, (left - np.uint32(1 + i)) * np.uint32(8), np.uint32(0))
        out ^= (signed << shift) * inside.astype(np.uint32)
    return out


class PreparedKeys:
    """Keys grouped by length and mixed once, to probe many filters (or subsets of the
    keys against each): a lookup probes a slice's candidates against every member's
    filter, and preparing them was a third of that cost when redone per member."""

    def __init__(self, keys: Sequence[str] | pa.Array | pa.ChunkedArray | None = None) -> None:
        self.n, self.groups = _length_groups(keys) if keys is not None else (0, [])

    def __len__(self) -> int:
        return self.n

    def subset(self, idx: np.ndarray) -> PreparedKeys:
        """The keys at positions ``idx`` (ascending), renumbered 0..len(idx)-1."""
        remap = np.full(self.n, -1, dtype=np.int64)
        remap[idx] = np.arange(len(idx), dtype=np.int64)
        out = PreparedKeys()
        out.n = len(idx)
        for g in self.groups:
            sel = np.flatnonzero(remap[g.idx] >= 0)
            if len(sel):
                part = g.take(sel)
                part.idx = remap[part.idx]
                out.groups.append(part)
        return out


def _murmur_next(seed: np.ndarray, g: _LengthGroup, out: np.ndarray | None = None,
                 tmp: np.ndarray | None = None) -> np.ndarray:
    """One Hadoop MurmurHash of the group's keys with per-key seeds (uint32; into ``out``
    when given, which may be ``seed`` itself; ``tmp``: scratch of the same shape).

    (uint32 array arithmetic wraps silently, as Java's int arithmetic does.)
    """
    h = np.bitwise_xor(seed, g.length, out=out)
    for j in range(g.kmix.shape[0]):
        h *= _M
        h ^= g.kmix[j]
    if g.tail is not None:
        if g.has_tail is None:
            h ^= g.tail
            h *= _M
        else:
            t = h ^ g.tail
            t *= _M
            np.copyto(h, t, where=g.has_tail)
    tmp = np.right_shift(h, np.uint32(13), out=tmp)
    h ^= tmp
    h *= _M
    np.right_shift(h, np.uint32(15), out=tmp)
    h ^= tmp
    return h


def _positions(h: np.ndarray, vector_size: int) -> np.ndarray:
    """Java's ``Math.abs(h % vectorSize)`` for int32 ``h`` (given as uint32), as uint32."""
    a = np.abs(h.view(np.int32)).view(np.uint32)  # abs(MIN_VALUE) wraps to 2**31: still right
    return np.remainder(a, np.uint32(vector_size), out=a)


def hash_chain(keys: Sequence[str] | pa.Array | pa.ChunkedArray, nb_hash: int, *,
               in_order: bool = True, short: np.ndarray | None = None) -> np.ndarray:
    """The raw chained hashes ``(nb_hash, n)`` uint32 of each key, in input order
    (``in_order=False``: grouped by the keys' word counts, each group in input order -
    the keys' order when they are of one count - for a filter that may take them so,
    without putting each hash back in input order).

    The chain does not depend on the filter's size, so one chain serves every filter the
    same keys go into (use its first ``k`` rows for a filter with ``k`` hashes). ``short``:
    the keys as :func:`streamer.data.short_keys` integers, if the caller has them.
    """
    n, groups = _length_groups(keys, short)
    out = np.empty((nb_hash, n), dtype=np.uint32)
    direct = len(groups) == 1 or not in_order  # hash straight into (a slice of) the rows
    start = 0
    for g in groups:
        m = len(g.idx)
        h = np.zeros(m, dtype=np.uint32)
        tmp = np.empty_like(h)
        for i in range(nb_hash):
            if direct:
                h = _murmur_next(h, g, out=out[i, start : start + m], tmp=tmp)
            else:
                h = _murmur_next(h, g, out=h, tmp=tmp)
                out[i, g.idx] = h
        start += m
    return out


def hash_positions(keys: Sequence[str] | pa.Array, nb_hash: int, vector_size: int) -> np.ndarray:
    """Bit positions (n, nb_hash) int64 for each key, in input order (Hudi's HashFunction)."""
    chain = hash_chain(keys, nb_hash)
    return _positions(chain, vector_size).T.astype(np.int64)


def _as_binary(keys: Sequence[str] | pa.Array | pa.ChunkedArray) -> pa.Array:
    if isinstance(keys, pa.ChunkedArray):
        keys = keys.combine_chunks()
    if not isinstance(keys, pa.Array):
        keys = pa.array(list(keys), type=pa.string())
    if keys.null_count:
        raise ValueError("bloom filter keys must not be null")
    if pa.types.is_large_string(keys.type) or pa.types.is_large_binary(keys.type):
        keys = keys.cast(pa.string() if pa.types.is_large_string(keys.type) else pa.binary())
    if pa.types.is_string(keys.type):
        keys = keys.view(pa.binary())
    if not pa.types.is_binary(keys.type):
        keys = pc.cast(keys, pa.string()).view(pa.binary())
    return keys


# -- filters ----------------------------------------------------------------------------------
@dataclass
class _Row:
    """One standard bloom filter: its bits packed (:class:`PackedBits`), as serialized."""

    vector_size: int
    bits: PackedBits = field(repr=False)

    def __post_init__(self) -> None:
        if not isinstance(self.bits, PackedBits):  # a bool array (one byte per bit)
            self.bits = PackedBits.from_bools(self.bits)

    @classmethod
    def empty(cls, vector_size: int) -> _Row:
        return cls(vector_size, PackedBits(vector_size))

    def packed(self) -> bytes:
        return self.bits.packed.tobytes()


class BloomFilter:
    """A Hudi bloom filter of type ``SIMPLE`` or ``DYNAMIC_V0``."""

    def __init__(
        self,
        type_code: str,
        vector_size: int,
        nb_hash: int,
        hash_type: int = MURMUR_HASH,
        *,
        rows: list[_Row] | None = None,
        row_capacity: int = 0,
        max_entries: int = 0,
        current_count: int = 0,
    ) -> None:
        if type_code not in (SIMPLE, DYNAMIC_V0):
            raise ValueError(f"unsupported bloom filter type code {type_code!r}")
        if hash_type != MURMUR_HASH:
            raise ValueError(f"unsupported bloom hash type {hash_type} (only murmur=1)")
        self.type_code = type_code
        self.vector_size = vector_size
        self.nb_hash = nb_hash
        self.hash_type = hash_type
        self.rows = rows if rows is not None else [_Row.empty(vector_size)]
        self.row_capacity = row_capacity  # "nr": keys per row before a new one opens
        self.max_entries = max_entries  # not serialized by Hudi; only drives row growth
        self.current_count = current_count
        # Round-robin state once the row bound is reached (not serialized, as in Hudi).
        self._reached_max = False
        self._rr_index = 0

    # -- construction ---------------------------------------------------------------------
    @classmethod
    def new_simple(cls, num_entries: int = DEFAULT_NUM_ENTRIES, fpp: float = DEFAULT_FPP) -> BloomFilter:
        bits = bit_size(num_entries, fpp)
        return cls(SIMPLE, bits, num_hashes(bits, num_entries))

    @classmethod
    def new_dynamic(
        cls,
        num_entries: int = DEFAULT_NUM_ENTRIES,
        fpp: float = DEFAULT_FPP,
        max_entries: int = DEFAULT_MAX_ENTRIES,
        *,
        max_hashes: int | None = None,
    ) -> BloomFilter:
        """Hudi's sizing for ``num_entries`` keys at ``fpp``; ``max_hashes`` caps the hash
        functions (the bits stay: fewer hashes per key, a somewhat higher false-positive
        rate - see ``streamer.index.rfc06.BloomParams.block_hashes``). The count is in the
        serialized header, so every reader probes with the filter's own."""
        bits = bit_size(num_entries, fpp)
        k = num_hashes(bits, num_entries)
        return cls(
            DYNAMIC_V0,
            bits,
            k if max_hashes is None else max(1, min(k, max_hashes)),
            row_capacity=num_entries,
            max_entries=max_entries,
        )

    @classmethod
    def from_footer(cls, serialized: str | bytes, type_code: str | bytes) -> BloomFilter:
        """Parse a footer's base64 filter. Raises :class:`CorruptDataError` on bad bytes.

        The bit vectors stay in the text until probed (:class:`LazyBits`): only the
        headers are decoded here, after the whole text's alphabet and padding are checked.
        """
        if isinstance(type_code, bytes):
            type_code = type_code.decode()
        if isinstance(serialized, str):
            serialized = serialized.encode("ascii", errors="replace")
        try:
            return cls._parse(Base64Text(bytes(serialized)), type_code or SIMPLE)
        except (ValueError, struct.error, IndexError) as e:
            raise CorruptDataError(f"unreadable {type_code} bloom filter: {e}") from e

    @classmethod
    def _parse(cls, raw: Base64Text, type_code: str) -> BloomFilter:
        nb_hash, hash_type, vsize, pos = _read_filter_header(raw, 0)
        if type_code.startswith("DYNAMIC"):
            nr, cur, nrows = struct.unpack(">iii", raw.range(pos, pos + 12))
            pos += 12
            rows = []
            for _ in range(nrows):
                _, _, rvs, pos = _read_filter_header(raw, pos)
                rows.append(_Row(rvs, LazyBits(rvs, raw, pos)))
                pos += (rvs + 7) // 8
            f = cls(DYNAMIC_V0, vsize, nb_hash, hash_type, rows=rows, row_capacity=nr, current_count=cur)
            # Hudi does not serialize max entries; assume the default bound so adds keep
            # the same row growth a Hudi writer with default config would have.
            f.max_entries = max(DEFAULT_MAX_ENTRIES, nr * nrows)
        else:
            f = cls(SIMPLE, vsize, nb_hash, hash_type, rows=[_Row(vsize, LazyBits(vsize, raw, pos))])
            pos += (vsize + 7) // 8
        if pos != len(raw):
            raise ValueError(f"{len(raw) - pos} trailing bytes after the filter")
        return f

    # -- use -------------------------------------------------------------------------------
    def add(self, key: str) -> None:
        self.add_many([key])

    def add_many(self, keys: Iterable[str] | pa.Array | pa.ChunkedArray, *, in_order: bool = True,
                 short: np.ndarray | None = None) -> None:
        """Add keys in order (order decides which dynamic row each key lands in).

        ``in_order=False``: in an order of :func:`hash_chain`'s choosing. Every key added
        is in the filter either way and the rows fill the same; only which row holds a
        key differs, which no reader asks (a key is probed in every row). Keys of several
        lengths then skip putting each hash back in input order (~2% of a 1M-row upsert).
        ``short``: the keys as :func:`streamer.data.short_keys` integers, if made already.
        """
        if not isinstance(keys, pa.Array | pa.ChunkedArray | list | tuple):
            keys = list(keys)
        self.add_hashes(hash_chain(keys, self.nb_hash, in_order=in_order, short=short))

    def add_hashes(self, chain: np.ndarray) -> None:
        """Add keys given by their :func:`hash_chain` (at least ``nb_hash`` rows), in order."""
        if chain.shape[0] < self.nb_hash:
            raise ValueError(f"hash chain has {chain.shape[0]} hashes, the filter needs {self.nb_hash}")
        n = chain.shape[1]
        if n == 0:
            return
        pos = _positions(chain[: self.nb_hash], self.vector_size)  # (k, n)
        if self.type_code == SIMPLE:
            self.rows[0].bits.set(pos)
            return
        start = 0
        while start < n:
            row, take = self._next_run(n - start)
            chunk = pos[:, start : start + take]
            if row is None:  # round-robin over all rows, one key per row in turn
                nrows = len(self.rows)
                which = (self._rr_index + np.arange(take)) % nrows
                for r in range(nrows):
                    self.rows[r].bits.set(chunk[:, which == r])
                self._rr_index += take
            else:
                self.rows[row].bits.set(chunk)
            self.current_count += take
            start += take

    def _next_run(self, remaining: int) -> tuple[int | None, int]:
        """Which row the next keys go to and how many of them (Hudi's getActiveStandardBF)."""
        if self._reached_max:
            return None, remaining
        nr = self.row_capacity
        if self.current_count >= nr:
            if len(self.rows) * nr < self.max_entries:
                self.rows.append(_Row.empty(self.vector_size))
                self.current_count = 0
            else:
                # The first key after the bound goes to row 0, then round-robin from 0.
                self._reached_max = True
                return 0, 1
        return len(self.rows) - 1, min(remaining, nr - self.current_count)

    def might_contain(self, key: str) -> bool:
        return bool(self.might_contain_many([key])[0])

    def might_contain_many(
        self, keys: Sequence[str] | pa.Array | pa.ChunkedArray | PreparedKeys
    ) -> np.ndarray:
        """Vectorised membership test: a bool per key (in any row, like Hudi's dynamic filter).

        Hashes are computed lazily along the chain and a (key, row) pair is dropped at its
        first unset bit, so a key that is not there costs a couple of hashes, not ``k``.
        """
        n, groups = (keys.n, keys.groups) if isinstance(keys, PreparedKeys) else _length_groups(keys)
        hit = np.zeros(n, dtype=bool)
        if n == 0:
            return hit
        gathers = [r.bits.gather for r in self.rows]
        for g in groups:
            for lo in range(0, len(g.idx), _CHUNK):
                part = g if len(g.idx) <= _CHUNK else g.take(np.arange(lo, min(lo + _CHUNK, len(g.idx))))
                hit[part.idx] = self._test_group(part, gathers)
        return hit

    @property
    def nbytes(self) -> int:
        """Memory the filter's bits take (packed: an eighth of a byte per bit)."""
        return sum(r.bits.nbytes for r in self.rows)

    @property
    def held_bytes(self) -> int:
        """Memory the filter may hold: a parsed one keeps its base64 text until decoded."""
        return sum(r.bits.held_bytes for r in self.rows)

    def _test_group(self, g: _LengthGroup, gathers: Sequence[Callable[[np.ndarray], np.ndarray]]) -> np.ndarray:
        m = len(g.idx)
        vsize = self.vector_size
        acc = [np.ones(m, dtype=np.uint8) for _ in gathers]  # per row: 1 while every bit so far is set
        where = np.arange(m, dtype=np.int64)  # current position -> position in g
        cur = g
        h = np.zeros(m, dtype=np.uint32)
        for _ in range(self.nb_hash):
            h = _murmur_next(h, cur)
            pos = _positions(h, vsize)
            byte = pos >> np.uint32(3)
            shift = (pos & np.uint32(7)).astype(np.uint8)
            alive = None
            for a, gather in zip(acc, gathers, strict=True):
                a &= gather(byte) >> shift  # a is 0/1: keeps only the tested bit
                alive = a if alive is None else (alive | a)
            if alive is None:  # a filter has at least one bit vector
                raise ValueError("bloom filter without bit vectors")
            alive = alive.view(bool)
            n_alive = int(np.count_nonzero(alive))
            if n_alive == 0:
                return np.zeros(m, dtype=bool)
            if n_alive * 4 < len(h) * 3:  # compact once a quarter has dropped out
                sel = np.flatnonzero(alive)
                cur = cur.take(sel)
                h = h[sel]
                where = where[sel]
                acc = [a[sel] for a in acc]
        alive = acc[0].copy()
        for a in acc[1:]:
            alive |= a
        out = np.zeros(m, dtype=bool)
        out[where[alive.view(bool)]] = True
        return out

    # -- bytes -----------------------------------------------------------------------------
    def to_bytes(self) -> bytes:
        parts = [_filter_header(self.nb_hash, self.hash_type, self.vector_size)]
        if self.type_code == DYNAMIC_V0:
            parts.append(struct.pack(">iii", self.row_capacity, self.current_count, len(self.rows)))
            for row in self.rows:
                parts.append(_filter_header(self.nb_hash, self.hash_type, row.vector_size))
                parts.append(row.packed())
        else:
            parts.append(self.rows[0].packed())
        return b"".join(parts)

    def serialize(self) -> str:
        return base64.b64encode(self.to_bytes()).decode("ascii")


def _filter_header(nb_hash: int, hash_type: int, vector_size: int) -> bytes:
    return struct.pack(">iibi", _FILTER_VERSION, nb_hash, hash_type, vector_size)


def _read_filter_header(raw: Base64Text, pos: int) -> tuple[int, int, int, int]:
    ver, nb_hash, hash_type, vsize = struct.unpack(">iibi", raw.range(pos, pos + 13))
    if ver != _FILTER_VERSION:
        raise ValueError(f"unsupported filter version {ver} at byte {pos}")
    if vsize <= 0 or nb_hash <= 0:
        raise ValueError(f"impossible filter sizes (bits={vsize}, hashes={nb_hash})")
    return nb_hash, hash_type, vsize, pos + 13
