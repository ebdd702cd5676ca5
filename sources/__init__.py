"""Sources: where records come from, each with an explicit, resumable position.

:func:`build_source` turns a validated source config into a reader implementing
:class:`~streamer.sources.base.Source` (and :class:`~streamer.sources.base.StreamingSource` for Kafka).
"""

from __future__ import annotations

from streamer.config.sources import FilesSourceConfig, GeneratorSourceConfig, KafkaSourceConfig
from streamer.sources.base import ERROR_COLUMNS, ERROR_SCHEMA_DDL, Batch, Source, StreamingSource
from streamer.sources.position import (
    FileListPosition,
    GeneratorPosition,
    KafkaOffsets,
    Position,
    position_from_json,
    position_to_json,
)


def build_source(config: KafkaSourceConfig | FilesSourceConfig | GeneratorSourceConfig) -> Source:
    """The reader for a ``source:`` config (imports Spark-only modules lazily)."""
    if isinstance(config, KafkaSourceConfig):
        from streamer.sources.kafka import KafkaSource

        return KafkaSource(config)
    if isinstance(config, FilesSourceConfig):
        from streamer.sources.files import FilesSource

        return FilesSource(config)
    from streamer.sources.generator import GeneratorSource

    return GeneratorSource(config)


__all__ = [
    "ERROR_COLUMNS",
    "ERROR_SCHEMA_DDL",
    "Batch",
    "FileListPosition",
    "GeneratorPosition",
    "KafkaOffsets",
    "Position",
    "Source",
    "StreamingSource",
    "build_source",
    "position_from_json",
    "position_to_json",
]
