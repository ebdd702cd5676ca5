"""A table's identity: its keys, partitioning, key generator and index.

Everything here is persisted in ``hoodie.properties`` and decides where a record lives,
so every writer that opens the table later builds the same keys and partition paths and
finds a key's file group the same way. It belongs to the table format, below the
writer, the services and the pipeline configuration that all read it; the per-writer
settings (sizes, codecs, filters) are :class:`streamer.write.config.WriteOptions`.
Keeping the mapping to Hudi property names here means the rest of the code never spells
a ``hoodie.*`` string.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from enum import Enum
from typing import Any

from streamer import defaults
from streamer.errors import ConfigError, CorruptDataError
from streamer.table.log_format import LogBlockFormat
from streamer.table.properties import WRITABLE_VERSIONS, WRITE_VERSION, TableProperties
from streamer.table.table_keys import (
    BUCKET_HASH_FIELD,
    BUCKET_NUM_BUCKETS,
    GLOBAL_UPDATE_PARTITION_PATH,
    HUDI_BLOOM_UPDATE_PARTITION_PATH,
    HUDI_BUCKET_ENGINE,
    HUDI_BUCKET_HASH_FIELD,
    HUDI_BUCKET_NUM_BUCKETS,
    HUDI_INDEX_TYPE,
    INDEX_TYPE,
    TS_INPUT_FMT,
    TS_OUTPUT_FMT,
    TS_TIMEZONE,
    TS_TYPE,
    URL_ENCODE_PARTITIONING,
)


class KeyGenType(str, Enum):
    """The Hudi key generators we implement, by their Java class (what readers expect)."""

    SIMPLE = "org.apache.hudi.keygen.SimpleKeyGenerator"
    COMPLEX = "org.apache.hudi.keygen.ComplexKeyGenerator"
    NON_PARTITIONED = "org.apache.hudi.keygen.NonpartitionedKeyGenerator"
    TIMESTAMP = "org.apache.hudi.keygen.TimestampBasedKeyGenerator"

    @property
    def short_name(self) -> str:
        """The name a pipeline's ``target.key_generator`` uses (``simple``, ``non_partitioned``...)."""
        return self.name.lower()

    @classmethod
    def parse(cls, value: str | KeyGenType) -> KeyGenType:
        """From a short name (the YAML's, or an alias) or Hudi's class name."""
        if isinstance(value, KeyGenType):
            return value
        short = {m.short_name: m for m in cls}
        short.update(nonpartitioned=cls.NON_PARTITIONED, timestamp_based=cls.TIMESTAMP)
        key = value.strip()
        if key.lower() in short:
            return short[key.lower()]
        for member in cls:
            if member.value == key:
                return member
        raise ConfigError(f"unknown key generator {value!r} (one of {sorted(short)})")


class TimestampType(str, Enum):
    """How a timestamp key generator reads its field (Hudi's ``timestamp.type``)."""

    EPOCHMILLISECONDS = "EPOCHMILLISECONDS"
    UNIX_TIMESTAMP = "UNIX_TIMESTAMP"  # epoch seconds
    DATE_STRING = "DATE_STRING"


class IndexType(str, Enum):
    """How a write finds a key's file group (see :class:`IndexConfig`)."""

    BLOOM = "bloom"
    BUCKET = "bucket"
    #: Hudi's ``GLOBAL_BLOOM``: a key is looked up in every partition, so a record key is
    #: unique across the table and a row whose partition value changes moves.
    GLOBAL_BLOOM = "global_bloom"


#: Hudi's ``bucketIdStr`` formats a bucket in 8 digits: the file id's first 8 characters.
MAX_BUCKETS = 100_000_000


