"""Every ``hoodie.properties`` key this project reads or writes, in one registry.

Each key is a :class:`TableKey`: its name, the value a reader assumes when the key is
absent, and the table versions whose ``hoodie.properties`` carry it (6: Hudi 0.x;
8: Hudi 1.0; 9: Hudi 1.1 and later). The names are Apache Hudi's
(``HoodieTableConfig`` and the key generator options it persists); the module-level
constants are plain strings so a typo fails at import, not at read time.

Hudi 1.x renamed some keys and kept reading the old name:

- ``hoodie.table.precombine.field`` became ``hoodie.table.ordering.fields`` (table
  version 9). Hudi declares the new key with the old one as its alternative, and its
  config lookup takes the main key whenever it is present, the alternative only
  otherwise. :attr:`~streamer.table.properties.TableProperties.ordering_fields` follows
  that rule.
- ``hoodie.table.keygenerator.class`` gave way to ``hoodie.table.keygenerator.type``
  (version 8 on). Hudi still reads the class first when a table has it: see
  :attr:`~streamer.table.properties.TableProperties.key_generator_class`.
- ``hoodie.compaction.record.merger.strategy`` became ``hoodie.record.merge.strategy.id``.

Nothing outside :mod:`streamer.table.properties` parses ``hoodie.properties``; code
that needs a value asks :class:`~streamer.table.properties.TableProperties` for it.
"""

from __future__ import annotations

from dataclasses import dataclass

#: The table versions this registry describes.
V6, V8, V9 = 6, 8, 9
_ALL = frozenset({V6, V8, V9})
_V6 = frozenset({V6})
_V6_V8 = frozenset({V6, V8})
_V8_ON = frozenset({V8, V9})
_V9 = frozenset({V9})


@dataclass(frozen=True)
class TableKey:
    """One ``hoodie.properties`` key.

    ``default`` is what a reader takes when the key is absent (``None``: no value).
    ``versions`` are the table versions whose properties carry the key. ``renamed_to``
    names the key that replaced it in later versions (Hudi reads both).
    """

    name: str
    default: str | None
    versions: frozenset[int]
    doc: str
    renamed_to: str | None = None


#: Every key by name, in the order they are declared below.
REGISTRY: dict[str, TableKey] = {}


def _key(name: str, doc: str, *, versions: frozenset[int] = _ALL, default: str | None = None,
         renamed_to: str | None = None) -> str:
    if name in REGISTRY:
        raise ValueError(f"table key {name} declared twice")
    REGISTRY[name] = TableKey(name, default, versions, doc, renamed_to)
    return name


def known_in(version: int) -> frozenset[str]:
    """The names of the keys a table of ``version`` carries."""
    return frozenset(k.name for k in REGISTRY.values() if version in k.versions)


