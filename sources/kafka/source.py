"""Kafka topic → batches of parsed records, JSON or Confluent Avro.

Batch mode (``trigger: once``, and every batch of a run-once loop): the driver asks
the broker for watermarks, plans explicit end offsets (capped by
``max_records_per_batch``) and reads exactly ``[start, end)`` with
``spark.read.format("kafka")``. The end offsets are the position the runner stores
in the commit, so a replay reads the very same records.

Continuous mode: :meth:`KafkaSource.stream` builds the ``readStream`` and
:meth:`KafkaSource.batch_from_raw` decodes each micro-batch handed to ``foreachBatch``.

Decoding never fails a batch on bad data: unparsable payloads become error rows
(topic/partition/offset, raw payload, reason) for the error table.

Outward, the source mirrors each table commit's end offsets into its consumer group
(:meth:`KafkaSource.on_table_commit`) and reports lag from the watermarks
(:meth:`KafkaSource.lag`), both through one quiet driver client per source.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from streamer.config.sources import KafkaSourceConfig
from streamer.errors import SourceError
from streamer.sources import connect_schema
from streamer.sources.base import (
    ERROR_SCHEMA_DDL,
    SOURCE_ERROR_COL,
    Batch,
    Frames,
    PartitionLag,
    RecordIdentity,
    struct_from_ddl,
)
from streamer.sources.kafka.client import KafkaSourceClient
from streamer.sources.kafka.offsets import plan_end, resolve_start
from streamer.sources.kafka.records import METADATA_COLUMNS, error_columns, kafka_errors
from streamer.sources.kafka.settings import spark_kafka_options
from streamer.sources.position import KafkaOffsets, Position

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import Column, DataFrame, SparkSession
    from pyspark.sql.types import StructType

log = logging.getLogger(__name__)

CORRUPT_COLUMN = "_corrupt_record"
MALFORMED_JSON = "malformed JSON, or values that do not match the schema's types"
#: A record without ``schema`` and ``payload`` in a batch whose others embed their schemas.
NOT_WRAPPED = ("no embedded schema: the batch's other records are {schema, payload} "
               "(Kafka Connect's JsonConverter with schemas.enable), this one is not")
RAW_KAFKA_DDL = (
    "key BINARY, value BINARY, topic STRING, `partition` INT, `offset` BIGINT, "
    "timestamp TIMESTAMP, timestampType INT"
)
#: After the driver declined a batch (:mod:`streamer.sources.kafka.driver_json`), this many go
#: straight to Spark's decode: a declined batch reads its records twice, and a topic with
#: a bad record in every batch must not pay that every time.
DRIVER_RETRY_AFTER = 8
class KafkaSource:
    """:class:`~streamer.sources.base.StreamingSource` over one topic; position = :class:`KafkaOffsets`."""

    source_type = "kafka"

    def __init__(self, config: KafkaSourceConfig) -> None:
        self.config = config
        self.client = KafkaSourceClient(config)
        self._avro = None
        #: the declared fields the driver decodes (``_driver_rows``); False: not looked at yet
        self._driver_fields: list[pa.Field] | None | Literal[False] = False  # False: not parsed yet
        #: batches still to decode with Spark after the driver declined one
        self._driver_skip = 0
        #: the position the consumer group was last set to by this process (None: not yet)
        self._mirrored: KafkaOffsets | None = None
        if config.format == "avro":
            from streamer.sources.kafka.avro import AvroDecoder

            self._avro = AvroDecoder.from_config(config)

    def initial_position(self) -> None:
        """Resolved against the broker on the first read (``starting_offsets``)."""
        return None

    def _check(self, start: Position | None) -> KafkaOffsets | None:
        if start is not None and not isinstance(start, KafkaOffsets):
            raise SourceError(f"kafka source cannot resume from a {start.kind!r} position")
        return start

    # -- outward: lag and the consumer group -------------------------------------------------

    def lag(self, position: Position | None) -> list[PartitionLag]:
        """Records after ``position`` per partition, from the watermarks; [] if the broker is away."""
        if position is not None and not isinstance(position, KafkaOffsets):
            return []
        return self.client.lag(position)

    def preflight(self) -> None:
        """The topic's metadata within ``metadata_timeout``: an unreachable broker or a
        missing topic is one :class:`SourceError` before any JVM starts. A Postgres change
        stream on several partitions is warned about: a key change's delete and create
        usually land in different ones, and the create's unchanged TOASTed values can then
        be missed or older (docs/kafka.md)."""
        partitions = self.client.partitions(self.config.metadata_timeout.total_seconds())
        if self.config.debezium == "postgres" and len(partitions) > 1:
            log.warning("kafka %s: a Debezium Postgres topic of %d partitions: a primary-key change's unchanged "
                        "TOASTed values may go to the error table or take an older value; give the topic of a "
                        "table whose keys change one partition (docs/kafka.md)", self.config.topic, len(partitions))

    def on_table_commit(self, position: Position, instant: str) -> None:
        """Mirror the committed position into the consumer group (``commit_offsets``).

        The table already holds the position, so a failed group commit only means a
        dashboard lags behind: a warning, and the next commit catches the group up.
        """
        if not self.config.commit_offsets or not isinstance(position, KafkaOffsets):
            return
        try:
            self.client.commit(position, note=f"hudi instant {instant}")
            self._mirrored = position
        except Exception as e:  # SourceError, or anything librdkafka raises
            log.warning("kafka %s: group %s not updated for instant %s (the table has the position; "
                        "the next read catches it up): %s", self.config.topic, self.client.group_id, instant, e)

    def _catch_up_group(self, start: Position | None) -> None:
        """Set the group to the table's position ``start`` if this process has not yet.

        A group commit that failed (a broker restarting: "waiting for coordinator") left the
        group behind the table; without a later commit - an ``available_now`` run with
        nothing new, an idle pipeline - it would stay stuck there, and lag monitors would
        page for records long since written. Each read starts by mirroring its start once.
        """
        if not self.config.commit_offsets or not isinstance(start, KafkaOffsets) or start == self._mirrored:
            return
        try:
            self.client.commit(start, note="the table's committed position")
            self._mirrored = start
        except Exception as e:  # the table has the position; the next read tries again
            log.info("kafka %s: group %s not caught up to the table's position yet: %s",
                     self.config.topic, self.client.group_id, e)

    def close(self) -> None:
        """Release the driver-side client (also released when the source is collected)."""
        self.client.close()

    # -- batch ------------------------------------------------------------------------------

    def plan(self, start: Position | None) -> tuple[KafkaOffsets, KafkaOffsets]:
        """Concrete ``(start, end)`` offsets of the next batch (asks the broker)."""
        begin, end, _ = self._planned(start, None)
        return begin, end

    def _planned(self, start: Position | None,
                 bound: KafkaOffsets | None) -> tuple[KafkaOffsets, KafkaOffsets, frozenset[int]]:
        """The next batch's start and end offsets, no further than ``bound`` if given, and
        the partitions its cap left records in (``Batch.behind``): up to the bound, whose
        records past it are the next run's."""
        low, high = self.client.watermarks()
        begin = resolve_start(self.config, self._check(start), low, high)
        if bound is not None:  # a partition created after the bound was fixed holds nothing available "now"
            high = {p: min(h, max(bound.partitions.get(p, 0), begin.partitions.get(p, 0))) for p, h in high.items()}
        end = plan_end(begin, high, self.config.max_records_per_batch)
        return begin, end, frozenset(p for p, o in end.partitions.items() if o < high.get(p, o))

    def read_raw(self, spark: SparkSession, begin: KafkaOffsets, end: KafkaOffsets) -> DataFrame:
        """The raw Kafka rows of ``[begin, end)`` (key, value, topic, partition, offset, ...)."""
        if begin == end:
            return spark.createDataFrame([], RAW_KAFKA_DDL)
        return (
            spark.read.format("kafka")
            .options(**spark_kafka_options(self.config))
            .option("assign", json.dumps({self.config.topic: sorted(end.partitions)}))
            .option("startingOffsets", begin.spark_json())
            .option("endingOffsets", end.spark_json())
            .option("failOnDataLoss", str(self.config.fail_on_data_loss).lower())
            .load()
        )

    def read_batch(self, spark: SparkSession, start: Position | None) -> Batch:
        self._catch_up_group(start)
        begin, end, behind = self._planned(start, None)
        log.info("kafka %s: reading %d offset(s) %s", self.config.topic, begin.records_until(end), end.partitions)
        # A batch that starts from "no position" reports the resolved start, so has_new_data works.
        return self._batch(spark, self.read_raw(spark, begin, end), start if start is not None else begin, end,
                           behind)

    # -- available now -------------------------------------------------------------------------

    def available_now(self, start: Position | None) -> KafkaOffsets:
        """The topic's end offsets now: an ``available_now`` run reads up to them, no further."""
        _, high = self.client.watermarks()
        return KafkaOffsets(topic=self.config.topic, partitions=high)

    def read_batch_until(self, spark: SparkSession, start: Position | None, bound: object) -> Batch:
        """:meth:`read_batch` capped by ``bound`` (:meth:`available_now`'s offsets) as well."""
        assert isinstance(bound, KafkaOffsets)
        self._catch_up_group(start)
        begin, end, behind = self._planned(start, bound)
        return self._batch(spark, self.read_raw(spark, begin, end), start if start is not None else begin, end,
                           behind)

    def _batch(self, spark: SparkSession, raw: DataFrame, start: Position | None, end: Position | None,
               behind: frozenset[int] = frozenset()) -> Batch:
        """Decode ``raw`` into a batch; ``end`` None = computed from the offsets seen;
        ``behind``: ``Batch.behind``."""
        from pyspark.sql import functions as F

        driver_rows = None
        if self._avro is not None:
            good, bad, cached = self._avro.decode(spark, raw)
            decoded = _Decoded(cached[0], Frames.of(good, bad, cached))
            payload: tuple[Column, Column] = (F.base64(F.col("value")), F.lit("base64"))
        else:
            driver_rows = self._driver_rows(raw) if self.config.schema_ddl is not None else None
            if driver_rows is not None and end is not None:
                return self._deferred_batch(spark, raw, start, end, driver_rows, behind)
            decoded = json_decoder(spark, raw, self.config)
            payload = _payload()
        if end is None:
            end = self._end_seen(decoded.base, self._check(start))
        record_columns = self._record_columns()
        originals = kafka_originals(decoded.base, *payload) if record_columns else None
        retype = None
        if decoded.redecode is not None:
            redecode = decoded.redecode

            def retype(types: StructType) -> Batch:
                return Batch(start=start, end=end, frames=redecode(types), record_columns=record_columns,
                             originals=originals, behind=behind)

        together = decoded.together
        return Batch(start=start, end=end, frames=decoded.frames, retype=retype, record_columns=record_columns,
                     originals=originals, together=None if together is None else (lambda: together),
                     explain_errors=decoded.explain_errors,
                     driver_rows=driver_rows if together is not None else None, behind=behind)

    def _record_columns(self) -> tuple[str, ...]:
        """``Batch.record_columns``: each row's own partition and offset, when kept."""
        return ("_kafka_partition", "_kafka_offset") if self.config.include_metadata else ()

    def _deferred_batch(self, spark: SparkSession, raw: DataFrame, start: Position | None, end: Position,
                        driver_rows: Callable[[], pa.Table | None], behind: frozenset[int]) -> Batch:
        """A batch the driver may decode (``driver_rows``): Spark's decode is planned only
        when something asks for it - the driver declined, or a reader wants ``df`` -,
        since planning it costs ~0.1 s of JVM time a batch (benchmarks/RESULTS.md)."""
        made: list[_Decoded] = []

        def decoded() -> _Decoded:
            if not made:
                made.append(json_decoder(spark, raw, self.config))
            return made[0]

        def explain(errors: pa.Table) -> pa.Table:
            explainer = decoded().explain_errors
            assert explainer is not None  # a declared schema's decode explains its errors
            return explainer(errors)

        def together() -> DataFrame:
            frame = decoded().together
            assert frame is not None  # made for a declared schema
            return frame

        record_columns = self._record_columns()
        originals = None
        if record_columns:

            def originals(keys: pa.Table) -> pa.Table:
                return kafka_originals(decoded().base, *_payload())(keys)

        return Batch(start=start, end=end, frames=Frames(lambda: decoded().frames()), record_columns=record_columns,
                     originals=originals, together=together, explain_errors=explain, driver_rows=driver_rows,
                     behind=behind)

    def _driver_rows(self, raw: DataFrame) -> Callable[[], pa.Table | None] | None:
        """``Batch.driver_rows`` of a declared-schema JSON batch whose field types the
        driver decodes as Spark does (:mod:`streamer.sources.kafka.driver_json`), else None."""
        from streamer.sources.kafka import driver_json

        assert self.config.schema_ddl is not None  # ``together`` is made for a declared schema only
        if self._driver_fields is False:  # once per source: parsing the DDL asks the JVM
            self._driver_fields = driver_json.arrow_fields(struct_from_ddl(self.config.schema_ddl))
        fields = self._driver_fields
        if fields is None:
            return None
        if self._driver_skip:
            self._driver_skip -= 1
            return None
        metadata = METADATA_COLUMNS if self.config.include_metadata else {}
        limit = None if self.config.max_record_bytes is None else int(self.config.max_record_bytes)

        def rows() -> pa.Table | None:
            got = driver_json.decode(driver_json.collect_raw(raw), fields, metadata, limit)
            if got is None:
                self._driver_skip = DRIVER_RETRY_AFTER
            return got

        return rows

    def _end_seen(self, source: DataFrame, start: KafkaOffsets | None) -> KafkaOffsets:
        """``end`` of a micro-batch: last offset seen + 1 per partition (else the start's)."""
        from pyspark.sql import functions as F

        rows = source.groupBy("partition").agg(F.max("offset").alias("last")).collect()
        offsets = dict(start.partitions) if start is not None else {}
        for r in rows:
            offsets[int(r["partition"])] = max(offsets.get(int(r["partition"]), 0), int(r["last"]) + 1)
        return KafkaOffsets(topic=self.config.topic, partitions=offsets)

    # -- continuous -------------------------------------------------------------------------

    def stream(self, spark: SparkSession, start: Position | None = None) -> DataFrame:
        """``readStream`` of raw Kafka rows, starting at ``start`` (else ``starting_offsets``).

        Spark's own checkpoint takes precedence over ``startingOffsets`` once it exists.
        """
        start = self._check(start)
        so = self.config.starting_offsets
        if start is not None:
            starting = start.spark_json()
        elif isinstance(so, dict):
            starting = KafkaOffsets(topic=self.config.topic, partitions=so).spark_json()
        else:
            starting = so
        reader = (
            spark.readStream.format("kafka")
            .options(**spark_kafka_options(self.config))
            .option("subscribe", self.config.topic)
            .option("startingOffsets", starting)
            .option("failOnDataLoss", str(self.config.fail_on_data_loss).lower())
        )
        if self.config.max_records_per_batch is not None:
            reader = reader.option("maxOffsetsPerTrigger", str(self.config.max_records_per_batch))
        return reader.load()

    def batch_from_raw(self, raw: DataFrame, start: Position | None) -> Batch:
        """Decode a ``foreachBatch`` micro-batch; ``end`` = last offset seen + 1 per partition."""
        start = self._check(start)
        return self._batch(raw.sparkSession, raw, start, None)

    # -- what the pipeline asks a streaming source --------------------------------------------

    def resolve_stream_start(self, start: Position | None) -> KafkaOffsets:
        """Concrete offsets for every partition (``starting_offsets`` without a position);
        raises on data loss if configured to (``resolve_start``)."""
        low, high = self.client.watermarks()
        return resolve_start(self.config, self._check(start), low, high)

    def raw_between(self, spark: SparkSession, start: Position, end: Position) -> DataFrame:
        """The raw rows from ``start`` up to ``end`` (a batch read of the stream's topic)."""
        begin, until = self._check(start), self._check(end)
        assert begin is not None and until is not None
        return self.read_raw(spark, begin, until)

    def filter_committed(self, raw: DataFrame, position: Position | None) -> DataFrame:
        """Rows at or after the committed offset of their partition only."""
        position = self._check(position)
        if position is None or not position.partitions:
            return raw
        return raw.where(at_or_after(position))

    def warm_up_batch(self, spark: SparkSession, start: Position | None) -> Batch:
        """The first available record of each partition (an empty batch on an empty topic)."""
        low, high = self.client.watermarks()
        begin = KafkaOffsets(topic=self.config.topic, partitions=low)
        end = KafkaOffsets(topic=begin.topic, partitions={p: min(o + 1, high[p]) for p, o in low.items()})
        return self.batch_from_raw(self.read_raw(spark, begin, end), begin)

    def record_identity(self) -> RecordIdentity:
        """Records are identified by topic/partition/offset (the metadata columns); without
        ``include_metadata`` a source reading them is returned, and they are hidden."""
        meta = tuple(METADATA_COLUMNS)
        positions = (("topic", "_kafka_topic"), ("partition", "_kafka_partition"), ("offset", "_kafka_offset"))
        if self.config.include_metadata:
            return RecordIdentity(self, positions, meta, (), "_kafka_timestamp")
        reading = KafkaSource(self.config.model_copy(update={"include_metadata": True}))
        self.close()
        return RecordIdentity(reading, positions, meta, meta, "_kafka_timestamp")

    # -- decoding ---------------------------------------------------------------------------

    def decode(self, spark: SparkSession, raw: DataFrame) -> tuple[DataFrame, DataFrame, tuple[DataFrame, ...]]:
        """Raw Kafka rows → (good records, error rows, cached frames to release)."""
        if self._avro is not None:
            return self._avro.decode(spark, raw)
        return decode_json(spark, raw, self.config)


