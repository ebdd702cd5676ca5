"""What Apache Hudi's Hive sync registers for a Merge-On-Read table, in one place.

Read off Hudi's ``HiveSyncTool``, ``HMSDDLExecutor``, ``HoodieInputFormatUtils`` and
``SparkDataSourceTableUtils`` (hudi-sync), so that a table we register is the table
Hudi's ``HoodieStreamer --enable-sync`` would have registered:

- **Tables.** A MOR table ``t`` becomes ``t_ro`` (read-optimized: base files only,
  ``HoodieParquetInputFormat``) and ``t_rt`` (snapshot: base files merged with logs,
  ``HoodieParquetRealtimeInputFormat``). ``skip_ro_suffix`` registers the read-optimized
  table as plain ``t`` (Hudi ``hoodie.datasource.hive_sync.skip_ro_suffix``). Hudi 1.x
  also registers the snapshot under the plain name ``t``
  (``hoodie.meta.sync.sync_snapshot_with_table_name``, default true there), so that
  ``SELECT ... FROM db.t`` is the snapshot; ``snapshot_with_table_name`` does the same
  here, and yields to ``skip_ro_suffix`` as Hudi does.
- **Storage.** Serde ``ParquetHiveSerDe``, output format ``MapredParquetOutputFormat``,
  location the base path, ``EXTERNAL=TRUE`` with table type ``EXTERNAL_TABLE``, serde
  parameter ``serialization.format=1``.
- **Spark data source table** (``sync_as_datasource``, Hudi's default): table parameters
  ``spark.sql.sources.provider=hudi``, the schema JSON in ``spark.sql.sources.schema.part.N``
  chunks of at most ``schema_string_length_threshold`` characters with ``numParts``, the
  partition columns in ``numPartCols``/``partCol.N``, ``spark.sql.create.version`` when a
  Spark version is given; serde parameters ``path`` (the base path) and
  ``hoodie.query.as.ro.table``. Spark then reads the table through the ``hudi`` data
  source instead of the Hive input formats.
- **Sync state.** ``last_commit_time_sync``: the newest completed commit-timeline instant
  synced (Hudi's ``HOODIE_LAST_COMMIT_TIME_SYNC``); the next sync adds the partitions
  written after it.
- **Partitions.** Values from the partition path as Hudi's default extractors read it
  (one field: the whole path, ``SinglePartPartitionValueExtractor`` / hive-style
  ``HiveStylePartitionValueExtractor``; several: one value per path segment, ``k=`` cut,
  ``MultiPartKeysValueExtractor``); URL-encoded paths are decoded (Hudi's
  ``decode_partition``, inferred from the url-encode setting). Location
  ``<base>/<partition path>``.

One addition, inside an extension point: each field of the Spark schema JSON carries the
metadata entry ``morhudi.options`` (table path and query type). Spark hands a Python data
source no table options when it reads a catalog table - only the schema - so this is how
``streamer.read.spark_source`` (registered as ``hudi`` where Hudi's bundle is absent)
finds the table. Spark and Hudi ignore field metadata they do not know;
``spark_source_options: false`` leaves it out.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from urllib.parse import unquote

SUFFIX_READ_OPTIMIZED = "_ro"
SUFFIX_SNAPSHOT = "_rt"

INPUT_FORMAT_RO = "org.apache.hudi.hadoop.HoodieParquetInputFormat"
INPUT_FORMAT_RT = "org.apache.hudi.hadoop.realtime.HoodieParquetRealtimeInputFormat"
OUTPUT_FORMAT = "org.apache.hadoop.hive.ql.io.parquet.MapredParquetOutputFormat"
SERDE = "org.apache.hadoop.hive.ql.io.parquet.serde.ParquetHiveSerDe"

LAST_COMMIT_TIME_SYNC = "last_commit_time_sync"
SPARK_PROVIDER = "spark.sql.sources.provider"
SPARK_SCHEMA_NUM_PARTS = "spark.sql.sources.schema.numParts"
SPARK_SCHEMA_PART = "spark.sql.sources.schema.part."
SPARK_NUM_PART_COLS = "spark.sql.sources.schema.numPartCols"
SPARK_PART_COL = "spark.sql.sources.schema.partCol."
SPARK_CREATE_VERSION = "spark.sql.create.version"
SERDE_PATH = "path"
SERDE_QUERY_AS_RO = "hoodie.query.as.ro.table"
#: Field metadata key our Python data source reads the table location from.
SOURCE_OPTIONS_KEY = "morhudi.options"


@dataclass(frozen=True)
class HiveTableSpec:
    """One metastore table of a Hudi table: its name and which view it is."""

    name: str
    realtime: bool  # HoodieParquetRealtimeInputFormat (snapshot) or not (read-optimized)
    read_optimized: bool  # hoodie.query.as.ro.table

    @property
    def input_format(self) -> str:
        return INPUT_FORMAT_RT if self.realtime else INPUT_FORMAT_RO

    @property
    def query_type(self) -> str:
        return "read_optimized" if self.read_optimized else "snapshot"


def table_specs(name: str, *, skip_ro_suffix: bool = False,
                snapshot_with_table_name: bool = True) -> list[HiveTableSpec]:
    """The metastore tables of MOR table ``name``, in Hudi's sync order (ro, rt, plain)."""
    ro = name if skip_ro_suffix else name + SUFFIX_READ_OPTIMIZED
    specs = [HiveTableSpec(ro, realtime=False, read_optimized=True),
             HiveTableSpec(name + SUFFIX_SNAPSHOT, realtime=True, read_optimized=False)]
    if snapshot_with_table_name and not skip_ro_suffix:
        specs.append(HiveTableSpec(name, realtime=True, read_optimized=False))
    return specs


