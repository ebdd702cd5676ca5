"""JSON with embedded Connect schemas decoded by the schemas (streamer/sources/connect_schema.py):
each Debezium/Kafka Connect type reaches the table as the database's type, with its value."""

from __future__ import annotations

import base64
import datetime as dt
import json
from decimal import Context, Decimal

import pytest

from streamer.config.sources import KafkaSourceConfig
from streamer.errors import SourceError
from streamer.sources.debezium import change_rows
from streamer.sources.kafka.source import NOT_WRAPPED, json_decoder
from tests.support.cdc import connect_envelope, pg_event

pytestmark = pytest.mark.integration

UTC = dt.timezone.utc


def unscaled(value: Decimal, scale: int) -> str:
    """Connect's decimal: base64 of the unscaled value, big-endian two's complement."""
    n = int(value.scaleb(scale, Context(prec=60)))  # the default context rounds to 28 digits
    return base64.b64encode(n.to_bytes(n.bit_length() // 8 + 1, "big", signed=True)).decode()


def col(field: str, kind: str, name: str | None = None, **extra) -> dict:
    out = {"type": kind, "optional": field != "id", "field": field, **extra}
    if name:
        out["name"] = name
    return out


COLUMNS = [
    col("id", "int32"),
    col("small", "int16"),
    col("big", "int64"),
    col("ratio", "float"),
    col("amount", "bytes", "org.apache.kafka.connect.data.Decimal",
        parameters={"scale": "2", "connect.decimal.precision": "12"}),
    col("huge", "bytes", "org.apache.kafka.connect.data.Decimal",
        parameters={"scale": "4", "connect.decimal.precision": "38"}),
    col("born", "int32", "io.debezium.time.Date"),
    col("seen", "int64", "io.debezium.time.MicroTimestamp"),
    col("seen_ms", "int64", "org.apache.kafka.connect.data.Timestamp"),
    col("seen_ns", "int64", "io.debezium.time.NanoTimestamp"),
    col("at", "string", "io.debezium.time.ZonedTimestamp"),
    col("opens", "int64", "io.debezium.time.MicroTime"),
    col("blob", "bytes"),
    col("loose", "struct", "io.debezium.data.VariableScaleDecimal",
        fields=[{"type": "int32", "optional": False, "field": "scale"},
                {"type": "bytes", "optional": False, "field": "value"}]),
    col("holidays", "array", items={"type": "int32", "optional": True, "name": "io.debezium.time.Date"}),
    col("doc", "string", "io.debezium.data.Json"),
]
HUGE = Decimal("-1234567890123456789012345678901234.5678")  # 38 digits: 16 bytes unscaled
BORN = dt.date(1969, 7, 20)  # before 1970: a negative day number
SEEN = dt.datetime(1969, 12, 31, 23, 59, 59, 999_999)


def row(i: int, **over) -> dict:
    days = (BORN - dt.date(1970, 1, 1)).days
    micros = (SEEN - dt.datetime(1970, 1, 1)) // dt.timedelta(microseconds=1)
    out = {"id": i, "small": -7, "big": 2**40 + i, "ratio": 0.5, "amount": unscaled(Decimal("-1234.50") * i, 2),
           "huge": unscaled(HUGE, 4), "born": days, "seen": micros, "seen_ms": 1_700_000_000_123,
           "seen_ns": micros * 1000 - 1, "at": "2024-03-01T10:00:00.250000Z", "opens": 36_000_000_000,
           "blob": base64.b64encode(b"\x00\xffdata").decode(),
           "loose": {"scale": 3, "value": unscaled(Decimal("-0.042"), 3)},
           "holidays": [days, 0], "doc": '{"a": 1}'}
    return {**out, **over}


def raw_frame(spark, values: list[str | None]):
    rows = [("t", 0, i, dt.datetime(2024, 1, 1, tzinfo=UTC), None if v is None else v.encode())
            for i, v in enumerate(values)]
    return spark.createDataFrame(rows, "topic string, partition int, offset bigint, timestamp timestamp, value binary")


def decode(spark, values: list[str | None], **extra):
    config = KafkaSourceConfig(type="kafka", bootstrap_servers="127.0.0.1:1", topic="t", debezium="postgres", **extra)
    good, bad, _ = json_decoder(spark, raw_frame(spark, values), config).frames()
    return change_rows(good, "postgres"), bad


def test_each_connect_type_arrives_as_the_database_type_with_its_value(spark):
    events = [connect_envelope(pg_event("c", None, row(1), 10), COLUMNS),
              connect_envelope(pg_event("u", row(1), row(2, id=1), 20), COLUMNS),
              connect_envelope(pg_event("d", row(3, amount=None), None, 30), COLUMNS)]
    rows, bad = decode(spark, [json.dumps(e) for e in events] + [None])
    assert bad.count() == 0
    types = dict(rows.dtypes)
    assert {c: types[c] for c in ("id", "small", "big", "ratio", "amount", "huge", "born", "seen", "seen_ms",
                                  "seen_ns", "at", "opens", "blob", "loose", "holidays", "doc")} == {
        "id": "int", "small": "smallint", "big": "bigint", "ratio": "float", "amount": "decimal(12,2)",
        "huge": "decimal(38,4)", "born": "date", "seen": "timestamp", "seen_ms": "timestamp", "seen_ns": "timestamp",
        "at": "timestamp", "opens": "bigint", "blob": "binary", "loose": "string", "holidays": "array<date>",
        "doc": "string"}
    got = {r._event_lsn: r for r in rows.collect()}
    first, update, delete = got[10], got[20], got[30]
    assert (first.id, first.small, first.big, first.amount, first.huge) == (1, -7, 2**40 + 1, Decimal("-1234.50"), HUGE)
    assert update.amount == Decimal("-2469.00") and update.id == 1
    assert delete._hoodie_is_deleted and delete.id == 3 and delete.amount is None
    assert first.born == BORN and first.holidays == [BORN, dt.date(1970, 1, 1)]
    # timestamps read in the session's zone (UTC): the database's wall time
    assert first.seen == SEEN and first.seen_ns == SEEN - dt.timedelta(microseconds=1)
    assert first.seen_ms == dt.datetime(2023, 11, 14, 22, 13, 20, 123_000)
    assert first.at == dt.datetime(2024, 3, 1, 10, 0, 0, 250_000)
    assert (first.opens, bytes(first.blob), first.loose, first.doc) == (36_000_000_000, b"\x00\xffdata", "-0.042",
                                                                          '{"a": 1}')


def test_decimals_of_every_byte_length_and_sign(spark):
    values = ["0", "0.01", "-0.01", "1.27", "-1.28", "127.99", "-128.00", "9999999999.99", "-9999999999.99",
              "42949672.96", "-42949672.97", "-0.00"]
    columns = [col("id", "int32"), COLUMNS[4]]
    events = [connect_envelope(pg_event("c", None, {"id": i, "amount": unscaled(Decimal(v), 2)}, 10 + i), columns)
              for i, v in enumerate(values)]
    rows, _ = decode(spark, [json.dumps(e) for e in events])
    assert {r.id: r.amount for r in rows.collect()} == {i: Decimal(v) for i, v in enumerate(values)}


def test_schemas_of_one_batch_merge_an_added_column_and_a_widened_one(spark):
    before = [col("id", "int32"), col("qty", "int32")]
    after = [col("id", "int32"), col("qty", "int64"), col("color", "string")]
    events = [connect_envelope(pg_event("c", None, {"id": 1, "qty": 5}, 10), before),
              connect_envelope(pg_event("c", None, {"id": 2, "qty": 2**40, "color": "red"}, 20), after)]
    rows, bad = decode(spark, [json.dumps(e) for e in events])
    assert bad.count() == 0
    assert {c: t for c, t in rows.dtypes if c in ("id", "qty", "color")} == {"id": "int", "qty": "bigint",
                                                                            "color": "string"}
    assert sorted((r.id, r.qty, r.color) for r in rows.collect()) == [(1, 5, None), (2, 2**40, "red")]


def test_a_decimal_whose_precision_grows_within_a_batch_takes_the_wider(spark):
    def amount(precision: str) -> dict:
        return col("amount", "bytes", "org.apache.kafka.connect.data.Decimal",
                   parameters={"scale": "2", "connect.decimal.precision": precision})

    events = [connect_envelope(pg_event("c", None, {"id": 1, "amount": unscaled(Decimal("1.50"), 2)}, 10),
                               [col("id", "int32"), amount("10")]),
              connect_envelope(pg_event("c", None, {"id": 2, "amount": unscaled(Decimal("-123456789.01"), 2)}, 20),
                               [col("id", "int32"), amount("12")])]
    rows, _ = decode(spark, [json.dumps(e) for e in events])
    assert dict(rows.dtypes)["amount"] == "decimal(12,2)"
    assert sorted(r.amount for r in rows.collect()) == [Decimal("-123456789.01"), Decimal("1.50")]


def test_a_record_without_its_schema_in_a_typed_batch_is_an_error_row_not_dropped(spark):
    typed = connect_envelope(pg_event("c", None, {"id": 1}, 10), [col("id", "int32")])
    plain = pg_event("c", None, {"id": 2}, 20)
    rows, bad = decode(spark, [json.dumps(typed), json.dumps(plain), "{not json"])
    assert [r.id for r in rows.collect()] == [1]
    reasons = sorted(r.reason for r in bad.collect())
    assert len(reasons) == 2 and NOT_WRAPPED in reasons


def test_without_embedded_schemas_or_with_the_setting_off_the_values_decide(spark):
    typed = connect_envelope(pg_event("c", None, {"id": 1, "born": 19000}, 10),
                             [col("id", "int32"), col("born", "int32", "io.debezium.time.Date")])
    rows, _ = decode(spark, [json.dumps(typed)], connect_types=False)
    assert {c: t for c, t in rows.dtypes if c in ("id", "born")} == {"id": "bigint", "born": "bigint"}
    rows, _ = decode(spark, [json.dumps(pg_event("c", None, {"id": 1}, 10))])
    assert dict(rows.dtypes)["id"] == "bigint"


def test_a_decimal_wider_than_spark_takes_is_refused_by_name(spark):
    wide = col("amount", "bytes", "org.apache.kafka.connect.data.Decimal",
               parameters={"scale": "2", "connect.decimal.precision": "50"})
    event = connect_envelope(pg_event("c", None, {"id": 1, "amount": unscaled(Decimal("1.5"), 2)}, 10),
                             [col("id", "int32"), wide])
    with pytest.raises(SourceError, match=r"field 'amount': decimal\(50, 2\).*decimal.handling.mode"):
        decode(spark, [json.dumps(event)])[0].collect()


def test_avro_named_types_are_found_through_name_references(spark):
    """Debezium's Avro ``after`` names ``before``'s record type: its fields convert too."""
    from pyspark.sql.pandas.types import from_arrow_schema

    from streamer.sources.connect_schema import METADATA_KEY, annotate_avro, needs_conversion
    from streamer.table.avro_schema import avro_to_arrow

    value = {"type": "record", "name": "Value", "namespace": "pg.public.kinds", "fields": [
        {"name": "id", "type": "int"},
        {"name": "born", "type": ["null", {"type": "int", "connect.name": "io.debezium.time.Date"}]},
        {"name": "day", "type": ["null", {"type": "int", "logicalType": "date"}]}]}
    envelope = {"type": "record", "name": "Envelope", "namespace": "pg.public.kinds", "fields": [
        {"name": "before", "type": ["null", value]}, {"name": "after", "type": ["null", "Value"]},
        {"name": "op", "type": "string"}]}
    annotated = annotate_avro(from_arrow_schema(avro_to_arrow(envelope)), envelope)
    before, after, op = annotated.fields
    for side in (before, after):
        born = side.dataType["born"]
        assert born.metadata[METADATA_KEY]["name"] == "io.debezium.time.Date"
        assert METADATA_KEY not in side.dataType["day"].metadata  # a logical type already: decoded as a date
    assert needs_conversion(before) and needs_conversion(after) and not needs_conversion(op)


def two_complement(n: int) -> str:
    """base64 of ``n`` as Java's ``BigInteger.toByteArray`` writes it (any size)."""
    return base64.b64encode(n.to_bytes(n.bit_length() // 8 + 1, "big", signed=True)).decode()


def test_a_numeric_without_precision_of_any_size_is_its_exact_text(spark):
    """VariableScaleDecimal beyond decimal(38,0)'s 38 digits (Postgres' numeric takes 131072
    before the point): the text Python's decimal module writes of the same value."""
    loose = COLUMNS[13]
    cases = [(123456789012345678901234567890123456789012_5, 1), (-123456789012345678901234567890123456789012_5, 1),
             (10**38, 0), (-(10**38), 0), (2**127, 0), (-(2**127), 0), (10**38 - 1, 0), (-(10**38) + 1, 3),
             (10**300 + 7, 0), (-(7 * 10**299) - 1, 250), (1, 60), (-5, 60), (0, 0), (0, 4), (-1, 0), (255, 0),
             (-256, 0), (2**56, 2), (-(2**56), 2), (2**56 - 1, 0), (10**18, 0), (-(10**18) - 1, 18)]
    events = [connect_envelope(pg_event("c", None, {"id": i, "loose": {"scale": s, "value": two_complement(n)}}, 10 + i),
                               [col("id", "int32"), loose]) for i, (n, s) in enumerate(cases)]
    rows, bad = decode(spark, [json.dumps(e) for e in events])
    assert bad.count() == 0
    exact = Context(prec=1000)
    assert {r.id: r.loose for r in rows.collect()} == {
        i: format(Decimal(n).scaleb(-s, exact), "f") for i, (n, s) in enumerate(cases)}


def test_leading_sign_bytes_and_fixed_decimals_keep_their_value(spark):
    """A value with redundant leading 0x00/0xFF bytes (still two's complement), and the
    fixed-precision decimal path, which reads its bytes the same way."""
    loose = COLUMNS[13]
    padded = {1: b"\x00\x00\x00\x05", 2: b"\xff\xff\xff\xfb", 3: b"\xff" * 30 + b"\x01", 4: b"\x00" * 20}
    huge = {i: Context(prec=60).multiply(HUGE, 2 - i) for i in padded}  # 38 digits, both signs, zero
    events = [connect_envelope(pg_event("c", None, {"id": i, "loose": {"scale": 2, "value": base64.b64encode(b).decode()},
                                                    "huge": unscaled(huge[i], 4)}, 10 + i),
                               [col("id", "int32"), loose, COLUMNS[5]]) for i, b in padded.items()]
    rows, _ = decode(spark, [json.dumps(e) for e in events])
    got = {r.id: (r.loose, r.huge) for r in rows.collect()}
    expected = {i: format(Decimal(int.from_bytes(b, "big", signed=True)).scaleb(-2), "f") for i, b in padded.items()}
    assert got == {i: (expected[i], huge[i]) for i in padded}


ZONED = "io.debezium.time.ZonedTimestamp"
EPOCH = dt.datetime(1970, 1, 1, tzinfo=UTC)


def micros(t: dt.datetime) -> int:
    return (t - EPOCH) // dt.timedelta(microseconds=1)


def zoned_events(values: dict[int, str | None]) -> list[dict]:
    columns = [col("id", "int32"), col("at", "string", ZONED),
               col("ats", "array", items={"type": "string", "optional": True, "name": ZONED})]
    return [connect_envelope(pg_event("c", None, {"id": i, "at": v, "ats": [v]}, 10 + i), columns)
            for i, v in values.items()]


def parsed_envelopes(spark, events: list[dict]):
    """The events parsed by their schemas, as the JSON decode parses a batch (``_p``)."""
    from pyspark.sql import functions as F

    from streamer.sources.connect_schema import envelope_type

    schema = envelope_type(sorted({json.dumps(e["schema"]) for e in events}))
    frame = spark.createDataFrame([(json.dumps(e),) for e in events], "raw string")
    return frame.select(F.from_json("raw", schema).alias("p")), schema


def test_a_timestamptz_no_timestamp_holds_is_a_reason_naming_it_not_a_failure_nor_a_null(spark):
    """Postgres' timestamptz 'infinity'/'-infinity' (Debezium's ZonedTimestamp sends the
    words) and years after 9999 or BC (``+12000-...``, ``-0099-...``): each record is given a
    reason naming the field and its value; one inside Spark's range converts exactly."""
    from pyspark.sql import functions as F

    from streamer.sources.connect_schema import to_logical, value_errors

    held = {1: ("2024-03-01T10:00:00.250000Z", dt.datetime(2024, 3, 1, 10, 0, 0, 250_000, tzinfo=UTC)),
            2: ("0001-01-01T00:00:00Z", dt.datetime(1, 1, 1, tzinfo=UTC)),
            3: ("9999-12-31T23:59:59.999999Z", dt.datetime(9999, 12, 31, 23, 59, 59, 999_999, tzinfo=UTC)),
            4: ("2024-06-30T23:30:00-02:00", dt.datetime(2024, 7, 1, 1, 30, tzinfo=UTC)),
            5: (None, None)}
    unheld = {11: "infinity", 12: "-infinity", 13: "+12000-01-01T00:00:00.000000Z", 14: "-0099-01-01T00:00:00.000000Z",
              15: "0001-01-01T00:30:00+01:00", 16: "9999-12-31T23:59:59.999999-01:00"}
    events = zoned_events({**{i: v for i, (v, _) in held.items()}, **unheld})
    parsed, schema = parsed_envelopes(spark, events)
    reason = value_errors(F.col("p"), schema)
    assert reason is not None
    flagged = parsed.select(F.col("p.payload.after.id").alias("id"), reason.alias("reason"), "p").cache()
    reasons = {r.id: r.reason for r in flagged.collect()}
    assert {i: reasons[i] for i in held} == dict.fromkeys(held)
    for i, v in unheld.items():
        assert reasons[i] == (f"field 'at': value {v} is not a timestamp Spark and Hudi hold "
                              f"(0001-01-01T00:00:00Z to 9999-12-31T23:59:59.999999Z); field 'ats[]': value {v} is "
                              "not a timestamp Spark and Hudi hold (0001-01-01T00:00:00Z to 9999-12-31T23:59:59.999999Z)")
    after = to_logical(F.col("p.payload"), schema["payload"]).getField("after")
    good = flagged.where(F.col("reason").isNull()).select(
        "id", F.unix_micros(after.getField("at")).alias("at"), F.transform(after.getField("ats"), F.unix_micros).alias("ats"))
    assert {r.id: (r.at, r.ats) for r in good.collect()} == {
        i: (None, [None]) if t is None else (micros(t), [micros(t)]) for i, (_, t) in held.items()}
    # reached without the reason's test, the conversion stops naming the value: never a null
    with pytest.raises(Exception, match="field 'at': value infinity is not a timestamp"):
        flagged.where(F.col("id") == 11).select(after.getField("at").cast("string")).collect()


def test_an_unheld_timestamptz_in_a_before_image_is_no_reason_and_reads_as_null(spark):
    """A delete's (or a REPLICA IDENTITY FULL update's) ``before`` holding 'infinity': the row
    of a delete is only its key, so the delete goes through; ``after`` alone decides."""
    from pyspark.sql import functions as F

    from streamer.sources.connect_schema import to_logical, value_errors

    columns = [col("id", "int32"), col("at", "string", ZONED)]
    events = [connect_envelope(pg_event("d", {"id": 1, "at": "infinity"}, None, 10), columns),
              connect_envelope(pg_event("u", {"id": 2, "at": "-infinity"}, {"id": 2, "at": "2024-01-01T00:00:00Z"}, 20),
                               columns)]
    parsed, schema = parsed_envelopes(spark, events)
    reason = value_errors(F.col("p"), schema)
    assert reason is not None
    payload = to_logical(F.col("p.payload"), schema["payload"])
    got = parsed.select(reason.alias("reason"), payload.getField("before").getField("id").alias("id"),
                        payload.getField("before").getField("at").alias("before_at"),
                        F.unix_micros(payload.getField("after").getField("at")).alias("after_at")).collect()
    assert sorted(tuple(r) for r in got) == [(None, 1, None, None),
                                             (None, 2, None, micros(dt.datetime(2024, 1, 1, tzinfo=UTC)))]


def test_a_record_with_a_timestamptz_no_timestamp_holds_is_an_error_row_with_the_reason(spark):
    """The decode (sources/kafka/source.py) makes :func:`value_errors`' records error rows:
    the batch's other rows land, none fails the batch, none becomes a null."""
    events = zoned_events({1: "2024-01-01T00:00:00.000000Z", 2: "infinity", 3: "+12000-01-01T00:00:00.000000Z",
                           4: "0001-01-01T00:00:00.000000Z"})
    events.append(connect_envelope(pg_event("d", {"id": 5, "at": "-infinity", "ats": None}, None, 50),
                                   events[0]["schema"]["fields"][1]["fields"]))
    from pyspark.sql import functions as F

    rows, bad = decode(spark, [json.dumps(e) for e in events])
    assert sorted(tuple(r) for r in rows.select("id", "_hoodie_is_deleted", F.unix_micros("at")).collect()) == [(1, False, micros(dt.datetime(2024, 1, 1, tzinfo=UTC))),
                                               (4, False, micros(dt.datetime(1, 1, 1, tzinfo=UTC))), (5, True, None)]
    errors = {json.loads(r.raw_payload)["payload"]["after"]["id"]: r.reason for r in bad.collect()}
    assert sorted(errors) == [2, 3]
    assert errors[2].startswith("field 'at': value infinity is not a timestamp Spark and Hudi hold")
    assert "field 'at': value +12000-01-01T00:00:00.000000Z" in errors[3]


def test_an_avro_record_with_a_timestamptz_no_timestamp_holds_is_an_error_row_with_the_reason(spark):
    """The same through Avro (sources/kafka/avro.py): Debezium's Avro converter sends a
    ZonedTimestamp as a string named by ``connect.name``. Before, 'infinity' stopped the batch."""
    import io

    import fastavro
    from pyspark.sql import functions as F

    from streamer.sources.kafka.avro import AvroDecoder

    zoned = {"type": "string", "connect.name": "io.debezium.time.ZonedTimestamp"}
    value = {"type": "record", "name": "Value", "namespace": "pg.public.t", "fields": [
        {"name": "id", "type": "int"}, {"name": "at", "type": ["null", zoned], "default": None}]}
    envelope = {"type": "record", "name": "Envelope", "namespace": "pg.public.t", "fields": [
        {"name": "before", "type": ["null", value], "default": None},
        {"name": "after", "type": ["null", "pg.public.t.Value"], "default": None},
        {"name": "op", "type": "string"}, {"name": "source", "type": {"type": "record", "name": "Source", "fields": [
            {"name": "lsn", "type": ["null", "long"], "default": None}]}}]}
    events = [(1, "c", None, {"id": 1, "at": "2024-01-01T00:00:00.000000Z"}),
              (2, "c", None, {"id": 2, "at": "infinity"}),
              (3, "u", None, {"id": 3, "at": "+12000-01-01T00:00:00.000000Z"}),
              (4, "d", {"id": 4, "at": "-infinity"}, None)]
    parsed = fastavro.parse_schema(envelope)
    values = []
    for lsn, op, before, after in events:
        buf = io.BytesIO()
        fastavro.schemaless_writer(buf, parsed, {"before": before, "after": after, "op": op, "source": {"lsn": lsn}})
        values.append(buf.getvalue())
    rows = [("t", 0, i, dt.datetime(2024, 1, 1, tzinfo=UTC), v) for i, v in enumerate(values)]
    raw = spark.createDataFrame(rows, "topic string, partition int, offset bigint, timestamp timestamp, value binary")
    decoder = AvroDecoder("t", fixed_schema=json.dumps(envelope), wire_format="raw", tombstones_ok=True,
                          connect_types=True)
    good, bad, _ = decoder.decode(spark, raw)
    got = change_rows(good, "postgres").select("id", "_hoodie_is_deleted", F.unix_micros("at").alias("at"))
    assert sorted(tuple(r) for r in got.collect()) == [(1, False, micros(dt.datetime(2024, 1, 1, tzinfo=UTC))),
                                                      (4, True, None)]
    errors = {r.offset: r.reason for r in bad.collect()}
    assert sorted(errors) == [1, 2]
    assert errors[1].startswith("field 'at': value infinity is not a timestamp Spark and Hudi hold")
    assert errors[2].startswith("field 'at': value +12000-01-01T00:00:00.000000Z is not a timestamp")
