"""Commit requirements: what must still hold, under the writer lock, for a commit to go in.

In the spirit of pyiceberg's commit requirements: the caller states what it based its
batch on, and the commit's :class:`~streamer.write.transaction.Transaction` checks it on
the snapshot it reads *while holding the lock*,
so no other writer can slip a commit in between the check and ours. Checked outside the
lock (as the pipeline did before), two runs of one pipeline could both pass the check
and both commit overlapping records.
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa

from streamer.errors import PositionConflictError, SchemaError
from streamer.table.identity import IndexConfig, table_index
from streamer.table.instant import Action
from streamer.table.snapshot import TableSnapshot
from streamer.write.schema import data_schema, reconcile


@dataclass(frozen=True)
class ExpectCheckpoint:
    """Commit only if the newest write carrying a checkpoint is the one the caller resumed from.

    ``instant``: the completed write whose checkpoint the caller's batch starts at
    (``None``: the caller started without one). ``keys``: the extra-metadata keys that
    count as a checkpoint. ``owner`` names the caller in the error.
    """

    instant: str | None
    keys: tuple[str, ...]
    owner: str = ""
    #: When set, a checkpoint commit counts only if this extra-metadata key is absent or
    #: equals ``owner``: the commits of other pipelines writing the same table are theirs.
    owner_key: str | None = None

    def check(self, snapshot: TableSnapshot) -> None:
        """Raise :class:`~streamer.errors.PositionConflictError` when another checkpoint commit came after ours.

        The steady path reads nothing: the newest write is the caller's own last commit.
        Table-service commits carry no checkpoint and are skipped by their action alone.
        """
        for inst in reversed(snapshot.timeline.completed_writes()):
            if inst.pending_action in (Action.COMPACTION, Action.LOG_COMPACTION):
                continue
            if inst.timestamp == self.instant:
                return
            extra = snapshot.commit_metadata(inst).extra_metadata
            if self.owner_key is not None and extra.get(self.owner_key) not in (None, self.owner):
                continue
            if any(extra.get(k) for k in self.keys):
                who = f"pipeline {self.owner}: " if self.owner else ""
                raise PositionConflictError(
                    f"{who}{snapshot.base_path} has a newer checkpoint (commit {inst.timestamp}) than "
                    f"the one this run started from ({self.instant}); is the pipeline running twice? "
                    "Nothing was committed; restart to resume from the table's position"
                )


@dataclass(frozen=True)
class ExpectIndex:
    """Commit only with the table's own (persisted) index: the index decides where keys
    are, so a writer using another would put a key's second version in a second group."""

    index: IndexConfig

    def check(self, snapshot: TableSnapshot) -> None:
        """Raise :class:`~streamer.errors.ConfigError` naming both indexes when they differ."""
        self.index.check_same(table_index(snapshot.properties.raw), snapshot.base_path)


@dataclass(frozen=True)
class ExpectSchema:
    """Commit only a batch whose schema the table's latest schema accepts (or evolves to).

    ``required``: the columns the batch must carry (keys, partition fields, ordering).
    A delete is judged on the columns it shares with the table, and writes in the
    table's schema (its other columns are not needed to delete a key).
    """

    incoming: pa.Schema
    required: tuple[str, ...]
    delete: bool = False

    def check(self, snapshot: TableSnapshot) -> None:
        """Raise :class:`~streamer.errors.SchemaError`, naming the table and the field, when
        the schemas are incompatible."""
        try:
            self.decide(snapshot.latest_schema())
        except SchemaError as e:
            raise SchemaError(f"{snapshot.base_path}: {e}; nothing was written") from e

    def decide(self, table_schema: pa.Schema | None) -> pa.Schema:
        """The schema the commit writes in, given the table's latest one."""
        if self.delete and table_schema is not None:
            decision = data_schema(table_schema)
            reconcile(table_schema, pa.schema([f for f in self.incoming if f.name in decision.names]),
                      self.required)
            return decision
        return reconcile(table_schema, self.incoming, self.required).schema