@dataclass(frozen=True)
class IndexConfig:
    """The table's index: ``bloom`` (default) or Hudi's ``bucket`` index (SIMPLE engine).

    Part of the table's identity, because it decides file placement: with ``bucket`` a
    key's file group is fixed by the hash of its ``hash_fields`` (Hudi's
    ``hoodie.bucket.index.hash.field``; empty = the record key fields) modulo
    ``num_buckets`` (``hoodie.bucket.index.num.buckets``), and every later writer must
    use the same two. Switching a table between indexes is refused: a bloom table's keys
    sit in any file group, and a bloom write would put new keys outside their bucket.
    """

    type: IndexType = IndexType.BLOOM
    num_buckets: int | None = None
    hash_fields: tuple[str, ...] = ()
    #: global bloom only (Hudi's ``hoodie.bloom.index.update.partition.path``): an update
    #: whose partition differs from the stored row's deletes it there and inserts the row
    #: in its new partition; ``False`` keeps the row in the partition it is stored in.
    update_partition_path: bool = True

    def __post_init__(self) -> None:
        object.__setattr__(self, "type", IndexType(self.type))
        object.__setattr__(self, "hash_fields", tuple(self.hash_fields))
        if self.type is IndexType.BUCKET:
            n = self.num_buckets
            if not isinstance(n, int) or isinstance(n, bool) or not 0 < n < MAX_BUCKETS:
                raise ConfigError(
                    f"bucket index: num_buckets must be an integer in [1, {MAX_BUCKETS - 1}], not {n!r}"
                )
        elif self.num_buckets is not None or self.hash_fields:
            raise ConfigError(f"num_buckets and hash_fields belong to the bucket index, not {self.type.value}")
        if not self.update_partition_path and not self.is_global:
            raise ConfigError("update_partition_path belongs to the global_bloom index")

    @property
    def is_bucket(self) -> bool:
        return self.type is IndexType.BUCKET

    @property
    def bucket_count(self) -> int:
        """``num_buckets`` of a bucket index (always set there); an error for bloom."""
        if self.num_buckets is None:
            raise ConfigError("the bloom index has no buckets (num_buckets belongs to the bucket index)")
        return self.num_buckets

    @property
    def is_global(self) -> bool:
        """Keys are unique across partitions (looked up in all of them)."""
        return self.type is IndexType.GLOBAL_BLOOM

    def describe(self) -> str:
        """``bloom`` or ``bucket (4 buckets, hash fields id)``: for errors and ``streamer show``."""
        if self.is_global:
            moves = "moves rows" if self.update_partition_path else "keeps rows in their partition"
            return f"global_bloom ({moves} on a partition change)"
        if not self.is_bucket:
            return "bloom"
        fields = ",".join(self.hash_fields) or "the record key"
        return f"bucket ({self.num_buckets} buckets, hash fields {fields})"

    def properties(self) -> dict[str, str]:
        """What ``hoodie.properties`` records of this index (nothing for bloom)."""
        if self.is_global:
            return {INDEX_TYPE: self.type.value,
                    GLOBAL_UPDATE_PARTITION_PATH: str(self.update_partition_path).lower()}
        if not self.is_bucket:
            return {}
        return {
            INDEX_TYPE: self.type.value,
            BUCKET_NUM_BUCKETS: str(self.num_buckets),
            BUCKET_HASH_FIELD: ",".join(self.hash_fields),
        }

    def hudi_write_options(self) -> dict[str, str]:
        """What an Apache Hudi writer of the table must be configured with (its index is a
        write config, not a table property): for ``streamer show`` and the docs."""
        if self.is_global:
            return {HUDI_INDEX_TYPE: "GLOBAL_BLOOM",
                    HUDI_BLOOM_UPDATE_PARTITION_PATH: str(self.update_partition_path).lower()}
        if not self.is_bucket:
            return {HUDI_INDEX_TYPE: "BLOOM"}
        return {
            HUDI_INDEX_TYPE: "BUCKET",
            HUDI_BUCKET_ENGINE: "SIMPLE",
            HUDI_BUCKET_NUM_BUCKETS: str(self.num_buckets),
            HUDI_BUCKET_HASH_FIELD: ",".join(self.hash_fields),
        }

    def check_same(self, table_index: IndexConfig, path: str) -> None:
        """Refuse a writer whose index differs from the one the table at ``path`` has."""
        if self != table_index:
            raise ConfigError(
                f"target.index is {self.describe()} but the table at {path} was created with "
                f"{table_index.describe()}; a table's index decides where its keys are and "
                "cannot change"
            )


@dataclass(frozen=True)
class TimestampKeyGenConfig:
    """Timestamp-based partitioning: epoch millis/seconds or a date string → a path."""

    timestamp_type: TimestampType = TimestampType.EPOCHMILLISECONDS
    output_format: str = "yyyy/MM/dd"
    input_format: str = "yyyy-MM-dd HH:mm:ss"
    timezone: str = "UTC"

    def __post_init__(self) -> None:
        object.__setattr__(self, "timestamp_type", TimestampType(self.timestamp_type))