def decode_json(
    spark: SparkSession, raw: DataFrame, config: KafkaSourceConfig
) -> tuple[DataFrame, DataFrame, tuple[DataFrame, ...]]:
    """Parse JSON payloads with ``from_json`` (PERMISSIVE + corrupt-record column).

    The schema is ``config.schema`` (Spark DDL) or inferred from up to
    ``infer_sample_records`` payloads of this batch (see :func:`json_decoder` to decode
    the same payloads again with the target table's types).
    """
    return json_decoder(spark, raw, config).frames()


@dataclass(frozen=True)
class _Decoded:
    """What the decode of one Kafka batch hands to its :class:`Batch`."""

    #: the raw rows with the payload as text (``_raw``): offsets seen, originals of records
    base: DataFrame
    #: good rows, error rows and the frames they share (made when first asked for)
    frames: Frames
    #: an inferred schema's decode again with given column types (``Batch.retype``)
    redecode: Callable[[StructType], Frames] | None = None
    #: a declared schema's good and bad rows in one frame, reasons left out (``Batch.together``)
    together: DataFrame | None = None
    explain_errors: Callable[[pa.Table], pa.Table] | None = None


def json_decoder(spark: SparkSession, raw: DataFrame, config: KafkaSourceConfig) -> _Decoded:
    """:func:`decode_json`'s frames (made when first asked for), plus for an inferred
    schema a function decoding the same payloads with given column types preferred
    (``Batch.retype``), reusing the cache, and for a declared one the good and bad rows in
    one frame (``Batch.together``) with the explanation of its bad rows."""
    from pyspark.sql import functions as F

    from streamer.sources.files import case_unique, spelling_counts

    base = raw.select("topic", "partition", "offset", "timestamp", *_as_text(F.col("value")))
    declared = config.schema_ddl is not None
    schema: StructType | None
    if config.schema_ddl is not None:  # cached by the reader, if it reads both df and errors (Batch.cache)
        schema = struct_from_ddl(config.schema_ddl)
    else:  # the schemas or inference read the payloads, then the decode reads them again
        limit = None if config.max_record_bytes is None else int(config.max_record_bytes)
        schema = None
        if config.debezium and config.connect_types:
            schema = connect_schema.envelope_type(connect_schema.batch_schemas(base.cache(), _usable(limit)))
        if schema is None:
            # Debezium: every payload. A change stream's shape varies inside a batch (deletes
            # carry ``before`` only, an added column appears mid-batch): a sample of the first
            # records would miss it and lose the column, or the deletes' keys.
            sample = None if config.debezium else config.infer_sample_records
            schema = infer_json_schema(spark, base.cache(), sample, limit)
    if schema is None:  # nothing to infer from: no good records, only (possible) null payloads
        schema = struct_from_ddl("value STRING")
    dropped: tuple[tuple[str, str], ...] = ()
    if not declared and not connect_schema.is_typed(schema):  # keys differing only in case
        schema, pairs = case_unique(schema, spelling_counts(base, F.col("_raw"), schema))
        dropped = tuple(pairs)
    exprs = _json_expressions(schema, config, dropped)
    parsed = base.select("topic", "partition", "offset", "timestamp", "_raw", "_valid", exprs.parse.alias("_p"))
    if declared:
        together = parsed.select(*exprs.good, exprs.unexplained_error.alias(SOURCE_ERROR_COL))
        return _Decoded(base, Frames(lambda: _split(base, parsed, exprs)), together=together,
                        explain_errors=_explainer(spark, exprs))
    frames = Frames.of(*_split(base, parsed, exprs))
    frames()[2][1].cache()  # the flagged rows: df and errors both read them
    if connect_schema.is_typed(schema):
        return _Decoded(base, frames)  # the types are the schemas' own: nothing to prefer

    def redecode(types: StructType) -> Frames:
        from streamer.sources.files import prefer_types

        exprs2 = _json_expressions(prefer_types(schema, types), config, dropped)
        parsed2 = base.select("topic", "partition", "offset", "timestamp", "_raw", "_valid",
                              exprs2.parse.alias("_p"))
        good2, bad2, (_, flagged2) = _split(base, parsed2, exprs2)
        return Frames.of(good2, bad2, (base, flagged2.cache()))

    return _Decoded(base, frames, redecode=redecode)


