"""The target Hudi table: ``target: {path, record_key, partition_by, ordering_field, ...}``.

Defaults follow Hudi's own (``hoodie.parquet.max.file.size`` etc.) so a table written
here behaves like one written by Hudi with the same settings; each key's comment names
the Hudi option it stands for. The keys become the writer's ``TableConfig`` and
``WriteOptions`` in one place, :mod:`streamer.pipeline.sink`; a key the writer cannot
honour is refused here, at validation, never accepted and ignored.
"""

from __future__ import annotations

import re
from datetime import timedelta
from typing import TYPE_CHECKING, Annotated, Literal

from pydantic import BeforeValidator, Field, field_validator, model_validator

from streamer import defaults
from streamer.config.base import StrictModel
from streamer.config.units import Duration, Size

if TYPE_CHECKING:
    from streamer.table.identity import IndexConfig

_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class SimpleKeyGen(StrictModel):
    """One record-key field, at most one partition field (values used as-is)."""

    #: Hudi's ``SimpleKeyGenerator`` (``hoodie.datasource.write.keygenerator.class``).
    type: Literal["simple"]


class ComplexKeyGen(StrictModel):
    """Any number of key and partition fields (``k1:v1,k2:v2`` keys, ``a/b`` partitions)."""

    #: Hudi's ``ComplexKeyGenerator``.
    type: Literal["complex"]


class NonPartitionedKeyGen(StrictModel):
    """Everything in one unpartitioned folder."""

    #: Hudi's ``NonpartitionedKeyGenerator``.
    type: Literal["non_partitioned"]


class TimestampKeyGen(StrictModel):
    """Partition by a formatted time taken from one field (Hudi's TimestampBasedKeyGenerator)."""

    #: Hudi's ``TimestampBasedKeyGenerator``; the time field is the one ``partition_by`` field.
    type: Literal["timestamp"]
    #: Hudi's ``EPOCHMICROSECONDS`` and ``SCALAR`` are named so that they are refused with
    #: a reason (the writer does not implement them), not as unknown values.
    timestamp_type: Literal[
        "UNIX_TIMESTAMP", "EPOCHMILLISECONDS", "EPOCHMICROSECONDS", "DATE_STRING", "SCALAR"
    ] = "EPOCHMILLISECONDS"
    #: Java ``DateTimeFormatter`` pattern of the partition path.
    output_date_format: str = "yyyy/MM/dd"
    #: Needed for ``DATE_STRING`` inputs.
    input_date_format: str | None = None
    #: Time zone the partition path is formatted in (Hudi ``hoodie.keygen.timebased.timezone``).
    timezone: str = "UTC"

    @field_validator("timestamp_type")
    @classmethod
    def _supported(cls, v: str) -> str:
        # the table format's own list (imported here: the table layer loads pyarrow)
        from streamer.table.identity import TimestampType

        supported = sorted(t.value for t in TimestampType)
        if v not in supported:
            raise ValueError(f"timestamp_type {v} is not supported by this writer (one of {supported})")
        return v

    @model_validator(mode="after")
    def _inputs(self) -> TimestampKeyGen:
        if self.timestamp_type == "DATE_STRING" and not self.input_date_format:
            raise ValueError("timestamp_type DATE_STRING needs input_date_format")
        return self


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


class BloomIndexSettings(StrictModel):
    """Bloom filters and key ranges in base files and log blocks (RFC-06); an upsert looks
    its keys up, inserts fill small file groups. Hudi's default index."""

    #: Hudi ``hoodie.index.type=BLOOM``.
    type: Literal["bloom"]


class BucketIndexSettings(StrictModel):
    """Hudi's bucket index (``hoodie.index.type=BUCKET``, SIMPLE engine): a key's hash picks
    its file group, nothing is looked up (an upsert costs O(batch) at any table size), and
    log blocks carry their key ranges but no bloom filter (nothing probes one; Hudi's own
    log blocks carry none). Fixed when the table is created; Hudi writers of the table
    must set the same values."""

    #: Hudi ``hoodie.index.type=BUCKET``.
    type: Literal["bucket"]
    #: Hudi ``hoodie.bucket.index.num.buckets``: file groups per partition, for the table's life.
    num_buckets: Annotated[int, Field(strict=True, ge=1, lt=100_000_000)]
    #: Hudi ``hoodie.bucket.index.hash.field``: record key fields hashed; empty = all of them.
    hash_field: FieldList = []