# --------------------------------------------------------------------------- identity
TABLE_NAME = _key("hoodie.table.name", "Table name; part of the checksum.")
DATABASE_NAME = _key("hoodie.database.name", "Database; the checksum takes it as '' when absent.")
TABLE_TYPE = _key("hoodie.table.type", "MERGE_ON_READ or COPY_ON_WRITE.", default="COPY_ON_WRITE")
TABLE_VERSION = _key("hoodie.table.version", "6, 8 or 9 (required: we refuse a table without).")
CHECKSUM = _key("hoodie.table.checksum", "CRC32 of '<database>.<table name>'; Hudi refuses a stale one.")
TIMELINE_LAYOUT_VERSION = _key("hoodie.timeline.layout.version", "1 (.hoodie/) or 2 (.hoodie/timeline/); absent: 1 below version 8.")
TIMELINE_PATH = _key("hoodie.timeline.path", "Timeline folder under .hoodie for layout 2.", versions=_V8_ON, default="timeline")
TIMELINE_HISTORY_PATH = _key("hoodie.timeline.history.path", "LSM history folder under the timeline folder (layout 2's archive).", versions=_V8_ON, default="history")
INITIAL_VERSION = _key("hoodie.table.initial.version", "The version the table was created at (Hudi 1.x).", versions=_V8_ON)
TABLE_FORMAT = _key("hoodie.table.format", "Table format plugin; 'native' is Hudi's own.", versions=_V9, default="native")
TIMELINE_TIMEZONE = _key("hoodie.table.timeline.timezone", "Zone of instant times; our writer says UTC.", default="LOCAL")
ARCHIVELOG_FOLDER = _key("hoodie.archivelog.folder", "Archived timeline folder under .hoodie (version 6); Hudi 1.x writes 'history' here (the LSM history's name).", default="archived")
CDC_ENABLED = _key("hoodie.table.cdc.enabled", "Change-data capture logging.", default="false")
CREATE_SCHEMA = _key("hoodie.table.create.schema", "Avro schema the table was created with.")
BASE_FILE_FORMAT = _key("hoodie.table.base.file.format", "Base file format.", default="PARQUET")
LOG_FILE_FORMAT = _key("hoodie.table.log.file.format", "Log *file* format (always HOODIE_LOG); old versions of this project wrote the data block type here.", default="HOODIE_LOG")
POPULATE_META_FIELDS = _key("hoodie.populate.meta.fields", "Whether rows carry the _hoodie_* meta columns.", default="true")
PARTITION_METAFILE_BASE_FORMAT = _key("hoodie.partition.metafile.use.base.format", "Partition metafiles as base files instead of properties.", default="false")
METADATA_PARTITIONS = _key("hoodie.table.metadata.partitions", "Metadata-table partitions built (comma separated).")
METADATA_PARTITIONS_INFLIGHT = _key("hoodie.table.metadata.partitions.inflight", "Metadata-table partitions being built.")

# --------------------------------------------------------------------------- keys and partitions
RECORD_KEY_FIELDS = _key("hoodie.table.recordkey.fields", "Record key fields, comma separated (no type suffix).")
PARTITION_FIELDS = _key("hoodie.table.partition.fields", "Partition fields, comma separated; from version 8 a custom key generator's fields carry their partition type (city:SIMPLE, ts:TIMESTAMP).")
KEYGEN_CLASS = _key("hoodie.table.keygenerator.class", "Key generator class; Hudi 1.x writes it only for a user-provided class.")
KEYGEN_TYPE = _key("hoodie.table.keygenerator.type", "Key generator type (SIMPLE, COMPLEX, NON_PARTITION, TIMESTAMP, CUSTOM...).", versions=_V8_ON)
HIVE_STYLE_PARTITIONING = _key("hoodie.datasource.write.hive_style_partitioning", "Partition folders named field=value.", default="false")
URL_ENCODE_PARTITIONING = _key("hoodie.datasource.write.partitionpath.urlencode", "Partition values URL-encoded in paths.", default="false")
DROP_PARTITION_COLUMNS = _key("hoodie.datasource.write.drop.partition.columns", "Partition columns left out of the data files.", default="false")
#: The timestamp key generator's settings, which Hudi persists with the table. The
#: defaults are this project's writer's (Hudi has none for type and formats).
TS_TYPE = _key("hoodie.keygen.timebased.timestamp.type", "How the timestamp partition field is read.", default="EPOCHMILLISECONDS")
TS_INPUT_FMT = _key("hoodie.keygen.timebased.input.dateformat", "Input format of a DATE_STRING timestamp field.", default="yyyy-MM-dd HH:mm:ss")
TS_OUTPUT_FMT = _key("hoodie.keygen.timebased.output.dateformat", "Partition path format of the timestamp.", default="yyyy/MM/dd")
TS_TIMEZONE = _key("hoodie.keygen.timebased.timezone", "Zone the timestamp is formatted in.", default="UTC")

