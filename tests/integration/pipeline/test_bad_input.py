"""Bad input never stops a continuous pipeline, never vanishes, and the counts add up."""

from __future__ import annotations

import json
import threading
import uuid

import pytest

from streamer.config import parse_pipelines
from streamer.pipeline.runner import PipelineRunner
from streamer.read import Table
from tests.support.trip_model import (
    TripModel,
    assert_matches_model,
    kafka_pipeline_yaml,
    produce_records,
    run_until_caught_up,
)

pytestmark = [pytest.mark.integration, pytest.mark.kafka]

MALFORMED = "malformed JSON, or values that do not match the schema's types"
NULL_KEY = "record key field 'uuid' is null or empty"
NULL_ORDERING = "ordering field 'ts' is null or empty"
TOMBSTONE = "null payload (tombstone)"
MAX_BYTES = 2048


def bad_records(round_: int) -> list[tuple[str | None, str]]:
    """(payload, expected reason) of every kind of bad record, unique per round."""
    big = json.dumps({"uuid": f"big-{round_}", "ts": 5, "city": "sf", "fare": 1.0, "pad": "x" * (2 * MAX_BYTES)})
    return [
        ('{"uuid": "trunc-' + str(round_) + '", "ts": ', MALFORMED),
        (f"not json at all #{round_}", MALFORMED),
        (json.dumps({"uuid": f"wt-{round_}", "ts": "yesterday", "city": "sf", "fare": 2.0}),
         "field 'ts': value yesterday is not a valid bigint"),
        (json.dumps({"uuid": f"wt2-{round_}", "ts": 5, "city": "sf", "fare": "cheap"}),
         "field 'fare': value cheap is not a valid double"),
        (json.dumps({"uuid": None, "ts": 10 + round_, "city": "sf", "fare": 3.0}), NULL_KEY),
        (json.dumps({"uuid": "", "ts": 20 + round_, "city": "nyc", "fare": 4.0}), NULL_KEY),
        (json.dumps({"ts": 30 + round_, "city": "ams", "fare": 5.0}), NULL_KEY),
        (json.dumps({"uuid": f"nots-{round_}", "city": "ams", "fare": 6.0}), NULL_ORDERING),
        (big, f"record of {len(big)} bytes exceeds source.max_record_bytes ({MAX_BYTES})"),
        (None, TOMBSTONE),
    ]


def test_bad_records_go_to_the_error_table_and_counts_add_up(kafka, spark, tmp_path):
    topic = kafka.create_topic(f"bad-{uuid.uuid4().hex[:8]}", partitions=3)
    model = TripModel(seed=11, key_space=2_000)
    yaml = "pipelines:\n" + kafka_pipeline_yaml(
        "dirty", kafka.bootstrap_servers, topic, str(tmp_path / "lake"),
        source_extra=f", max_records_per_batch: 1500, max_record_bytes: {MAX_BYTES}",
        extra="""\
        transforms:
          - {type: filter, condition: "fare >= 0"}
        """,
    )
    (config,), problems = parse_pipelines(yaml)
    assert not problems
    assert config.errors.path  # derived: <lake>/_errors/dirty

    expected_bad: list[tuple[str | None, str]] = []
    negative = 0
    produced = 0
    done = threading.Event()

    def produce() -> None:
        nonlocal negative, produced
        try:
            for round_ in range(3):
                good = model.records(1_000)
                produced += produce_records(kafka, topic, good)
                bad = bad_records(round_)
                expected_bad.extend(bad)
                produced += kafka.produce(topic, [p for p, _ in bad])
                # Valid records a transform drops: counted as filtered, not as errors.
                dropped = [{"uuid": f"neg-{round_}-{i}", "ts": 1, "city": "sf", "fare": -1.0} for i in range(7)]
                negative += len(dropped)
                produced += produce_records(kafka, topic, dropped)
        finally:
            done.set()

    runner = PipelineRunner(config, spark=spark)
    producer = threading.Thread(target=produce, daemon=True)
    producer.start()
    run_until_caught_up(runner, kafka, topic, done.is_set, timeout_s=180)
    producer.join(timeout=30)

    # Good records land exactly (the model never saw the bad or filtered ones).
    assert_matches_model(runner.sink.path, model.expected())

    # Every bad record is in the error table, once, with its reason and source offset.
    errors = Table.open(config.errors.path).read().to_pylist()
    assert len(errors) == len(expected_bad) == 30
    assert sorted(e["reason"] for e in errors) == sorted(r for _, r in expected_bad)
    assert len({(e["partition"], e["offset"]) for e in errors}) == len(errors)
    assert all(e["topic"] == topic and e["source_type"] == "kafka" for e in errors)
    def verbatim(reason: str) -> bool:  # rows whose payload is the record's original bytes
        return reason == MALFORMED or "exceeds" in reason or reason.startswith("field ")

    raw = {e["raw_payload"] for e in errors if verbatim(e["reason"])}
    assert raw == {p for p, r in expected_bad if verbatim(r)}
    unkeyed = [json.loads(e["raw_payload"]) for e in errors if e["reason"] in (NULL_KEY, NULL_ORDERING)]
    assert len(unkeyed) == 12 and all("_kafka_offset" not in p for p in unkeyed)
    assert {p["ts"] for p in unkeyed if p.get("ts") is not None} == {10, 11, 12, 20, 21, 22, 30, 31, 32}

    # The counts add up, per batch and in total.
    reports = [r for r in runner.reports if not r.skipped]
    assert all(r.read == r.written + r.errored + r.filtered for r in reports)
    assert sum(r.read for r in reports) == produced
    assert sum(r.errored for r in reports) == len(expected_bad)
    assert sum(r.filtered for r in reports) == negative
    assert sum(r.written for r in reports) == model.produced
    assert any(r.error_instant for r in reports)
