"""Where a pipeline resumes: the source position stored in the table's commits.

HoodieStreamer keeps its checkpoint in the commit metadata of each delta commit
(``deltastreamer.checkpoint.key``); we do the same with a JSON position, so a table
written by us tells any reader which input it contains. Table-service commits
(compaction, log compaction) carry no checkpoint, so we walk back to the newest
write that has one.
"""

from __future__ import annotations

from collections.abc import Iterator

from pydantic import ValidationError

from sources.position import Position, position_from_json
from streamer.errors import SourceError
from streamer.fs import FileSystem
from streamer.table.metadata import CHECKPOINT_KEY, CommitMetadata
from streamer.table.properties import load_properties, properties_path
from streamer.table.timeline import Timeline

#: Extra-metadata key holding the Spark micro-batch id that produced a commit.
BATCH_ID_KEY = "mor.streamer.batch.id"
#: Extra-metadata key naming the pipeline that wrote a commit.
PIPELINE_KEY = "mor.streamer.pipeline"

__all__ = [
    "BATCH_ID_KEY", "CHECKPOINT_KEY", "PIPELINE_KEY", "StoredCheckpoint", "checkpoint_history", "stored_checkpoint",
]


class StoredCheckpoint:
    """The newest committed position of a table (and the batch id that wrote it)."""

    def __init__(self, position: Position | None, instant: str | None, batch_id: int | None) -> None:
        self.position = position
        self.instant = instant
        self.batch_id = batch_id

    def __repr__(self) -> str:
        return f"StoredCheckpoint(instant={self.instant}, batch_id={self.batch_id}, position={self.position})"


def stored_checkpoint(fs: FileSystem, base_path: str) -> StoredCheckpoint:
    """Read the position of the newest completed write that carries one.

    A table that does not exist yet, or has no checkpoint, gives an empty checkpoint
    (the pipeline starts from the source's configured beginning).
    """
    for found in _checkpoints_newest_first(fs, base_path):
        return found
    return StoredCheckpoint(None, None, None)


def checkpoint_history(fs: FileSystem, base_path: str) -> list[StoredCheckpoint]:
    """Every completed write's checkpoint in the active timeline, oldest first.

    Why: it is the audit trail of exactly-once - consecutive positions must never
    go backwards, and each input record belongs to exactly one commit.
    """
    return list(reversed(list(_checkpoints_newest_first(fs, base_path))))


def _checkpoints_newest_first(fs: FileSystem, base_path: str) -> Iterator[StoredCheckpoint]:
    if not fs.exists(properties_path(base_path)):
        return
    props = load_properties(fs, base_path)
    timeline = Timeline.load(fs, base_path, props)
    for instant in reversed(timeline.completed_writes()):
        meta = CommitMetadata.from_bytes(timeline.read_details(instant), timeline.path_of(instant))
        text = meta.extra_metadata.get(CHECKPOINT_KEY)
        if not text:
            continue
        try:
            position = position_from_json(text)
        except ValidationError as e:
            raise SourceError(
                f"commit {instant.timestamp} of {base_path} holds a checkpoint that is not a "
                f"mor-streamer position ({CHECKPOINT_KEY}={text[:200]!r}): {e.errors()[0]['msg']}"
            ) from e
        raw_batch = meta.extra_metadata.get(BATCH_ID_KEY)
        yield StoredCheckpoint(position, instant.timestamp, int(raw_batch) if raw_batch else None)
