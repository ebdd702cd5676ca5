"""The indexable members of a file slice: its base file and its committed data blocks.

The index and the file-group writer both need to walk a slice's members newest-first
and read, for each, either just its footer (bloom + range) or just its key column.
This module gives them one view, with the reads counted, so tests can prove that a
member whose footer excluded every key was never opened for keys.

Only *committed* data counts: a block whose instant is not a completed instant (a
failed or rolled-back write) or is named by a rollback command block is skipped —
a key it holds was never committed, so it must not make an insert look like an update.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TypeVar

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from streamer.data import short_keys
from streamer.errors import CorruptDataError, MissingFileError, first_line
from streamer.fs import FileStatus, FileSystem, read_failure
from streamer.index.footer_cache import CACHE
from streamer.index.rfc06 import KeySummary, UnionSummary
from streamer.table import meta_fields
from streamer.table.fsview import FileSlice
from streamer.table.log_format import BlockType, LogBlock, read_log_file
from streamer.table.merge import CorruptBlock, ScanStats, effective_blocks
from streamer.table.timeline import CommittedInstants

RECORD_KEY = meta_fields.RECORD_KEY
T = TypeVar("T")


@dataclass
class LookupStats:
    """What a lookup touched: footers read vs. members opened to read keys."""

    footers_read: int = 0
    keys_read: int = 0
    footer_ids: list[str] = field(default_factory=list)
    key_ids: list[str] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def footer(self, member_id: str) -> None:
        with self._lock:
            self.footers_read += 1
            self.footer_ids.append(member_id)

    def keys(self, member_id: str) -> None:
        with self._lock:
            self.keys_read += 1
            self.key_ids.append(member_id)

    def merge(self, other: LookupStats) -> None:
        with self._lock:
            self.footers_read += other.footers_read
            self.keys_read += other.keys_read
            self.footer_ids.extend(other.footer_ids)
            self.key_ids.extend(other.key_ids)


@dataclass
class Member:
    """A base file or one data block, read lazily and counted."""

    fs: FileSystem
    kind: str  # "base" | "parquet" | "avro" | "delete"
    path: str
    instant: str
    block: LogBlock | None = None
    #: base files: bytes and modification time on storage (the cache key); blocks: their
    #: log file's bytes (see :meth:`cache_id`)
    size: int = 0
    mtime_ns: int = 0
    _kv: dict[bytes, bytes] | None = field(default=None, repr=False)
    _kv_read: bool = field(default=False, repr=False)
    _num_rows: int | None = field(default=None, repr=False)
    #: the base file's parsed footer, when this member read it: its key read reuses it
    #: (a footer with Hudi's ~860 KB of bloom filter text takes ~0.45 ms to parse)
    _metadata: pq.FileMetaData | None = field(default=None, repr=False)

    @property
    def member_id(self) -> str:
        return self.path if self.block is None else f"{self.path}@{self.block.offset}"

    def _cache_key(self) -> tuple[str, int, int]:
        """(path, size, mtime) this member is cached under (see :meth:`_cached`)."""
        if self.block is None:
            return self.path, self.size, self.mtime_ns
        return block_cache_key(self.path, self.block.offset, self.instant, self.size)

    def _cached(self, kind: str, load: Callable[[], tuple[T, int]]) -> T:
        """``load()`` once per process for this immutable member (see :mod:`footer_cache`).

        A base file is identified by path, size and modification time. A block by its log
        file's path and size, its offset and its instant: log files are never rewritten in
        place (a new write is a new version; an append by another writer changes the size),
        and the listing gives log files no modification time. Unknown size: not cached.
        """
        return CACHE.get_or_load(kind, *self._cache_key(), load)

    def footer_kv(self, stats: LookupStats | None) -> dict[bytes, bytes] | None:
        """Parquet KV metadata (base file or Parquet block); ``None`` for Avro blocks."""
        if self._kv_read:
            return self._kv
        self._kv_read = True
        if self.kind in ("avro", "delete"):
            return None

        def load() -> tuple[tuple[dict[bytes, bytes], int], int]:
            if stats is not None:
                stats.footer(self.member_id)
            if self.kind == "base":
                with _base_errors(self.path), self.fs.open_input_file(self.path) as f:
                    md = self._metadata = pq.read_metadata(f)
            else:
                assert self.block is not None
                # the same footer read as LogBlock.parquet_metadata(), keeping the row count too
                md = self.block._parquet_file().metadata
            kv = dict(md.metadata or {})
            return (kv, md.num_rows), sum(len(k) + len(v) for k, v in kv.items()) + 200

        self._kv, self._num_rows = self._cached("footer", load)
        return self._kv

    @property
    def num_rows(self) -> int | None:
        """Rows in the member, known once its footer was read (``None`` before/for Avro)."""
        return self._num_rows

    def summary(self, stats: LookupStats | None) -> KeySummary | None:
        """The member's own key range and bloom filter (parsed once per process)."""
        def load() -> tuple[KeySummary | None, int]:
            s = KeySummary.from_kv(self.footer_kv(stats), slice_level=False)
            bits = s.bloom.held_bytes if s is not None and s.bloom is not None else 0
            return s, bits + 200

        return self._cached("summary", load)

    def slice_summary(self, stats: LookupStats | None) -> KeySummary | None:
        """The whole-slice summary of blocks written before the logs-only one."""
        return KeySummary.from_kv(self.footer_kv(stats), slice_level=True)

    def logs_summary(self, stats: LookupStats | None) -> KeySummary | None:
        """The summary of the slice's log blocks up to this one (see ``rfc06``): their key
        range, and in blocks of an older format a cumulative filter too."""
        return KeySummary.from_kv(self.footer_kv(stats), slice_level=False, logs_level=True)

    def cached_keys(self) -> pa.Array | None:
        """The record-key column if this process already holds it, else ``None`` without
        reading anything."""
        return CACHE.peek("keys", *self._cache_key())

    def keys(self, stats: LookupStats | None) -> pa.Array:
        """Only the record-key column."""
        if stats is not None:
            stats.keys(self.member_id)

        def load() -> tuple[pa.Array, int]:
            if self.kind == "base":
                with _base_errors(self.path), self.fs.open_input_file(self.path) as f:
                    t = pq.ParquetFile(f, metadata=self._metadata,
                                       page_checksum_verification=True).read(columns=[RECORD_KEY])
                arr = t.column(0).combine_chunks()
            else:
                assert self.block is not None
                arr = (self.block.deletes().column(RECORD_KEY).combine_chunks() if self.kind == "delete"
                       else self.block.record_keys())
            return arr, arr.nbytes

        return self._cached("keys", load)

    def short_keys(self, keys: pa.Array) -> np.ndarray | None:
        """This member's record keys ``keys`` (what :meth:`keys` gave) as
        :func:`streamer.data.short_keys` integers (None: a key does not fit), kept with the
        key column: a lookup matches them instead of the strings."""

        def load() -> tuple[tuple[np.ndarray | None], int]:
            short = short_keys(keys)
            return (short,), 0 if short is None else short.nbytes

        return self._cached("short_keys", load)[0]


    def columns(self, names: list[str]) -> pa.Table:
        """Those of ``names`` the member's rows have (a data member; not cached: read for
        the few keys a write must know more of than their presence)."""
        if self.kind == "base":
            with _base_errors(self.path), self.fs.open_input_file(self.path) as f:
                pf = pq.ParquetFile(f, metadata=self._metadata, page_checksum_verification=True)
                have = set(pf.schema_arrow.names)
                return pf.read(columns=[c for c in names if c in have])
        assert self.block is not None and self.kind != "delete"
        return self.block.records(names, missing_ok=True)


