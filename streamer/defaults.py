"""Defaults shared by the YAML models (``streamer.config``) and the writer (``streamer.write``).

Each is written here once and imported by both sides, so ``engine: auto`` in a pipeline
and ``WriteOptions()`` in Python mean the same thing. This module imports nothing: the
config models load it without pulling in the writer (and pyarrow); only ``typing``, for
the ``Final`` that gives the choices below their literal types.
"""

from __future__ import annotations

from typing import Final

MiB = 1024 * 1024

#: ``engine: auto`` writes batches up to this many rows on the driver, larger ones with Spark
#: (``EngineConfig.local_max_records`` / ``WriteOptions.auto_local_max_rows``). Measured
#: (benchmarks/RESULTS.md, "Engines"; 2 cores): the local engine upserts 1M rows ~2x faster
#: than the Spark engine (3M: ~1.8x), but its driver peaks ~+190 MiB at 1M and ~+650 MiB
#: at 3M (a Spark DataFrame is collected through the JVM's heap first) where the Spark
#: engine's driver stays flat. Up to 1M the driver is safe and local wins; above, the
#: driver's memory decides.
LOCAL_MAX_ROWS = 1_000_000
#: Threads of the local engine and of the bloom-index lookup
#: (``EngineConfig.local_threads`` / ``WriteOptions.parallelism``).
LOCAL_THREADS = 4

#: Hudi ``hoodie.parquet.max.file.size``.
MAX_FILE_SIZE = 120 * MiB
#: Hudi ``hoodie.parquet.small.file.limit``.
SMALL_FILE_LIMIT = 100 * MiB
#: Hudi ``hoodie.logfile.data.block.max.size``.
LOG_BLOCK_MAX_SIZE = 256 * MiB
#: Compression of base files and Parquet log blocks. Hudi's default is gzip; snappy writes
#: about 3x faster and every Hudi reader reads it.
PARQUET_CODEC: Final = "snappy"
#: Parquet blocks carry the RFC-06 index; Avro blocks are what older readers expect.
LOG_BLOCK_FORMAT: Final = "parquet"

#: Bytes of immutable base-file facts (footers, parsed bloom filters, key columns) the index
#: keeps per process between lookups (see ``streamer.index.footer_cache``).
FOOTER_CACHE_BYTES = 256 * MiB