def _as_text(value: Column) -> tuple[Column, Column]:
    """A payload's columns the decode reads: ``_raw``, the payload as text holding the
    original bytes (cast to binary gives them back), and ``_valid``, whether it is UTF-8 -
    tested here, in generated code: under ``from_json`` (which Spark evaluates without code
    generation) the test ran by reflection, a lookup per record (~7% of a batch's JVM CPU
    in a profile)."""
    from pyspark.sql import functions as F

    text = value.cast("string")
    return text.alias("_raw"), F.is_valid_utf8(text).alias("_valid")


def _split(
    base: DataFrame, parsed: DataFrame, exprs: _JsonExpressions
) -> tuple[DataFrame, DataFrame, tuple[DataFrame, ...]]:
    """(good rows, error rows, the frames they share: to cache before reading both)."""
    from pyspark.sql import functions as F

    # two projections (parse, then flag): every DataFrame operation is analysed eagerly,
    # so a chain of withColumn calls re-analyses the growing plan at each step
    flagged = parsed.select(
        "topic", "partition", "offset", "timestamp", "_p", exprs.reason.alias("_reason"),
        # bytes kept for bad rows only; the cheap test, not the reason again (an expression
        # that large doubled the frame's analysis)
        F.when(exprs.is_bad_record, F.col("_raw")).alias("_raw"),
    )
    good = flagged.where(exprs.is_good).select(*exprs.good)
    bad = flagged.where(exprs.is_bad).select(*exprs.bad)
    return good, bad, (base, flagged)


