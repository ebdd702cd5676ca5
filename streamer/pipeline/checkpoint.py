"""Where a pipeline resumes: the source position stored in the table's commits.

Each data commit carries the position it covers in its ``extraMetadata``, in two forms:

- ``mor.streamer.checkpoint`` (:data:`STREAMER_CHECKPOINT_KEY`): our own position as JSON,
  for every source kind (Kafka offsets, file list, generator batch);
- ``deltastreamer.checkpoint.key`` (:data:`CHECKPOINT_KEY`), Kafka sources only: the same
  offsets in Apache Hudi HoodieStreamer's format (``topic,0:123,1:456``), so HoodieStreamer
  can continue a table we wrote.

Resuming reads them back the other way round: the newest completed write carrying
either key decides, ours first; a HoodieStreamer string there means HoodieStreamer wrote
the table last, and we continue from its offsets. Table-service commits (compaction, log
compaction) carry no checkpoint, so we walk back to the newest write that has one, as
HoodieStreamer does - past the active timeline into the archived writes when needed (a
pipeline idle while others write the table has its last write archived; HoodieStreamer
would start over there). A value we cannot read is an error naming the commit, key and value:
never a silent restart from the source's beginning.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

from pydantic import ValidationError

from streamer.errors import MissingFileError, SourceError
from streamer.fs import FileSystem
from streamer.sources.position import (
    CheckpointFormatError,
    KafkaOffsets,
    Position,
    position_from_json,
    position_to_json,
)
from streamer.table.archived_commits import archived_write_extras, moved_to_archive
from streamer.table.metadata import CHECKPOINT_KEY, CHECKPOINT_KEY_V2
from streamer.table.properties import properties_path
from streamer.table.snapshot import TableSnapshot

#: Extra-metadata key holding our own position (JSON, see ``streamer.sources.position``).
STREAMER_CHECKPOINT_KEY = "mor.streamer.checkpoint"
#: Extra-metadata key holding the Spark micro-batch id that produced a commit.
BATCH_ID_KEY = "mor.streamer.batch.id"
#: Extra-metadata key naming the pipeline that wrote a commit.
PIPELINE_KEY = "mor.streamer.pipeline"
#: Extra-metadata keys whose presence makes a commit a checkpoint commit.
CHECKPOINT_KEYS = (STREAMER_CHECKPOINT_KEY, CHECKPOINT_KEY, CHECKPOINT_KEY_V2)

__all__ = [
    "BATCH_ID_KEY", "CHECKPOINT_KEY", "PIPELINE_KEY", "STREAMER_CHECKPOINT_KEY", "StoredCheckpoint",
    "checkpoint_history", "checkpoint_metadata", "stored_checkpoint",
]

log = logging.getLogger(__name__)


class StoredCheckpoint:
    """The newest committed position of a table (and the batch id that wrote it).

    ``key`` and ``value`` are the extra-metadata entry the position was read from
    (for error messages and audits).
    """

    def __init__(
        self,
        position: Position | None,
        instant: str | None,
        batch_id: int | None,
        *,
        key: str | None = None,
        value: str | None = None,
    ) -> None:
        self.position = position
        self.instant = instant
        self.batch_id = batch_id
        self.key = key
        self.value = value

    def __repr__(self) -> str:
        return (
            f"StoredCheckpoint(instant={self.instant}, batch_id={self.batch_id}, key={self.key}, "
            f"position={self.position})"
        )


def checkpoint_metadata(position: Position) -> dict[str, str]:
    """The commit extra-metadata that records ``position``.

    Kafka offsets are also written under ``deltastreamer.checkpoint.key`` in
    HoodieStreamer's own format, so HoodieStreamer can take the topic over. Other
    sources write no ``deltastreamer.checkpoint.key`` at all: HoodieStreamer's DFS
    sources keep a different checkpoint (a modification time, with its own rules),
    which a file-list or generator position cannot be translated into; without the
    key HoodieStreamer sees "no checkpoint" instead of misreading ours.
    """
    meta = {STREAMER_CHECKPOINT_KEY: position_to_json(position)}
    if isinstance(position, KafkaOffsets) and position.partitions:
        meta[CHECKPOINT_KEY] = position.to_hoodie_streamer()
    return meta


def stored_checkpoint(fs: FileSystem, base_path: str, *, topic: str | None = None,
                      pipeline: str | None = None) -> StoredCheckpoint:
    """Read the position of the newest completed write that carries one.

    ``pipeline``: only that pipeline's commits count (and those that name no pipeline:
    HoodieStreamer's, or a table handed over): several pipelines may write one table,
    each from its own sources, and each resumes from its own position.

    A table that does not exist yet, or has no checkpoint, gives an empty checkpoint
    (the pipeline starts from the source's configured beginning). ``topic`` is the
    Kafka topic the pipeline reads, when it reads one: a stored position that is not
    for that topic is a :class:`SourceError` naming the commit, key and value (a table
    handed over from another topic must not be resumed at that topic's offsets).
    """
    for found in _checkpoints_newest_first(fs, base_path, pipeline, archived=True):
        if topic is not None:
            _check_source_topic(found, topic, base_path)
        return found
    return StoredCheckpoint(None, None, None)


def checkpoint_history(fs: FileSystem, base_path: str, *, pipeline: str | None = None) -> list[StoredCheckpoint]:
    """Every completed write's checkpoint in the active timeline, oldest first.

    Why: it is the audit trail of exactly-once - consecutive positions must never
    go backwards, and each input record belongs to exactly one commit.
    """
    return list(reversed(list(_checkpoints_newest_first(fs, base_path, pipeline))))


def _checkpoints_newest_first(fs: FileSystem, base_path: str, pipeline: str | None = None, *,
                              archived: bool = False) -> Iterator[StoredCheckpoint]:
    """Checkpoints of completed writes, newest first: the active timeline's, then (with
    ``archived``) the archived writes' (:mod:`streamer.table.archived_commits`). A
    pipeline idle while other writers commit has its last write archived; without the
    archive it would find no position and start over at its source's beginning."""
    if not fs.exists(properties_path(base_path)):
        return
    snapshot = TableSnapshot.load(fs, base_path)
    for instant in reversed(snapshot.timeline.completed_writes()):
        try:
            extra = snapshot.commit_metadata(instant).extra_metadata
        except MissingFileError as e:
            # the lookup runs without the writers' lock: an archiver may have moved the
            # instant after our listing (the archive walk below reads it); else damage
            if moved_to_archive(e.path, TableSnapshot.load(fs, base_path).timeline):
                continue
            raise
        found = _checkpoint_of(extra, instant.timestamp, base_path, pipeline)
        if found is not None:
            yield found
    if not archived:
        return
    for ts, extra in archived_write_extras(fs, base_path, snapshot.properties, snapshot.timeline.layout_version):
        found = _checkpoint_of(extra, ts, base_path, pipeline)
        if found is not None:
            log.info("%s: the newest checkpoint%s is in archived commit %s", base_path,
                     f" of pipeline {pipeline}" if pipeline else "", ts)
            yield found


def _checkpoint_of(extra: dict[str, str], instant: str, base_path: str,
                   pipeline: str | None) -> StoredCheckpoint | None:
    owner = extra.get(PIPELINE_KEY)
    if pipeline is not None and owner is not None and owner != pipeline:
        return None  # another pipeline's position, from its own sources
    found = _position_in(extra, instant, base_path)
    if found is None:
        return None
    key, position = found
    raw_batch = extra.get(BATCH_ID_KEY)
    batch_id = int(raw_batch) if raw_batch else None
    return StoredCheckpoint(position, instant, batch_id, key=key, value=extra[key])


def _position_in(extra: dict[str, str], instant: str, base_path: str) -> tuple[str, Position] | None:
    """(key, position) of one commit's checkpoint, or None when it carries none.

    Ours wins when present. ``deltastreamer.checkpoint.key`` alone holds either
    HoodieStreamer's Kafka string, or (a table written by an earlier version of this
    project) a JSON position, told apart by the leading ``{``. HoodieStreamer's
    ``deltastreamer.checkpoint.reset_key`` is ignored: it records the ``--checkpoint``
    a HoodieStreamer run was started with, which only HoodieStreamer's next run compares
    against its own settings; a commit with only that key is skipped (HoodieStreamer
    itself refuses to resume there). HoodieStreamer 1.x keeps its checkpoint under
    ``streamer.checkpoint.key.v2`` on table version 8+ (the same Kafka string), which
    wins over the version-6 key as in Hudi 1.x's ``CheckpointUtils``.
    """
    ours = extra.get(STREAMER_CHECKPOINT_KEY)
    if ours:
        return STREAMER_CHECKPOINT_KEY, _from_json(ours, STREAMER_CHECKPOINT_KEY, instant, base_path)
    key = CHECKPOINT_KEY_V2 if extra.get(CHECKPOINT_KEY_V2) else CHECKPOINT_KEY
    theirs = extra.get(key)
    if not theirs:
        return None
    if theirs.lstrip().startswith("{"):
        return key, _from_json(theirs, key, instant, base_path)
    try:
        return key, KafkaOffsets.from_hoodie_streamer(theirs)
    except CheckpointFormatError as e:
        raise SourceError(
            f"{_where(instant, base_path, key, theirs)} is not a HoodieStreamer Kafka checkpoint "
            f"('<topic>,<partition>:<offset>,...'; other HoodieStreamer sources' checkpoints cannot be "
            f"resumed from): {e.reason}"
        ) from e


def _from_json(text: str, key: str, instant: str, base_path: str) -> Position:
    try:
        return position_from_json(text)
    except ValidationError as e:
        raise SourceError(
            f"{_where(instant, base_path, key, text)} is not a mor-streamer position: {e.errors()[0]['msg']}"
        ) from e


def _check_source_topic(found: StoredCheckpoint, topic: str, base_path: str) -> None:
    position = found.position
    if position is None:  # a checkpoint read from a commit always holds one
        raise SourceError(f"the checkpoint of commit {found.instant} in {base_path} holds no position")
    if isinstance(position, KafkaOffsets) and position.topic == topic:
        return
    what = f"topic {position.topic!r}" if isinstance(position, KafkaOffsets) else f"a {position.kind!r} source"
    raise SourceError(
        f"{_where(found.instant, base_path, found.key, found.value or '')} is a position in {what}, but the pipeline "
        f"reads Kafka topic {topic!r}; refusing to resume from another source's position"
    )


def _where(instant: str | None, base_path: str, key: str | None, value: str) -> str:
    return f"commit {instant} of {base_path}: {key}={value[:200]!r}"