class GlobalBloomIndexSettings(StrictModel):
    """The bloom index looked up in every partition (Hudi's ``GLOBAL_BLOOM``): a record key
    is unique across the table, so a row whose partition column changes (a status, a
    date) does not stay behind in its old partition, and a delete finds its key wherever
    it is. Each upsert asks every partition's file groups (their footers first), so it
    costs more than ``bloom`` on a table of many partitions. Planned on the driver: the
    ``local`` engine only."""

    #: Hudi ``hoodie.index.type=GLOBAL_BLOOM``.
    type: Literal["global_bloom"]
    #: Hudi ``hoodie.bloom.index.update.partition.path``: ``true`` = an update with a new
    #: partition value deletes the stored row in its old partition and inserts it in the
    #: new one; ``false`` = the row is updated where it is stored.
    update_partition_path: bool = True


IndexSettings = Annotated[
    BloomIndexSettings | GlobalBloomIndexSettings | BucketIndexSettings,
    Field(discriminator="type"),
    BeforeValidator(_keygen_shorthand),
]


class HiveCatalogConfig(StrictModel):
    """Register the table in a Hive metastore after each commit, as Hudi's Hive sync does
    (``HoodieStreamer --enable-sync``); see docs/catalog.md. A failed sync is reported and
    retried at the next commit; it never fails the commit."""

    #: Hudi ``hoodie.datasource.hive_sync.mode=hms``: the metastore's thrift API.
    type: Literal["hive"]
    #: Hudi ``hoodie.datasource.hive_sync.metastore.uris``: ``thrift://host:port``.
    uri: str = Field(min_length=1)
    #: Hudi ``hoodie.datasource.hive_sync.database``; created when missing.
    database: str = "default"
    #: Hudi ``hoodie.datasource.hive_sync.table``; default the target's ``table_name``
    #: (else the pipeline name). A MOR table registers ``<table>_ro`` and ``<table>_rt``.
    table: str | None = None
    #: Hudi ``hoodie.datasource.hive_sync.skip_ro_suffix``: the read-optimized table is
    #: ``<table>`` instead of ``<table>_ro``.
    skip_ro_suffix: bool = False
    #: Hudi ``hoodie.meta.sync.sync_snapshot_with_table_name`` (default true in Hudi 1.x):
    #: also register the snapshot (real-time) table as plain ``<table>``. Ignored with
    #: ``skip_ro_suffix`` (that name is then the read-optimized table, as in Hudi).
    snapshot_with_table_name: bool = True
    #: Hudi ``hoodie.datasource.hive_sync.sync_as_datasource``: the Spark table parameters
    #: (``spark.sql.sources.provider=hudi``, schema JSON) that make Spark read through the
    #: ``hudi`` data source.
    sync_as_datasource: bool = True
    #: Put the table path into the Spark schema's field metadata (``morhudi.options``),
    #: which our Python data source needs to read a catalog table (docs/catalog.md).
    spark_source_options: bool = True
    #: Hudi ``hoodie.datasource.hive_sync.support_timestamp``: timestamp columns as Hive
    #: ``timestamp`` (default: ``bigint``, as Hudi).
    support_timestamp: bool = False
    #: Hudi ``hoodie.datasource.hive_sync.schema_string_length_thresh``: characters per
    #: ``spark.sql.sources.schema.part.N`` parameter.
    schema_string_length_threshold: Annotated[int, Field(ge=100)] = 4000
    #: Hudi ``hoodie.meta_sync.spark.version``: written as ``spark.sql.create.version``.
    spark_version: str | None = None
    #: Hudi ``hoodie.datasource.hive_sync.table_properties``: extra table parameters.
    table_properties: dict[str, str] = {}
    #: Hudi ``hoodie.datasource.hive_sync.serde_properties``: extra serde parameters.
    serde_properties: dict[str, str] = {}
    #: The most one sync may wait on the metastore, all its calls together: a slow or hung
    #: metastore never holds a pipeline longer (the commit is durable before the sync).
    timeout: Duration = timedelta(seconds=30)

    @field_validator("uri")
    @classmethod
    def _thrift_uri(cls, v: str) -> str:
        from urllib.parse import urlparse

        parsed = urlparse(v)
        if parsed.scheme != "thrift" or not parsed.hostname or not parsed.port:
            raise ValueError(f"uri {v!r} must be thrift://host:port")
        return v

    @field_validator("database", "table")
    @classmethod
    def _hive_name(cls, v: str | None) -> str | None:
        if v is not None and not _IDENTIFIER.match(v):
            raise ValueError(f"{v!r} must be letters, digits and underscores (a Hive name)")
        return v