def _explainer(spark: SparkSession, exprs: _JsonExpressions) -> Callable[[pa.Table], pa.Table]:
    """``Batch.explain_errors`` of a declared-schema JSON batch: the reasons of error rows
    collected from ``together``, by the same expression over their own bytes (rebuilt from
    ``raw_payload``: text, or base64 of bytes that are not UTF-8) in one small Spark job."""

    def explain(errors: pa.Table) -> pa.Table:
        import pyarrow as pa
        import pyarrow.compute as pc
        from pyspark.sql import functions as F

        if errors.num_rows == 0:
            return errors
        payload, encoding = F.col("raw_payload"), F.col("payload_encoding")
        raw = F.when(encoding == F.lit("base64"), F.unbase64(payload)).otherwise(payload.cast("binary"))
        rows = spark.createDataFrame(pa.table({
            "_i": pa.array(range(errors.num_rows), pa.int64()),
            "raw_payload": errors.column("raw_payload"),
            "payload_encoding": errors.column("payload_encoding"),
        }))
        texts = rows.select("_i", *_as_text(raw))
        found = texts.select("_i", "_raw", "_valid", exprs.parse.alias("_p")).select("_i", exprs.reason.alias("reason"))
        got = found.toArrow()
        reasons = got.column("reason").take(pc.sort_indices(got.column("_i")))
        at = errors.column_names.index("reason")
        return errors.set_column(at, errors.schema.field(at), reasons.cast(errors.schema.field(at).type))

    return explain


