"""The engine seam: where the per-batch and per-file-group functions run.

One core, two engines (DESIGN §2). The core is three plain functions —
:func:`~streamer.write.prepare.prepare_rows` (keys + schema),
:func:`~streamer.write.prepare.latest_per_key` (combine) and
:func:`~streamer.write.filegroup.write_file_group` (one file group's files) — and an
engine only decides *where* they run: a thread pool on the driver, or Spark executors.
The driver does the rest in both cases (index lookup on collected keys, routing,
commit), so the files written are the same either way.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from streamer.table.metadata import WriteStat
from streamer.write.filegroup import WriteContext
from streamer.write.plan import WritePlan
from streamer.write.prepare import PrepareSpec


@dataclass
class Prepared:
    """A batch after keys/schema/combine: its key columns on the driver, data wherever."""

    keys: pa.Table  # _hoodie_record_key, _hoodie_partition_path, _mor_is_delete
    input_rows: int
    handle: Any  # engine-private: an Arrow table (local) or a cached DataFrame (spark)

    def release(self) -> None:
        unpersist = getattr(self.handle, "unpersist", None)
        if unpersist is not None:
            unpersist()


class Engine(ABC):
    name: str = "abstract"

    @abstractmethod
    def prepare(self, data: Any, spec: PrepareSpec, combine: bool) -> Prepared:
        """Build keys, conform to the schema and combine duplicates."""

    @abstractmethod
    def write(self, prepared: Prepared, plan: WritePlan, ctx: WriteContext) -> list[WriteStat]:
        """Run :func:`write_file_group` for every task of ``plan``; return the stats."""