def location_uri(table_path: str) -> str:
    """The table location engines resolve, from the path the user gave: a URI as given
    (``s3a://bucket/t``; Hudi too registers its base path as given), a local path as an
    absolute ``file:/abs`` URI."""
    if "://" in table_path or table_path.startswith("file:"):
        return table_path.rstrip("/")
    return "file:" + os.path.abspath(table_path)


def partition_location(base_uri: str, partition_path: str) -> str:
    return f"{base_uri.rstrip('/')}/{partition_path}" if partition_path else base_uri


def partition_values(partition_path: str, fields: list[str], *, decode: bool = False) -> list[str]:
    """Hive partition values of a partition path (Hudi's default extractors, see the
    module doc); raises ``ValueError`` when the path has the wrong number of parts."""
    if not fields:
        return []
    if len(fields) == 1:
        value = partition_path
        prefix = f"{fields[0]}="
        if value.startswith(prefix):  # hive-style
            value = value[len(prefix):]
        values = [value]
    else:
        values = [part.split("=", 1)[1] if "=" in part else part for part in partition_path.split("/")]
        if len(values) != len(fields):
            raise ValueError(f"partition path {partition_path!r} has {len(values)} part(s) but the table "
                             f"is partitioned by {len(fields)} field(s) {fields}")
    return [unquote(v) for v in values] if decode else values


def spark_table_parameters(schema_json: str, partition_fields: list[str], threshold: int,
                           spark_version: str | None) -> dict[str, str]:
    """Hudi's ``SparkDataSourceTableUtils.getSparkTableProperties``."""
    out = {SPARK_PROVIDER: "hudi"}
    if spark_version:
        out[SPARK_CREATE_VERSION] = spark_version
    parts = [schema_json[i:i + threshold] for i in range(0, len(schema_json), threshold)] or [""]
    out[SPARK_SCHEMA_NUM_PARTS] = str(len(parts))
    for i, part in enumerate(parts):
        out[f"{SPARK_SCHEMA_PART}{i}"] = part
    if partition_fields:
        out[SPARK_NUM_PART_COLS] = str(len(partition_fields))
        for i, p in enumerate(partition_fields):
            out[f"{SPARK_PART_COL}{i}"] = p
    return out


def spark_serde_parameters(base_uri: str, read_optimized: bool) -> dict[str, str]:
    """Hudi's ``SparkDataSourceTableUtils.getSparkSerdeProperties``."""
    return {SERDE_PATH: base_uri, SERDE_QUERY_AS_RO: str(read_optimized).lower()}


def source_options(base_uri: str, spec: HiveTableSpec) -> dict[str, str]:
    """The field-metadata entry our Python data source reads (see the module doc)."""
    return {SOURCE_OPTIONS_KEY: json.dumps({"path": base_uri, "query": spec.query_type}, sort_keys=True)}