@dataclass(frozen=True)
class _JsonExpressions:
    """The decode's column expressions for one schema: built once, reused every batch.

    A Spark ``Column`` is an unresolved expression, not bound to a DataFrame, so one set
    serves every micro-batch; building them anew cost ~100 py4j calls per batch (most of
    them in :func:`~streamer.sources.files.explain`), a visible share of a small batch's latency.
    """

    parse: Column
    reason: Column
    is_good: Column
    is_bad: Column
    good: tuple[Column, ...]
    bad: tuple[Column, ...]
    #: A bad record, over the parse (``_raw``, ``_p``): true exactly where ``reason`` is
    #: not null, without the reason's explanation (a large expression to plan).
    is_bad_record: Column
    #: A bad row's error columns as one struct, ``reason`` null (null on good rows; fields
    #: nullable, as Arrow needs for a null struct): ``Batch.together``'s ``SOURCE_ERROR_COL``,
    #: over the parse; the reason comes from ``Batch.explain_errors``, for bad rows only.
    unexplained_error: Column


#: Expressions by (SparkContext, schema, settings); small: one entry per schema a run sees.
_EXPRESSIONS: dict[tuple[int, str, int | None, bool, bool, tuple[tuple[str, str], ...]], _JsonExpressions] = {}
_EXPRESSIONS_MAX = 32


