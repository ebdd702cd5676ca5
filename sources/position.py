"""Source positions: where a batch ended, in a form the runner stores and resumes from.

A position always means "the next thing to read" (like a Kafka committed offset), so
``read_batch(start=previous.end)`` neither re-reads nor skips. Positions are small
pydantic models tagged by ``kind``; :func:`position_to_json` / :func:`position_from_json`
round-trip them through the Hudi commit metadata (``extraMetadata``).
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter


class _Position(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class KafkaOffsets(_Position):
    """Next offset to read per partition of one topic."""

    kind: Literal["kafka"] = "kafka"
    topic: str
    partitions: dict[int, int] = Field(default_factory=dict)

    def spark_json(self) -> str:
        """Spark's ``startingOffsets``/``endingOffsets`` form: ``{"topic": {"0": 42}}``."""
        import json

        return json.dumps({self.topic: {str(p): o for p, o in sorted(self.partitions.items())}})

    def records_until(self, end: KafkaOffsets) -> int:
        """Offsets between this position and ``end`` (an upper bound on records: compaction/transactions leave gaps)."""
        return sum(max(0, o - self.partitions.get(p, 0)) for p, o in end.partitions.items())


class FileListPosition(_Position):
    """Files done so far: everything older than the watermark, plus ``files`` near it.

    Keeping only files at/near the watermark (not the whole history) keeps the
    position small; a file whose mtime falls behind ``watermark_ns - grace`` after
    being listed late is not picked up (see ``late_file_grace``).
    """

    kind: Literal["files"] = "files"
    #: Largest modification time (ns since epoch) among processed files.
    watermark_ns: int = 0
    #: Processed files whose mtime is within the grace window of the watermark (sorted).
    files: tuple[str, ...] = ()


class GeneratorPosition(_Position):
    """Index of the next batch to generate."""

    kind: Literal["generator"] = "generator"
    batch_index: int = Field(default=0, ge=0)


Position = Annotated[KafkaOffsets | FileListPosition | GeneratorPosition, Field(discriminator="kind")]

_ADAPTER: TypeAdapter[Position] = TypeAdapter(Position)


def position_to_json(position: Position) -> str:
    return position.model_dump_json()


def position_from_json(text: str) -> Position:
    """Inverse of :func:`position_to_json`; raises ``pydantic.ValidationError`` on junk."""
    return _ADAPTER.validate_json(text)
