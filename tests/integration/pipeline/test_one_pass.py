"""A Kafka batch with a declared schema is collected in one pass (``Batch.together``,
no cache): the rows, the source's error rows (their reasons found afterwards, for bad
rows only) and the unkeyable rows (with their own offsets and bytes) are exactly those
of the cached two-branch collect, and nothing was made or cached on the way."""

from __future__ import annotations

import dataclasses
import uuid

import pyarrow as pa
import pytest

from streamer.config import parse_pipelines
from streamer.pipeline.batch import prepare
from streamer.sources import build_source

pytestmark = [pytest.mark.integration, pytest.mark.kafka]

YAML = """
pipelines:
  - name: one_pass
    source: {{type: kafka, bootstrap_servers: "{bootstrap}", topic: {topic}, format: json,
              schema: "id STRING, ts BIGINT, fare DOUBLE", include_metadata: true, max_record_bytes: 64}}
    target: {{path: "{t}", record_key: [id], ordering_field: ts}}
    trigger: {{mode: once}}
    engine: local
"""

RECORDS = [
    '{"id": "a", "ts": 1, "fare": 1.5}',
    '{"id": "b", "ts": 2}',
    "{not json",
    '{"id": null, "ts": 3}',  # decodes, but has no key: an error row with its own offset and bytes
    '{"id": "c", "ts": "x"}',  # wrong type
    b'{"id": "\xff", "ts": 4}',  # not UTF-8
    None,  # tombstone
    '{"id": "d", "ts": 5, "fare": 2.0, "pad": "' + "p" * 80 + '"}',  # over max_record_bytes
    '{"id": "  ", "ts": 6}',  # blank key
    '{"id": "e", "ts": 7, "fare": 3.25}',
]


def _without_time(errors: pa.Table) -> list[dict]:
    return sorted((dict(r, error_time=None) for r in errors.to_pylist()), key=lambda r: r["offset"])


def test_one_pass_equals_the_cached_collect(kafka, spark, tmp_path):
    topic = kafka.create_topic(f"one-pass-{uuid.uuid4().hex[:8]}", partitions=2)
    (config,), problems = parse_pipelines(YAML.format(bootstrap=kafka.bootstrap_servers, topic=topic,
                                                      t=tmp_path / "t"))
    assert not problems
    kafka.produce(topic, RECORDS)
    source = build_source(config.source)

    one = source.read_batch(spark, None)
    assert one.together is not None
    two = dataclasses.replace(source.read_batch(spark, None), together=None)
    try:
        by_one = prepare(config, spark, one, "kafka", "{}")
        # the error split's frames were never made (each costs a plan analysis), nor cached
        assert not one.frames.built, "the one pass made the two-branch frames"
        assert not any(d.is_cached for d in one.cached), "the one pass filled a cache"
        by_two = prepare(config, spark, two, "kafka", "{}")
        assert any(d.is_cached for d in two.cached)
    finally:
        one.release()
        two.release()

    assert (by_one.read, by_one.written, by_one.errored) == (by_two.read, by_two.written, by_two.errored)
    assert (by_one.read, by_one.written, by_one.errored) == (len(RECORDS), 3, 7)
    assert by_one.good.schema == by_two.good.schema
    assert by_one.good.sort_by("id").to_pylist() == by_two.good.sort_by("id").to_pylist()
    assert sorted(by_one.good.column("id").to_pylist()) == ["a", "b", "e"]
    assert by_one.errors.schema == by_two.errors.schema
    # the one pass explains its bad rows afterwards (Batch.explain_errors): the same reasons
    assert _without_time(by_one.errors) == _without_time(by_two.errors)
    assert all(e["reason"] for e in by_one.errors.to_pylist())
    unkeyed = [e for e in by_one.errors.to_pylist() if e["raw_payload"] == RECORDS[3]]
    assert len(unkeyed) == 1 and unkeyed[0]["source_position"].startswith(f"{topic}/")
    # sources leave error_time null in Spark; the driver stamps it when it collects them
    assert all(e["error_time"] is not None for e in by_one.errors.to_pylist())


def _compilations(spark) -> int:
    """Whole-stage code compilations so far in this JVM (Spark's CodegenMetrics)."""
    return int(spark._jvm.org.apache.spark.metrics.source.CodegenMetrics.METRIC_COMPILATION_TIME().getCount())


@pytest.mark.parametrize("read", ["poll", "stream"])
def test_the_next_batch_compiles_no_new_code(kafka, spark, tmp_path, read):
    """A micro-batch's plan must generate the same code as the previous one's: a literal
    that changes per batch (the time of ``current_timestamp()``, a committed offset) is
    inlined by Spark's code generation, so every batch compiled its stages again and the
    JVM compiled them to machine code again - ~1 s of JVM CPU per 100k-record batch."""
    topic = kafka.create_topic(f"no-recompile-{uuid.uuid4().hex[:8]}", partitions=2)
    (config,), problems = parse_pipelines(YAML.format(bootstrap=kafka.bootstrap_servers, topic=topic,
                                                      t=tmp_path / "t"))
    assert not problems
    config = config.model_copy(update={"source": config.source.model_copy(update={"max_records_per_batch": 4})})
    # good records only: a batch with bad ones runs the small jobs that explain them,
    # whose first run compiles code of its own
    kafka.produce(topic, [f'{{"id": "k{i}", "ts": {i}}}' for i in range(16)])
    source = build_source(config.source)

    def one_batch(start):
        if read == "poll":
            batch = source.read_batch(spark, start)
        else:  # as foreachBatch hands it over: the raw rows, the committed ones filtered out
            begin = source.resolve_stream_start(None)
            raw = source.read_raw(spark, begin, source.plan(start)[1])
            batch = source.batch_from_raw(source.filter_committed(raw, start), start)
        try:
            got = prepare(config, spark, batch, "kafka", "{}")
        finally:
            batch.release()
        return batch.end, got

    end, first = one_batch(None)
    end, second = one_batch(end)  # the first batch from a position (stream: filtered)
    # two more batches, each counted: code that differs per batch compiles in both, while
    # a one-off compile of another thread of this JVM (a job of an earlier test still
    # finishing on a loaded machine, seen once) lands in at most one of them
    compiled, reads = [], [first.read, second.read]
    for _ in range(2):
        before = _compilations(spark)
        after, got = one_batch(end)
        compiled.append(_compilations(spark) - before)
        assert after != end
        end = after
        reads.append(got.read)
    # each read exactly its 4 records: the stream's filter still drops committed ones
    assert reads == [4, 4, 4, 4]
    assert min(compiled) == 0, f"every next micro-batch compiled new code: {compiled}"