def _json_expressions(schema: StructType, config: KafkaSourceConfig,
                      dropped: tuple[tuple[str, str], ...] = ()) -> _JsonExpressions:
    from pyspark import SparkContext

    limit = None if config.max_record_bytes is None else int(config.max_record_bytes)
    # keyed by the SparkContext too: Columns hold JVM objects of the context they came from
    key = (id(SparkContext._active_spark_context), schema.json(), limit, bool(config.include_metadata),
           config.debezium is not None, dropped)
    found = _EXPRESSIONS.get(key)
    if found is None:
        if len(_EXPRESSIONS) >= _EXPRESSIONS_MAX:
            _EXPRESSIONS.clear()
        found = _EXPRESSIONS[key] = _build_json_expressions(schema, limit, config, dropped)
    return found


def _build_json_expressions(schema: StructType, limit: int | None, config: KafkaSourceConfig,
                            dropped: tuple[tuple[str, str], ...] = ()) -> _JsonExpressions:
    from pyspark.sql import functions as F
    from pyspark.sql.types import StringType, StructField, StructType

    from streamer.sources.files import (
        TEXT_AFTER_JSON,
        case_clash,
        explain,
        text_after_value,
    )

    full = StructType([*schema.fields, StructField(CORRUPT_COLUMN, StringType())])
    opts = {"mode": "PERMISSIVE", "columnNameOfCorruptRecord": CORRUPT_COLUMN}
    valid = F.col("_valid")  # the base frame's test (see json_decoder)
    parsable = valid
    if limit is not None:  # an oversized record is not parsed at all (a 50 MB one exhausted the heap)
        parsable = valid & (F.octet_length(F.col("_raw")) <= F.lit(limit))
    parse = F.from_json(F.when(parsable, F.col("_raw")), full, opts)
    # a change stream's tombstones (null values after deletes) are rows of nulls, which the
    # Debezium step drops; anywhere else a null payload is an error
    tombstones_ok = config.debezium is not None
    reason = F.when(F.col("_raw").isNull(),
                    F.lit(None).cast("string") if tombstones_ok else F.lit("null payload (tombstone)"))
    if limit is not None:
        size = F.octet_length(F.col("_raw"))
        reason = reason.when(
            size > F.lit(limit),
            F.format_string(f"record of %d bytes exceeds source.max_record_bytes ({limit})", size),
        )
    reason = reason.when(
        ~valid, F.lit("record is not valid UTF-8 text (raw_payload holds its bytes, base64)")
    ).when(
        F.col("_p").isNull() | F.col(f"_p.{CORRUPT_COLUMN}").isNotNull(),
        explain("json", F.col("_raw"), schema, {}, malformed=MALFORMED_JSON),
    )
    is_bad_record = ~valid | F.col("_p").isNull() | F.col(f"_p.{CORRUPT_COLUMN}").isNotNull()
    after = text_after_value(F.when(parsable, F.col("_raw")))
    reason = reason.when(after, F.lit(TEXT_AFTER_JSON))
    is_bad_record = is_bad_record | after
    if dropped:  # a key another differs from only in case (``v`` and ``V``)
        clash = case_clash(F.when(parsable, F.col("_raw")), list(dropped))
        reason = reason.when(clash.isNotNull(), clash)
        is_bad_record = is_bad_record | clash.isNotNull()
    typed = connect_schema.is_typed(schema)
    if typed:  # the batch's other records carry their schemas: this one must too
        unwrapped = F.col("_p.payload").isNull()
        reason = reason.when(unwrapped, F.lit(NOT_WRAPPED))
        is_bad_record = is_bad_record | unwrapped
        unheld = connect_schema.value_errors(F.col("_p"), schema)
        if unheld is not None:  # a value its column's type cannot hold (a timestamptz 'infinity')
            reason = reason.when(unheld.isNotNull(), unheld)
            is_bad_record = is_bad_record | unheld.isNotNull()
    good = (*[connect_schema.to_logical(F.col("_p").getField(f.name), f).alias(f.name) if typed
              else F.col("_p").getField(f.name).alias(f.name) for f in schema.fields],
            *_metadata_columns(config))
    bad = tuple(error_columns(*_payload(), F.col("_reason")))
    is_bad = F.col("_reason").isNotNull()
    # every branch of ``reason`` yields text, so it is null exactly when none of them holds
    is_bad_record = F.col("_raw").isNotNull() & is_bad_record if tombstones_ok else F.col("_raw").isNull() | is_bad_record
    if limit is not None:
        is_bad_record = is_bad_record | (F.octet_length(F.col("_raw")) > F.lit(limit))
    unexplained = error_columns(*_payload(), F.lit(None).cast("string"))
    return _JsonExpressions(
        parse=parse, reason=reason, is_good=F.col("_reason").isNull(), is_bad=is_bad, good=good, bad=bad,
        is_bad_record=is_bad_record,
        unexplained_error=F.when(is_bad_record, F.struct(*unexplained)).cast(StructType.fromDDL(ERROR_SCHEMA_DDL)),
    )


