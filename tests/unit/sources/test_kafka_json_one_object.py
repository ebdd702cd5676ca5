"""A Kafka record holds one JSON object. Text after it - a second object, or anything
else - makes the record an error row naming why: a JSON parse of the first value ignores
the rest (Spark's, as Jackson's under HoodieStreamer), so the second object was lost with
no error (found by a review: `{"id":"g"}\\n{"id":"h"}` wrote g alone, errored 0)."""

from __future__ import annotations

import datetime as dt
import json

import pytest

from streamer.config.sources import KafkaSourceConfig
from streamer.sources.files import TEXT_AFTER_JSON
from streamer.sources.kafka.source import json_decoder

pytestmark = pytest.mark.integration  # a Spark session

ONE_OBJECT = [
    '{"id": "a", "ts": 1}',
    '  {"id": "b", "ts": 1, "note": "braces } { and ] [ in a string"}  \n',
    '{"id": "c", "ts": 1, "n": {"x": [1, {"y": 2}], "z": {}}, "q": "\\" } {"}',
]
MORE_THAN_ONE = [
    '{"id": "g", "ts": 3}\n{"id": "h", "ts": 3}',
    '{"id": "b2", "ts": 2} {"id": "k", "ts": 2}',
    '{"id": "t", "ts": 2}{"id": "u", "ts": 2}',
    '{"id": "x", "ts": 2} trailing',
    '{"id": "y", "ts": 2, "n": [1]} 5',
]


def _raw(spark, values: list[str]):
    rows = [("t", 0, i, dt.datetime(2024, 1, 1), v.encode()) for i, v in enumerate(values)]
    return spark.createDataFrame(rows, "topic string, partition int, offset bigint, timestamp timestamp, value binary")


@pytest.mark.parametrize("schema", [None, "id STRING, ts BIGINT, note STRING"], ids=["inferred", "declared"])
def test_text_after_the_json_object_makes_the_record_an_error_row(spark, schema):
    config = KafkaSourceConfig(type="kafka", bootstrap_servers="127.0.0.1:1", topic="t",
                               **({"schema": schema} if schema else {}))
    good, bad, _ = json_decoder(spark, _raw(spark, ONE_OBJECT + MORE_THAN_ONE), config).frames()
    assert sorted(r.id for r in good.collect()) == ["a", "b", "c"]
    errors = {r.offset: (r.reason, r.raw_payload) for r in bad.collect()}
    assert sorted(errors) == list(range(len(ONE_OBJECT), len(ONE_OBJECT) + len(MORE_THAN_ONE)))
    for offset, (reason, payload) in errors.items():
        assert reason == TEXT_AFTER_JSON
        assert payload == MORE_THAN_ONE[offset - len(ONE_OBJECT)]  # kept whole, so nothing is lost
    json.loads(ONE_OBJECT[2])  # the escaped quote case is one valid object


@pytest.mark.parametrize("schema", [None, "id STRING, ts BIGINT, note STRING"], ids=["inferred", "declared"])
def test_a_json_line_of_a_file_holds_one_object_too(spark, tmp_path, schema):
    from streamer.config.sources import FilesSourceConfig
    from streamer.sources.files import FilesSource

    lines = [v.replace("\n", " ") for v in ONE_OBJECT + MORE_THAN_ONE]  # a line each
    (tmp_path / "a.json").write_text("\n".join(lines) + "\n")
    src = FilesSource(FilesSourceConfig(type="files", path=str(tmp_path), format="json",
                                        **({"schema": schema} if schema else {})))
    batch = src.read_batch(spark, None)
    assert sorted(r.id for r in batch.df.collect()) == ["a", "b", "c"]
    errors = sorted((r.raw_payload, r.reason) for r in batch.errors.collect())
    assert errors == sorted((line, TEXT_AFTER_JSON) for line in lines[len(ONE_OBJECT):])
    batch.release()


def test_keys_differing_only_in_case_keep_the_spelling_most_records_hold(spark, tmp_path):
    """``id`` and ``ID``, ``v`` and ``V``: JSON keeps them apart, Spark's and Hudi's column
    names do not, so reading either failed the batch as ambiguous, on every run. The
    spelling most records hold is the column; a record holding another is an error row
    naming both. A key repeated in one record, at any depth, is one column (its last value,
    as Jackson takes it under Hudi); before, that failed the batch too."""
    from streamer.config.sources import FilesSourceConfig
    from streamer.sources.files import FilesSource

    values = ['{"id": "a", "ts": 1, "v": 1}', '{"id": "b", "ts": 1, "v": 2}',
              '{"id": "c", "ID": "other", "ts": 1}', '{"id": "d", "ts": 1, "V": 4}',
              '{"id": "e", "ts": 1, "v": 5, "v": 6}', '{"id": "f", "ts": 1, "s": {"x": 1, "x": 2}}']
    config = KafkaSourceConfig(type="kafka", bootstrap_servers="127.0.0.1:1", topic="t")
    kafka_good, kafka_bad, _ = json_decoder(spark, _raw(spark, values), config).frames()
    (tmp_path / "a.json").write_text("\n".join(values) + "\n")
    batch = FilesSource(FilesSourceConfig(type="files", path=str(tmp_path), format="json")).read_batch(spark, None)
    for good, bad in ((kafka_good, kafka_bad), (batch.df, batch.errors)):
        assert sorted((r.id, r.v, r.s and r.s.asDict()) for r in good.collect()) == [
            ("a", 1, None), ("b", 2, None), ("e", 6, None), ("f", None, {"x": 2})]
        reasons = sorted(r.reason for r in bad.collect())
        assert reasons == [f"field '{name}' differs from field '{kept}' only in case; Spark and Hudi take column "
                           f"names whatever their case, and the batch's column is '{kept}', which most records spell so"
                           for name, kept in (("ID", "id"), ("V", "v"))]
    batch.release()
