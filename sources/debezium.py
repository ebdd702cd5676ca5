"""Debezium change events → the rows of a table, as HoodieStreamer's Debezium sources make them.

A Debezium connector publishes one event per changed row: ``{before, after, source, op,
ts_ms}`` (inside ``{schema, payload}`` when Kafka Connect's JSON converter embeds schemas),
and after a delete a tombstone (a null value) for log compaction. This step turns a batch
of decoded events into what the writer takes:

- ``c`` (insert), ``r`` (snapshot read) and ``u`` (update) become the row of ``after``;
- ``d`` becomes the row of ``before`` with ``_hoodie_is_deleted`` true, which the writer
  turns into a delete of its key (Debezium puts at least the primary key in ``before``);
- tombstones and events that change no row (``t`` truncate, ``m`` message) are dropped,
  so the batch counts them as filtered;
- Debezium's source metadata becomes columns named as Apache Hudi's ``DebeziumConstants``
  names them (``_change_operation_type``, ``_event_lsn``, ...), so a table moves between
  HoodieStreamer and this project with the same columns.

Ordering is by the position in the database's log, never by a clock: two changes of one
millisecond, or a replayed batch, must not let the older change win. Postgres gives each
change its own log sequence number (``_event_lsn``); a row's changes are serialised by
its lock, so their LSNs increase in commit order. MySQL gives the binlog file and the
event's position in it: ``_event_seq`` is one ``bigint``, the file's number times 2^32 plus
the position, because Hudi's string ``_event_seq`` (``"000009.1200"``) compares wrongly
as text (``"...9.1200" < "...9.300"``) and a table's ordering field is compared as a value.
A binlog position is below 2^32: MySQL caps a binlog file at 1 GiB (one transaction may
run over, not by gigabytes).

An update that changes the primary key reaches Kafka as a delete of the old key and a
create of the new one (Debezium's default for both connectors), so it needs nothing here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from streamer.config.sources import DEBEZIUM_ORDERING
from streamer.table.meta_fields import IS_DELETED

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame
    from pyspark.sql.types import DataType, StructType

#: The envelope's fields (Debezium's ``Envelope.FieldName``).
#: The envelope's fields (Debezium 3.x adds ``ts_us``/``ts_ns`` and, with transaction
#: metadata on, the ``transaction`` block): never columns of the table.
ENVELOPE = ("before", "after", "source", "op", "ts_ms", "ts_us", "ts_ns", "transaction")
#: Operations that carry a row: create, snapshot read, update, delete.
ROW_OPERATIONS = ("c", "r", "u", "d")
DELETE_OP = "d"

#: Metadata columns both connectors get: (column, envelope field).
_COMMON = (
    ("_change_operation_type", "op"),
    ("_upstream_event_processed_ts_ms", "ts_ms"),
    ("db_shard_source_partition", "source.name"),
)
#: Per connector, as Hudi's ``PostgresDebeziumSource``/``MysqlDebeziumSource`` select them.
_BY_DATABASE = {
    "postgres": (
        ("db_schema_source_partition", "source.schema"),
        ("_event_origin_ts_ms", "source.ts_ms"),
        ("_event_tx_id", "source.txId"),
        ("_event_lsn", "source.lsn"),
        ("_event_xmin", "source.xmin"),
    ),
    "mysql": (
        ("_event_origin_ts_ms", "source.ts_ms"),
        ("_event_bin_file", "source.file"),
        ("_event_pos", "source.pos"),
        ("_event_row", "source.row"),
    ),
}
#: Metadata columns whose type is fixed whatever the decode inferred (a JSON sample of
#: nulls infers strings): the ordering columns and the numbers they come from.
_BIGINT = {"_upstream_event_processed_ts_ms", "_event_origin_ts_ms", "_event_tx_id", "_event_lsn",
           "_event_xmin", "_event_pos", "_event_row"}
_BINLOG_FILE_SPAN = 1 << 32


def metadata_columns(database: str) -> tuple[str, ...]:
    """The metadata columns :func:`change_rows` adds for ``database``, in order."""
    names = [name for name, _ in (*_COMMON, *_BY_DATABASE[database])]
    return (*names, "_event_seq") if database == "mysql" else tuple(names)


def change_rows(events: DataFrame, database: str) -> DataFrame:
    """The table rows of a batch of decoded Debezium events (see the module doc).

    ``events`` has the envelope's fields as columns, or one ``payload`` column holding
    them (JSON with embedded schemas). A batch of tombstones only has the fields all null.
    """
    from pyspark.sql import functions as F

    # columns beside the envelope (the Kafka metadata columns) pass through
    extra = [c for c in events.columns if c not in (*ENVELOPE, "payload", "schema")]
    if "op" not in events.columns and "payload" in events.columns:
        events = events.select("payload.*", *extra)
    if _only_tombstones(events):
        # the decoder found no payload to learn a shape from: a batch of tombstones only
        # (a batch boundary after a delete). It changes no row.
        return _no_changes(events, database, [c for c in extra if c != "value"])
    missing = [f for f in ("op", "after", "before", "source") if f not in events.columns]
    if missing:
        raise ValueError(f"not Debezium change events: no field(s) {missing} in the values "
                         f"(fields: {events.columns}); is the connector's converter unwrapping them "
                         "(ExtractNewRecordState)? Then leave source.debezium unset")
    types = {f.name: f.dataType for f in events.schema.fields}
    op = F.col("op")
    events = events.where(op.isin(*ROW_OPERATIONS))
    is_delete = op == F.lit(DELETE_OP)
    meta = [_source_field(types, path).alias(name) if name not in _BIGINT
            else _snapshot_lsn(_source_field(types, path).cast("bigint"), op) if name == "_event_lsn"
            else _source_field(types, path).cast("bigint").alias(name)
            for name, path in (*_COMMON, *_BY_DATABASE[database])]
    if database == "mysql":
        meta.append(_binlog_sequence(types).alias("_event_seq"))
    ordering = DEBEZIUM_ORDERING[database]
    data = [_row_field(types, name, is_delete).alias(name) for name in _row_fields(types)]
    taken = set(metadata_columns(database))
    clash = [name for name in _row_fields(types) if name in taken or name == IS_DELETED or name in extra]
    if clash:
        raise ValueError(f"the table's column(s) {clash} have the names of Debezium metadata columns")
    rows = events.select(*meta, *data, is_delete.alias(IS_DELETED), *extra)
    assert ordering in rows.columns
    return rows


def _snapshot_lsn(lsn: Column, op: Column) -> Column:
    """``_event_lsn``, 0 for a snapshot read that has none. Debezium's incremental snapshot
    (the ``execute-snapshot`` signal) sends its rows with a null ``source.lsn``; its read of
    a row is not ordered against the changes streamed beside it by any LSN, so it ranks
    below all of them: it inserts a key the table lacks (a lost key change's create, the
    backfill's purpose) and never overwrites a row a change wrote. Without it, every such
    row went to the error table (a null ordering value)."""
    from pyspark.sql import functions as F

    return F.when(lsn.isNull() & (op == F.lit("r")), F.lit(0).cast("bigint")).otherwise(lsn).alias("_event_lsn")


def _only_tombstones(events: DataFrame) -> bool:
    """Whether ``events`` is the JSON decoder's frame for a batch without one payload (its
    one ``value`` column, all null), which has no envelope to unpack."""
    from pyspark.sql import functions as F

    if "value" not in events.columns or {"op", "before", "after", "source"} & set(events.columns):
        return False
    return events.where(F.col("value").isNotNull()).isEmpty()


def _no_changes(events: DataFrame, database: str, extra: list[str]) -> DataFrame:
    """No rows, in the columns :func:`change_rows` always has (the metadata, the delete flag)."""
    from pyspark.sql import functions as F

    meta = [F.lit(None).cast("bigint" if name in _BIGINT or name == "_event_seq" else "string").alias(name)
            for name in metadata_columns(database)]
    return events.where(F.lit(False)).select(*meta, F.lit(False).alias(IS_DELETED), *extra)


def _row_fields(types: dict[str, DataType]) -> list[str]:
    """The table's columns: ``after``'s fields, then any only ``before`` has (a batch of
    deletes only has ``after`` all null, which JSON inference types as a string)."""
    names: list[str] = []
    for side in ("after", "before"):
        struct = _struct(types.get(side))
        if struct is not None:
            names.extend(f.name for f in struct.fields if f.name not in names)
    if not names:
        raise ValueError("Debezium events with neither an 'after' nor a 'before' row")
    return names


def _row_field(types: dict[str, DataType], name: str, is_delete: Column) -> Column:
    """Column ``name`` of the event's row: ``before``'s for a delete, else ``after``'s."""
    from pyspark.sql import functions as F

    after, before = _struct(types.get("after")), _struct(types.get("before"))
    a = F.col("after").getField(name) if after is not None and name in after.fieldNames() else None
    b = F.col("before").getField(name) if before is not None and name in before.fieldNames() else None
    if a is not None and b is not None:
        target = after[name].dataType  # type: ignore[index]
        return F.when(is_delete, b.cast(target)).otherwise(a)
    if a is not None:
        return a  # null on a delete: Debezium sends no after
    assert b is not None
    return F.when(is_delete, b)


