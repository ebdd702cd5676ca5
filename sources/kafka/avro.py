"""Confluent-framed Avro payloads → records, decoded on the executors.

Wire format: magic byte ``0``, a 4-byte big-endian schema id, then the Avro binary
body. Per batch the driver collects the distinct schema ids (one small Spark job),
fetches each writer schema once (cached for the life of the source), and ships the
``{id: schema}`` map into a ``mapInArrow`` function that decodes with fastavro and
resolves every writer schema into the one reader schema (the subject's latest, or the
fixed ``.avsc``). A payload that cannot be decoded becomes an error row with the reason.
"""

from __future__ import annotations

import io
import json
import logging
import struct
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import pyarrow as pa

from streamer.config.sources import KafkaSourceConfig, SchemaRegistry
from streamer.errors import SourceError
from streamer.sources import connect_schema
from streamer.sources.avro import parse_avro_schema, records_to_spark_batch, spark_arrow_schema
from streamer.sources.kafka.records import METADATA_COLUMNS, kafka_errors
from streamer.table.avro_schema import avro_to_arrow

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

log = logging.getLogger(__name__)

MAGIC_BYTE = 0
HEADER = struct.Struct(">bI")
ERROR_FIELD = "_avro_error"
META_FIELDS = [
    pa.field("topic", pa.string()),
    pa.field("partition", pa.int32()),
    pa.field("offset", pa.int64()),
    pa.field("timestamp", pa.timestamp("us", tz="UTC")),
    pa.field("value", pa.binary()),
]


def confluent_frame(schema_id: int, body: bytes) -> bytes:
    """Wrap an Avro body in the Confluent wire format (used by producers and tests)."""
    return HEADER.pack(MAGIC_BYTE, schema_id) + body


class SchemaLookup(Protocol):
    def schema_by_id(self, schema_id: int) -> str: ...

    def latest(self, subject: str) -> str | None: ...


class RegistrySchemas:
    """Schema Registry lookups through ``confluent_kafka.schema_registry.SchemaRegistryClient``
    (the ``[schemaregistry]`` extra is a dependency), cached by id: ids are immutable, so
    the cache never goes stale. A missing id raises ``LookupError``, a missing subject
    gives None, anything else is a :class:`SourceError` naming the registry URL.
    """

    def __init__(self, cfg: SchemaRegistry) -> None:
        from confluent_kafka.schema_registry import SchemaRegistryClient

        self.cfg = cfg
        self._by_id: dict[int, str] = {}
        conf: dict[str, Any] = {"url": cfg.url, "timeout": max(1, round(cfg.timeout.total_seconds()))}
        if cfg.basic_auth_user is not None:
            secret = cfg.basic_auth_password.get_secret_value() if cfg.basic_auth_password else ""
            conf["basic.auth.user.info"] = f"{cfg.basic_auth_user}:{secret}"
        self._client = SchemaRegistryClient(conf)

    def schema_by_id(self, schema_id: int) -> str:
        if schema_id not in self._by_id:
            try:
                text = self._client.get_schema(schema_id).schema_str
            except Exception as e:  # SchemaRegistryError (HTTP), httpx transport errors
                if _not_found(e):
                    raise LookupError(schema_id) from e
                raise self._failed(f"/schemas/ids/{schema_id}", e) from e
            if text is None:
                raise SourceError(f"schema registry {self.cfg.url}/schemas/ids/{schema_id}: no schema text")
            self._by_id[schema_id] = text
        return self._by_id[schema_id]

    def latest(self, subject: str) -> str | None:
        try:
            return self._client.get_latest_version(subject).schema.schema_str
        except Exception as e:
            if _not_found(e):
                return None
            raise self._failed(f"/subjects/{subject}/versions/latest", e) from e

    def _failed(self, path: str, cause: Exception) -> SourceError:
        """Client errors (httpx ConnectError, 5xx...) as a SourceError naming the registry URL."""
        return SourceError(f"schema registry {self.cfg.url}{path}: {type(cause).__name__}: {cause}")


def _not_found(e: Exception) -> bool:
    return getattr(e, "http_status_code", None) == 404