# --------------------------------------------------------------------------- merging
ORDERING_FIELDS = _key("hoodie.table.ordering.fields", "Ordering fields, comma separated (compared in order).", versions=_V9)
PRECOMBINE_FIELD = _key("hoodie.table.precombine.field", "The ordering field before version 9.", versions=_V6_V8, renamed_to=ORDERING_FIELDS)
RECORD_MERGE_MODE = _key("hoodie.record.merge.mode", "EVENT_TIME_ORDERING, COMMIT_TIME_ORDERING or CUSTOM; absent: from the payload class, else from whether there is an ordering field.", versions=_V8_ON)
PAYLOAD_CLASS = _key("hoodie.compaction.payload.class", "Payload class; in version 9 only a custom payload is kept here.")
PARTIAL_UPDATE_MODE = _key("hoodie.table.partial.update.mode", "Partial-update mode (Hudi 1.1+); this project refuses a table that sets one.", versions=_V9)
MERGE_STRATEGY_ID = _key("hoodie.record.merge.strategy.id", "Record merger strategy id (version 8 on).", versions=_V8_ON)
MERGER_STRATEGY = _key("hoodie.compaction.record.merger.strategy", "Record merger strategy id.", versions=_V6, renamed_to=MERGE_STRATEGY_ID)

# --------------------------------------------------------------------------- this project's own
#: The bucket index of a table our writer lays out by key hash (absent: the bloom index).
#: Our own namespace, not Hudi's ``hoodie.index.type``/``hoodie.bucket.index.*``: in table
#: version 6 those are write configs, and persisted under Hudi's names Spark SQL writers
#: would merge them into their write config - this must not change how Hudi writes.
INDEX_TYPE = _key("mor_streamer.index.type", "bloom, global_bloom or bucket (this project's key).", versions=_ALL, default="bloom")
GLOBAL_UPDATE_PARTITION_PATH = _key("mor_streamer.index.global.update.partition.path", "Global bloom index: a partition change moves the row (true) or keeps it where it is (this project's key).", versions=_ALL)
BUCKET_NUM_BUCKETS = _key("mor_streamer.index.bucket.num.buckets", "Bucket count of a bucket-indexed table (this project's key).", versions=_ALL)
BUCKET_HASH_FIELD = _key("mor_streamer.index.bucket.hash.field", "Fields a bucket index hashes (this project's key).", versions=_ALL)

# --------------------------------------------------------------------------- Hudi writer options
# Not table properties: what a Hudi writer of a bucket-indexed table must be configured
# with, for ``streamer show`` and the docs. Not in :data:`REGISTRY`.
HUDI_INDEX_TYPE = "hoodie.index.type"
HUDI_BUCKET_ENGINE = "hoodie.index.bucket.engine"
HUDI_BUCKET_NUM_BUCKETS = "hoodie.bucket.index.num.buckets"
HUDI_BUCKET_HASH_FIELD = "hoodie.bucket.index.hash.field"
HUDI_BLOOM_UPDATE_PARTITION_PATH = "hoodie.bloom.index.update.partition.path"

#: Hudi's key generator types (``KeyGeneratorType``) and the class each stands for; a
#: version 8+ table names its key generator by type. ``USER_PROVIDED`` has no class of
#: its own: such a table names the class.
KEYGEN_TYPE_CLASSES: dict[str, str] = {
    key_type: f"org.apache.hudi.keygen.{name}KeyGenerator" for key_type, name in (
        ("SIMPLE", "Simple"), ("SIMPLE_AVRO", "SimpleAvro"),
        ("COMPLEX", "Complex"), ("COMPLEX_AVRO", "ComplexAvro"),
        ("TIMESTAMP", "TimestampBased"), ("TIMESTAMP_AVRO", "TimestampBasedAvro"),
        ("CUSTOM", "Custom"), ("CUSTOM_AVRO", "CustomAvro"),
        ("NON_PARTITION", "Nonpartitioned"), ("NON_PARTITION_AVRO", "NonpartitionedAvro"),
        ("GLOBAL_DELETE", "GlobalDelete"), ("GLOBAL_DELETE_AVRO", "GlobalAvroDelete"),
    )
}