def _source_field(types: dict[str, DataType], path: str) -> Column:
    """An envelope field (``op``) or a field of ``source`` (``source.lsn``); null when the
    connector did not send it (its type then comes from the caller's cast)."""
    from pyspark.sql import functions as F

    head, _, field = path.partition(".")
    if not field:
        return F.col(head) if head in types else F.lit(None).cast("string")
    struct = _struct(types.get(head))
    if struct is None or field not in struct.fieldNames():
        return F.lit(None).cast("string")
    return F.col(head).getField(field)


def _binlog_sequence(types: dict[str, DataType]) -> Column:
    """``_event_seq`` of a MySQL event: binlog file number × 2^32 + position (module doc)."""
    from pyspark.sql import functions as F

    file_number = F.substring_index(_source_field(types, "source.file").cast("string"), ".", -1).cast("bigint")
    pos = _source_field(types, "source.pos").cast("bigint")
    too_far = F.raise_error(F.format_string(
        "binlog position %d of %s is 2^32 or more: _event_seq cannot order it", pos, _source_field(types, "source.file")))
    return F.when(pos >= F.lit(_BINLOG_FILE_SPAN), too_far.cast("bigint")).otherwise(
        file_number * F.lit(_BINLOG_FILE_SPAN) + pos)


def _struct(t: DataType | None) -> StructType | None:
    from pyspark.sql.types import StructType

    return t if isinstance(t, StructType) else None
