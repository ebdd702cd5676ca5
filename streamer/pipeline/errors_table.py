"""Bad records: flag them, split them off, and keep them in a table of their own.

A record that cannot be keyed (null or missing record-key field, null ordering
value) must not fail the batch nor vanish: it goes to the pipeline's error table
with the reason and its payload. The error table is itself a mor-streamer (Hudi MOR)
table keyed by a hash of the record's identity (source position, reason, payload),
so a replayed batch upserts the same error rows instead of duplicating them.

Why a record's position is its own (a streamed record's ``topic/partition/offset``,
``streamer.sources.base.RecordIdentity``) and not the batch's end position: after a crash,
continuous mode may cut the same records into different micro-batches, and the id must
not depend on where a batch happened to end.
"""

from __future__ import annotations

import datetime as dt
import hashlib
from collections.abc import Callable
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc

from streamer.config.pipeline import EngineConfig
from streamer.config.target import TargetConfig
from streamer.pipeline.sink import TableSink
from streamer.sources.base import ERROR_COLUMNS
from streamer.write.result import CommitResult

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

    from streamer.fs_s3 import S3Settings

ERROR_ID = "error_id"
#: Columns the runner adds to a transformed batch: why a row is bad (null = good) and its JSON.
REASON_COL = "_mor_reason"
PAYLOAD_COL = "_mor_payload"

#: The error table's columns as Arrow types (the same as ``streamer.sources.base.ERROR_SCHEMA_DDL``).
ERROR_ARROW_SCHEMA = pa.schema(
    [
        ("source_type", pa.string()),
        ("source_position", pa.string()),
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("offset", pa.int64()),
        ("file", pa.string()),
        ("raw_payload", pa.string()),
        ("payload_encoding", pa.string()),
        ("reason", pa.string()),
        ("error_time", pa.timestamp("us", tz="UTC")),
    ]
)
assert tuple(ERROR_ARROW_SCHEMA.names) == ERROR_COLUMNS
_ID_FIELDS = ("source_type", "source_position", "topic", "partition", "offset", "file", "reason", "raw_payload")


def flag_unkeyable(df: DataFrame, target: TargetConfig, metadata: tuple[str, ...] = ()) -> DataFrame:
    """``df`` plus :data:`REASON_COL` (null for good rows) and :data:`PAYLOAD_COL` (bad rows'
    JSON, without the source's ``metadata`` columns).

    A key field missing from the batch altogether makes every row an error (named in
    the reason), rather than an exception that would stop a streaming pipeline.
    """
    from pyspark.sql import functions as F

    columns = set(df.columns)
    needed = [(f, "record key field") for f in target.record_key]
    if target.ordering_field:
        needed.append((target.ordering_field, "ordering field"))
    reason: Column = F.lit(None).cast("string")
    branches: Column | None = None
    for name, what in needed:
        if name not in columns:
            cond, text = F.lit(True), f"{what} '{name}' is not in the record (columns: {sorted(columns)})"
        else:
            col = F.col(f"`{name}`")
            cond = col.isNull()
            if what == "record key field":
                cond = cond | (F.trim(col.cast("string")) == F.lit(""))
            text = f"{what} '{name}' is null or empty"
        branches = F.when(cond, F.lit(text)) if branches is None else branches.when(cond, F.lit(text))
    if branches is not None:
        reason = branches
    payload = F.to_json(F.struct(*[F.col(f"`{c}`") for c in df.columns if c not in metadata]))
    # one projection (each DataFrame is analysed when made); the reason's test is cheap to repeat
    return df.select("*", reason.alias(REASON_COL), F.when(reason.isNotNull(), payload).alias(PAYLOAD_COL))


def all_keyable(rows: pa.Table, target: TargetConfig) -> bool:
    """Whether :func:`flag_unkeyable` would flag none of ``rows`` (collected to the
    driver): every key field and the ordering field present, none null, no key blank
    (Spark's ``trim`` takes spaces only). A driver-decoded batch with a row it would flag
    goes through the Spark decode instead, which writes that row's error."""
    needed = [*target.record_key, *([target.ordering_field] if target.ordering_field else [])]
    for name in needed:
        if name not in rows.column_names:
            return False
        column = rows.column(name)
        if column.null_count:
            return False
        text = pa.types.is_string(column.type) or pa.types.is_large_string(column.type)
        if name in target.record_key and text and pc.any(pc.equal(pc.utf8_trim(column, " "), "")).as_py():
            return False
    return True


def with_no_reasons(rows: pa.Table) -> pa.Table:
    """``rows``, all good, with :func:`flag_unkeyable`'s two columns (null)."""
    text = pa.nulls(rows.num_rows, pa.string())
    return rows.append_column(REASON_COL, text).append_column(PAYLOAD_COL, text)