class AvroDecoder:
    """Decodes a batch of raw Kafka rows; see the module docstring."""

    def __init__(
        self,
        topic: str,
        lookup: SchemaLookup | None = None,
        fixed_schema: str | None = None,
        wire_format: str = "confluent",
        subject: str | None = None,
        include_metadata: bool = False,
        max_record_bytes: int | None = None,
        tombstones_ok: bool = False,
        connect_types: bool = False,
    ) -> None:
        if (lookup is None) == (fixed_schema is None):
            raise SourceError("AvroDecoder needs exactly one of a schema lookup or a fixed schema")
        self.topic = topic
        self.lookup = lookup
        self.fixed_schema = fixed_schema
        self.wire_format = wire_format
        self.subject = subject or f"{topic}-value"
        self.include_metadata = include_metadata
        #: A value larger than this is an error row, not decoded (``source.max_record_bytes``).
        self.max_record_bytes = max_record_bytes
        #: Null values are rows of nulls, not errors (a change stream's tombstones).
        self.tombstones_ok = tombstones_ok
        #: Kafka Connect's named types become their logical types (``source.connect_types``).
        self.connect_types = connect_types

    @classmethod
    def from_config(cls, config: KafkaSourceConfig) -> AvroDecoder:
        fixed = Path(config.avro_schema_file).read_text(encoding="utf-8") if config.avro_schema_file else None
        registry = config.schema_registry
        return cls(
            topic=config.topic,
            lookup=RegistrySchemas(registry) if registry is not None else None,
            fixed_schema=fixed,
            wire_format=config.avro_wire_format,
            subject=registry.subject if registry is not None else None,
            include_metadata=config.include_metadata,
            max_record_bytes=None if config.max_record_bytes is None else int(config.max_record_bytes),
            tombstones_ok=config.debezium is not None,
            connect_types=config.debezium is not None and config.connect_types,
        )

    # -- driver side ------------------------------------------------------------------------

    def writer_schemas(self, spark: SparkSession, raw: DataFrame) -> dict[int, str]:
        """Writer schemas of every schema id present in the batch (fixed schema: none needed)."""
        if self.lookup is None or self.wire_format != "confluent":
            return {}
        from pyspark.sql import functions as F

        ids = (
            raw.where((F.length("value") >= 5) & (F.substring("value", 1, 1) == F.lit(b"\x00")))
            .select(F.conv(F.hex(F.substring("value", 2, 4)), 16, 10).cast("int").alias("id"))
            .distinct()
            .collect()
        )
        out: dict[int, str] = {}
        for r in ids:
            try:
                out[r.id] = self.lookup.schema_by_id(r.id)
            except LookupError:
                log.warning("schema id %d of topic %s is not in the registry", r.id, self.topic)
        return out

    def reader_schema(self, writers: dict[int, str]) -> str:
        if self.fixed_schema is not None:
            return self.fixed_schema
        assert self.lookup is not None
        latest = self.lookup.latest(self.subject)
        if latest is not None:
            return latest
        if writers:
            return writers[max(writers)]
        raise SourceError(f"no Avro schema for subject {self.subject!r} in the registry and none in the batch")

    def decode(self, spark: SparkSession, raw: DataFrame) -> tuple[DataFrame, DataFrame, tuple[DataFrame, ...]]:
        from pyspark.sql import functions as F
        from pyspark.sql.pandas.types import from_arrow_schema


        raw = raw.select("topic", "partition", "offset", "timestamp", "value").cache()
        writers = self.writer_schemas(spark, raw)
        reader = self.reader_schema(writers)
        value_schema = spark_arrow_schema(_value_schema(reader))
        out_schema = pa.schema([*value_schema, pa.field(ERROR_FIELD, pa.string()), *META_FIELDS])
        fn = make_decoder(reader, writers, self.wire_format, self.fixed_schema is not None, out_schema,
                          self.max_record_bytes, self.tombstones_ok)
        decoded = raw.mapInArrow(fn, from_arrow_schema(out_schema)).cache()
        decoded_columns = [F.col(f"`{f.name}`").alias(f.name) for f in value_schema]
        columns = decoded_columns
        reason = F.col(ERROR_FIELD)
        if self.connect_types:  # Debezium's named dates and timestamps, as the JSON decode has them
            spark_fields = connect_schema.annotate_avro(from_arrow_schema(value_schema), parse_avro_schema(reader))
            columns = [connect_schema.to_logical(c, f).alias(f.name) if connect_schema.needs_conversion(f) else c
                       for c, f in zip(columns, spark_fields.fields, strict=True)]
            # a value its column's type cannot hold (a timestamptz 'infinity') makes its record
            # an error row, as in the JSON decode: converted, it would stop the batch
            unheld = connect_schema.value_errors(F.struct(*decoded_columns), spark_fields)
            if unheld is not None:
                reason = F.coalesce(reason, unheld)
        good = decoded.where(reason.isNull()).select(
            *columns,
            *([F.col(src).alias(name) for name, src in METADATA_COLUMNS.items()] if self.include_metadata else []),
        )
        bad = kafka_errors(decoded.where(reason.isNotNull()), F.base64("value"), "base64", reason)
        return good, bad, (raw, decoded)


