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
to the catalog carries the location in each field's metadata (:data:`PATH_METADATA_KEY`)
and the reader takes it from there.
"""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

from streamer.fs import FileSystem
from streamer.read.merge import align_tables
from streamer.read.slice_reader import SliceReadSpec, read_file_slice
from streamer.table.fsview import FileSlice

SHORT_NAME = "morhudi"
#: Field metadata key holding the table location, for catalog tables (see the module doc).
PATH_METADATA_KEY = "morhudi.path"


def register(spark) -> None:
    """Make ``format("morhudi")`` available in this session."""
    spark.dataSource.register(MorHudiDataSource)


class SlicePartition(InputPartition):
    """One file slice to read (picklable: plain dataclasses)."""

    def __init__(self, fslice: FileSlice) -> None:
        super().__init__(fslice.file_id)
        self.fslice = fslice


def _opt(options: dict[str, str], *names: str) -> str | None:
    for n in names:
        v = options.get(n)
        if v not in (None, ""):
            return v
    return None


class MorHudiDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return SHORT_NAME

    def _plan(self, spark_schema=None):
        from streamer.read.table import Table

        path = _opt(self.options, "path", "location") or _path_from_schema(spark_schema)
        if not path:
            raise ValueError("morhudi: load(path), option('path', ...) or a table LOCATION is required")
        table = Table.open(path)
        columns = _opt(self.options, "columns")
        cols = [c.strip() for c in columns.split(",") if c.strip()] if columns else None
        plan = table.plan(
            query=_opt(self.options, "query", "hoodie.datasource.query.type") or "snapshot",
            as_of=_opt(self.options, "as_of", "as.of.instant"),
            begin=_opt(self.options, "begin", "hoodie.datasource.read.begin.instanttime"),
            end=_opt(self.options, "end", "hoodie.datasource.read.end.instanttime"),
            columns=cols,
        )
        schema = table.schema() or pa.schema([])
        if cols:
            schema = pa.schema([schema.field(c) for c in cols if c in schema.names])
        return table.fs, plan, schema

    def schema(self):
        from pyspark.sql.pandas.types import from_arrow_schema
        from pyspark.sql.types import StructField, StructType

        _, _, schema = self._plan()
        spark_schema = from_arrow_schema(schema)
        path = _opt(self.options, "location")  # set by Spark for CREATE TABLE only
        if path is None:
            return spark_schema
        # carried into the catalog by CREATE TABLE: the only place a later read finds it
        return StructType([StructField(f.name, f.dataType, f.nullable, {**f.metadata, PATH_METADATA_KEY: path})
                           for f in spark_schema.fields])

    def reader(self, schema) -> DataSourceReader:
        fs, plan, arrow_schema = self._plan(schema)
        # the columns Spark expects (a catalog table's, fixed when it was created), in its order
        wanted = [f.name for f in schema.fields] if schema is not None else []
        if wanted and all(n in arrow_schema.names for n in wanted):
            arrow_schema = pa.schema([arrow_schema.field(n) for n in wanted])
        return MorHudiReader(fs, plan.slices, plan.spec, arrow_schema)


def _path_from_schema(schema) -> str | None:
    for f in getattr(schema, "fields", None) or ():
        path = (f.metadata or {}).get(PATH_METADATA_KEY)
        if path:
            return path
    return None


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


__all__ = ["PATH_METADATA_KEY", "MorHudiDataSource", "MorHudiReader", "SHORT_NAME", "register"]
