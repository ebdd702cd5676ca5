"""Write Hudi MOR tables: ``HudiWriter.create(...)`` / ``HudiWriter.open(path)``."""

from streamer.table.identity import KeyGenType, TableConfig, TimestampKeyGenConfig, TimestampType
from streamer.table.log_format import LogBlockFormat
from streamer.write.config import WriteOptions
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
