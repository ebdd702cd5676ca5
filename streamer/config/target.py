"""The target Hudi table: ``target: {path, record_key, partition_by, ordering_field, ...}``.

Defaults follow Hudi's own (``hoodie.parquet.max.file.size`` etc.) so a table written
here behaves like one written by Hudi with the same settings; :attr:`hudi_properties`
names the Hudi option each key stands for.
"""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import BeforeValidator, Field, field_validator, model_validator

from streamer.config.base import StrictModel
from streamer.config.units import Size

_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class SimpleKeyGen(StrictModel):
    """One record-key field, at most one partition field (values used as-is)."""

    type: Literal["simple"]


class ComplexKeyGen(StrictModel):
    """Any number of key and partition fields (``k1:v1,k2:v2`` keys, ``a/b`` partitions)."""

    type: Literal["complex"]


class NonPartitionedKeyGen(StrictModel):
    """Everything in one unpartitioned folder."""

    type: Literal["non_partitioned"]


class TimestampKeyGen(StrictModel):
    """Partition by a formatted time taken from one field (Hudi's TimestampBasedKeyGenerator)."""

    type: Literal["timestamp"]
    timestamp_type: Literal[
        "UNIX_TIMESTAMP", "EPOCHMILLISECONDS", "EPOCHMICROSECONDS", "DATE_STRING", "SCALAR"
    ] = "EPOCHMILLISECONDS"
    #: Java ``DateTimeFormatter`` pattern of the partition path.
    output_date_format: str = "yyyy/MM/dd"
    #: Needed for ``DATE_STRING`` inputs.
    input_date_format: str | None = None
    timezone: str = "UTC"
    scalar_time_unit: Literal["SECONDS", "MILLISECONDS", "MICROSECONDS", "DAYS"] | None = None

    @model_validator(mode="after")
    def _inputs(self) -> TimestampKeyGen:
        if self.timestamp_type == "DATE_STRING" and not self.input_date_format:
            raise ValueError("timestamp_type DATE_STRING needs input_date_format")
        if self.timestamp_type == "SCALAR" and not self.scalar_time_unit:
            raise ValueError("timestamp_type SCALAR needs scalar_time_unit")
        return self


KEY_GENERATOR_CLASSES: dict[str, str] = {
    "simple": "org.apache.hudi.keygen.SimpleKeyGenerator",
    "complex": "org.apache.hudi.keygen.ComplexKeyGenerator",
    "non_partitioned": "org.apache.hudi.keygen.NonpartitionedKeyGenerator",
    "timestamp": "org.apache.hudi.keygen.TimestampBasedKeyGenerator",
}


def _keygen_shorthand(value: object) -> object:
    return {"type": value} if isinstance(value, str) else value


KeyGeneratorConfig = Annotated[
    SimpleKeyGen | ComplexKeyGen | NonPartitionedKeyGen | TimestampKeyGen,
    Field(discriminator="type"),
    BeforeValidator(_keygen_shorthand),
]

FieldList = Annotated[list[Annotated[str, Field(min_length=1)]], BeforeValidator(
    lambda v: [v] if isinstance(v, str) else v
)]


