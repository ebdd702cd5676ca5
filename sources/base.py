"""The contract between sources and the pipeline runner.

A source turns (spark, start position) into a :class:`Batch`: good records, bad
records (for the error table) and the end position. The runner writes both, stores
``batch.end`` in the same Hudi commit, and on restart passes the stored position
back, so a batch is written once however often the process dies.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from streamer.errors import ConfigError
from streamer.sources.position import Position

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import Column, DataFrame, SparkSession
    from pyspark.sql.types import StructType

#: Columns of every source's ``Batch.errors`` (the error table's schema, in this order).
ERROR_SCHEMA_DDL = (
    "source_type STRING, source_position STRING, topic STRING, `partition` INT, `offset` BIGINT, "
    "file STRING, raw_payload STRING, payload_encoding STRING, reason STRING, error_time TIMESTAMP"
)
ERROR_COLUMNS = (
    "source_type", "source_position", "topic", "partition", "offset",
    "file", "raw_payload", "payload_encoding", "reason", "error_time",
)


def unstamped_error_time() -> Column:
    """``error_time`` of error rows a source builds in Spark: null, stamped on the driver
    when the rows are collected (``streamer.pipeline.errors_table.as_error_arrow``).

    Why not ``current_timestamp()``: Spark's optimizer folds it into a timestamp literal,
    and generated code inlines such literals, so every micro-batch's plan compiled to new
    classes that the JVM then compiled to machine code again - ~1 s of JVM CPU per
    100k-record Kafka batch, more than the decode itself (benchmarks/RESULTS.md).
    """
    from pyspark.sql import functions as F

    return F.lit(None).cast("timestamp")


def struct_from_ddl(ddl: str) -> StructType:
    """The record schema a source's ``schema:`` declares in Spark DDL (``a INT, b STRING``).
    A DDL of a single type (``int``) parses to that type, not to columns: refused by name."""
    from pyspark.sql.types import StructType

    parsed = StructType.fromDDL(ddl)
    if not isinstance(parsed, StructType):
        raise ConfigError(f"schema {ddl!r} is one {parsed.simpleString()} value, not columns "
                          "(write them as `name TYPE, ...`)")
    return parsed


#: Column of :attr:`Batch.together`: on a bad record's row, its error row (a struct of
#: :data:`ERROR_COLUMNS`); null on a good record's row.
SOURCE_ERROR_COL = "_mor_source_error"

#: Hidden column of a files source's rows: which input line a row came from (file index
#: in the batch << 40 | line number). It lets a record found bad after decoding (a null
#: key, see ``Batch.originals``) reach the error table under its own position and bytes.
RECORD_COLUMN = "_mor_record"


class Frames:
    """A batch's ``df``, ``errors`` and the frames they share (``cached``), built on first
    use and then kept: every copy of a batch (``dataclasses.replace``) sees the same ones.

    Why lazily: each Spark DataFrame is analysed when it is made, and for a Kafka JSON
    batch the error split's frames took ~0.1 s of JVM CPU per micro-batch to analyse
    (the decode's error explanation is a large expression), wasted on a reader of
    :attr:`Batch.together`, which needs none of them.
    """

    def __init__(self, build: Callable[[], tuple[DataFrame, DataFrame, tuple[DataFrame, ...]]]) -> None:
        self._build: Callable[[], tuple[DataFrame, DataFrame, tuple[DataFrame, ...]]] | None = build
        self._built: tuple[DataFrame, DataFrame, tuple[DataFrame, ...]] | None = None

    @classmethod
    def of(cls, df: DataFrame, errors: DataFrame, cached: tuple[DataFrame, ...] = ()) -> Frames:
        out = cls(lambda: (df, errors, tuple(cached)))
        out()
        return out

    def __call__(self) -> tuple[DataFrame, DataFrame, tuple[DataFrame, ...]]:
        if self._built is None:
            assert self._build is not None
            df, errors, cached = self._build()
            self._built, self._build = (df, errors, tuple(cached)), None
        return self._built

    @property
    def built(self) -> bool:
        return self._built is not None


@dataclass(frozen=True, init=False)
class Batch:
    """One micro-batch read from a source.

    ``df`` holds the good records, ``errors`` the bad ones (see :data:`ERROR_COLUMNS`);
    both are lazy Spark DataFrames over the same input. Sources that must parse the
    input once for both cache it; the runner calls :meth:`release` after the commit.
    A source may hand them over already made (``df=``, ``errors=``, ``cached=``) or as
    :class:`Frames` that make them when first asked for (``frames=``).
    """

    start: Position | None
    end: Position
    #: For a batch whose schema was inferred: the same input decoded again with these
    #: column types for the columns they name (the target table's), so one bad value
    #: cannot make a column's inferred type wider than the table's. None = fixed schema.
    retype: Callable[[StructType], Batch] | None
    #: Hidden columns of ``df`` identifying each row's input record (dropped before writing).
    record_columns: tuple[str, ...]
    #: Given a table of ``record_columns`` values, the error-table identity and original
    #: bytes of those records (``record_columns`` + :data:`ERROR_COLUMNS`, reason null).
    originals: Callable[[pa.Table], pa.Table] | None
    #: The good and the bad records as one frame, for a reader that collects both in one
    #: pass and needs no cache: the columns of ``df`` (null on bad rows) and
    #: :data:`SOURCE_ERROR_COL` (null on good rows), made when called (a plan costs JVM
    #: time a reader of ``driver_rows`` may not need). None: only ``df`` and ``errors``.
    together: Callable[[], DataFrame] | None
    #: With ``together`` whose error rows leave ``reason`` null: given those rows (as
    #: collected, :data:`ERROR_COLUMNS`), the same rows with their reasons. A source uses
    #: it when the reason is costly to plan for every batch and only bad rows need it.
    explain_errors: Callable[[pa.Table], pa.Table] | None
    #: With ``together``: its good rows made on the driver without the Spark decode (its
    #: columns but :data:`SOURCE_ERROR_COL`, as Spark's collect types them), or None when
    #: a record of the batch needs that decode (a reader then collects ``together``).
    driver_rows: Callable[[], pa.Table | None] | None
    #: ``df``, ``errors`` and ``cached``, made on first use.
    frames: Frames
    #: Kafka partitions holding records past the batch's end that the batch could have
    #: read but for its cap (``max_records_per_batch``): a primary-key change whose create
    #: the batch has may have its delete there (:mod:`streamer.pipeline.held_back`).
    behind: frozenset[int]

    def __init__(
        self,
        df: DataFrame | None = None,
        errors: DataFrame | None = None,
        *,
        start: Position | None,
        end: Position,
        cached: tuple[DataFrame, ...] = (),
        retype: Callable[[StructType], Batch] | None = None,
        record_columns: tuple[str, ...] = (),
        originals: Callable[[pa.Table], pa.Table] | None = None,
        together: Callable[[], DataFrame] | None = None,
        explain_errors: Callable[[pa.Table], pa.Table] | None = None,
        driver_rows: Callable[[], pa.Table | None] | None = None,
        frames: Frames | None = None,
        behind: frozenset[int] = frozenset(),
    ) -> None:
        if frames is None:
            if df is None or errors is None:
                raise TypeError("a Batch needs df and errors, or frames that make them")
            frames = Frames.of(df, errors, cached)
        elif df is not None or errors is not None or cached:
            raise TypeError("a Batch takes df/errors/cached or frames, not both")
        for name, value in (("start", start), ("end", end), ("retype", retype), ("record_columns", record_columns),
                            ("originals", originals), ("together", together),
                            ("explain_errors", explain_errors), ("driver_rows", driver_rows), ("frames", frames),
                            ("behind", behind)):
            object.__setattr__(self, name, value)

    @property
    def df(self) -> DataFrame:
        return self.frames()[0]

    @property
    def errors(self) -> DataFrame:
        return self.frames()[1]

    @property
    def cached(self) -> tuple[DataFrame, ...]:
        """DataFrames serving both ``df`` and ``errors``: cached by the source or, when it
        left that to the reader, by :meth:`cache`; unpersisted by :meth:`release`."""
        return self.frames()[2]

    def cache(self) -> None:
        """Cache the input ``df`` and ``errors`` share, before reading both (or one twice).

        A source may leave this to the reader: filling a cache costs a Spark job's worth
        of JVM work and ~0.1 s of planning per batch, wasted on a reader of ``together``.
        """
        for d in self.cached:
            if not d.is_cached:
                d.cache()

    def release(self) -> None:
        """Free cached input once the batch is committed (safe to call more than once;
        frames never made hold no cache)."""
        if not self.frames.built:
            return
        for d in self.cached:
            if d.is_cached:
                d.unpersist()

    @property
    def has_new_data(self) -> bool:
        """False when the source had nothing new (``end`` equals ``start``): skip the commit."""
        return self.start != self.end


@runtime_checkable
class Source(Protocol):
    """A batch source; every source type implements this."""

    #: ``"kafka"``, ``"files"`` or ``"generator"``.
    source_type: str

    def read_batch(self, spark: SparkSession, start: Position | None) -> Batch:
        """Read what is available after ``start`` (None = the configured beginning)."""
        ...

    def initial_position(self) -> Position | None:
        """Where a pipeline with no stored position starts (None if it must be resolved by reading)."""
        ...


@runtime_checkable
class StreamingSource(Source, Protocol):
    """A source that can also drive Spark Structured Streaming (continuous mode).

    The pipeline knows no source by name: what a stream needs that is particular to the
    source (where it really starts, which rows a replayed micro-batch already committed)
    is asked here.
    """

    def resolve_stream_start(self, start: Position | None) -> Position:
        """The concrete position a stream starts at (``start``, else the configured
        beginning), naming every unit the source reads; raises on data loss."""
        ...

    def stream(self, spark: SparkSession, start: Position | None = None) -> DataFrame:
        """A streaming DataFrame of raw input, for ``writeStream.foreachBatch``."""
        ...

    def filter_committed(self, raw: DataFrame, position: Position | None) -> DataFrame:
        """``raw`` without the rows at or before ``position`` (a micro-batch Spark hands
        over again, or one overlapping a committed one, writes nothing twice)."""
        ...

    def batch_from_raw(self, raw: DataFrame, start: Position | None) -> Batch:
        """Decode one micro-batch of :meth:`stream` output handed to ``foreachBatch``."""
        ...

    def raw_between(self, spark: SparkSession, start: Position, end: Position) -> DataFrame:
        """The raw input from ``start`` up to ``end``, as :meth:`stream` hands it over: the
        records a micro-batch left to the next one (``streamer.pipeline.held_back``), which
        Spark's stream, already past them, does not hand over again."""
        ...


@runtime_checkable
class WarmsUp(Protocol):
    """A source that knows a cheap batch to warm its read path with (a hot standby)."""

    def warm_up_batch(self, spark: SparkSession, start: Position | None) -> Batch:
        """A small batch at or after ``start`` (or anywhere, if nothing is after it) to
        decode without writing; may be empty."""
        ...


@dataclass(frozen=True)
class RecordIdentity:
    """How a source's rows say which input record they are (stable error-table ids).

    A record found bad after decoding (a null key) is identified by its own position
    (Kafka: topic/partition/offset), not the batch's, so a replay cut into other
    micro-batches gives it the same error id.
    """

    #: The source to read with: it may read identity columns the YAML did not ask for.
    source: Source
    #: (error-table column, batch column) pairs, e.g. ``("offset", "_kafka_offset")``.
    positions: tuple[tuple[str, str], ...] = ()
    #: Columns describing the record rather than its data (kept out of its JSON payload).
    metadata: tuple[str, ...] = ()
    #: Those of them only the pipeline wanted (dropped before the table gets the rows).
    hidden: tuple[str, ...] = ()
    #: A timestamp column dating each record (the batch's freshness), if any.
    event_time: str | None = None


@runtime_checkable
class IdentifiesRecords(Protocol):
    """A source whose rows can carry their own position (see :class:`RecordIdentity`)."""

    def record_identity(self) -> RecordIdentity:
        ...


def record_identity(source: Source) -> RecordIdentity:
    """``source``'s :class:`RecordIdentity` (none beyond the batch's position if it has no way)."""
    if isinstance(source, IdentifiesRecords):
        return source.record_identity()
    return RecordIdentity(source)


@runtime_checkable
class ReadsAvailableNow(Protocol):
    """A source that can fix, once, what "available now" means (``trigger.mode: available_now``).

    Like Spark's ``Trigger.AvailableNow``: the end is decided when the run starts, then
    read in capped batches, so a scheduled job catches up and stops even while producers
    keep writing (what arrives after the start is the next run's).
    """

    def available_now(self, start: Position | None) -> object:
        """A bound on what later reads may return, fixed now (Kafka: the end offsets; files:
        the listing). Opaque to the runner: only handed back to :meth:`read_batch_until`."""
        ...

    def read_batch_until(self, spark: SparkSession, start: Position | None, bound: object) -> Batch:
        """:meth:`Source.read_batch` (capped as usual), taking nothing beyond ``bound``."""
        ...


@dataclass(frozen=True)
class PartitionLag:
    """How far one partition of a source is behind what it holds (Kafka: a topic partition)."""

    #: ``"topic-0"`` for Kafka; a source's own name for its unit of ordering otherwise.
    partition: str
    #: Records available after ``position`` in this partition (latest offset - position).
    records: int


@runtime_checkable
class ReportsLag(Protocol):
    """A source that can say how far a position is behind (exported as a metric)."""

    def lag(self, position: Position | None) -> list[PartitionLag]:
        """Per-partition lag after ``position``; an empty list when it cannot be asked now.

        Called after each batch; must be cheap (metadata only) and must not raise for an
        unreachable server - lag is an observation, never a reason to stop a pipeline.
        """
        ...


@runtime_checkable
class NotifiedOfCommits(Protocol):
    """A source told when a position became durable in the table.

    The table's commit is the source of truth for where a pipeline resumes; this hook
    only mirrors it outward (Kafka: the consumer group's committed offsets, for lag
    dashboards). It runs after the table commit completed and must not raise.
    """

    def on_table_commit(self, position: Position, instant: str) -> None:
        ...


@runtime_checkable
class Preflight(Protocol):
    """A source that can check, before Spark starts, that what it reads is there.

    A run that cannot reach its broker should say so in seconds, not after a JVM start
    and a first batch (``streamer run --once`` used to take a minute to fail).
    """

    def preflight(self) -> None:
        """Raise one clear :class:`~streamer.errors.SourceError` if the source cannot be read."""
        ...


def empty_errors(spark: SparkSession) -> DataFrame:
    return spark.createDataFrame([], ERROR_SCHEMA_DDL)