def block_cache_key(log_path: str, offset: int, instant: str, log_size: int) -> tuple[str, int, int]:
    """The cache key of the block at ``offset`` of a log file of ``log_size`` bytes (see
    :meth:`Member._cached`)."""
    return f"{log_path}@{offset}#{instant}", log_size, 1 if log_size > 0 else 0


def remember_base_file_keys(status: FileStatus, keys: pa.Array, short: np.ndarray | None = None) -> None:
    """Keep the record keys of a base file this process has just written, under its path,
    size and modification time as a listing gives them (see :meth:`Member._cache_key`);
    ``short``: the same keys as short-key integers, if the writer made them."""
    _remember((status.path, status.size, status.mtime_ns or 0), keys, short)


def remember_block_keys(log_path: str, log_size: int, instant: str,
                        blocks: list[tuple[int, pa.Array, np.ndarray | None]]) -> None:
    """Keep the record keys of data blocks this process has just written, by their offset
    in the log file, and their short-key integers if the writer made them: the next
    lookup matches them without reading them back (a 1M-row upsert's blocks were ~5% of
    the next one's CPU to read again, and their short keys ~2% to make again)."""
    for offset, keys, short in blocks:
        _remember(block_cache_key(log_path, offset, instant, log_size), keys, short)


def _remember(key: tuple[str, int, int], keys: pa.Array, short: np.ndarray | None) -> None:
    CACHE.put("keys", *key, keys, keys.nbytes)
    if short is not None and len(short) == len(keys):
        CACHE.put("short_keys", *key, (short,), short.nbytes)  # as Member.short_keys keeps them


def is_committed_fn(completed: frozenset[str], first_active: str | None) -> Callable[[str], bool]:
    """Committed = completed on the active timeline, or older than it (archived): the rule
    of :class:`~streamer.table.timeline.CommittedInstants`, as a function."""
    return CommittedInstants(completed, first_active).__contains__


@contextlib.contextmanager
def _base_errors(path: str) -> Iterator[None]:
    """A base file gone or damaged is an error naming it, not a bare OSError."""
    try:
        yield
    except FileNotFoundError as e:
        raise MissingFileError("base file missing", path) from e
    except (pa.ArrowInvalid, OSError) as e:
        if (failed := read_failure(e, path, "reading a base file")) is not None:
            raise failed from e
        raise CorruptDataError(f"unreadable base file ({first_line(e)})", path) from e


