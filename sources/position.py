"""Source positions: where a batch ended, in a form the runner stores and resumes from.

A position always means "the next thing to read" (like a Kafka committed offset), so
``read_batch(start=previous.end)`` neither re-reads nor skips. Positions are small
pydantic models tagged by ``kind``; :func:`position_to_json` / :func:`position_from_json`
round-trip them through the Hudi commit metadata (``extraMetadata``).

Kafka offsets also convert to and from Apache Hudi HoodieStreamer's own checkpoint
string (:meth:`KafkaOffsets.to_hoodie_streamer`, :meth:`KafkaOffsets.from_hoodie_streamer`),
so a topic can be handed over between HoodieStreamer and us in either direction.
"""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from streamer.errors import SourceError

#: Kafka's legal topic names (``[a-zA-Z0-9._-]``, at most 249 characters): no ``,`` or ``:``,
#: which is what makes HoodieStreamer's checkpoint string unambiguous.
_KAFKA_TOPIC = re.compile(r"[A-Za-z0-9._-]{1,249}")
_DIGITS = re.compile(r"[0-9]{1,19}")
#: Java ``int`` (partition) and ``long`` (offset) bounds, as HoodieStreamer parses them.
_MAX_PARTITION = 2**31 - 1
_MAX_OFFSET = 2**63 - 1
_HOODIE_STREAMER_FORM = "<topic>,<partition>:<offset>[,<partition>:<offset>...]"


class CheckpointFormatError(SourceError):
    """A HoodieStreamer Kafka checkpoint string we refuse to guess about.

    ``value`` is the text, ``reason`` what is wrong with it (callers that know the
    commit and key add them to their own message).
    """

    def __init__(self, value: str, reason: str) -> None:
        super().__init__(
            f"{value[:200]!r} is not a HoodieStreamer Kafka checkpoint ({_HOODIE_STREAMER_FORM}): {reason}"
        )
        self.value = value
        self.reason = reason


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

    def to_hoodie_streamer(self) -> str:
        """HoodieStreamer's checkpoint string, e.g. ``trips,0:123,1:456`` (partitions ascending).

        It is what Hudi's ``KafkaOffsetGen.CheckpointUtils.offsetsToStr`` writes under
        ``deltastreamer.checkpoint.key``; offsets mean "next to read" there as here, so the
        numbers are copied as they are. Raises :class:`CheckpointFormatError` for what that
        format cannot say (no partitions, a topic with ``,``/``:``, out-of-range numbers)
        rather than writing a string HoodieStreamer would misread.
        """
        text = ",".join([self.topic, *(f"{p}:{o}" for p, o in sorted(self.partitions.items()))])
        _check_topic(text, self.topic)
        if not self.partitions:
            raise CheckpointFormatError(text, "no partitions (the format needs at least one)")
        for p, o in self.partitions.items():
            _check_range(text, p, o)
        return text

    @classmethod
    def from_hoodie_streamer(cls, text: str) -> KafkaOffsets:
        """Parse HoodieStreamer's checkpoint string strictly (inverse of :meth:`to_hoodie_streamer`).

        Strict on purpose: HoodieStreamer treats a string it cannot read as "no
        checkpoint" and restarts from ``auto.offset.reset``; we raise
        :class:`CheckpointFormatError` instead, so nothing is silently re-read or skipped.
        Partitions may come in any order; each may appear once.
        """
        if not text:
            raise CheckpointFormatError(text, "empty")
        topic, *entries = text.split(",")
        _check_topic(text, topic)
        if not entries:
            raise CheckpointFormatError(text, "no <partition>:<offset> entries after the topic")
        partitions: dict[int, int] = {}
        for entry in entries:
            p, o = _parse_entry(text, entry)
            if p in partitions:
                raise CheckpointFormatError(text, f"partition {p} appears more than once")
            partitions[p] = o
        return cls(topic=topic, partitions=partitions)


def _check_topic(text: str, topic: str) -> None:
    if not _KAFKA_TOPIC.fullmatch(topic):
        raise CheckpointFormatError(
            text, f"topic {topic!r} is not a Kafka topic name (1-249 of [a-zA-Z0-9._-])"
        )


def _parse_entry(text: str, entry: str) -> tuple[int, int]:
    """One ``<partition>:<offset>`` entry, both non-negative decimal integers."""
    p, sep, o = entry.partition(":")
    if not sep:
        raise CheckpointFormatError(text, f"entry {entry!r} is not <partition>:<offset>")
    for name, digits in (("partition", p), ("offset", o)):
        if not _DIGITS.fullmatch(digits):
            raise CheckpointFormatError(
                text, f"entry {entry!r}: {name} {digits!r} is not a non-negative integer (at most 19 digits)"
            )
    _check_range(text, int(p), int(o))
    return int(p), int(o)


def _check_range(text: str, partition: int, offset: int) -> None:
    if not 0 <= partition <= _MAX_PARTITION:
        raise CheckpointFormatError(text, f"partition {partition} is outside [0, {_MAX_PARTITION}]")
    if not 0 <= offset <= _MAX_OFFSET:
        raise CheckpointFormatError(text, f"offset {offset} of partition {partition} is outside [0, {_MAX_OFFSET}]")


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