@dataclass(frozen=True)
class TableConfig:
    """A table's identity: everything that decides record keys and file placement."""

    name: str
    record_key_fields: tuple[str, ...]
    partition_fields: tuple[str, ...] = ()
    ordering_field: str | None = None
    keygen: KeyGenType = KeyGenType.SIMPLE
    hive_style_partitioning: bool = False
    timestamp: TimestampKeyGenConfig = field(default_factory=TimestampKeyGenConfig)
    log_block_format: LogBlockFormat = LogBlockFormat(defaults.LOG_BLOCK_FORMAT)
    database: str | None = "default"
    #: Partition values escaped as Hudi's ``PartitionPathEncodeUtils.escapePathName`` does
    #: (``hoodie.datasource.write.partitionpath.urlencode``). Refused for now: the key
    #: generator does not encode yet, and writing plain folders into such a table would
    #: put a value with ``/`` in nested folders Hudi's readers do not decode.
    url_encode_partitions: bool = False
    #: bloom (default) or bucket; see :class:`IndexConfig`. A bucket index's empty
    #: ``hash_fields`` become the record key fields here, so what is persisted is explicit.
    index: IndexConfig = field(default_factory=IndexConfig)
    #: Hudi table version a new table is created at (6, 8 or 9); an existing table's own.
    #: What each means and why 6 is the default: docs/table-versions.md.
    table_version: int = WRITE_VERSION
    #: The table merges by commit time although it names an ordering field
    #: (``COMMIT_TIME_ORDERING`` at version 8 or later: a Hudi 1.x table, or a version-6
    #: ``OverwriteWithLatestAvroPayload`` table upgraded). Hudi 1.x then keeps a key's last
    #: row of a batch too, not its highest ordering value; the field stays for Hudi. Read
    #: from an existing table's properties; a table created with it says so in its merge
    #: mode (by default a table created with an ordering field merges by it).
    latest_write_wins: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "record_key_fields", tuple(self.record_key_fields))
        if self.index.is_bucket and not self.index.hash_fields:
            object.__setattr__(
                self, "index", replace(self.index, hash_fields=tuple(self.record_key_fields))
            )
        object.__setattr__(self, "partition_fields", tuple(self.partition_fields))
        object.__setattr__(self, "keygen", KeyGenType.parse(self.keygen))
        object.__setattr__(self, "log_block_format", LogBlockFormat(self.log_block_format))
        self.validate()

    def validate(self) -> None:
        if not self.name:
            raise ConfigError("table name is empty")
        if not self.record_key_fields:
            raise ConfigError(f"table {self.name}: at least one record key field is needed")
        if self.table_version not in WRITABLE_VERSIONS:
            raise ConfigError(
                f"table {self.name}: table version {self.table_version} is not one this writer "
                f"writes ({', '.join(map(str, WRITABLE_VERSIONS))})"
            )
        if self.latest_write_wins and (self.table_version < 8 or not self.ordering_field):
            raise ConfigError(
                f"table {self.name}: commit-time merging beside an ordering field needs table "
                f"version 8 or later (got {self.table_version}, ordering field {self.ordering_field!r})"
            )
        kg = self.keygen
        if kg is KeyGenType.SIMPLE and (
            len(self.record_key_fields) != 1 or len(self.partition_fields) > 1
        ):
            raise ConfigError(
                f"table {self.name}: SimpleKeyGenerator takes one record key field and at "
                f"most one partition field (got keys {self.record_key_fields}, partitions "
                f"{self.partition_fields}); use keygen='complex'"
            )
        if kg is KeyGenType.NON_PARTITIONED and self.partition_fields:
            raise ConfigError(
                f"table {self.name}: NonpartitionedKeyGenerator cannot take partition fields "
                f"{self.partition_fields}"
            )
        if kg is KeyGenType.TIMESTAMP and (
            len(self.partition_fields) != 1 or len(self.record_key_fields) != 1
        ):
            raise ConfigError(
                f"table {self.name}: TimestampBasedKeyGenerator needs one record key field "
                "and exactly one (timestamp) partition field"
            )

        unknown = [f for f in self.index.hash_fields if f not in self.record_key_fields]
        if unknown:
            raise ConfigError(
                f"table {self.name}: bucket index hash fields {unknown} are not record key fields "
                f"{self.record_key_fields} (Hudi hashes the record key's values)"
            )

    @property
    def combine_field(self) -> str | None:
        """The field that picks a key's row among a batch's rows (None: the last row)."""
        return None if self.latest_write_wins else self.ordering_field

    @property
    def is_partitioned(self) -> bool:
        return bool(self.partition_fields)

    def with_changes(self, **changes: Any) -> TableConfig:  # any fields' values, checked as at init
        return replace(self, **changes)

    # -- hoodie.properties ------------------------------------------------------------
    def extra_properties(self) -> dict[str, str]:
        """Keys beyond :func:`new_table_properties`' arguments that we persist."""
        extra: dict[str, str] = {URL_ENCODE_PARTITIONING: str(self.url_encode_partitions).lower()}
        extra.update(self.index.properties())
        if self.keygen is KeyGenType.TIMESTAMP:
            extra.update(
                {
                    TS_TYPE: self.timestamp.timestamp_type.value,
                    TS_OUTPUT_FMT: self.timestamp.output_format,
                    TS_INPUT_FMT: self.timestamp.input_format,
                    TS_TIMEZONE: self.timestamp.timezone,
                }
            )
        return extra

    @classmethod
    def from_properties(cls, props: TableProperties | Mapping[str, str]) -> TableConfig:
        """Rebuild from ``hoodie.properties`` (a table written by us or by Hudi).

        Every value comes from :class:`~streamer.table.properties.TableProperties`, the
        one reader of the file, so the writer keys, partitions and orders a table exactly
        as the readers (ours and Hudi's) see it. A table without a key generator is given
        the one Hudi 0.x infers from its fields. More than one ordering field is refused:
        the writer merges by a single field, and Hudi compares several in turn.
        """
        if not isinstance(props, TableProperties):
            props = TableProperties(dict(props))
        keys, parts = props.record_key_fields, props.partition_fields
        if len(props.ordering_fields) > 1:
            raise ConfigError(
                f"table {props.name}: ordering fields {props.ordering_fields}: this writer "
                "merges by one ordering field"
            )
        ts = props.timestamp_keygen
        return cls(
            index=table_index(props),
            name=props.name,
            record_key_fields=keys,
            partition_fields=parts,
            ordering_field=props.precombine_field,
            keygen=_table_keygen(props),
            hive_style_partitioning=props.hive_style_partitioning,
            timestamp=TimestampKeyGenConfig(
                timestamp_type=TimestampType(ts["type"]),
                output_format=ts["output_format"],
                input_format=ts["input_format"],
                timezone=ts["timezone"],
            ),
            log_block_format=LogBlockFormat(props.legacy_log_block_format),
            database=props.database,
            url_encode_partitions=props.url_encode_partitioning,
            table_version=props.version or WRITE_VERSION,  # absent: a v6-era file
            latest_write_wins=(props.version >= 8 and props.merge_mode == "COMMIT_TIME_ORDERING"
                               and props.precombine_field is not None),
        )


