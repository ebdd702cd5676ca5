"""Sources: where records come from, each with an explicit, resumable position.

:func:`build_source` turns a validated source config into a reader implementing
:class:`~sources.base.Source` (and :class:`~sources.base.StreamingSource` for Kafka).
"""

from __future__ import annotations

from sources.base import ERROR_COLUMNS, ERROR_SCHEMA_DDL, Batch, Source, StreamingSource
from sources.position import (
    FileListPosition,
    GeneratorPosition,
    KafkaOffsets,
    Position,
    position_from_json,
    position_to_json,
)
from streamer.config.sources import FilesSourceConfig, GeneratorSourceConfig, KafkaSourceConfig


def build_source(config: KafkaSourceConfig | FilesSourceConfig | GeneratorSourceConfig) -> Source:
    """The reader for a ``source:`` config (imports Spark-only modules lazily)."""
    if isinstance(config, KafkaSourceConfig):
        from sources.kafka import KafkaSource

        return KafkaSource(config)
    if isinstance(config, FilesSourceConfig):
        from sources.files import FilesSource

        return FilesSource(config)
    from sources.generator import GeneratorSource

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
