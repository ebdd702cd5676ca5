"""streamer.read: query Hudi tables (snapshot, read-optimized, incremental, time travel).

``Table.open(path).read(...)`` returns a ``pyarrow.Table``; the Spark data source
(:func:`streamer.read.spark_source.register`) serves the same rows as ``format("morhudi")``.
"""

from streamer.read.table import QueryError, ReadResult, Table
from streamer.table.merge import ScanStats

__all__ = ["QueryError", "ReadResult", "ScanStats", "Table"]