def unkeyable_error_rows(
    bad: pa.Table, source_type: str, position_json: str, positions: tuple[tuple[str, str], ...] = ()
) -> pa.Table:
    """Error rows (:data:`ERROR_ARROW_SCHEMA`) for flagged rows collected to the driver.

    ``positions`` maps error-table columns (``topic``, ``partition``, ``offset``) to the
    batch columns holding each record's own (``RecordIdentity.positions``); a row
    without an offset falls back on ``position_json`` (the batch's).
    """
    n = bad.num_rows
    source_col = dict(positions)

    def col(name: str, typ: pa.DataType) -> pa.Array:
        if name in bad.column_names:
            return pc.cast(bad.column(name), typ).combine_chunks()
        return pa.nulls(n, typ)

    def own(field: str, typ: pa.DataType) -> pa.Array:
        return col(source_col[field], typ) if field in source_col else pa.nulls(n, typ)

    topic, part, off = own("topic", pa.string()), own("partition", pa.int32()), own("offset", pa.int64())
    where = [
        f"{t}/{p}/{o}" if o is not None else position_json
        for t, p, o in zip(topic.to_pylist(), part.to_pylist(), off.to_pylist(), strict=True)
    ]
    now = dt.datetime.now(dt.UTC)
    return pa.table(
        [
            pa.array([source_type] * n, pa.string()),
            pa.array(where, pa.string()),
            topic,
            part,
            off,
            pa.nulls(n, pa.string()),
            col(PAYLOAD_COL, pa.string()),
            pa.array(["json"] * n, pa.string()),
            col(REASON_COL, pa.string()),
            pa.array([now] * n, pa.timestamp("us", tz="UTC")),
        ],
        schema=ERROR_ARROW_SCHEMA,
    )


def with_originals(rows: pa.Table, keys: pa.Table, originals: Callable[[pa.Table], pa.Table]) -> pa.Table:
    """Error rows of records flagged after decoding, with the source's identity of each
    record (its own position: file and line, topic/partition/offset) and its original
    bytes instead of the batch's position and a JSON re-serialisation of the decoded row.

    ``keys`` holds the rows' record-id columns (``Batch.record_columns``), aligned with
    ``rows``; a row whose record the source cannot find keeps what it had.
    """
    names = keys.column_names
    found = originals(keys)
    if found.num_rows == 0:
        return rows
    left = keys.append_column("_row", pa.array(range(rows.num_rows), pa.int64()))
    matched = left.join(found, names, join_type="left outer").sort_by("_row")
    hit = pc.is_valid(matched.column("source_position"))
    cols = []
    for name in ERROR_COLUMNS:
        if name in ("reason", "error_time"):
            cols.append(rows.column(name))
        else:
            theirs = pc.cast(matched.column(name), ERROR_ARROW_SCHEMA.field(name).type)
            cols.append(pc.if_else(hit, theirs, rows.column(name)))
    return pa.table(cols, schema=ERROR_ARROW_SCHEMA)


def as_error_arrow(errors: pa.Table) -> pa.Table:
    """Error rows from a source (Spark's ``toArrow``) in :data:`ERROR_ARROW_SCHEMA`,
    ``error_time`` stamped here (now, UTC) where the source left it null: sources
    build it in Spark as null (:func:`streamer.sources.base.unstamped_error_time` says why)."""
    rows = errors.select(list(ERROR_COLUMNS)).cast(ERROR_ARROW_SCHEMA)
    at = rows.column_names.index("error_time")
    times = rows.column(at)
    if times.null_count == 0:
        return rows
    stamp = pa.scalar(dt.datetime.now(dt.UTC), ERROR_ARROW_SCHEMA.field(at).type)
    return rows.set_column(at, ERROR_ARROW_SCHEMA.field(at), pc.fill_null(times, stamp))


def with_error_ids(errors: pa.Table) -> pa.Table:
    """Deterministic ids: the same bad record in a replayed batch gets the same id.

    Sources give every record its own position (file and line, topic/partition/offset),
    so ids differ per record. Where a position is shared nonetheless (a transform dropped
    the record id, so rows carry the batch's position), the n-th identical row of the
    batch gets ``#n`` in its id: one error row per bad record, never two merged into one
    (the batch report would count them twice, the table hold one).
    """
    cols = [errors.column(c).to_pylist() for c in _ID_FIELDS]
    seen: dict[str, int] = {}
    ids = []
    for values in zip(*cols, strict=True):
        text = "\u0001".join("" if v is None else str(v) for v in values)
        digest = hashlib.sha256(text.encode()).hexdigest()
        n = seen[digest] = seen.get(digest, 0) + 1
        ids.append(digest if n == 1 else hashlib.sha256(f"{digest}#{n}".encode()).hexdigest())
    return errors.add_column(0, ERROR_ID, pa.array(ids, pa.string()))


class ErrorTable:
    """The error table of one pipeline (non-partitioned, keyed by :data:`ERROR_ID`)."""

    def __init__(self, path: str, pipeline_name: str, s3: S3Settings | None = None) -> None:
        target = TargetConfig(
            path=path,
            record_key=[ERROR_ID],
            partition_by=[],
            table_name=f"{pipeline_name.replace('-', '_')}_errors",
        )
        self.sink = TableSink(target, EngineConfig(mode="local"), s3=s3)

    def write(self, errors: pa.Table, extra_metadata: dict[str, str]) -> CommitResult:
        """Upsert error rows (:data:`ERROR_ARROW_SCHEMA`); duplicates of a batch collapse by id."""
        rows = with_error_ids(errors.cast(ERROR_ARROW_SCHEMA))
        return self.sink.writer(rows.schema).upsert(rows, extra_metadata=extra_metadata, engine="local")
