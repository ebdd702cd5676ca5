"""The engine seam: where the per-batch and per-file-group functions run.

One core, two engines (docs/architecture.md). The core is three plain functions —
:func:`~streamer.write.prepare.prepare_rows` (keys + schema),
:func:`~streamer.write.prepare.latest_per_key` (combine) and
:func:`~streamer.write.filegroup.write_file_group` (one file group's files) — and an
engine only decides *where* they run: a thread pool on the driver, or Spark executors.
The local engine looks keys up and routes them on the driver; the Spark engine runs
the same lookup and planning on executors, once per table partition, while it writes
(its :meth:`Engine.plan` is deferred to :meth:`Engine.write`). The driver commits in
both cases, and the rows written are the same either way.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from streamer.table.metadata import WriteStat
from streamer.write.filegroup import WriteContext
from streamer.write.plan import WritePlan
from streamer.write.prepare import PrepareSpec
from streamer.write.tagging import Planned, PlanRequest, plan_on_driver


@dataclass
class Prepared:
    """A batch after keys/schema/combine: its key columns on the driver, data wherever."""

    #: _hoodie_record_key, _hoodie_partition_path, _mor_is_delete on the driver; ``None``
    #: when the engine plans where the rows are (the driver never holds them)
    keys: pa.Table | None
    input_rows: int  # the Spark engine counts them while it writes
    handle: Any  # engine-private: an Arrow table (local) or a lazy DataFrame (spark)
    #: more engine-private cached data of this batch (released after the write)
    cached: list[Any] = field(default_factory=list)

    def release(self) -> None:
        for obj in [self.handle, *self.cached]:
            unpersist = getattr(obj, "unpersist", None)
            if unpersist is not None:
                unpersist()


class Engine(ABC):
    name: str = "abstract"

    @abstractmethod
    def prepare(self, data: Any, spec: PrepareSpec, combine: bool) -> Prepared:
        """Build keys, conform to the schema and combine duplicates."""

    def plan(self, prepared: Prepared, request: PlanRequest) -> Planned:
        """Tag the batch's rows (index lookup or bucket hash) and decide the commit's tasks.
        Default: on the driver, from ``prepared.keys``. An engine that plans where the rows
        are returns a plan without tasks (``WritePlan.rows`` set) and decides them in
        :meth:`write`."""
        assert prepared.keys is not None, f"the {self.name} engine kept no keys on the driver"
        return plan_on_driver(prepared.keys, request)

    @abstractmethod
    def write(self, prepared: Prepared, plan: WritePlan, ctx: WriteContext) -> list[WriteStat]:
        """Run :func:`write_file_group` for every task of ``plan``; return the stats."""
