"""RFC-06 index metadata: what a Parquet data block's footer says about its keys.

Each Parquet data block carries, in its Parquet key-value metadata (the only place
other Hudi readers ignore):

* for the block itself, Hudi's own base-file keys: ``org.apache.hudi.bloomfilter``,
  ``hoodie_bloom_filter_type_code``, ``hoodie_min_record_key``, ``hoodie_max_record_key``
  - so the block is indexable exactly like a base file (its filter sized to its keys);
* for the slice's log blocks so far, their key *range* only, under
  ``mor_streamer.logs.min_record_key`` / ``max_record_key``: two strings.

Why no cumulative filter: a filter of every log key of the slice,
rewritten into each new block, costs O(blocks^2) bytes per slice. Measured with
``benchmarks/bench_bytes.py`` (a 100k upsert, whose rows are 2.9 MB as plain Parquet):
the cumulative filters were 0.77 MB of the 5.95 MB it wrote at 1M rows and 9.6 MB of
14.8 MB at 3M, growing with the table, while each block's own filter is written once
(O(keys) bytes). A summary written only at doubling points (Fenwick-style, O(log n)
footers per lookup) still writes each key's bits ~log2(n)/2 times. What the cumulative
filter saved - reading each block's footer - a lookup mostly pays anyway: with updates
spread over the table every slice has candidates, and then every member's footer was
read to find which member holds them. And immutable footers are read and parsed once
per process (:mod:`streamer.index.footer_cache`), so a warm lookup probes the blocks'
parsed filters without I/O (the benchmark prints the warm upsert's cost beside the
bytes). The cumulative key range is kept because it is free (two keys): keys outside
it (time-ordered keys, a cold file group) still cost only the newest block's footer
and the base file's.

Blocks' own filters have the bits of ``BloomParams.block_fpp`` (1e-6: 29 bits per key)
and 10 hash functions instead of that rate's 20 (``block_hashes``: ~5e-6 false
positives), base files Hudi's ``fpp`` (1e-9) and its 30: Hudi's bloom index reads our
base files' filters, nobody but us reads a block's, and a false positive costs one
key-column read of that block.

Older formats stay readable and indexable: blocks that carry a cumulative filter of the
logs (``mor_streamer.logs.bloomfilter``) or of the whole slice (``mor_streamer.slice.*``,
base keys included) are looked up by it as before; the next block written after them
carries the range only. Summaries can only over-approximate (keys later deleted, or in
a rolled-back block, stay in): that costs a false positive, never a miss.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from streamer.table.bloom import BloomFilter

BLOOM_KEY = "org.apache.hudi.bloomfilter"
BLOOM_TYPE_KEY = "hoodie_bloom_filter_type_code"
MIN_KEY = "hoodie_min_record_key"
MAX_KEY = "hoodie_max_record_key"

SLICE_PREFIX = "mor_streamer.slice."
SLICE_BLOOM_KEY = SLICE_PREFIX + "bloomfilter"
SLICE_BLOOM_TYPE_KEY = SLICE_PREFIX + "bloom_filter_type_code"
SLICE_MIN_KEY = SLICE_PREFIX + "min_record_key"
SLICE_MAX_KEY = SLICE_PREFIX + "max_record_key"
SLICE_BASE_INSTANT_KEY = SLICE_PREFIX + "base_instant"

LOGS_PREFIX = "mor_streamer.logs."
LOGS_BLOOM_KEY = LOGS_PREFIX + "bloomfilter"
LOGS_BLOOM_TYPE_KEY = LOGS_PREFIX + "bloom_filter_type_code"
LOGS_MIN_KEY = LOGS_PREFIX + "min_record_key"
LOGS_MAX_KEY = LOGS_PREFIX + "max_record_key"


def _kv_names(slice_level: bool, logs_level: bool) -> tuple[str, str, str, str]:
    if logs_level:
        return (LOGS_BLOOM_KEY, LOGS_BLOOM_TYPE_KEY, LOGS_MIN_KEY, LOGS_MAX_KEY)
    if slice_level:
        return (SLICE_BLOOM_KEY, SLICE_BLOOM_TYPE_KEY, SLICE_MIN_KEY, SLICE_MAX_KEY)
    return (BLOOM_KEY, BLOOM_TYPE_KEY, MIN_KEY, MAX_KEY)


@dataclass(frozen=True)
class BloomParams:
    """Sizing of the filters we write.

    Per-file filters are sized to the keys they hold (capped at Hudi's ``num_entries``),
    so a small block does not carry a 300 KB footer: base files at Hudi's false-positive
    rate ``fpp``, log blocks at ``block_fpp`` (see the module docstring). The
    ``slice_*`` fields sized the cumulative filter older blocks carried; it is only
    rebuilt now for tests and tools that write the old format.
    """

    num_entries: int = 60_000
    fpp: float = 1e-9
    max_entries: int = 100_000
    slice_num_entries: int = 5_000
    slice_fpp: float = 1e-6
    slice_max_entries: int = 200_000
    block_fpp: float = 1e-6
    #: Hash functions of a block's filter. Why not the rate's optimum (20 at 1e-6): every
    #: key written is hashed that many times, and on a 1M-row upsert the block filters
    #: were ~20% of the CPU (benchmarks/RESULTS.md, "Large batches"). With the same 29
    #: bits per key, 10 hashes give ~4.8e-6 false positives per probe, 8 give 1.2e-5;
    #: keys not in a block leave its filter after a hash or two either way.
    block_hashes: int = 10

    def sized_for(self, n: int) -> BloomFilter:
        """A base file's filter for ``n`` keys."""
        entries = max(128, min(n, self.num_entries))
        return BloomFilter.new_dynamic(entries, self.fpp, max(entries, self.max_entries))

    def block_sized_for(self, n: int) -> BloomFilter:
        """A log block's own filter for ``n`` keys."""
        entries = max(128, min(n, self.num_entries))
        return BloomFilter.new_dynamic(entries, self.block_fpp, max(entries, self.max_entries),
                                       max_hashes=self.block_hashes)

    def new_slice(self) -> BloomFilter:
        return BloomFilter.new_dynamic(self.slice_num_entries, self.slice_fpp, self.slice_max_entries)


@dataclass
class KeySummary:
    """Min/max key and bloom filter of a set of keys (a file, a block or a slice)."""

    min_key: str | None
    max_key: str | None
    bloom: BloomFilter | None

    def candidates(self, keys: pa.Array, bloom_limit: int | None = None) -> np.ndarray:
        """Bool mask: which of ``keys`` may be in this set (range, then bloom).

        With ``bloom_limit``, the bloom filter is not probed when the range admits at
        least that many keys: the caller confirms candidates against the real keys
        anyway, and for that many it is cheaper to read them than to hash every
        candidate ``k`` times (a filter has no false negatives, so the final answer is
        the same either way).
        """
        n = len(keys)
        if n == 0:
            return np.zeros(0, dtype=bool)
        mask = np.ones(n, dtype=bool)
        if self.min_key is not None:
            mask &= pc.fill_null(pc.greater_equal(keys, self.min_key), False).to_numpy(
                zero_copy_only=False
            )
        if self.max_key is not None:
            mask &= pc.fill_null(pc.less_equal(keys, self.max_key), False).to_numpy(
                zero_copy_only=False
            )
        if self.bloom is not None and mask.any():
            idx = np.flatnonzero(mask)
            if bloom_limit is not None and len(idx) >= bloom_limit:
                return mask
            hit = self.bloom.might_contain_many(keys.take(pa.array(idx)))
            mask[idx[~hit]] = False
        return mask

    def to_kv(self, *, slice_level: bool, logs_level: bool = False) -> dict[str, str]:
        keys = _kv_names(slice_level, logs_level)
        out: dict[str, str] = {}
        if self.bloom is not None:
            out[keys[0]] = self.bloom.serialize()
            out[keys[1]] = self.bloom.type_code
        if self.min_key is not None:
            out[keys[2]] = self.min_key
        if self.max_key is not None:
            out[keys[3]] = self.max_key
        return out

    @classmethod
    def from_kv(
        cls, kv: dict[bytes, bytes] | None, *, slice_level: bool, with_bloom: bool = True,
        logs_level: bool = False,
    ) -> KeySummary | None:
        """Parse from Parquet KV metadata; ``None`` when the footer lacks the index.

        ``with_bloom=False`` parses the key range only (the filter stays ``None``): the
        filter is the expensive part, so callers that may not need it ask for it later.
        """
        if not kv:
            return None
        keys = _kv_names(slice_level, logs_level)
        raw_bloom = kv.get(keys[0].encode())
        raw_min = kv.get(keys[2].encode())
        raw_max = kv.get(keys[3].encode())
        if raw_bloom is None and raw_min is None:
            return None
        bloom = None
        if raw_bloom is not None and with_bloom:
            type_code = kv.get(keys[1].encode(), b"SIMPLE")
            bloom = BloomFilter.from_footer(raw_bloom, type_code)
        return cls(
            raw_min.decode() if raw_min is not None else None,
            raw_max.decode() if raw_max is not None else None,
            bloom,
        )

    @classmethod
    def of_keys(cls, keys: pa.Array, bloom: BloomFilter, chain: np.ndarray | None = None, *,
                is_sorted: bool = False, in_order: bool = True, short: np.ndarray | None = None) -> KeySummary:
        """Summary of ``keys``; ``chain`` = their :func:`hash_chain` if already computed;
        ``is_sorted``: the keys are in ascending order (their range is their ends);
        ``in_order=False``: the filter may take them in any order; ``short``: the keys as
        short-key integers, if made already (see ``BloomFilter.add_many``)."""
        if len(keys) == 0:
            return cls(None, None, bloom)
        if chain is not None and chain.shape[0] >= bloom.nb_hash:
            bloom.add_hashes(chain)
        else:
            bloom.add_many(keys, in_order=in_order, short=short)
        return cls(*key_range(keys, is_sorted=is_sorted), bloom)


def key_range(keys: pa.Array, *, is_sorted: bool = False) -> tuple[str, str]:
    """The least and greatest of ``keys`` (non-empty, no nulls) in UTF-8 byte order, as Arrow
    compares strings; of sorted keys, their first and last (a scan of a million keys was
    ~2% of a 1M-row upsert, done twice per block)."""
    if is_sorted:
        return keys[0].as_py(), keys[len(keys) - 1].as_py()
    mm = pc.min_max(keys)
    return mm["min"].as_py(), mm["max"].as_py()


def extend(prev: KeySummary | None, keys: pa.Array, *, is_sorted: bool = False) -> KeySummary:
    """The log blocks' cumulative key range after adding ``keys`` (a new block) to ``prev``
    (whose filter, if an older block carried one, is dropped: see the module docstring)."""
    if len(keys) == 0:
        return KeySummary(prev.min_key, prev.max_key, None) if prev is not None else KeySummary(None, None, None)
    lo, hi = key_range(keys, is_sorted=is_sorted)
    if prev is None:
        return KeySummary(lo, hi, None)
    return KeySummary(
        lo if prev.min_key is None else min(prev.min_key, lo, key=_utf8),
        hi if prev.max_key is None else max(prev.max_key, hi, key=_utf8),
        None,
    )


def _utf8(s: str) -> bytes:
    """Arrow compares strings by UTF-8 bytes; so must we, or ranges would disagree."""
    return s.encode("utf-8")


@dataclass(frozen=True)
class UnionSummary:
    """Several summaries answering together: a key may be present if any admits it
    (a base file's own summary and its slice's log-blocks summary)."""

    parts: tuple[KeySummary, ...]

    def candidates(self, keys: pa.Array, bloom_limit: int | None = None) -> np.ndarray:
        return self.candidates_by_part(keys, bloom_limit)[0]

    def candidates_by_part(self, keys: pa.Array, bloom_limit: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        """The union's mask and the first part's own: the first part is asked about every
        key, so its answer is whole (a later part is asked only about keys still out)."""
        mask = np.zeros(len(keys), dtype=bool)
        first = mask
        for i, part in enumerate(self.parts):
            rest = np.flatnonzero(~mask)
            if len(rest) == 0:
                break
            mask[rest[part.candidates(keys.take(pa.array(rest)), bloom_limit)]] = True
            if i == 0:
                first = mask.copy()
        return mask, first


def block_metadata(
    sorted_keys: pa.Array,
    prev_logs: KeySummary | None,
    params: BloomParams,
    base_instant: str,
    *,
    with_bloom: bool = True,
    short: np.ndarray | None = None,
) -> dict[str, str]:
    """Parquet KV metadata for a new data block: its own index plus the key range of the
    slice's log blocks (``prev_logs`` = the range of the slice's earlier blocks, ``None``
    for the first). The block's footer does not grow with the slice's earlier blocks.
    ``short``: the keys as short-key integers, if the writer has them (the filter's hashes
    start from them).

    ``with_bloom=False`` leaves the block's own filter out (its key range stays): for
    tables whose index never probes blocks (the bucket index), where hashing every key
    into a filter was about a quarter of an upsert's CPU (``benchmarks/bench_growth.py``)."""
    if with_bloom:
        own = KeySummary.of_keys(sorted_keys, params.block_sized_for(len(sorted_keys)), is_sorted=True,
                                 in_order=False, short=short)
    else:
        own = extend(None, sorted_keys, is_sorted=True)  # the block's own key range, no filter
    kv = own.to_kv(slice_level=False)
    kv.update(extend(prev_logs, sorted_keys, is_sorted=True).to_kv(slice_level=False, logs_level=True))
    kv[SLICE_BASE_INSTANT_KEY] = base_instant
    return kv
