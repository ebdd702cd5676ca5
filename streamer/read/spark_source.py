"""``spark.read.format("morhudi")``: the same reads, planned on the driver, run on executors.

A PySpark Python Data Source (PySpark 4.x). The driver plans one input partition per
file slice with :meth:`Table.plan`; each executor reads its slice with the very
function the local reader uses (:func:`read_file_slice`) and yields Arrow record
batches, so both paths return identical rows.

Options: ``path`` (a path or URI: ``/abs``, ``file:/abs``, ``s3://...``), ``query``
(snapshot | read_optimized | incremental), ``as_of`` (alias ``as.of.instant``), ``begin``,
``end``, ``columns`` (comma-separated), ``allow_corrupt`` (``true``: read past corrupt
committed log blocks, as ``streamer read --allow-corrupt``; by default a read that meets
one fails naming the file, offset and instant).

Filters: Spark pushes ``WHERE`` conjuncts (``=``, ``<``, ``<=``, ``>``, ``>=``, ``IN``,
``IS [NOT] NULL``, ``LIKE 'a%'``/``'%a'``/``'%a%'``, ``NOT``) on top-level columns to
:meth:`MorHudiPushdownReader.pushFilters`; the ones :mod:`streamer.read.spark_filters`
can translate exactly become the read's filter (partition pruning on the driver, then
statistics and row pruning in each slice, the filter applied to the merged rows), the rest
stay with Spark. :func:`register` turns on ``spark.sql.python.filterPushdown.enabled``
(off by default in Spark 4.1) where that is safe - see its doc for the Spark versions
that leak a pushed-down plan into later scans of the same DataFrame.

Spark SQL: ``CREATE TABLE t USING morhudi LOCATION '/abs'`` works too. Spark hands a
Python data source the location (as ``path`` and ``location``, a ``file:`` URI) only when the table is
created, and no options at all when the catalog table is read later; so the schema given
to the catalog carries the location and the read options of ``OPTIONS (...)`` in each
field's metadata (:data:`OPTIONS_METADATA_KEY`) and the reader takes them from there.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, ClassVar

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

from streamer.fs import FileSystem
from streamer.read.slice_reader import SliceReadSpec, read_file_slice
from streamer.table.fsview import FileSlice
from streamer.table.merge import align_tables

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.types import StructType

    from streamer.integrity import CorruptRead
    from streamer.read.table import ReadPlan, Table

SHORT_NAME = "morhudi"
#: Field metadata key holding a catalog table's location and read options (see the module doc).
OPTIONS_METADATA_KEY = "morhudi.options"


#: Spark's switch for ``pushFilters`` of Python data sources (4.1+).
PUSHDOWN_CONF = "spark.sql.python.filterPushdown.enabled"
_PROVIDER = "org.apache.spark.sql.execution.datasources.v2.python.PythonDataSourceV2"
#: Apache Hudi's Spark data source (registered as ``hudi`` by its bundle).
_HUDI_SOURCE = "org.apache.hudi.DefaultSource"
#: Hudi's short name, which catalog tables synced by Hudi (and by us) name as provider.
HUDI_SHORT_NAME = "hudi"


def register(spark: SparkSession, *, pushdown: bool | None = None, hudi_alias: bool | None = None) -> None:
    """Make ``format("morhudi")`` available in this session.

    ``hudi_alias``: also register the source under Hudi's short name ``hudi``, so that a
    catalog table whose provider is ``hudi`` (what Hudi's Hive sync and ours register,
    ``spark.sql.sources.provider=hudi``) is read through it: ``spark.sql("SELECT ... FROM
    db.trips")``. ``None`` (auto) means yes unless Apache Hudi's Spark bundle is on the
    session's classpath (then Hudi's own ``hudi`` source reads those tables) or that cannot
    be told (see :func:`hudi_bundle_present`). Such a table's location comes from its
    schema's field metadata (``morhudi.options``, written by :mod:`streamer.catalog`):
    Spark gives a Python source no table options for a catalog read.

    ``pushdown``: whether the source takes Spark's filters. ``None`` (auto) means yes
    unless the session turned :data:`PUSHDOWN_CONF` off or this Spark has the read-info
    leak (:func:`spark_leaks_pushdown`): there a DataFrame read once with pushed filters
    and again without any (``df.where(...).count()`` then ``df.count()``) silently reads
    the first scan's pruned slices again. ``True`` turns the switch on and accepts that.
    Spark refuses a reader implementing ``pushFilters`` while the switch is off, so a
    source without it is registered whenever pushdown is not used.
    """
    if pushdown is None:
        setting = spark.conf.get(PUSHDOWN_CONF, None)
        off = setting is not None and str(setting).strip().lower() != "true"
        pushdown = not off and not spark_leaks_pushdown(spark)
    if hudi_alias is None:
        hudi_alias = hudi_bundle_present(spark) is False
    if not pushdown:
        spark.dataSource.register(MorHudiDataSourceNoPushdown)
        if hudi_alias:
            spark.dataSource.register(HudiAliasDataSourceNoPushdown)
        return
    spark.conf.set(PUSHDOWN_CONF, "true")
    spark.dataSource.register(MorHudiDataSource)
    if hudi_alias:
        spark.dataSource.register(HudiAliasDataSource)


def hudi_bundle_present(spark: SparkSession) -> bool | None:
    """Whether Apache Hudi's Spark data source (``org.apache.hudi.DefaultSource``) is on
    the session's classpath; None when it cannot be told (no JVM at hand)."""
    try:
        jvm = spark._jvm
        if jvm is None:  # a stopped session: cannot tell
            return None
        loader = jvm.java.lang.Thread.currentThread().getContextClassLoader()
    except Exception:  # noqa: BLE001 - e.g. Spark Connect: cannot tell
        return None
    try:
        jvm.java.lang.Class.forName(_HUDI_SOURCE, False, loader)
        return True
    except Exception:  # noqa: BLE001 - ClassNotFoundException through py4j
        return False