def _table_keygen(props: TableProperties) -> KeyGenType:
    """The table's key generator (see :attr:`TableProperties.key_generator_class`), or
    the one Hudi 0.x infers from the fields when the table names none."""
    try:
        kg_class = props.key_generator_class
    except CorruptDataError as e:
        raise ConfigError(f"table {props.name}: {e}") from e
    if not kg_class:
        return _inferred_keygen(props.record_key_fields, props.partition_fields)
    try:
        return KeyGenType.parse(kg_class)
    except ConfigError as e:
        raise ConfigError(
            f"table {props.name}: key generator {kg_class} is not supported by this writer"
        ) from e


def _inferred_keygen(keys: tuple[str, ...], parts: tuple[str, ...]) -> KeyGenType:
    """Hudi 0.x's choice for a table that names no key generator."""
    if not parts:
        return KeyGenType.NON_PARTITIONED
    if len(keys) == 1 and len(parts) == 1:
        return KeyGenType.SIMPLE
    return KeyGenType.COMPLEX


def table_index(props: TableProperties | Mapping[str, str]) -> IndexConfig:
    """The index ``hoodie.properties`` records (no key: bloom); a value we cannot use
    names its property. Read by every commit, so a writer whose ``config.index`` was
    changed after opening the table cannot write with another index."""
    if not isinstance(props, TableProperties):
        props = TableProperties(dict(props))
    kind, value, fields = props.index_settings
    if kind not in {t.value for t in IndexType}:
        raise ConfigError(
            f"table {props.name}: hoodie.properties {INDEX_TYPE}={kind!r} is not bloom, global_bloom or bucket"
        )
    if kind == IndexType.BLOOM.value:
        return IndexConfig()
    if kind == IndexType.GLOBAL_BLOOM.value:
        moves = (props.raw.get(GLOBAL_UPDATE_PARTITION_PATH) or "true").strip().lower()
        if moves not in ("true", "false"):
            raise ConfigError(f"table {props.name}: hoodie.properties {GLOBAL_UPDATE_PARTITION_PATH}"
                              f"={moves!r} is not true or false")
        return IndexConfig(IndexType.GLOBAL_BLOOM, update_partition_path=moves == "true")
    try:
        num = int(value)
    except ValueError:
        raise ConfigError(
            f"table {props.name}: hoodie.properties {BUCKET_NUM_BUCKETS}={value!r} is not a bucket count"
        ) from None
    return IndexConfig(IndexType.BUCKET, num, fields)