def _payload() -> tuple[Column, Column]:
    """A Kafka value as error-table text: itself when UTF-8, else base64."""
    from pyspark.sql import functions as F

    valid = F.col("_raw").isNull() | F.is_valid_utf8(F.col("_raw"))
    return (
        F.when(valid, F.col("_raw")).otherwise(F.base64(F.col("_raw").cast("binary"))),
        F.when(valid, F.lit("utf-8")).otherwise(F.lit("base64")),
    )


def kafka_originals(frame: DataFrame, payload: Column, encoding: Column) -> Callable[[pa.Table], pa.Table]:
    """``Batch.originals`` of a Kafka batch: records by ``(_kafka_partition, _kafka_offset)``."""

    def originals(keys: pa.Table) -> pa.Table:
        import pyarrow as pa
        import pyarrow.compute as pc
        from pyspark.sql import functions as F

        wanted = frame.sparkSession.createDataFrame(
            pa.table({"partition": pc.cast(keys.column(0), pa.int32()), "offset": pc.cast(keys.column(1), pa.int64())})
        )
        rows = frame.join(F.broadcast(wanted), ["partition", "offset"])
        found = kafka_errors(rows, payload, encoding, F.lit(None).cast("string")).toArrow()
        return found.append_column("_kafka_partition", found.column("partition")).append_column(
            "_kafka_offset", found.column("offset")
        )

    return originals