class TargetConfig(StrictModel):
    """Where and how records are written. ``record_key``/``partition_by`` accept a name or a list."""

    path: str = Field(min_length=1)
    record_key: FieldList = Field(min_length=1)
    partition_by: FieldList = []
    #: Field deciding which version of a key wins (Hudi's precombine field). None = arrival order.
    ordering_field: str | None = None
    #: Hudi ``hoodie.table.name``; defaults to the pipeline name.
    table_name: str | None = None
    #: None = simple / complex / non_partitioned, whichever fits ``record_key`` and ``partition_by``.
    key_generator: KeyGeneratorConfig | None = None
    #: ``city=sf/`` instead of ``sf/`` partition folders.
    hive_style: bool = False
    #: Partition paths URL-encoded (Hudi ``hoodie.datasource.write.partitionpath.urlencode``).
    url_encode_partitions: bool = False
    operation: Literal["upsert", "insert", "bulk_insert"] = "upsert"
    #: Parquet blocks carry the RFC-06 index; Avro blocks are what older readers expect.
    log_block_format: Literal["parquet", "avro"] = "parquet"
    compression: Literal["snappy", "zstd", "gzip", "none"] = "snappy"
    #: Hudi ``hoodie.parquet.max.file.size``.
    max_file_size: Size = 120 * 1024**2
    #: Hudi ``hoodie.parquet.small.file.limit``: base files below this receive inserts.
    small_file_limit: Size = 100 * 1024**2
    #: Hudi ``hoodie.logfile.max.size``: a log file above this rolls to a new version.
    log_file_max_size: Size = 1024**3
    #: Hudi ``hoodie.logfile.data.block.max.size``: larger writes split into several blocks.
    log_block_max_size: Size = 256 * 1024**2

    @field_validator("table_name")
    @classmethod
    def _table_name(cls, v: str | None) -> str | None:
        if v is not None and not _IDENTIFIER.match(v):
            raise ValueError(f"table_name {v!r} must be letters, digits and underscores")
        return v

    @model_validator(mode="after")
    def _consistent(self) -> TargetConfig:
        for name in ("record_key", "partition_by"):
            values = getattr(self, name)
            if len(set(values)) != len(values):
                raise ValueError(f"{name} lists a field twice: {values}")
        kg = self.key_generator
        if kg is None:
            pass
        elif kg.type == "simple" and (len(self.record_key) != 1 or len(self.partition_by) > 1):
            raise ValueError("key_generator simple needs one record_key field and at most one partition_by field (use complex)")
        elif kg.type == "non_partitioned" and self.partition_by:
            raise ValueError("key_generator non_partitioned cannot have partition_by")
        elif kg.type == "timestamp" and len(self.partition_by) != 1:
            raise ValueError("key_generator timestamp needs exactly one partition_by field (the time field)")
        if self.small_file_limit > self.max_file_size:
            raise ValueError("small_file_limit cannot exceed max_file_size")
        return self

    @property
    def effective_key_generator(self) -> str:
        """The key generator type in use, after the default is chosen."""
        if self.key_generator is not None:
            return self.key_generator.type
        if not self.partition_by:
            return "non_partitioned"
        if len(self.record_key) == 1 and len(self.partition_by) == 1:
            return "simple"
        return "complex"

    @property
    def key_generator_class(self) -> str:
        """Hudi's class name for ``hoodie.table.keygenerator.class``."""
        return KEY_GENERATOR_CLASSES[self.effective_key_generator]

    def hudi_properties(self) -> dict[str, str]:
        """The Hudi write/table options these settings correspond to (for hoodie.properties etc.)."""
        props = {
            "hoodie.table.name": self.table_name or "",
            "hoodie.datasource.write.recordkey.field": ",".join(self.record_key),
            "hoodie.datasource.write.partitionpath.field": ",".join(self.partition_by),
            "hoodie.datasource.write.hive_style_partitioning": str(self.hive_style).lower(),
            "hoodie.datasource.write.partitionpath.urlencode": str(self.url_encode_partitions).lower(),
            "hoodie.datasource.write.operation": self.operation,
            "hoodie.table.keygenerator.class": self.key_generator_class,
            "hoodie.logfile.data.block.format": self.log_block_format,
            "hoodie.parquet.compression.codec": self.compression,
            "hoodie.parquet.max.file.size": str(self.max_file_size),
            "hoodie.parquet.small.file.limit": str(self.small_file_limit),
            "hoodie.logfile.max.size": str(self.log_file_max_size),
            "hoodie.logfile.data.block.max.size": str(self.log_block_max_size),
        }
        if self.ordering_field:
            props["hoodie.datasource.write.precombine.field"] = self.ordering_field
        kg = self.key_generator
        if isinstance(kg, TimestampKeyGen):
            props["hoodie.keygen.timebased.timestamp.type"] = kg.timestamp_type
            props["hoodie.keygen.timebased.output.dateformat"] = kg.output_date_format
            props["hoodie.keygen.timebased.timezone"] = kg.timezone
            if kg.input_date_format:
                props["hoodie.keygen.timebased.input.dateformat"] = kg.input_date_format
            if kg.scalar_time_unit:
                props["hoodie.keygen.timebased.timestamp.scalar.time.unit"] = kg.scalar_time_unit
        return props
