"""How we write a table: per-writer settings (sizes, codecs, filters, engine).

A user may change these between runs without rewriting data; none is persisted. The
table's identity (keys, partitioning, index), which is persisted, is
:mod:`streamer.table.identity`. A pipeline's ``target:`` becomes both in one place,
:mod:`streamer.pipeline.sink`; defaults shared with the YAML models come from
:mod:`streamer.defaults`.
"""

from __future__ import annotations

from dataclasses import dataclass

from streamer import defaults
from streamer.errors import ConfigError
from streamer.index.rfc06 import BloomParams

_BLOOM = BloomParams()
#: Codecs every Hudi reader reads (``none`` = Hudi's ``uncompressed``).
PARQUET_CODECS = ("snappy", "zstd", "gzip", "none")


@dataclass(frozen=True)
class WriteOptions:
    """Per-writer knobs (not persisted). Defaults follow Hudi's where Hudi has one.

    ``small_file_limit``/``max_file_size`` drive insert routing (Hudi's
    ``hoodie.parquet.small.file.limit`` / ``hoodie.parquet.max.file.size``).
    ``bloom_*`` size the Hudi-compatible dynamic bloom filters (Hudi's defaults, so a
    Hudi reader's bloom index can use our base-file footers unchanged).
    ``engine``: ``local``, ``spark`` or ``auto`` (local below ``auto_local_max_rows``).
    ``parquet_codec``: compression of base files and Parquet log blocks (Hudi's
    ``hoodie.parquet.compression.codec``).
    ``log_block_max_size``: one commit's data for a file group above this many bytes is
    written as several data blocks (Hudi's ``hoodie.logfile.data.block.max.size``).
    ``lock_timeout_s``: how long a commit waits for the table's writer lock (held by
    another writer, or by a table service between two commits) before it raises the
    retryable :class:`~streamer.errors.CommitConflictError` naming the holder.
    """

    small_file_limit: int = defaults.SMALL_FILE_LIMIT
    max_file_size: int = defaults.MAX_FILE_SIZE
    default_record_size: int = 1024
    bloom_num_entries: int = _BLOOM.num_entries
    bloom_fpp: float = _BLOOM.fpp
    bloom_max_entries: int = _BLOOM.max_entries
    slice_bloom_num_entries: int = _BLOOM.slice_num_entries
    slice_bloom_fpp: float = _BLOOM.slice_fpp
    slice_bloom_max_entries: int = _BLOOM.slice_max_entries
    engine: str = "auto"
    auto_local_max_rows: int = defaults.LOCAL_MAX_ROWS
    parallelism: int = defaults.LOCAL_THREADS
    lock_timeout_s: float = 30.0
    heartbeat_expiry_s: float = 60.0
    combine_before_insert: bool = True
    parquet_codec: str = defaults.PARQUET_CODEC
    log_block_max_size: int = defaults.LOG_BLOCK_MAX_SIZE

    def __post_init__(self) -> None:
        if self.max_file_size <= 0 or self.small_file_limit < 0:
            raise ConfigError("max_file_size must be > 0 and small_file_limit >= 0")
        if self.small_file_limit > self.max_file_size:
            raise ConfigError(
                f"small_file_limit ({self.small_file_limit}) exceeds max_file_size "
                f"({self.max_file_size})"
            )
        if self.engine not in ("auto", "local", "spark"):
            raise ConfigError(f"engine must be auto, local or spark, not {self.engine!r}")
        if self.parquet_codec not in PARQUET_CODECS:
            raise ConfigError(f"parquet_codec must be one of {PARQUET_CODECS}, not {self.parquet_codec!r}")
        if self.log_block_max_size <= 0:
            raise ConfigError(f"log_block_max_size must be positive, not {self.log_block_max_size}")