CatalogConfig = Annotated[HiveCatalogConfig, Field(discriminator="type")]


#: ``record_key`` of a ``topic_pattern`` pipeline that names none: each table's primary key,
#: read from its topic's message keys when the table is found.
PRIMARY_KEY = "(primary key)"


class TargetConfig(StrictModel):
    """Where and how records are written. ``record_key``/``partition_by`` accept a name or a list."""

    #: Table base path (Hudi ``hoodie.base.path``): a local folder or URI (``s3://bucket/lake/trips``).
    path: str = Field(min_length=1)
    #: Field(s) identifying a record (Hudi ``hoodie.datasource.write.recordkey.field``); with a
    #: source's ``topic_pattern``, by default each table's primary key, from its message keys.
    record_key: FieldList = Field(min_length=1)
    #: Partition path field(s) (Hudi ``hoodie.datasource.write.partitionpath.field``); empty = unpartitioned.
    partition_by: FieldList = []
    #: Field deciding which version of a key wins (Hudi's precombine field). None = arrival order.
    ordering_field: str | None = None
    #: Hudi ``hoodie.table.name``; defaults to the pipeline name with ``-`` as ``_``.
    table_name: str | None = None
    #: None = simple / complex / non_partitioned, whichever fits ``record_key`` and ``partition_by``.
    key_generator: KeyGeneratorConfig | None = None
    #: ``city=sf/`` instead of ``sf/`` partition folders.
    hive_style: bool = False
    #: Partition paths URL-encoded (Hudi ``hoodie.datasource.write.partitionpath.urlencode``).
    #: Partition values escaped as Hudi's ``escapePathName`` (``a/b`` -> ``a%2Fb``), Hudi's
    #: ``hoodie.datasource.write.partitionpath.urlencode`` (persisted in hoodie.properties).
    url_encode_partitions: bool = False
    #: Hudi ``hoodie.datasource.write.operation``: ``upsert`` updates existing keys; ``insert`` skips the
    #: index lookup (an existing key is written again); ``bulk_insert`` writes new file groups only.
    operation: Literal["upsert", "insert", "bulk_insert"] = "upsert"
    #: With ``operation: insert``: drop records whose key the table already holds (HoodieStreamer's
    #: ``--filter-dupes``), found through the bloom index and confirmed by reading those file
    #: groups; the dropped records count as filtered.
    filter_dupes: bool = False
    #: Parquet blocks carry the RFC-06 index; Avro blocks are what older readers expect.
    log_block_format: Literal["parquet", "avro"] = defaults.LOG_BLOCK_FORMAT
    #: Hudi ``hoodie.parquet.compression.codec``: base files and Parquet log blocks.
    compression: Literal["snappy", "zstd", "gzip", "none"] = defaults.PARQUET_CODEC
    #: Hudi ``hoodie.parquet.max.file.size``.
    max_file_size: Size = defaults.MAX_FILE_SIZE
    #: Hudi ``hoodie.parquet.small.file.limit``: base files below this receive inserts.
    small_file_limit: Size = defaults.SMALL_FILE_LIMIT
    #: Hudi ``hoodie.logfile.max.size``: refused if set (see :meth:`_log_file_max_size`).
    log_file_max_size: Size | None = None
    #: Hudi ``hoodie.logfile.data.block.max.size``: one commit's data for a file group
    #: above this is written as several data blocks.
    log_block_max_size: Size = defaults.LOG_BLOCK_MAX_SIZE
    #: How a write finds a key's file group: ``bloom`` (lookup), ``global_bloom`` (lookup
    #: across partitions: a key is unique in the table) or ``bucket`` (key hash).
    #: Persisted with the table; a different value for an existing table is refused.
    index: IndexSettings = BloomIndexSettings(type="bloom")
    #: Hudi table version a *new* table is created at: 6 (Hudi 0.x, and read by every engine
    #: that reads Hudi, Trino included), 8 (Hudi 1.0) or 9 (Hudi 1.1+). An existing table is
    #: always written at its own version. Why 6 is the default: docs/table-versions.md.
    table_version: Literal[6, 8, 9] = 6
    #: Keep a catalog (Hive metastore) current after each commit; none by default.
    catalog: CatalogConfig | None = None
    #: How long a commit waits for the table's writer lock, held by another writer of the
    #: table or by a table service between two commits (Hudi ``hoodie.write.lock.wait_time_ms``).
    lock_timeout: Duration = timedelta(seconds=30)
    #: How many times a batch's commit is tried again after a conflict with another writer
    #: (the lock still held after ``lock_timeout``, an Apache Hudi writer writing the table, a
    #: clustering pending on the batch's file groups), after 1, 2, 4... seconds, before the run
    #: fails (Hudi ``hoodie.write.num.retries.on.conflict.failures``). A try that conflicted
    #: committed nothing; a stop (Ctrl-C) during a wait ends the run at once.
    conflict_retries: int = Field(default=3, ge=0, le=20)

    @field_validator("table_name")
    @classmethod
    def _table_name(cls, v: str | None) -> str | None:
        if v is not None and not _IDENTIFIER.match(v):
            raise ValueError(f"table_name {v!r} must be letters, digits and underscores")
        return v

    @field_validator("log_file_max_size")
    @classmethod
    def _log_file_max_size(cls, v: int | None) -> int | None:
        # Hudi rolls an appended-to log file over to a new version once it passes this
        # size. This writer never appends to a log file: each commit writes a new log
        # file version per file group, so a file holds one commit's blocks for one group.
        # Bounding that too would take several log files per file group and commit, each
        # with its own write stat, which the commit does not produce.
        if v is not None:
            raise ValueError(
                "log_file_max_size is not supported: this writer never appends to a log file "
                "(every commit writes a new log file per file group), so a log file holds one "
                "commit's blocks; bound blocks with log_block_max_size and file slices with "
                "compaction"
            )
        return v

    @field_validator("log_block_max_size")
    @classmethod
    def _positive_block_size(cls, v: int) -> int:
        if v <= 0:
            raise ValueError("log_block_max_size must be positive")
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
        elif kg.type == "timestamp" and (len(self.partition_by) != 1 or len(self.record_key) != 1):
            raise ValueError("key_generator timestamp needs one record_key field and exactly one "
                             "partition_by field (the time field), as Hudi's TimestampBasedKeyGenerator")
        if self.filter_dupes and self.operation != "insert":
            raise ValueError(f"filter_dupes is for operation insert (an {self.operation} updates an existing "
                             "key instead of writing it again)")
        if self.small_file_limit > self.max_file_size:
            raise ValueError("small_file_limit cannot exceed max_file_size")
        if self.index.type == "bucket":
            unknown = [f for f in self.index.hash_field if f not in self.record_key]
            if unknown:
                raise ValueError(f"index.hash_field {unknown} must be record_key fields {self.record_key}")
            if len(set(self.index.hash_field)) != len(self.index.hash_field):
                raise ValueError(f"index.hash_field lists a field twice: {self.index.hash_field}")
        return self

    @property
    def writer_index(self) -> IndexConfig:
        """The table's :class:`~streamer.table.identity.IndexConfig` for ``index``."""
        # imported here: ``streamer validate`` need not load the table layer (pyarrow)
        from streamer.table.identity import IndexConfig, IndexType

        if self.index.type == "bloom":
            return IndexConfig()
        if self.index.type == "global_bloom":
            return IndexConfig(IndexType.GLOBAL_BLOOM, update_partition_path=self.index.update_partition_path)
        return IndexConfig(IndexType.BUCKET, self.index.num_buckets, tuple(self.index.hash_field))

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
        """Hudi's class name for ``hoodie.table.keygenerator.class`` (the writer's table)."""
        # imported here: ``streamer validate`` need not load the table layer (pyarrow)
        from streamer.table.identity import KeyGenType

        return KeyGenType.parse(self.effective_key_generator).value
