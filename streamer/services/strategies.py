"""Which file slices a compaction plan takes first (Hudi's compaction strategies).

* ``log_file_size`` (Hudi ``LogFileSizeBasedCompactionStrategy``): slices with the most
  log bytes first - they cost readers the most - then bounded by the IO budget.
* ``bounded_io`` (``BoundedIOCompactionStrategy``): in listing order, add slices while
  the estimated IO (read base + logs, write a new base) stays within ``io_budget_bytes``.
* ``day_based`` (``DayBasedCompactionStrategy``): only the ``day_partitions`` most recent
  day partitions (partition paths parsed as dates, newest first), then by log size.

A budget never yields an empty plan: the first slice is always taken, or a slice
larger than the budget could never be compacted.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass

from streamer.config.policies import CompactionPolicy
from streamer.table.fsview import FileSlice

_DATE_RE = re.compile(r"(\d{4})[-/]?(\d{2})[-/]?(\d{2})")


@dataclass(frozen=True)
class Candidate:
    fslice: FileSlice

    @property
    def log_bytes(self) -> int:
        return sum(lf.size for lf in self.fslice.log_files)

    @property
    def base_bytes(self) -> int:
        return self.fslice.base_file.size if self.fslice.base_file else 0

    @property
    def io_bytes(self) -> int:
        """Read base + logs, write a base about the size of the old one plus the logs."""
        return 2 * self.base_bytes + 2 * self.log_bytes


def partition_day(partition: str) -> dt.date | None:
    """The date a partition path names (``2024/01/31``, ``day=2024-01-31``...), if any."""
    m = _DATE_RE.search(partition.replace("%2F", "/"))
    if not m:
        return None
    try:
        return dt.date(int(m.group(1)), int(m.group(2)), int(m.group(3)))
    except ValueError:
        return None


def _bounded(cands: list[Candidate], budget: int) -> list[Candidate]:
    out: list[Candidate] = []
    used = 0
    for c in cands:
        if out and used + c.io_bytes > budget:
            continue
        out.append(c)
        used += c.io_bytes
    return out


def order_and_bound(cands: list[Candidate], policy: CompactionPolicy) -> list[Candidate]:
    strategy = policy.strategy
    if strategy == "bounded_io":
        ordered = sorted(cands, key=lambda c: (c.fslice.partition_path, c.fslice.file_id))
    elif strategy == "day_based":
        days = sorted({d for c in cands if (d := partition_day(c.fslice.partition_path))}, reverse=True)
        keep = set(days[: policy.day_partitions])
        dated = [c for c in cands if partition_day(c.fslice.partition_path) in keep]
        ordered = sorted(dated, key=lambda c: (-(partition_day(c.fslice.partition_path) or dt.date.min).toordinal(),
                                               -c.log_bytes, c.fslice.file_id))
    elif strategy == "log_file_size":
        ordered = sorted(cands, key=lambda c: (-c.log_bytes, c.fslice.partition_path, c.fslice.file_id))
    else:  # the policy model refuses others; keep a clear error for programmatic use
        raise ValueError(f"unknown compaction strategy {strategy!r}")
    return _bounded(ordered, policy.io_budget_bytes)
