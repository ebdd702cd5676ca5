"""From a pipeline's ``target:`` and ``engine:`` to the MOR writer, in one place.

The YAML names (``record_key``, ``partition_by``, ``compression``, ...) become the
writer's table identity (:class:`~streamer.table.identity.TableConfig`, persisted in
``hoodie.properties``) and its per-writer knobs
(:class:`~streamer.write.config.WriteOptions`) here only: :func:`table_config` and
:func:`write_options` read every ``target:`` key the writer honours (the others are
refused when the YAML is validated). When the table already exists, the identity on
storage wins, and a YAML that disagrees with it is refused naming the field: silently
re-keying an existing table would scatter its records.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from streamer.config.pipeline import EngineConfig
from streamer.config.target import TargetConfig, TimestampKeyGen
from streamer.data import is_spark_dataframe
from streamer.errors import ConfigError
from streamer.fs import FileSystem, resolve
from streamer.fs_s3 import S3Settings
from streamer.table.identity import KeyGenType, TableConfig, TimestampKeyGenConfig, TimestampType
from streamer.table.log_format import LogBlockFormat
from streamer.table.properties import properties_path
from streamer.write.config import WriteOptions
from streamer.write.writer import HudiWriter

if TYPE_CHECKING:
    import pyarrow as pa

    from streamer.read import Table


def table_config(target: TargetConfig) -> TableConfig:
    """The table identity a new table gets from ``target:``."""
    ts = TimestampKeyGenConfig()
    kg = target.key_generator
    if isinstance(kg, TimestampKeyGen):
        try:
            ts_type = TimestampType(kg.timestamp_type)
        except ValueError as e:
            raise ConfigError(
                f"target.key_generator.timestamp_type {kg.timestamp_type} is not supported by the "
                f"writer (supported: {[t.value for t in TimestampType]})"
            ) from e
        ts = TimestampKeyGenConfig(
            timestamp_type=ts_type,
            output_format=kg.output_date_format,
            input_format=kg.input_date_format or ts.input_format,
            timezone=kg.timezone,
        )
    return TableConfig(
        name=target.table_name or "",
        record_key_fields=tuple(target.record_key),
        partition_fields=tuple(target.partition_by),
        ordering_field=target.ordering_field,
        keygen=KeyGenType.parse(target.effective_key_generator),
        hive_style_partitioning=target.hive_style,
        timestamp=ts,
        log_block_format=LogBlockFormat(target.log_block_format),
        url_encode_partitions=target.url_encode_partitions,
        index=target.writer_index,
        table_version=target.table_version,
    )


def open_table(path: str, s3: S3Settings | None = None) -> Table | None:
    """The table at ``path`` for reading, or None when there is none yet."""
    from streamer.read import Table

    fs, base = resolve(path, s3=s3)
    return Table.open(base, fs=fs) if fs.exists(properties_path(base)) else None


def write_options(target: TargetConfig, engine: EngineConfig) -> WriteOptions:
    """The writer's knobs: sizes and codec from ``target:``, the engine from ``engine:``."""
    return WriteOptions(
        small_file_limit=int(target.small_file_limit),
        max_file_size=int(target.max_file_size),
        parquet_codec=target.compression,
        log_block_max_size=int(target.log_block_max_size),
        engine=engine.mode,
        auto_local_max_rows=engine.local_max_records,
        parallelism=engine.local_threads,
        lock_timeout_s=target.lock_timeout.total_seconds(),
    )


def engine_for(data: Any, engine: EngineConfig) -> str:
    """The engine a prepared batch is written with: decided once, by the batch step.

    With ``mode: auto`` the batch step (``pipeline.batch.on_driver``) has already applied
    ``local_max_records``: a batch it collected to the driver is Arrow, one it kept
    distributed is a Spark DataFrame. Naming the engine that implies keeps the writer
    from counting the DataFrame's rows again (and possibly deciding otherwise).
    """
    if engine.mode != "auto":
        return engine.mode
    return "spark" if is_spark_dataframe(data) else "local"


def _check_identity(path: str, on_disk: TableConfig, wanted: TableConfig) -> None:
    checks = (
        ("record_key", on_disk.record_key_fields, wanted.record_key_fields),
        ("partition_by", on_disk.partition_fields, wanted.partition_fields),
        ("ordering_field", on_disk.ordering_field, wanted.ordering_field),
        ("key_generator", on_disk.keygen, wanted.keygen),
        ("hive_style", on_disk.hive_style_partitioning, wanted.hive_style_partitioning),
        ("url_encode_partitions", on_disk.url_encode_partitions, wanted.url_encode_partitions),
    )
    def show(v: object) -> object:
        return v.short_name if isinstance(v, KeyGenType) else v

    for name, have, want in checks:
        if have != want:
            raise ConfigError(
                f"target.{name} is {show(want)!r} but the table at {path} was created with "
                f"{show(have)!r}; a table's keys and partitioning cannot change"
            )


class TableSink:
    """Opens the target table lazily (it is created by the first batch that has data)."""

    def __init__(self, target: TargetConfig, engine: EngineConfig, fs: FileSystem | None = None,
                 s3: S3Settings | None = None) -> None:
        self.target = target
        self.engine = engine
        if fs is None:
            fs, path = resolve(target.path, s3)  # s3: the pipeline's storage.s3, if any
        else:
            path = target.path.rstrip("/")
        self.fs = fs
        self.path = path
        self.options = write_options(target, engine)
        self.wanted = table_config(target)
        self._writer: HudiWriter | None = None

    def engine_for(self, data: Any) -> str:
        """The ``engine=`` to pass with ``data`` (a prepared batch): see :func:`engine_for`."""
        if self.target.index.type == "global_bloom":
            return "local"  # see pipeline.batch.on_driver
        return engine_for(data, self.engine)

    def exists(self) -> bool:
        return self.fs.exists(properties_path(self.path))

    def writer(self, schema: pa.Schema | None = None) -> HudiWriter:
        if self._writer is None:
            if self.exists():
                # the table's index, or a bucket layout it records none of (adopted)
                w = HudiWriter.open(self.path, options=self.options, fs=self.fs, index=self.wanted.index)
                _check_identity(self.path, w.config, self.wanted)
                # the data block type is a per-writer setting (as Hudi's
                # hoodie.logfile.data.block.format): this run's YAML decides it
                w.config = w.config.with_changes(log_block_format=self.wanted.log_block_format)
            else:
                w = HudiWriter.create(self.path, self.wanted, schema=schema, options=self.options, fs=self.fs)
            self._writer = w
        return self._writer
