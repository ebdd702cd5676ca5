"""Bloom index over base files *and* log blocks: tag each incoming key update or insert.

For every file group of the partitions a batch touches:

1. read the footers that summarise the whole slice (the base file's bloom/range and the
   newest Parquet block's range of the slice's log blocks - or, in older blocks, their
   cumulative filter) and keep the keys they may hold;
2. only if some survive, read the footers of the slice's members (base file, blocks)
   and keep, per member, the keys its own range and bloom admit (footers and parsed
   filters of these immutable files are kept per process: ``footer_cache``);
3. only members left with candidates are opened, and then for the key column alone;
   an exact match makes the key an update of that file group.

A batch that asks a partition about many keys against its slices' rows (a backfill, a
catch-up after an outage) skips steps 1-3: every member's key column is matched once
(:func:`_find_in_slices`). Full records are never read. Keys are compared as Arrow
strings (UTF-8 byte order) throughout. :meth:`BloomIndex.lookup` is non-global, like Hudi's default bloom index: a
key is looked up in its own partition only; :meth:`BloomIndex.lookup_global` asks every
partition (Hudi's global bloom index).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from streamer import defaults
from streamer.data import rows_by_value, short_keys
from streamer.fs import FileSystem
from streamer.index.rfc06 import KeySummary
from streamer.index.slice_members import (
    LookupStats,
    Member,
    slice_members,
    slice_summary,
)
from streamer.table import meta_fields
from streamer.table.bloom import PreparedKeys
from streamer.table.fsview import FileSlice

RECORD_KEY = meta_fields.RECORD_KEY
PARTITION_PATH = meta_fields.PARTITION_PATH
FILE_ID = "_hoodie_file_id"


@dataclass(frozen=True)
class IndexResult:
    """Per input row: the file group it updates, or null (an insert)."""

    #: string (a dictionary of the groups' ids from :meth:`BloomIndex.lookup`: no string
    #: per row), null = insert
    file_ids: pa.Array
    stats: LookupStats
    #: the partition of each row's file group (null = not found)
    partitions: pa.Array | None = None

    def is_update(self) -> pa.Array:
        return pc.is_valid(self.file_ids)


#: One lookup job: the slices asked, the rows of the batch asked about, their keys, and
#: the keys as short-key integers when they fit.
_Job = tuple[list[FileSlice], np.ndarray, pa.Array, "np.ndarray | None"]


def _find_in_slice(
    fs: FileSystem,
    file_slice: FileSlice,
    keys: pa.Array,
    is_committed: Callable[[str], bool],
    stats: LookupStats,
    seeds: dict[tuple[str, str, str], KeySummary] | None = None,
    on_corrupt: Callable[[FileSlice, list], None] | None = None,
    members: list[Member] | None = None,
) -> np.ndarray:
    """Bool mask over ``keys``: present in this slice's committed data (``members``: the
    slice's, when the caller listed them already).

    ``seeds`` receives the slice's log-blocks summary when the newest block carries one
    (the file-group writer chains the next block's summary from it: no second read).
    """
    found = np.zeros(len(keys), dtype=bool)
    if members is None:
        members = slice_members(fs, file_slice, is_committed, with_deletes=True,
                                on_corrupt=_corrupt_in(file_slice, on_corrupt))
    if not members or len(keys) == 0:
        return found
    index = slice_summary(members, stats)
    if seeds is not None and index.logs is not None and index.logs.min_key is not None:
        seeds[slice_key(file_slice)] = index.logs
    candidates, base_admits = index.candidates(keys)
    if not candidates.any():
        return found
    cand_idx = np.flatnonzero(candidates)
    cand_keys = keys.take(pa.array(cand_idx))
    live = np.zeros(len(cand_keys), dtype=bool)
    prepared = _Prepared(cand_keys)
    held: list[pa.Array] = []  # key columns in memory, matched together (see _direct_keys)

    def match_held() -> None:
        if held:
            live[_present_in_any(cand_keys, held)] = True
            held.clear()

    for m in members:
        if m.kind == "delete":
            # a key deleted after its last write here is no longer in this group; the
            # members before it first (a key written again after its delete stays live)
            match_held()
            if live.any():
                gone = _present(cand_keys, m.keys(stats)).to_numpy(zero_copy_only=False)
                live &= ~gone
            continue
        direct = _direct_keys(m, len(cand_keys), stats)
        if direct is not None:
            held.append(direct)
            continue
        own: np.ndarray | None
        if m.kind == "base" and base_admits is not None:
            own = base_admits[cand_idx]  # its summary was asked about every key already
        else:
            own = _member_candidates(m, cand_keys, stats, index.filtered, prepared)
        if own is None or not own.any():
            continue
        present = _present(cand_keys.filter(pa.array(own)), m.keys(stats))
        live[np.flatnonzero(own)[present.to_numpy(zero_copy_only=False)]] = True
    match_held()
    found[cand_idx[live]] = True
    return found


#: Slices asked about at least one key per this many of their rows are matched against
#: every member's key column (read once per process and kept), their ranges and filters
#: never asked. Why: a filter probe costs ~0.2 us per key that leaves at its first hash
#: and ~1.4 us per key it admits, while reading and matching a key column costs
#: ~0.05-0.1 us per row; a large batch (a backfill, a catch-up) asks every slice about
#: tens of thousands of keys, and on the 1M-row upsert benchmark the probes were ~40% of
#: the upsert's CPU (benchmarks/RESULTS.md, "Large batches").
DENSE_ROWS_PER_KEY = 16


def _is_dense(members: list[Member], n_keys: int, stats: LookupStats) -> bool:
    """Whether ``n_keys`` are many against the members' rows (see :data:`DENSE_ROWS_PER_KEY`);
    the row counts come from the members' footers, which a lookup reads anyway."""
    if n_keys == 0:
        return False
    budget = n_keys * DENSE_ROWS_PER_KEY
    rows = 0
    for m in members:
        if m.kind == "delete":
            continue
        if m.kind == "avro":
            return False  # no footer to count rows: the filters decide
        m.footer_kv(stats)
        if m.num_rows is None:
            return False
        rows += m.num_rows
        if rows > budget:
            return False
    return True


def _corrupt_in(s: FileSlice, on_corrupt: Callable[[FileSlice, list], None] | None,
                ) -> Callable[[list], None] | None:
    return None if on_corrupt is None else lambda bad: on_corrupt(s, bad)


def _find_in_slices(
    fs: FileSystem,
    slices: list[FileSlice],
    keys: pa.Array,
    is_committed: Callable[[str], bool],
    stats: LookupStats,
    seeds: dict[tuple[str, str, str], KeySummary] | None = None,
    on_corrupt: Callable[[FileSlice, list], None] | None = None,
    short: np.ndarray | None = None,
) -> list[np.ndarray]:
    """Per slice, a bool mask over ``keys``: present in its committed data.

    When the keys are many against the slices' rows (:func:`_is_dense`), every member's
    key column is matched in one pass: the keys are hashed once for all the slices and
    each stored key is looked up once (``index_in``); then each slice's members apply in
    write order (a delete block removes the keys written before it, a later write brings
    a key back). Otherwise each slice asks its footers first (:func:`_find_in_slice`).
    ``short``: ``keys`` as :func:`streamer.data.short_keys` integers, when they fit.
    """
    if len(keys) == 0 or not slices:
        return [np.zeros(len(keys), dtype=bool) for _ in slices]
    per_slice = [slice_members(fs, s, is_committed, with_deletes=True, on_corrupt=_corrupt_in(s, on_corrupt))
                 for s in slices]
    if not _is_dense([m for members in per_slice for m in members], len(keys), stats):
        masks = []
        for i, s in enumerate(slices):
            # one slice's members at a time: a base file's member holds its parsed footer
            # (~1 MB with Hudi's filter), and a partition may have hundreds of slices
            members, per_slice[i] = per_slice[i], []
            masks.append(_find_in_slice(fs, s, keys, is_committed, stats, seeds, on_corrupt, members))
        return masks
    everything = [m for members in per_slice for m in members]
    if seeds is not None:  # what the file-group writer chains the next block's summary on
        for s, members in zip(slices, per_slice, strict=True):
            logs = slice_summary(members, stats).logs
            if logs is not None and logs.min_key is not None:
                seeds[slice_key(s)] = logs
    columns = [m.keys(stats) for m in everything]
    if not columns:
        return [np.zeros(len(keys), dtype=bool) for _ in slices]
    where = _positions_in(keys, short, everything, columns)
    out: list[np.ndarray] = []
    lengths = iter(len(c) for c in columns)
    start = 0
    for members in per_slice:
        live = np.zeros(len(keys), dtype=bool)
        for m in members:
            end = start + next(lengths)
            at = where[start:end]
            live[at[at >= 0]] = m.kind != "delete"
            start = end
        out.append(live)
    return out


def _positions_in(keys: pa.Array, short: np.ndarray | None, members: list[Member],
                  columns: list[pa.Array]) -> np.ndarray:
    """For each stored key of ``columns`` (the members' key columns, concatenated), its
    position in ``keys``, else -1. As :func:`streamer.data.short_keys` integers when
    ``short`` is given and every stored key fits (hashing integers costs about half of
    hashing the strings; a member's integers are kept with its key column), else as strings."""
    if short is not None:
        stored = [m.short_keys(c) for m, c in zip(members, columns, strict=True)]
        if all(s is not None for s in stored):
            joined = np.concatenate([s for s in stored if s is not None])
            return _short_positions_in(short, joined)
    strings = pa.chunked_array([c if c.type == keys.type else c.cast(keys.type) for c in columns], type=keys.type)
    return pc.fill_null(pc.index_in(strings, value_set=keys), -1).to_numpy()


#: Golden-ratio multiplier of the pre-test's multiply-shift hash (Fibonacci hashing: the
#: product's top bits depend on every bit of the key).
_FIB = np.uint64(0x9E3779B97F4A7C15)
#: The pre-test's bitmap holds at most 2^24 marks (16 MiB, a byte each): a partition's
#: batch of more than 2M keys is turned away less often, never answered differently.
_MARK_BITS_MAX = 24


def _short_positions_in(short: np.ndarray, stored: np.ndarray) -> np.ndarray:
    """For each of ``stored`` (short keys), its position in ``short``, else -1.

    Most stored keys of a large table are not in the batch: a bitmap of the batch's keys
    (one multiply-shift hash, 8-16 bits per key up to 2M keys: ~6-12% false positives) turns them
    away before Arrow's hash lookup, which then probes the few left. Measured: 300k stored
    keys against 125k keys of a partition, 9.5 ms -> 5.6 ms (benchmarks/RESULTS.md)."""
    if len(stored) <= len(short):  # most stored keys may be in the batch: probe them all
        return pc.fill_null(pc.index_in(pa.array(stored), value_set=pa.array(short)), -1).to_numpy()
    bits = min(_MARK_BITS_MAX, max(10, int(len(short) * 8 - 1).bit_length()))
    shift = np.uint64(64 - bits)
    marks = np.zeros(1 << bits, dtype=bool)
    with np.errstate(over="ignore"):
        marks[(short * _FIB) >> shift] = True
        maybe = np.flatnonzero(marks[(stored * _FIB) >> shift])
    out = np.full(len(stored), -1, dtype=np.int32)
    if len(maybe):
        found = pc.index_in(pa.array(stored[maybe]), value_set=pa.array(short))
        out[maybe] = pc.fill_null(found, -1).to_numpy()
    return out


#: A member whose key column this process already holds is matched against the slice's
#: candidates directly, skipping its range and bloom filter, while it has at most this
#: many rows per candidate. Why: a probe of the filter costs ~0.2 us per candidate and any
#: hit then streams the member's keys anyway (~30-90 ns per row), so in a long-running
#: pipeline whose batches update keys all over a slice's blocks (every block holds some)
#: the probes were pure overhead - 60% of the lookup's CPU on the streamer benchmark
#: (benchmarks/RESULTS.md). A large member with few candidates keeps its filter: then most
#: probes end at the first hash and the member is never read.
DIRECT_MATCH_ROWS_PER_KEY = 16


def _direct_keys(m: Member, n_keys: int, stats: LookupStats) -> pa.Array | None:
    """``m``'s key column when it is in memory and small enough to match directly."""
    if m.kind not in ("base", "parquet"):
        return None
    held = m.cached_keys()
    if held is None or len(held) > DIRECT_MATCH_ROWS_PER_KEY * max(n_keys, 1):
        return None
    stats.keys(m.member_id)  # counted as read: what the lookup matched against
    return held


def _present_in_any(keys: pa.Array, columns: list[pa.Array]) -> np.ndarray:
    """Bool per ``keys``: in any of ``columns`` (one hash of ``keys``; the columns stream
    through it, then the few keys found are matched back)."""
    members = pa.chunked_array([c if c.type == keys.type else c.cast(keys.type) for c in columns], type=keys.type)
    found = members.filter(pc.is_in(members, value_set=keys))
    if len(found) == 0:
        return np.zeros(len(keys), dtype=bool)
    return pc.is_in(keys, value_set=found.combine_chunks()).to_numpy(zero_copy_only=False)


def _present(keys: pa.Array, member_keys: pa.Array) -> pa.Array:
    """Bool per ``keys``: in ``member_keys``. The smaller side becomes the hash set: a
    batch's few candidates are hashed and the member's key column streams through them
    (measured: 1M member keys against 30k candidates, 23 ms instead of 129 ms of CPU for
    hashing the member's keys), then the few found are matched back."""
    if len(keys) >= len(member_keys):
        return pc.is_in(keys, value_set=member_keys)
    found = member_keys.filter(pc.is_in(member_keys, value_set=keys))
    return pc.is_in(keys, value_set=found)


#: Probe a member's bloom filter only while fewer keys than this fraction of its rows
#: (and fewer than :data:`BLOOM_SKIP_MIN_KEYS`) are in its key range; from there on,
#: reading its key column (needed to confirm any hit) and matching it once is cheaper
#: than hashing every candidate up to ``k`` times. Measured on the 1M-upsert benchmark:
#: after a slice filter (older blocks' cumulative one) the candidates are mostly real
#: keys of the slice, so a member probe costs ~1.4 us per candidate against ~0.1 us per
#: row to read and match. Without one (the current format: a key range only) most
#: candidates are not in the member and leave its filter after a hash or two: the
#: filter is always probed.
BLOOM_SKIP_FRACTION = 0.1
BLOOM_SKIP_MIN_KEYS = 1_000


class _Prepared:
    """The slice's candidates prepared for probing once, on the first member that needs it."""

    def __init__(self, keys: pa.Array) -> None:
        self.keys = keys
        self._prepared: PreparedKeys | None = None

    def subset(self, idx: np.ndarray) -> PreparedKeys:
        if self._prepared is None:
            self._prepared = PreparedKeys(self.keys)
        return self._prepared.subset(idx)


def _member_candidates(m: Member, keys: pa.Array, stats: LookupStats,
                       filtered: bool = True, prepared: _Prepared | None = None) -> np.ndarray | None:
    """Which ``keys`` the member's own footer admits (all of them when it has no index).

    The key range is checked first; the bloom filter is parsed and probed unless
    ``filtered`` (the keys passed a filter over the whole slice) and the range leaves
    many candidates relative to the member's rows (see :data:`BLOOM_SKIP_FRACTION`).
    """
    if m.kind == "avro":
        return np.ones(len(keys), dtype=bool)
    kv = m.footer_kv(stats)
    in_range = KeySummary.from_kv(kv, slice_level=False, with_bloom=False)
    if in_range is None:
        return np.ones(len(keys), dtype=bool)
    mask = in_range.candidates(keys)
    n_cand = int(np.count_nonzero(mask))
    rows = m.num_rows
    if n_cand == 0 or (
        filtered and rows is not None
        and n_cand >= max(BLOOM_SKIP_MIN_KEYS, math.ceil(BLOOM_SKIP_FRACTION * rows))
    ):
        return mask
    s = m.summary(stats)
    if s is None or s.bloom is None:
        return mask
    idx = np.flatnonzero(mask)
    probe = prepared.subset(idx) if prepared is not None else keys.take(pa.array(idx))
    hit = s.bloom.might_contain_many(probe)
    mask[idx[~hit]] = False
    return mask


def may_hold(fs: FileSystem, file_slice: FileSlice, keys: pa.Array, is_committed: Callable[[str], bool],
             stats: LookupStats) -> bool:
    """Whether the slice's footers admit one of ``keys``: the slice's summary, then each
    data member's own key range and bloom filter - the index's first two steps, without
    reading a key column (a reader that merges the slice anyway confirms the keys there).
    Delete blocks hold no rows and are not asked."""
    members = slice_members(fs, file_slice, is_committed)
    if not members or len(keys) == 0:
        return False
    index = slice_summary(members, stats)
    candidates, base_admits = index.candidates(keys)
    if not candidates.any():
        return False
    cand_keys = keys.filter(pa.array(candidates))
    prepared = _Prepared(cand_keys)
    for m in members:
        if m.kind == "base" and base_admits is not None:
            if base_admits[np.flatnonzero(candidates)].any():
                return True
            continue
        own = _member_candidates(m, cand_keys, stats, False, prepared)
        if own is None or own.any():
            return True
    return False


def slice_key(s: FileSlice) -> tuple[str, str, str]:
    return (s.partition_path, s.file_id, s.base_instant)


class BloomIndex:
    """Looks keys up in the latest (merged) file slices of a table."""

    def __init__(
        self,
        fs: FileSystem,
        slices: Iterable[FileSlice],
        is_committed: Callable[[str], bool],
        parallelism: int = defaults.LOCAL_THREADS,
        on_corrupt: Callable[[FileSlice, list], None] | None = None,
    ) -> None:
        """``on_corrupt(slice, corrupt_blocks)`` hears of every corrupt block a lookup met
        (and may raise): a key in a lost block would be tagged an insert."""
        self.fs = fs
        self.on_corrupt = on_corrupt
        self.is_committed = is_committed
        self.parallelism = max(1, parallelism)
        self.by_partition: dict[str, list[FileSlice]] = {}
        #: per looked-up slice (see :func:`slice_key`), its cumulative summary as read
        self.slice_seeds: dict[tuple[str, str, str], KeySummary] = {}
        for s in slices:
            self.by_partition.setdefault(s.partition_path, []).append(s)

    def lookup(self, keys: pa.Array, partitions: pa.Array, *, short: np.ndarray | None = None) -> IndexResult:
        """Tag ``keys`` (aligned with ``partitions``): file id of the group holding each.
        ``short``: the keys as :func:`streamer.data.short_keys` integers, if made already."""
        keys, partitions = _whole(keys), _whole(partitions)
        if short is None:
            short = short_keys(keys)
        jobs: list[_Job] = []
        for part, rows in rows_by_value(partitions):
            slices = self.by_partition.get(part) if isinstance(part, str) else None
            if slices:
                jobs.append((slices, rows, keys.take(pa.array(rows)), None if short is None else short[rows]))
        return self._run(jobs, len(keys), with_partitions=False)

    def lookup_global(self, keys: pa.Array) -> IndexResult:
        """Tag ``keys`` in every partition (Hudi's global bloom index): the file id and the
        partition of the group holding each; every slice's footers are asked first, so only
        the groups that may hold a key are opened for keys."""
        keys = _whole(keys)
        rows = np.arange(len(keys))
        jobs: list[_Job] = [([s], rows, keys, None) for slices in self.by_partition.values() for s in slices]
        return self._run(jobs, len(keys), with_partitions=True)

    def holders(self, keys: pa.Array) -> tuple[list[tuple[str, np.ndarray]], LookupStats]:
        """Every partition holding any of ``keys``, with the positions of the keys it holds:
        with a per-partition index one key may be stored in several partitions, which
        :meth:`lookup_global` (one holder per key) does not say."""
        keys = _whole(keys)
        rows = np.arange(len(keys))
        jobs: list[_Job] = [(slices, rows, keys, None) for slices in self.by_partition.values()]
        stats = LookupStats()
        by_part: dict[str, list[np.ndarray]] = {}
        for s, hit in self._hits(jobs, stats):
            if len(hit):
                by_part.setdefault(s.partition_path, []).append(hit)
        return [(p, np.unique(np.concatenate(h))) for p, h in sorted(by_part.items())], stats

    def _run(self, jobs: list[_Job], n: int, *, with_partitions: bool) -> IndexResult:
        stats = LookupStats()
        results = self._hits(jobs, stats)
        codes = np.full(n, -1, dtype=np.int32)
        names: list[str] = []
        parts: list[str] = []
        for s, hit_rows in results:
            if len(hit_rows):
                codes[hit_rows] = len(names)
                names.append(s.file_id)
                parts.append(s.partition_path)
        mask = codes < 0
        file_ids = pa.DictionaryArray.from_arrays(pa.array(codes, mask=mask), pa.array(names, pa.string()))
        if not with_partitions:  # the hot path of every upsert: no array of n strings
            return IndexResult(file_ids, stats)
        partitions = pa.DictionaryArray.from_arrays(pa.array(codes, mask=mask), pa.array(parts, pa.string()))
        return IndexResult(file_ids.cast(pa.string()), stats, partitions.cast(pa.string()))

    def _hits(self, jobs: list[_Job], stats: LookupStats) -> list[tuple[FileSlice, np.ndarray]]:
        """Each job: slices asked about the same keys (a partition's), the keys' rows in the
        batch, the keys, and the keys as short-key integers if they fit; per slice, the rows
        it holds. Jobs run on ``parallelism`` threads (the Arrow and numpy work releases the
        GIL)."""

        def run(job: _Job) -> list[tuple[FileSlice, np.ndarray]]:
            slices, rows, part_keys, part_short = job
            local = LookupStats()
            masks = _find_in_slices(self.fs, slices, part_keys, self.is_committed, local, self.slice_seeds,
                                    self.on_corrupt, part_short)
            stats.merge(local)
            return [(s, rows[mask]) for s, mask in zip(slices, masks, strict=True)]

        if self.parallelism > 1 and len(jobs) > 1:
            with ThreadPoolExecutor(self.parallelism, thread_name_prefix="bloom-index") as ex:
                return [r for rs in ex.map(run, jobs) for r in rs]
        return [r for j in jobs for r in run(j)]


def _whole(arr: pa.Array | pa.ChunkedArray) -> pa.Array:
    return arr.combine_chunks() if isinstance(arr, pa.ChunkedArray) else arr
