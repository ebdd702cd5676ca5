"""``target.filter_dupes``: an insert pipeline drops the records whose key the table holds.

HoodieStreamer's ``--filter-dupes``: an ``insert`` skips the index to be cheap, so a
replayed or duplicated record would be written a second time; with this option the keys
of the batch are looked up first (:meth:`streamer.read.Table.lookup`: the bloom index
names the file groups that may hold them, and reading those, merged, confirms it - a key
deleted since is not a duplicate) and the records of keys found are dropped, counted as
filtered. Keys repeated within the batch are the writer's to combine, as for any insert.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc

from streamer.table import meta_fields

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from streamer.config.pipeline import PipelineConfig


def _existing(config: PipelineConfig, keys: pa.Table) -> pa.Array:
    """Per row of ``keys`` (record key, partition path): whether the table holds it."""
    from streamer.pipeline.sink import open_table

    table = open_table(config.target.path, config.s3_settings()) if keys.num_rows else None
    if table is None:
        return pa.array([False] * keys.num_rows, pa.bool_())
    rk, pp = keys.column(0).combine_chunks(), keys.column(1).combine_chunks()
    if config.target.index.type == "global_bloom":  # a key is the table's once, in any partition
        found = table.lookup(rk, columns=[meta_fields.RECORD_KEY])
        return pc.is_in(rk, value_set=found.rows.column(0).combine_chunks())
    found = table.lookup(rk, partitions=pp, columns=[meta_fields.RECORD_KEY, meta_fields.PARTITION_PATH])
    sep = "\x00"  # (key, partition) pairs matched as one string each
    held = pc.binary_join_element_wise(found.rows.column(0), found.rows.column(1), sep)
    return pc.is_in(pc.binary_join_element_wise(rk, pp, sep), value_set=held.combine_chunks())


def _keys(config: PipelineConfig, rows: pa.Table) -> pa.Table:
    from streamer.pipeline.sink import table_config
    from streamer.write.keygen import build_keys

    built = build_keys(rows, table_config(config.target))
    return pa.table({"k": built.record_keys, "p": built.partition_paths})


def drop_existing(config: PipelineConfig, rows: pa.Table) -> pa.Table:
    """``rows`` (on the driver) without those whose key the table holds."""
    if not rows.num_rows:
        return rows
    return rows.filter(pc.invert(_existing(config, _keys(config, rows))))


def drop_existing_on_spark(config: PipelineConfig, rows: DataFrame, spark: SparkSession) -> DataFrame:
    """The same for a batch written by Spark: its keys (only) come to the driver."""
    from pyspark.sql import functions as F

    fields = [*config.target.record_key, *config.target.partition_by]
    distinct = rows.select(*dict.fromkeys(fields)).distinct().toArrow()
    held = distinct.filter(_existing(config, _keys(config, distinct)))
    if not held.num_rows:
        return rows
    return rows.join(F.broadcast(spark.createDataFrame(held)), list(dict.fromkeys(fields)), "left_anti")
