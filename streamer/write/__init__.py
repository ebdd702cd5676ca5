"""Write Hudi MOR tables: ``HudiWriter.create(...)`` / ``HudiWriter.open(path)``."""

from streamer.write.config import (
    KeyGenType,
    LogBlockFormat,
    TableConfig,
    TimestampKeyGenConfig,
    TimestampType,
    WriteOptions,
)
from streamer.write.result import CommitResult
from streamer.write.writer import HudiWriter

__all__ = [
    "CommitResult",
    "HudiWriter",
    "KeyGenType",
    "LogBlockFormat",
    "TableConfig",
    "TimestampKeyGenConfig",
    "TimestampType",
    "WriteOptions",
]