class _Committed:
    """``in`` over :func:`is_committed_fn`'s answer, for :func:`effective_blocks`."""

    def __init__(self, is_committed: Callable[[str], bool]) -> None:
        self._is_committed = is_committed

    def __contains__(self, instant: object) -> bool:
        return isinstance(instant, str) and self._is_committed(instant)


def slice_members(
    fs: FileSystem,
    file_slice: FileSlice,
    is_committed: Callable[[str], bool],
    with_deletes: bool = False,
    on_corrupt: Callable[[list[CorruptBlock]], None] | None = None,
) -> list[Member]:
    """Base file first, then committed data (and, if asked, delete) blocks in write order."""
    members: list[Member] = []
    if file_slice.base_file is not None:
        b = file_slice.base_file
        members.append(Member(fs, "base", b.path, b.instant_time, size=b.size, mtime_ns=b.mtime_ns))
    blocks: list[tuple[str, LogBlock]] = []
    sizes = {lf.path: lf.size for lf in file_slice.log_files}
    for lf in file_slice.log_files:
        try:
            blocks.extend((lf.path, blk) for blk in read_log_file(fs, lf.path, lazy=True))
        except FileNotFoundError as e:
            raise MissingFileError("log file missing", lf.path) from e
    scan = ScanStats()
    kinds = {BlockType.PARQUET_DATA: "parquet", BlockType.AVRO_DATA: "avro", BlockType.DELETE: "delete"}
    # The blocks that count, in the order they apply - exactly as a reader merges them: a
    # completed log compaction stands where the blocks it replaced were, so a key written
    # after that range and before the compacted block was appended stays live here (else
    # the index would miss it and route its next update to another file group).
    effective = effective_blocks(blocks, _Committed(is_committed), scan)
    if scan.corrupt_blocks and on_corrupt is not None:
        on_corrupt(scan.corrupt_blocks)  # the caller decides: skip a torn tail, refuse damage
    for blk in effective:
        kind = kinds.get(blk.block_type)
        if kind is None or (kind == "delete" and not with_deletes):
            continue
        members.append(Member(fs, kind, blk.log_path, blk.instant_time or "", blk,
                              size=sizes.get(blk.log_path, 0)))
    return members


@dataclass(frozen=True)
class SliceIndex:
    """What answers "could this slice hold key k?" and what the next block chains on.

    ``lookup``: the base file's own summary together with the newest Parquet block's
    log-blocks summary (or, in blocks written before the logs-only summary, that block's
    whole-slice summary); ``None`` when neither is available (Avro blocks newest, or a
    block without the index): callers check members one by one. ``logs``: the log blocks'
    cumulative summary the next block extends; ``source``: the newest member read.
    ``filtered``: the lookup holds a filter over every member's keys (older formats; the
    current one has the log blocks' key range only), so the keys it admits are mostly in
    the slice - what decides whether probing a member's own filter is worth it.
    ``base_first``: the lookup is, or begins with, the base file's own summary, so its
    answer for the base file need not be asked again (:meth:`candidates`).
    """

    lookup: KeySummary | UnionSummary | None
    source: Member | None
    logs: KeySummary | None = None
    filtered: bool = False
    base_first: bool = False

    def candidates(self, keys: pa.Array) -> tuple[np.ndarray, np.ndarray | None]:
        """Which ``keys`` the slice may hold and, when the lookup asked the base file's own
        summary (range and bloom filter) about every key, which of them it admitted:
        probing the base file's filter again with the candidates repeated every true
        hit's ``k`` hashes (about 40% of a cold 10M-row upsert's probes)."""
        if self.lookup is None:
            return np.ones(len(keys), dtype=bool), None
        if not self.base_first:
            return self.lookup.candidates(keys), None
        if isinstance(self.lookup, UnionSummary):
            return self.lookup.candidates_by_part(keys)
        mask = self.lookup.candidates(keys)
        return mask, mask


def slice_summary(members: list[Member], stats: LookupStats | None) -> SliceIndex:
    """The slice's index, from at most two footers: the newest block's and the base file's
    (the base file's parsed once per process)."""
    members = [m for m in members if m.kind != "delete"]
    if not members:
        return SliceIndex(None, None)
    newest = members[-1]
    base = members[0] if members[0].kind == "base" else None
    if newest.kind == "base":
        own = newest.summary(stats)
        return SliceIndex(own, newest, filtered=own is not None and own.bloom is not None,
                          base_first=own is not None)
    if newest.kind == "parquet":
        logs = newest.logs_summary(stats)
        if logs is not None:
            filtered = logs.bloom is not None
            if base is None:
                return SliceIndex(logs, newest, logs, filtered)
            own = base.summary(stats)
            if own is None:
                return SliceIndex(None, newest, logs)
            return SliceIndex(UnionSummary((own, logs)), newest, logs, filtered and own.bloom is not None,
                              base_first=True)
        whole = newest.slice_summary(stats)  # written before the logs-only summary
        if whole is not None:
            return SliceIndex(whole, newest, filtered=whole.bloom is not None)
    return SliceIndex(None, None)
