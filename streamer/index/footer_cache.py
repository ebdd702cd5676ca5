"""What immutable files say, kept between lookups: footers, parsed filters, key columns.

A base file or a log block never changes once written, so a long-running pipeline (and
the services in its process) need not re-read and re-parse it every micro-batch: the
footer's key-value metadata and row count, its bloom filter parsed for probing (its bits
kept packed, as serialized: an eighth of a byte per bit, so a 10M-row table's filters fit
in ``defaults.FOOTER_CACHE_BYTES``; unpacked, they overflowed it and a warm lookup re-read
its footers), and its record-key column stay here, least recently used first out,
bounded in the bytes each entry's loader reports (the arrays' ``nbytes``). Since
log blocks carry only their own filter (``streamer.index.rfc06``), a lookup
probes every block of a slice: this is what keeps that to parsing each footer once.

Keyed by (path, size, modification time) from the listing: a file rolled back and
written again under the same name is another entry. A log block: by its log file's path
and size, its offset and instant (``slice_members.Member._cached``).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Any, TypeVar

from streamer import defaults

T = TypeVar("T")


class FooterCache:
    """A thread-safe LRU of ``(kind, path, size, mtime) -> value``, bounded by the values' bytes."""

    def __init__(self, max_bytes: int = defaults.FOOTER_CACHE_BYTES) -> None:
        self.max_bytes = max_bytes
        self._items: OrderedDict[tuple[str, str, int, int], tuple[Any, int]] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def get_or_load(self, kind: str, path: str, size: int, mtime_ns: int,
                    load: Callable[[], tuple[T, int]]) -> T:
        """The cached value, or ``load()`` -> ``(value, nbytes)`` kept if it fits (and the
        file's version is known: size and modification time)."""
        key = (kind, path, size, mtime_ns)
        with self._lock:
            hit = self._items.get(key)
            if hit is not None:
                self._items.move_to_end(key)
                self.hits += 1
                return hit[0]
            self.misses += 1
        value, nbytes = load()
        if size <= 0 or mtime_ns <= 0 or nbytes > self.max_bytes // 4:  # unknown version, or too big
            return value
        with self._lock:
            if key not in self._items:
                self._items[key] = (value, nbytes)
                self._bytes += nbytes
                while self._bytes > self.max_bytes and self._items:
                    _, (_, freed) = self._items.popitem(last=False)
                    self._bytes -= freed
        return value

    def put(self, kind: str, path: str, size: int, mtime_ns: int, value: Any, nbytes: int) -> None:
        """Keep ``value`` for a file this process has just written (what a later lookup
        would otherwise read back from storage); the same bounds as :meth:`get_or_load`."""
        if size <= 0 or mtime_ns <= 0 or nbytes > self.max_bytes // 4:
            return
        key = (kind, path, size, mtime_ns)
        with self._lock:
            if key in self._items:
                return
            self._items[key] = (value, nbytes)
            self._bytes += nbytes
            while self._bytes > self.max_bytes and self._items:
                _, (_, freed) = self._items.popitem(last=False)
                self._bytes -= freed

    def peek(self, kind: str, path: str, size: int, mtime_ns: int) -> Any | None:
        """The cached value if there is one (counted as a hit), else ``None``; never loads.

        Why: a lookup chooses between probing a member's bloom filter and matching its key
        column, and the column is the cheaper test once it is already in memory."""
        key = (kind, path, size, mtime_ns)
        with self._lock:
            hit = self._items.get(key)
            if hit is None:
                return None
            self._items.move_to_end(key)
            self.hits += 1
            return hit[0]

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
            self._bytes = 0

    @property
    def nbytes(self) -> int:
        return self._bytes


#: The process's cache (one per process: pipelines and services share it).
CACHE = FooterCache()