def spark_leaks_pushdown(spark: SparkSession) -> bool:
    """Whether this Spark keeps the read planned by a filter pushdown on the shared data
    source object (``PythonDataSourceV2.setReadInfo``), so that a later scan of the same
    relation without pushable filters reuses it (later Spark keeps it per scan). When it
    cannot be told (no JVM at hand, e.g. Spark Connect), assume it does."""
    try:
        jvm = spark._jvm
        if jvm is None:  # a stopped session: cannot tell
            return True
        loader = jvm.java.lang.Thread.currentThread().getContextClassLoader()
        cls = jvm.java.lang.Class.forName(_PROVIDER, False, loader)
        return any(m.getName() == "setReadInfo" for m in cls.getMethods())
    except Exception:  # noqa: BLE001 - any failure to look means "cannot tell"
        return True


class SlicePartition(InputPartition):
    """One file slice to read (picklable: plain dataclasses)."""

    def __init__(self, fslice: FileSlice, committed: dict[str, list[tuple[int, int, str]]] | None = None) -> None:
        super().__init__(fslice.file_id)
        self.fslice = fslice
        #: byte ranges completed instants wrote into the slice's log files (see
        #: :class:`~streamer.integrity.CommittedRegions`): a corrupt block inside
        #: them is refused, a torn tail past them skipped - as the local reader does
        self.committed = committed


def _committed_ranges(table: Table, slices: list[FileSlice]) -> dict[str, list[tuple[int, int, str]]]:
    """The committed byte ranges of the planned slices' log files (driver side, once)."""
    from streamer.integrity import CommittedRegions

    regions = CommittedRegions.of(table.fsview, table.timeline)
    return {lf.path: regions.ranges[lf.path] for s in slices for lf in s.log_files if lf.path in regions.ranges}


def refuse_corrupt(fslice: FileSlice, committed: dict[str, list[tuple[int, int, str]]] | None,
                   corrupt: Iterable[CorruptRead]) -> None:
    """Raise :class:`CorruptDataError` when a corrupt block an executor skipped lies in
    committed bytes (or in a log file no active instant names): its rows would be
    missing from the answer. ``allow_corrupt`` (option) reads past it."""
    from streamer.errors import CorruptDataError
    from streamer.integrity import CommittedRegions, corrupt_block_damage

    regions = CommittedRegions(dict(committed or {}))
    damage = [d for cb in corrupt
              if (d := corrupt_block_damage(regions, cb.path, getattr(cb, "offset", None),
                                            getattr(cb, "reason", ""))) is not None]
    if damage:
        more = f" (and {len(damage) - 1} more)" if len(damage) > 1 else ""
        raise CorruptDataError(f"{damage[0]}{more}: the rows of that block would be missing from this read; "
                               "read the rest with option('allow_corrupt', 'true'), or see `streamer check`")


def _opt(options: Mapping[str, str], *names: str) -> str | None:
    for n in names:
        v = options.get(n)
        if v not in (None, ""):
            return v
    return None


def _allow_corrupt(options: Mapping[str, str]) -> bool:
    return str(options.get("allow_corrupt", "")).lower() in ("true", "1", "yes")


def _plan(options: Mapping[str, str],
          filter: list[pc.Expression] | None = None) -> tuple[FileSystem, ReadPlan, pa.Schema]:
    """``(filesystem, ReadPlan, Arrow schema)`` of a read with these options."""
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
        filter=filter,
        allow_corrupt=_allow_corrupt(options),
    )
    schema = table.schema() or pa.schema([])
    if cols:
        schema = pa.schema([schema.field(c) for c in cols if c in schema.names])
    plan.committed = _committed_ranges(table, plan.slices) if plan.spec.include_logs else {}
    return table.fs, plan, schema


class MorHudiDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return SHORT_NAME

    _reader_class: ClassVar[type[MorHudiReader]]  # MorHudiPushdownReader, set below

    def _plan(self, options: Mapping[str, str]) -> tuple[FileSystem, ReadPlan, pa.Schema]:
        return _plan(options)

    def schema(self) -> StructType:
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

    def reader(self, schema: StructType) -> DataSourceReader:
        options = {**_options_from_schema(schema), **{k: v for k, v in self.options.items() if v not in (None, "")}}
        fs, plan, arrow_schema = self._plan(options)
        # the columns Spark expects (a catalog table's, fixed when it was created), in its order
        wanted = [f.name for f in schema.fields] if schema is not None else []
        if wanted and all(n in arrow_schema.names for n in wanted):
            arrow_schema = pa.schema([arrow_schema.field(n) for n in wanted])
        elif wanted and _from_catalog(schema):
            # a synced catalog table (streamer.catalog) knows the latest schema; the table's
            # schema here may come from an older base file: the catalog's types fill the gaps
            from pyspark.sql.pandas.types import to_arrow_schema

            given = to_arrow_schema(schema)
            arrow_schema = pa.schema([arrow_schema.field(n) if n in arrow_schema.names else given.field(n)
                                      for n in wanted])
        reader = self._reader_class(fs, plan.slices, plan.spec, arrow_schema, options)
        reader.committed = plan.committed
        return reader


#: The options a catalog table keeps (``path`` is Spark's name for its LOCATION).
_READ_OPTIONS = frozenset({
    "path", "location", "query", "hoodie.datasource.query.type", "as_of", "as.of.instant", "begin",
    "hoodie.datasource.read.begin.instanttime", "end", "hoodie.datasource.read.end.instanttime", "columns",
    "allow_corrupt",
})


def _from_catalog(schema: StructType | None) -> bool:
    return bool(_options_from_schema(schema))


def _options_from_schema(schema: StructType | None) -> dict[str, str]:
    for f in getattr(schema, "fields", None) or ():
        kept = (f.metadata or {}).get(OPTIONS_METADATA_KEY)
        if kept:
            return json.loads(kept)
    return {}


class MorHudiReader(DataSourceReader):
    """Reads the planned slices; pushes no filters (see :class:`MorHudiPushdownReader`)."""

    def __init__(self, fs: FileSystem, slices: list[FileSlice], spec: SliceReadSpec, schema: pa.Schema,
                 options: Mapping[str, str] | None = None) -> None:
        self.fs = fs
        self.slices = slices
        self.spec = spec
        self.arrow_schema = schema
        self.options = dict(options or {})
        #: committed byte ranges of the slices' log files (``None``: unknown, so every
        #: corrupt block is refused)
        self.committed: dict[str, list[tuple[int, int, str]]] | None = None

    def partitions(self) -> list[InputPartition]:
        c = self.committed or {}
        return [SlicePartition(s, {lf.path: c[lf.path] for lf in s.log_files if lf.path in c}) for s in self.slices]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if not isinstance(partition, SlicePartition):
            return  # no slices at all: Spark still asks for one (empty) partition
        table, stats = read_file_slice(self.fs, partition.fslice, self.spec)
        if stats.corrupt_blocks and not _allow_corrupt(self.options):
            refuse_corrupt(partition.fslice, partition.committed, stats.corrupt_blocks)
        if table is None or not len(table):
            return
        (table,) = align_tables([table], self.arrow_schema)
        yield from table.to_batches(max_chunksize=64 * 1024)


class MorHudiPushdownReader(MorHudiReader):
    """A reader that takes the filters it can apply exactly and plans again with them."""

    def pushFilters(self, filters: list) -> list:  # noqa: N802 - Spark's name
        """Keep what translates exactly (:func:`streamer.read.spark_filters.to_expression`),
        plan again with it (fewer slices), hand the rest back to Spark."""
        from streamer.read.spark_filters import to_expression

        taken: list[pc.Expression] = []
        rest = []
        for f in filters:
            expr = to_expression(f, self.arrow_schema)
            if expr is None:
                rest.append(f)  # Spark evaluates it after the scan
            else:
                taken.append(expr)
        if taken:
            self.fs, plan, _ = _plan(self.options, taken)  # conjuncts: each prunes on its own
            self.slices, self.spec, self.committed = plan.slices, plan.spec, plan.committed
        return rest


class MorHudiDataSourceNoPushdown(MorHudiDataSource):
    """``format("morhudi")`` for a session that turned :data:`PUSHDOWN_CONF` off."""

    _reader_class = MorHudiReader


MorHudiDataSource._reader_class = MorHudiPushdownReader


class HudiAliasDataSource(MorHudiDataSource):
    """This source under Hudi's short name ``hudi`` (see :func:`register`)."""

    @classmethod
    def name(cls) -> str:
        return HUDI_SHORT_NAME


class HudiAliasDataSourceNoPushdown(MorHudiDataSourceNoPushdown):
    """``hudi`` for a session that turned :data:`PUSHDOWN_CONF` off."""

    @classmethod
    def name(cls) -> str:
        return HUDI_SHORT_NAME

__all__ = ["HUDI_SHORT_NAME", "OPTIONS_METADATA_KEY", "PUSHDOWN_CONF", "hudi_bundle_present", "spark_leaks_pushdown",
           "MorHudiDataSource", "MorHudiPushdownReader", "MorHudiReader",
           "SHORT_NAME", "register"]
