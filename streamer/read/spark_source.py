"""``spark.read.format("morhudi")``: the same reads, planned on the driver, run on executors.

A PySpark Python Data Source (PySpark 4.x). The driver plans one input partition per
file slice with :meth:`Table.plan`; each executor reads its slice with the very
function the local reader uses (:func:`read_file_slice`) and yields Arrow record
batches, so both paths return identical rows.

Options: ``path`` (a path or URI: ``/abs``, ``file:/abs``, ``s3://...``), ``query``
(snapshot | read_optimized | incremental), ``as_of`` (alias ``as.of.instant``), ``begin``,
``end``, ``columns`` (comma-separated).

Spark SQL: ``CREATE TABLE t USING morhudi LOCATION '/abs'`` works too. Spark hands a
Python data source the location (as ``path`` and ``location``, a ``file:`` URI) only when the table is
created, and no options at all when the catalog table is read later; so the schema given
to the catalog carries the location and the read options of ``OPTIONS (...)`` in each
field's metadata (:data:`OPTIONS_METADATA_KEY`) and the reader takes them from there.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

from streamer.fs import FileSystem
from streamer.read.merge import align_tables
from streamer.read.slice_reader import SliceReadSpec, read_file_slice
from streamer.table.fsview import FileSlice

SHORT_NAME = "morhudi"
#: Field metadata key holding a catalog table's location and read options (see the module doc).
OPTIONS_METADATA_KEY = "morhudi.options"


def register(spark) -> None:
    """Make ``format("morhudi")`` available in this session."""
    spark.dataSource.register(MorHudiDataSource)


class SlicePartition(InputPartition):
    """One file slice to read (picklable: plain dataclasses)."""

    def __init__(self, fslice: FileSlice) -> None:
        super().__init__(fslice.file_id)
        self.fslice = fslice


def _opt(options: Mapping[str, str], *names: str) -> str | None:
    for n in names:
        v = options.get(n)
        if v not in (None, ""):
            return v
    return None


class MorHudiDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return SHORT_NAME

    def _plan(self, options: Mapping[str, str]):
        from streamer.read.table import Table

        path = _opt(options, "path", "location")
        if not path:
            raise ValueError("morhudi: load(path), option('path', ...) or a table LOCATION is required")
        table = Table.open(path)
        columns = _opt(options, "columns")
        cols = [c.strip() for c in columns.split(",") if c.strip()] if columns else None
        plan = table.plan(
            query=_opt(options, "query", "hoodie.datasource.query.type") or "snapshot",
            as_of=_opt(options, "as_of", "as.of.instant"),
            begin=_opt(options, "begin", "hoodie.datasource.read.begin.instanttime"),
            end=_opt(options, "end", "hoodie.datasource.read.end.instanttime"),
            columns=cols,
        )
        schema = table.schema() or pa.schema([])
        if cols:
            schema = pa.schema([schema.field(c) for c in cols if c in schema.names])
        return table.fs, plan, schema

    def schema(self):
        from pyspark.sql.pandas.types import from_arrow_schema
        from pyspark.sql.types import StructField, StructType

        _, _, schema = self._plan(self.options)
        spark_schema = from_arrow_schema(schema)
        if _opt(self.options, "location") is None:  # set by Spark for CREATE TABLE only
            return spark_schema
        # carried into the catalog by CREATE TABLE: the only place a later read finds them
        kept = json.dumps({k: v for k, v in self.options.items() if k in _READ_OPTIONS and v not in (None, "")},
                          sort_keys=True)
        return StructType([StructField(f.name, f.dataType, f.nullable, {**f.metadata, OPTIONS_METADATA_KEY: kept})
                           for f in spark_schema.fields])

    def reader(self, schema) -> DataSourceReader:
        options = {**_options_from_schema(schema), **{k: v for k, v in self.options.items() if v not in (None, "")}}
        fs, plan, arrow_schema = self._plan(options)
        # the columns Spark expects (a catalog table's, fixed when it was created), in its order
        wanted = [f.name for f in schema.fields] if schema is not None else []
        if wanted and all(n in arrow_schema.names for n in wanted):
            arrow_schema = pa.schema([arrow_schema.field(n) for n in wanted])
        return MorHudiReader(fs, plan.slices, plan.spec, arrow_schema)


#: The options a catalog table keeps (``path`` is Spark's name for its LOCATION).
_READ_OPTIONS = frozenset({
    "path", "location", "query", "hoodie.datasource.query.type", "as_of", "as.of.instant", "begin",
    "hoodie.datasource.read.begin.instanttime", "end", "hoodie.datasource.read.end.instanttime", "columns",
})


def _options_from_schema(schema) -> dict[str, str]:
    for f in getattr(schema, "fields", None) or ():
        kept = (f.metadata or {}).get(OPTIONS_METADATA_KEY)
        if kept:
            return json.loads(kept)
    return {}


class MorHudiReader(DataSourceReader):
    def __init__(self, fs: FileSystem, slices: list[FileSlice], spec: SliceReadSpec, schema: pa.Schema) -> None:
        self.fs = fs
        self.slices = slices
        self.spec = spec
        self.arrow_schema = schema

    def partitions(self) -> list[InputPartition]:
        return [SlicePartition(s) for s in self.slices]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if not isinstance(partition, SlicePartition):
            return  # no slices at all: Spark still asks for one (empty) partition
        table, _stats = read_file_slice(self.fs, partition.fslice, self.spec)
        if table is None or not len(table):
            return
        (table,) = align_tables([table], self.arrow_schema)
        yield from table.to_batches(max_chunksize=64 * 1024)


__all__ = ["OPTIONS_METADATA_KEY", "MorHudiDataSource", "MorHudiReader", "SHORT_NAME", "register"]
