"""One source batch → (rows for the table, rows for the error table, counts), in few Spark jobs.

Why this is its own step: on a small machine every Spark job costs a few hundred
milliseconds whatever its size, and freshness is the sum of them. A batch small
enough for the driver is therefore collected in **one** job as Arrow (the source's
error rows, the transformed rows with an "is it keyable" flag, the count before the
transforms: :mod:`streamer.pipeline.collect`) and split there; counting, splitting and
the error rows cost no further jobs. Larger batches stay distributed (cached once) for the Spark engine.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

from streamer.config.pipeline import PipelineConfig
from streamer.errors import first_line
from streamer.pipeline import held_back
from streamer.pipeline.collect import collect_together, set_rows
from streamer.pipeline.dupes import drop_existing, drop_existing_on_spark
from streamer.pipeline.errors_table import (
    ERROR_ARROW_SCHEMA,
    PAYLOAD_COL,
    REASON_COL,
    all_keyable,
    as_error_arrow,
    flag_unkeyable,
    unkeyable_error_rows,
    with_no_reasons,
    with_originals,
)
from streamer.pipeline.key_changes import rows_before_deletes
from streamer.pipeline.placeholder import Placeholder
from streamer.pipeline.unavailable import placeholder_columns, resolve
from streamer.sources.base import RECORD_COLUMN, SOURCE_ERROR_COL, Batch, RecordIdentity
from streamer.sources.debezium import change_rows
from streamer.sources.position import KafkaOffsets, Position
from streamer.table.meta_fields import IS_DELETED
from streamer.transforms import TransformError, apply_transforms, build_transform

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession
    from pyspark.sql.types import StructType

    from streamer.fs_s3 import S3Settings

log = logging.getLogger(__name__)


@dataclass
class PreparedBatch:
    """What a batch commits: ``good`` (Arrow, or a Spark DataFrame for the Spark engine) and ``errors``."""

    good: Any
    errors: pa.Table
    read: int
    written: int
    #: The position the batch commits when it left records to the next batch
    #: (:mod:`streamer.pipeline.held_back`); None: the batch's own end.
    end: Position | None = None
    #: How far a ``trigger.mode: once`` run's one more batch reads the records this one
    #: left: its own end, but for the partitions held back for a key change's create whose
    #: delete is still unread (:func:`~streamer.pipeline.held_back.creates_held`), which
    #: wait for the next run. None: the batch's own end.
    read_again: Position | None = None
    #: Deletes committed on their own after ``good`` (of ``written``), in a second commit
    #: (:func:`~streamer.pipeline.held_back.deferred_deletes`); None: one commit.
    deferred: held_back.Deferred | None = None
    _cached: list[DataFrame] = field(default_factory=list)

    @property
    def errored(self) -> int:
        return self.errors.num_rows

    @property
    def filtered(self) -> int:
        return self.read - self.written - self.errored

    def release(self) -> None:
        for df in self._cached:
            df.unpersist()
        self._cached.clear()


def estimated_rows(batch: Batch) -> int | None:
    """An upper bound on the batch's records known without a Spark job, else None: from
    positions that can count the records between them (``records_until``, offsets)."""
    count = getattr(batch.start, "records_until", None)
    if count is not None and type(batch.start) is type(batch.end):
        return count(batch.end)
    return None


def on_driver(config: PipelineConfig, batch: Batch) -> bool:
    """Whether the batch is collected to the driver (local engine) or written by Spark.
    A global index plans on the driver (it looks every key up in every partition)."""
    engine = config.engine
    if config.target.index.type == "global_bloom":
        return True
    if engine.mode != "auto":
        return engine.mode == "local"
    estimate = estimated_rows(batch)
    if estimate is None:
        estimate = batch.df.limit(engine.local_max_records + 1).count()
    return estimate <= engine.local_max_records


def prepare(
    config: PipelineConfig,
    spark: SparkSession,
    batch: Batch,
    source_type: str,
    position_json: str,
    identity: RecordIdentity | None = None,
) -> PreparedBatch:
    """Transform, flag unkeyable rows, split good from bad, count.

    ``identity`` says which columns identify a record (its error row's position) and
    which of them only the pipeline asked for (``hidden``: dropped from the rows that
    reach the table).
    """
    positions = identity.positions if identity is not None else ()
    metadata = identity.metadata if identity is not None else ()
    hidden_columns = identity.hidden if identity is not None else ()
    cached: list[DataFrame] = []
    retyped = with_table_types(config, spark, batch)
    if retyped is not batch:
        cached.extend(_own_caches(retyped, batch))
        batch = retyped
    local = on_driver(config, batch)
    steps = has_steps(config)
    one_pass = local and batch.together is not None and not steps
    flagged = None
    if not one_pass:
        batch.cache()  # df and errors are both read below (before any of their plans runs)
        flagged = flag_unkeyable(transformed(config, batch.df, spark), config.target, metadata)
    # a source's record columns may be its metadata columns: dropped only when the runner added them
    hidden = (*hidden_columns, RECORD_COLUMN)

    def drop(columns: list[str]) -> list[str]:
        return [REASON_COL, PAYLOAD_COL, *[c for c in dict.fromkeys(hidden) if c in columns]]

    n_good_in: int | None = None
    columns = _kafka_columns(positions)  # where a Debezium batch may hold its tail back
    try:
        if local:
            if one_pass:
                source_errors, rows = _one_pass(batch, config, metadata)
            else:
                source_errors, rows, n_good_in = _collect(batch, _made(flagged), steps)
            split = _split_local(config, rows, columns, batch, drop(rows.column_names))
        else:
            source_errors = as_error_arrow(batch.errors.toArrow())
            flagged = _made(flagged).persist()  # never one pass off the driver
            cached.append(flagged)
            split = _split_on_spark(config, flagged, spark, drop(flagged.columns), columns, batch)
    except Exception as e:
        failed = failing_step(config, spark, batch) if config.transforms else None
        if failed is None:
            raise
        raise failed from e
    good, bad, n_written, n_flagged = split.good, split.bad, split.written, split.flagged
    holds, creates, deferred = split.holds, split.creates, split.deferred
    if n_good_in is None:
        n_good_in = batch.df.count() if steps else n_flagged
    if holds:  # the records left to the next batch are read there
        source_errors, n_good_in = _not_held(batch, holds, source_errors, n_good_in, n_flagged)
    unkeyable = unkeyable_error_rows(bad, source_type, position_json, positions)
    if unkeyable.num_rows and batch.originals is not None and set(batch.record_columns) <= set(bad.column_names):
        # the record's own position and bytes, not the batch's position and a re-serialisation
        unkeyable = with_originals(unkeyable, bad.select(list(batch.record_columns)), batch.originals)
    errors = pa.concat_tables([source_errors, unkeyable]) if unkeyable.num_rows else source_errors
    return PreparedBatch(
        good=good,
        errors=errors.cast(ERROR_ARROW_SCHEMA),
        read=n_good_in + source_errors.num_rows,
        written=n_written,
        end=held_back.held_end(batch.end, holds) if holds else None,
        read_again=held_back.held_end(batch.end, creates) if creates else None,
        deferred=deferred,
        _cached=cached,
    )


def failing_step(config: PipelineConfig, spark: SparkSession, batch: Batch) -> TransformError | None:
    """The first of the transforms that fails on the batch's rows, as an error naming it
    (``transforms[1] (cast)``) with its own reason; ``None`` if each runs.

    Why: Spark analyses a step when it is added but runs it only when the batch is
    collected or written, so a value one step cannot take (``CAST('seven' AS INT)`` under
    ANSI, a Python function's exception) failed the batch naming no step. Asked only
    after such a failure: each step is run in turn (Spark's no-op sink: no Python, no
    collect) until one fails."""
    df = batch.df
    database = debezium_of(config)
    try:  # the input alone first: a source that fails (a broker gone) is no step's doing
        if database is not None:
            df = change_rows(df, database)
        df.write.format("noop").mode("overwrite").save()
    except Exception:
        return None
    for i, step in enumerate(config.transforms):
        try:
            df = build_transform(step).apply(df, spark)
            df.write.format("noop").mode("overwrite").save()
        except Exception as e:
            return TransformError(f"transforms[{i}] ({step.type}) failed on a record of the batch: {first_line(e)}")
    return None


def has_steps(config: PipelineConfig) -> bool:
    """Whether the source's rows change between the source and the table (and so may
    be dropped: the batch then counts the rows it read before them)."""
    return bool(config.transforms) or debezium_of(config) is not None


def debezium_of(config: PipelineConfig) -> str | None:
    """The Debezium connector the source's events come from, if any."""
    return getattr(config.source, "debezium", None)


def placeholder_of(config: PipelineConfig) -> Placeholder:
    """The connector's unavailable-value placeholder (the source's setting, else Debezium's default)."""
    setting = getattr(config.source, "unavailable_value_placeholder", None)
    return Placeholder.of(setting) if setting else Placeholder.of()


def transformed(config: PipelineConfig, df: DataFrame, spark: SparkSession) -> DataFrame:
    """The source's rows as the table takes them: Debezium events unpacked, then the transforms."""
    database = debezium_of(config)
    if database is not None:
        try:
            df = change_rows(df, database)
        except Exception as e:
            raise TransformError(f"source.debezium ({database}): {e}") from e
    return apply_transforms(df, config.transforms, spark)


def complete_unchanged_values(config: PipelineConfig, rows: pa.Table) -> pa.Table:
    """``rows`` (flagged, on the driver) with Debezium's placeholder for unchanged TOASTed
    values replaced by the value (:mod:`streamer.pipeline.unavailable`); a row that cannot
    be completed is flagged with the reason, for the error table."""
    good_mask = pc.is_null(rows.column(REASON_COL))
    good = rows.filter(good_mask)
    placeholder = placeholder_of(config)
    if not good.num_rows or not placeholder_columns(good, skip=(REASON_COL, PAYLOAD_COL), placeholder=placeholder):
        return rows
    from streamer.pipeline.sink import open_table, table_config
    from streamer.write.keygen import record_keys

    keys = record_keys(good, table_config(config.target))

    def stored(wanted: pa.Array, columns: list[str]) -> pa.Table | None:
        table = open_table(config.target.path, config.s3_settings())
        if table is None:
            return None
        return table.read(columns=["_hoodie_record_key", *columns],
                          filter=pc.field("_hoodie_record_key").isin(wanted))

    def before_deletes(positions: pa.Array, columns: list[str]) -> pa.Table | None:
        table = open_table(config.target.path, config.s3_settings())
        return None if table is None else rows_before_deletes(table, positions, columns)

    done = resolve(good, keys, config.target.ordering_field, stored, deleted=IS_DELETED,
                   operation="_change_operation_type", deleted_rows=before_deletes, placeholder=placeholder)
    if PAYLOAD_COL in done.column_names:
        flagged = pc.and_(pc.is_valid(done.column(REASON_COL)), pc.is_null(done.column(PAYLOAD_COL)))
        if pc.any(flagged).as_py():
            payload = pa.array([json.dumps(r, default=str) if f else p for r, f, p in zip(
                done.drop_columns([REASON_COL, PAYLOAD_COL]).to_pylist(), flagged.to_pylist(),
                done.column(PAYLOAD_COL).to_pylist(), strict=True)], pa.string())
            done = done.set_column(done.schema.get_field_index(PAYLOAD_COL), PAYLOAD_COL, payload)
    return pa.concat_tables([done, rows.filter(pc.invert(good_mask))], promote_options="permissive")


def _collect(batch: Batch, flagged: DataFrame, steps: bool) -> tuple[pa.Table, pa.Table, int | None]:
    """One job: the source's error rows, the transformed rows and (with transforms, which
    may drop rows) the count of the rows they were given."""
    from pyspark.sql import functions as F

    frames = [batch.errors, flagged]
    if steps:
        frames.append(batch.df.agg(F.count(F.lit(1)).alias("n")))
    collected = collect_together(*frames)
    n = int(collected[2].column("n")[0].as_py()) if steps else None
    return as_error_arrow(collected[0]), collected[1], n


def _not_held(batch: Batch, holds: held_back.Holds, source_errors: pa.Table, n_read: int,
              n_flagged: int) -> tuple[pa.Table, int]:
    """The source's error rows and the count of records read, without the records the
    batch left to the next one (read there)."""
    n_errors = source_errors.num_rows
    source_errors = held_back.kept(source_errors, holds, "partition", "offset")
    held = held_back.records_held(batch.end, holds) - (n_errors - source_errors.num_rows)
    return source_errors, max(n_flagged, n_read - held)


def _kafka_columns(positions: tuple[tuple[str, str], ...]) -> tuple[str, str] | None:
    """The rows' Kafka partition and offset columns, if the source's records are named so."""
    named = dict(positions)
    return (named["partition"], named["offset"]) if "partition" in named and "offset" in named else None


def _hold_back_local(config: PipelineConfig, rows: pa.Table,
                     columns: tuple[str, str] | None) -> tuple[pa.Table, held_back.Holds]:
    """A Debezium batch's rows on the driver without the tail it leaves to the next batch
    (:mod:`streamer.pipeline.held_back`), and where that tail starts."""
    if columns is None or not {*columns, IS_DELETED} <= set(rows.column_names):
        return rows, {}
    good = rows.filter(pc.is_null(rows.column(REASON_COL)))
    if not good.num_rows:
        return rows, {}
    from streamer.pipeline.sink import table_config
    from streamer.write.keygen import record_keys

    keys = record_keys(good, table_config(config.target))
    pairing = _pairing(config, good.column_names)
    paired = None if pairing is None else held_back.paired_deletes(
        good.column(IS_DELETED), good.column(pairing[0]), good.column(pairing[1]))
    holds = held_back.holds_of(good.column(columns[0]), good.column(columns[1]), good.column(IS_DELETED), keys,
                               paired)
    return held_back.kept(rows, holds, *columns), holds


def _complete_local(config: PipelineConfig, rows: pa.Table, columns: tuple[str, str] | None,
                    behind: frozenset[int], start: dict[int, int]) -> tuple[pa.Table, held_back.Holds]:
    """:func:`complete_unchanged_values` on the driver, without the records held back for a
    key change's create whose delete may be in what the batch did not read
    (:func:`~streamer.pipeline.held_back.creates_held`), and where those holds start."""
    good_mask = pc.is_null(rows.column(REASON_COL))
    done = complete_unchanged_values(config, rows.filter(good_mask))
    creates: held_back.Holds = {}
    if columns is not None:
        view = held_back.local_view(done, *columns, config.target.ordering_field, behind, start)
        creates = _creates_held(config, done.filter(pc.is_valid(done.column(REASON_COL))), columns, view)
    rows = pa.concat_tables([done, rows.filter(pc.invert(good_mask))], promote_options="permissive")
    if not creates or columns is None:
        return rows, {}
    return held_back.kept(rows, creates, *columns), creates


def _creates_held(config: PipelineConfig, incomplete: pa.Table, columns: tuple[str, str],
                  view: held_back.BatchView) -> held_back.Holds:
    """:func:`~streamer.pipeline.held_back.creates_held` of the rows left ``incomplete``,
    each hold logged."""
    if not view.behind:
        return {}
    waiting = held_back.waiting_creates(incomplete, *columns, "_change_operation_type", config.target.ordering_field)
    creates = held_back.creates_held(waiting, view) if waiting else {}
    for p, o in sorted(creates.items()):
        log.info("[%s] the create of a primary-key change at partition %d offset %d is not complete in the batch; "
                 "its delete may be in what the batch did not read of partitions %s: partition %d is held back "
                 "from it", config.name, p, o, sorted((view.behind | set(creates)) - {p}), p,
                 extra={"pipeline": config.name})
    return creates


@dataclass(frozen=True)
class _Split:
    """A batch split (:func:`_split_local`, :func:`_split_on_spark`): its rows for the table
    (Arrow, or a Spark DataFrame), its flagged rows, how many are written, how many rows were
    flagged or kept, what a Debezium batch leaves to the next batch (``holds``), which of
    that it leaves for a key change's create (``creates``), and the deletes it commits on
    their own."""

    good: Any
    bad: pa.Table
    written: int
    flagged: int
    holds: held_back.Holds
    creates: held_back.Holds
    deferred: held_back.Deferred | None


def _split_local(config: PipelineConfig, rows: pa.Table, columns: tuple[str, str] | None, batch: Batch,
                 hidden: list[str]) -> _Split:
    """A batch collected to the driver (flagged ``rows``), split; ``hidden`` columns are
    dropped from the rows for the table; of ``batch``."""
    holds: held_back.Holds = {}
    creates: held_back.Holds = {}
    deferred: held_back.Deferred | None = None
    if debezium_of(config) == "postgres":
        rows, holds = _hold_back_local(config, rows, columns)
        rows, creates = _complete_local(config, rows, columns, batch.behind, _starts(batch))
        holds = held_back.merged(holds, creates)
    good_mask = pc.is_null(rows.column(REASON_COL))
    good = rows.filter(good_mask)
    if debezium_of(config) == "postgres" and _may_defer(batch, holds):
        good, deferred = _deferred_local(config, good, columns, hidden, batch.behind | set(holds))
    good = good.drop_columns(hidden)
    if config.target.filter_dupes:
        good = drop_existing(config, good)
        if deferred is not None:
            deferred = deferred.keeping(drop_existing(config, deferred.rows), None)
    n_deferred = deferred.count if deferred else 0
    return _Split(good, rows.filter(pc.invert(good_mask)), good.num_rows + n_deferred, rows.num_rows, holds, creates,
                  deferred)


def _split_on_spark(config: PipelineConfig, flagged: DataFrame, spark: SparkSession, hidden: list[str],
                    columns: tuple[str, str] | None, batch: Batch) -> _Split:
    """A batch written by Spark (``flagged``, persisted), split: as :func:`_split_local`,
    its rows for the table a DataFrame and its flagged rows collected."""
    from pyspark.sql import functions as F

    good = flagged.where(F.col(REASON_COL).isNull())
    bad = flagged.where(F.col(REASON_COL).isNotNull()).toArrow()
    holds: held_back.Holds = {}
    creates: held_back.Holds = {}
    deferred: held_back.Deferred | None = None
    if debezium_of(config) == "postgres":
        keys = list(config.target.record_key)
        pairing = _pairing(config, good.columns)
        if columns is not None and {*columns, IS_DELETED, *keys} <= set(good.columns):
            holds = held_back.holds_on_spark(good, *columns, IS_DELETED, keys, pairing)
        if holds and columns is not None:
            good = held_back.kept_on_spark(good, holds, *columns)
            bad = held_back.kept(bad, holds, *columns)
        good, incomplete = _complete_on_spark(config, good, spark)
        if incomplete is not None and columns is not None:
            view = held_back.spark_view(good, *columns, config.target.ordering_field, batch.behind, _starts(batch))
            creates = _creates_held(config, incomplete, columns, view)
            bad = pa.concat_tables([bad, incomplete.select(bad.column_names)], promote_options="permissive")
            if creates and columns is not None:
                good = held_back.kept_on_spark(good, creates, *columns)
                bad = held_back.kept(bad, creates, *columns)
                holds = held_back.merged(holds, creates)
        if _may_defer(batch, holds) and columns is not None and {*columns, IS_DELETED, *keys} <= set(good.columns):
            good, deferred = _deferred_on_spark(good, columns, keys, pairing, hidden, batch.behind | set(holds))
    good = good.drop(*hidden)
    n_kept = good.count()
    n_deferred = deferred.count if deferred else 0
    written = n_kept
    if config.target.filter_dupes:
        good = drop_existing_on_spark(config, good, spark)
        written = good.count()
        if deferred is not None:
            left = drop_existing_on_spark(config, deferred.rows, spark)
            deferred = deferred.keeping(left, int(left.count()))
    written += deferred.count if deferred else 0
    return _Split(good, bad, written, n_kept + n_deferred + bad.num_rows, holds, creates, deferred)


def _may_defer(batch: Batch, holds: held_back.Holds) -> bool:
    """Whether a key change's create may be unread while the batch has its delete: some
    partition has records the batch did not read or held back, and it is not the topic's
    only partition (there the create follows its delete: nothing is deferred)."""
    waiting = batch.behind | set(holds)
    if not waiting:
        return False
    end = batch.end.partitions if isinstance(batch.end, KafkaOffsets) else {}
    return not (len(waiting) == 1 and set(end) <= waiting)


def _starts(batch: Batch) -> dict[int, int]:
    """Each Kafka partition's first offset in the batch (none for other sources)."""
    return dict(batch.start.partitions) if isinstance(batch.start, KafkaOffsets) else {}


def _pairing(config: PipelineConfig, columns: list[str]) -> tuple[str, str] | None:
    """The ordering and operation columns that pair a key change's delete with its create
    (:func:`~streamer.pipeline.held_back.paired_deletes`), if the rows have them."""
    ordering, operation = config.target.ordering_field, "_change_operation_type"
    return (ordering, operation) if ordering is not None and {ordering, operation} <= set(columns) else None


def _deferred_local(config: PipelineConfig, good: pa.Table, columns: tuple[str, str] | None,
                    hidden: list[str], waiting: frozenset[int]) -> tuple[pa.Table, held_back.Deferred | None]:
    """``good`` without the deletes it commits on their own
    (:func:`~streamer.pipeline.held_back.deferred_deletes`), and those: in a partition
    other than one of those ``waiting`` (with records the batch did not read or held
    back), where a key change's create may be."""
    if columns is None or not good.num_rows or not {*columns, IS_DELETED} <= set(good.column_names):
        return good, None
    from streamer.pipeline.sink import table_config
    from streamer.write.keygen import record_keys

    pairing = _pairing(config, good.column_names)
    paired = None if pairing is None else held_back.paired_deletes(
        good.column(IS_DELETED), good.column(pairing[0]), good.column(pairing[1]))
    later = held_back.deferred_deletes(record_keys(good, table_config(config.target)), good.column(columns[1]),
                                       good.column(IS_DELETED), paired)
    if len(waiting) == 1:  # the create of a delete in the one waiting partition is not there
        later = pc.and_(later, pc.fill_null(pc.not_equal(good.column(columns[0]), next(iter(waiting))), False))
    if not pc.any(later).as_py():
        return good, None
    rows = good.filter(later)
    at = rows.group_by(columns[0]).aggregate([(columns[1], "min")])
    deferred = held_back.Deferred(rows.drop_columns([c for c in hidden if c in rows.column_names]), rows.num_rows,
                                  dict(zip(at.column(0).to_pylist(), at.column(1).to_pylist(), strict=True)))
    return good.filter(pc.invert(later)), deferred


def _deferred_on_spark(good: DataFrame, columns: tuple[str, str], keys: list[str], pairing: tuple[str, str] | None,
                       hidden: list[str], waiting: frozenset[int]) -> tuple[DataFrame, held_back.Deferred | None]:
    """:func:`_deferred_local` for a batch written by Spark."""
    from pyspark.sql import functions as F

    later = held_back.deferred_on_spark(good, columns[1], IS_DELETED, keys, pairing).select(*good.columns)
    if len(waiting) == 1:
        later = later.where(F.col(columns[0]) != next(iter(waiting)))
    # one job: each partition's first deferred offset and how many it defers
    firsts = later.groupBy(columns[0]).agg(F.min(columns[1]), F.count(F.lit(1))).collect()
    if not firsts:
        return good, None
    at = {int(r[0]): int(r[1]) for r in firsts}
    deferred = held_back.Deferred(later.drop(*hidden), sum(int(r[2]) for r in firsts), at)
    return good.join(later.select(*columns), list(columns), "left_anti"), deferred


def _complete_on_spark(config: PipelineConfig, rows: DataFrame,
                       spark: SparkSession) -> tuple[DataFrame, pa.Table | None]:
    """:func:`complete_unchanged_values` for a batch written by Spark: the rows of the keys
    that carry the placeholder are completed on the driver (few: updates that left a large
    value alone) and put back; the rows that could not be are returned for the error table."""
    from functools import reduce

    from pyspark.sql import functions as F

    tests = _placeholder_tests(rows, placeholder_of(config))
    keys = list(config.target.record_key)
    if not tests or not set(keys) <= set(rows.columns):  # no text, or no row (a batch of tombstones)
        return rows, None
    # over the batch's cached rows: cheap to evaluate again for each use
    carrying = rows.where(reduce(lambda a, b: a | b, tests))
    touched = carrying.select(*keys).distinct()
    if not touched.take(1):
        return rows, None
    ordering, operation = config.target.ordering_field, "_change_operation_type"
    if ordering is not None and {ordering, operation, IS_DELETED} <= set(rows.columns):
        # a key change's create is completed from its old key, whose delete shares its position
        created_at = carrying.where(F.col(operation) == "c").select(ordering).distinct()
        old_keys = rows.where(F.col(IS_DELETED)).join(F.broadcast(created_at), ordering, "left_semi").select(*keys)
        touched = touched.union(old_keys).distinct()
    done = complete_unchanged_values(config, rows.join(F.broadcast(touched), keys, "left_semi").toArrow())
    ok = pc.is_null(done.column(REASON_COL))
    completed = spark.createDataFrame(done.filter(ok)) if pc.any(ok).as_py() else None
    rest = rows.join(F.broadcast(touched), keys, "left_anti")
    out = rest if completed is None else rest.unionByName(completed)
    incomplete = done.filter(pc.invert(ok))
    return out, incomplete if incomplete.num_rows else None


def _placeholder_tests(rows: DataFrame, placeholder: Placeholder) -> list[Column]:
    """A test per column and form of the placeholder (:meth:`Placeholder.forms`) that a
    row's value is it, in Spark: the forms are chosen by the column's Arrow type."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import ArrayType, MapType

    tests = []
    for f in rows.schema.fields:
        t = f.dataType
        arrow = None if f.name in (REASON_COL, PAYLOAD_COL) else _arrow_of(t)
        col = F.col(f"`{f.name}`")
        for form in placeholder.forms(arrow) if arrow is not None else ():
            if isinstance(t, MapType):
                tests.append((F.size(col) == len(form)) & (F.map_keys(col) == F.array(*[F.lit(k) for k, _ in form]))
                             & (F.map_values(col) == F.array(*[F.lit(v) for _, v in form])))
            elif isinstance(t, ArrayType):
                tests.append(col == F.array(*[F.lit(x).cast(t.elementType) for x in form]))
            else:
                tests.append(col == F.lit(form))
    return tests


def _arrow_of(t: Any) -> pa.DataType | None:
    """The Arrow type of a Spark column that may hold the placeholder (text, bytes, arrays
    of them or of integers, a map of text); None for any other."""
    from pyspark.sql import types as T

    plain = {T.StringType: pa.string(), T.BinaryType: pa.binary(), T.ByteType: pa.int8(), T.ShortType: pa.int16(),
             T.IntegerType: pa.int32(), T.LongType: pa.int64()}
    if isinstance(t, T.ArrayType):
        element = plain.get(type(t.elementType))
        return None if element is None else pa.list_(element)
    if isinstance(t, T.MapType):
        texts = isinstance(t.keyType, T.StringType) and isinstance(t.valueType, T.StringType)
        return pa.map_(pa.string(), pa.string()) if texts else None
    if isinstance(t, T.StringType):
        return pa.string()
    return pa.binary() if isinstance(t, T.BinaryType) else None


def _made(flagged: DataFrame | None) -> DataFrame:
    """The flagged rows of a batch not prepared in one pass (:func:`prepare` makes them then)."""
    if flagged is None:
        raise RuntimeError("the batch's flagged rows were not made (prepared in one pass?)")
    return flagged


def _one_pass(batch: Batch, config: PipelineConfig, metadata: tuple[str, ...]) -> tuple[pa.Table, pa.Table]:
    """The source's error rows and the flagged rows of ``batch``, as :func:`prepare`'s
    collect gives them, from one projection of its input (``Batch.together``).

    Why: reading ``df`` and ``errors`` needs their shared decode cached so that the input
    is parsed once (:meth:`Batch.cache`), and the collect then reads the cache twice;
    filling and reading the cache was ~40% of the JVM's CPU of a 100k-record Kafka batch
    and its planning ~0.2 s (benchmarks/RESULTS.md). Without transforms both kinds of
    rows come from one pass here and are split on the driver.

    A batch the source can decode on the driver (``Batch.driver_rows``: every record
    ordinary, and here every row keyable) skips Spark's decode; any other goes through
    ``together``, whose source read then runs a second time.
    """
    batch.release()  # cached by someone after all: this plan must not read (and fill) it
    if batch.driver_rows is not None:
        rows = batch.driver_rows()
        if rows is not None and all_keyable(rows, config.target):
            return ERROR_ARROW_SCHEMA.empty_table(), with_no_reasons(rows)
    assert batch.together is not None
    flagged = flag_unkeyable(batch.together(), config.target, (*metadata, SOURCE_ERROR_COL))
    rows = flagged.toArrow()
    column = rows.column(SOURCE_ERROR_COL)
    not_error = pc.is_null(column)
    errors = as_error_arrow(set_rows(column))
    if errors.num_rows and batch.explain_errors is not None:
        errors = batch.explain_errors(errors)  # a small job, for batches with bad records only
    return errors, rows.filter(not_error).drop_columns([SOURCE_ERROR_COL])


def with_table_types(config: PipelineConfig, spark: SparkSession, batch: Batch) -> Batch:
    """The batch decoded with the target table's column types, when its schema was inferred.

    Declared schema first (the source has no ``retype`` then), else the table's schema
    for the columns it has, else inference: one wrong-typed value must not widen a column
    (``ts`` becoming a string made the table refuse the whole batch, forever); with the
    table's type it is only its own record that goes to the error table.

    Only columns the transforms pass through unchanged take the table's type: a column a
    transform converts (``to_date(d, 'yyyy/MM/dd') AS d``) has the table's type after the
    transform, not in the source, and parsing the source with it would refuse every row.
    """
    if batch.retype is None:
        return batch
    table = table_spark_schema(config.target.path, config.s3_settings())
    if table is None:
        return numeric_ordering(config, batch)
    have = {f.name: f.dataType for f in batch.df.schema.fields}
    if has_steps(config):
        out = {f.name: f.dataType for f in transformed(config, batch.df, spark).schema.fields}
        have = {n: t for n, t in have.items() if out.get(n) == t}
    from pyspark.sql.types import StructType

    wanted = StructType([f for f in table.fields if f.name in have])
    if all(have[f.name] == f.dataType for f in wanted.fields):
        return batch  # nothing to change: no second decoding
    return batch.retype(wanted)


def numeric_ordering(config: PipelineConfig, batch: Batch) -> Batch:
    """The first batch of a new table, its ordering field decoded as a number when any
    record gives it as one and inference made it text.

    Why: inference makes a column text when one record's value is text (``"ts":
    "yesterday"`` among numbers), and the table would keep that type: its versions then
    order as text (``"9"`` above ``"10"``), and the wrong one wins, for good. As a number,
    only the odd record goes to the error table, as it does once the table exists. A field
    every record gives as text (an ISO time) stays text; one a transform makes is left alone.
    """
    from pyspark.sql import functions as F
    from pyspark.sql.types import DoubleType, LongType, StringType, StructField, StructType

    name = config.target.ordering_field
    assert batch.retype is not None
    field = next((f for f in batch.df.schema.fields if f.name == name), None)
    if field is None or not isinstance(field.dataType, StringType) or has_steps(config):
        return batch
    for kind in (LongType(), DoubleType()):
        retyped = batch.retype(StructType([StructField(field.name, kind, True)]))
        if retyped.df.where(F.col(f"`{field.name}`").isNotNull()).limit(1).count():
            return retyped
        for d in _own_caches(retyped, batch):
            if d.is_cached:
                d.unpersist()
    return batch


def _own_caches(retyped: Batch, batch: Batch) -> list[DataFrame]:
    """The caches of ``retyped`` that ``batch``, whose input it shares, does not hold."""
    return [d for d in retyped.cached if all(d is not c for c in batch.cached)]


def table_spark_schema(path: str, s3: S3Settings | None = None) -> StructType | None:
    """The table's data columns as a Spark schema (None: no table yet, or no schema).

    Columns whose type Spark cannot hold are left out (they keep their inferred type).
    """
    from pyspark.sql.pandas.types import from_arrow_type
    from pyspark.sql.types import StructField, StructType

    from streamer.fs import resolve
    from streamer.table.properties import properties_path
    from streamer.table.snapshot import TableSnapshot
    from streamer.write.schema import data_schema

    fs, base = resolve(path, s3)  # s3: the pipeline's storage.s3 settings
    if not fs.exists(properties_path(base)):
        return None
    schema = TableSnapshot.load(fs, base).latest_schema()
    if schema is None:
        return None
    fields = []
    for f in data_schema(schema):
        try:
            fields.append(StructField(f.name, from_arrow_type(f.type), True))
        except (TypeError, ValueError, NotImplementedError):
            continue
    return StructType(fields)