def _value_schema(reader_schema: str) -> pa.Schema:
    """Arrow schema of the decoded values (top-level fields nullable: an error row has none)."""
    return pa.schema([f.with_nullable(True) for f in avro_to_arrow(parse_avro_schema(reader_schema))])


def make_decoder(
    reader_schema: str, writers: dict[int, str], wire_format: str, fixed: bool, out_schema: pa.Schema,
    max_record_bytes: int | None = None, tombstones_ok: bool = False,
) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """The ``mapInArrow`` function (a closure shipped to executors; plain data only)."""
    skip = {ERROR_FIELD, *(m.name for m in META_FIELDS)}
    spark_values = pa.schema([f for f in out_schema if f.name not in skip])
    value_schema = _value_schema(reader_schema)

    def decode_batches(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        import fastavro

        reader = fastavro.parse_schema(json.loads(reader_schema))
        parsed_writers = {i: fastavro.parse_schema(json.loads(s)) for i, s in writers.items()}
        for batch in batches:
            rows = batch.to_pylist()
            records: list[dict[str, Any]] = []
            errors: list[str | None] = []
            for row in rows:
                record, error = _decode_one(row["value"], reader, parsed_writers, wire_format, fixed,
                                            max_record_bytes, tombstones_ok)
                records.append(record or {})
                errors.append(error)
            values = records_to_spark_batch(records, value_schema, spark_values)
            arrays = [*values.columns, pa.array(errors, pa.string())]
            arrays += [batch.column(m.name).cast(m.type) for m in META_FIELDS]
            yield pa.RecordBatch.from_arrays(arrays, schema=out_schema)

    return decode_batches


def _decode_one(
    value: bytes | None, reader: Any, writers: dict[int, Any], wire_format: str, fixed: bool,
    max_record_bytes: int | None = None, tombstones_ok: bool = False,
) -> tuple[dict[str, Any] | None, str | None]:
    import fastavro

    if value is None:
        # a change stream's tombstone is a row of nulls (the Debezium step drops it)
        return ({}, None) if tombstones_ok else (None, "null payload (tombstone)")
    if max_record_bytes is not None and len(value) > max_record_bytes:
        # as the JSON decode says it: the record goes to the error table undecoded
        return None, f"record of {len(value)} bytes exceeds source.max_record_bytes ({max_record_bytes})"
    body = value
    writer = reader
    if wire_format == "confluent":
        if len(value) < 5 or value[0] != MAGIC_BYTE:
            return None, "not Confluent Avro wire format (expected magic byte 0 and a 4-byte schema id)"
        _, schema_id = HEADER.unpack_from(value)
        body = value[5:]
        if not fixed:
            if schema_id not in writers:
                return None, f"schema id {schema_id} not found in the schema registry"
            writer = writers[schema_id]
    buf = io.BytesIO(body)
    try:
        record = fastavro.schemaless_reader(buf, writer, reader)
    except Exception as e:  # truncated bodies, bad unions, incompatible schemas...
        return None, f"Avro decode failed: {type(e).__name__}: {e}"
    if buf.tell() != len(body):
        return None, f"Avro decode failed: {len(body) - buf.tell()} trailing byte(s) after the record"
    if not isinstance(record, dict):
        return None, "Avro payload is not a record"
    return record, None