def infer_json_schema(spark: SparkSession, base: DataFrame, sample: int | None,
                      max_record_bytes: int | None = None) -> StructType | None:
    """Spark's JSON schema inference over the first ``sample`` UTF-8 payloads (text column
    ``_raw``) of a batch (``None``: all of them); None if there are none.

    Payloads over ``max_record_bytes`` are left out: they go to the error table
    undecoded, and parsing one (a runaway 50 MB record) only to infer columns from it
    is the work the limit exists to avoid."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import StructType

    texts = base.where(_usable(max_record_bytes))
    texts = texts.select(F.col("_raw").alias("v"))
    if sample is not None:
        texts = texts.limit(sample)
    inferred = spark.read.option("mode", "DROPMALFORMED").json(texts.rdd.map(lambda r: r.v))
    fields = [f for f in inferred.schema.fields if f.name != CORRUPT_COLUMN]
    return StructType(fields) if fields else None


def _usable(max_record_bytes: int | None) -> Column:
    """The records a schema is learnt from: UTF-8 text, within ``max_record_bytes``."""
    from pyspark.sql import functions as F

    usable = F.col("_raw").isNotNull() & F.is_valid_utf8(F.col("_raw"))
    if max_record_bytes is not None:
        usable = usable & (F.octet_length(F.col("_raw")) <= F.lit(max_record_bytes))
    return usable


def _metadata_columns(config: KafkaSourceConfig) -> list[Column]:
    from pyspark.sql import functions as F

    if not config.include_metadata:
        return []
    return [F.col(src).alias(name) for name, src in METADATA_COLUMNS.items()]


def at_or_after(position: KafkaOffsets) -> Column:
    """Row filter keeping raw Kafka rows at or after the given offset of their partition
    (rows of partitions the position does not name are kept).

    The offsets are one map literal, not an ``offset < N`` comparison per partition:
    generated code inlines integer literals, so each micro-batch's new offsets made Spark
    compile the whole stage again and the JVM compile it to machine code again; a map
    literal is a reference the code reads, the same code every batch.
    """
    from pyspark.sql import functions as F

    pairs = [c for p, off in sorted(position.partitions.items())
             for c in (F.lit(int(p)).cast("int"), F.lit(int(off)).cast("bigint"))]
    start = F.try_element_at(F.create_map(*pairs), F.col("partition"))
    return F.col("offset") >= F.coalesce(start, F.lit(0).cast("bigint"))
