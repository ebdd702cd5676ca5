"""Issue 15: Kafka lag per partition, exported after each batch, against a real broker.

A capped batch leaves records behind; the lag gauge of each partition must equal the
broker's end offset minus the position the batch committed, both over HTTP (the run's
endpoint) and in the batch's progress event.
"""

from __future__ import annotations

import json
import urllib.request
import uuid

import pytest
from prometheus_client.parser import text_string_to_metric_families

from streamer.config import parse_pipelines
from streamer.config.pipeline import MetricsConfig, ProgressConfig
from streamer.observe.run import RunObservers, RunSettings
from streamer.pipeline.multi import run_pipelines

pytestmark = [pytest.mark.integration, pytest.mark.kafka]

YAML = """
pipelines:
  - name: lagged
    source: {{type: kafka, bootstrap_servers: "{bootstrap}", topic: {topic}, format: json,
              max_records_per_batch: 4}}
    target: {{path: "{t}", record_key: [id]}}
    trigger: {{mode: once}}
    engine: local
"""


def test_lag_per_partition_is_exported_after_a_batch(kafka, spark, tmp_path):
    topic = kafka.create_topic(f"lag-{uuid.uuid4().hex[:8]}", partitions=2)
    records = [json.dumps({"id": f"k{i}", "v": i}) for i in range(12)]
    assert kafka.produce(topic, records, keys=[f"k{i}" for i in range(12)]) == 12
    configs, problems = parse_pipelines(YAML.format(bootstrap=kafka.bootstrap_servers, topic=topic,
                                                    t=tmp_path / "t"))
    assert not problems
    progress = tmp_path / "progress.jsonl"
    observers = RunObservers(configs, RunSettings(MetricsConfig(port=0, host="127.0.0.1"),
                                                  ProgressConfig(path=str(progress))))
    try:
        run_pipelines(configs, once=True, spark=spark, on_report=observers.on_report,
                      collect_layout=observers.collect_layout)
        assert observers.endpoint is not None
        with urllib.request.urlopen(f"http://127.0.0.1:{observers.endpoint.port}/metrics", timeout=5) as r:
            text = r.read().decode()
    finally:
        observers.close()
    [event] = [json.loads(x) for x in progress.read_text().splitlines()]
    assert event["status"] == "committed" and event["numInputRows"] < 12  # capped: records left behind
    ends = kafka.end_offsets(topic)
    committed = {int(p): o for p, o in event["endOffset"]["partitions"].items()}
    expected = {f"{topic}-{p}": ends[p] - committed.get(p, 0) for p in ends}
    assert {x["partition"]: x["records"] for x in event["lag"]} == expected
    assert sum(expected.values()) == 12 - event["numInputRows"]
    lag = {
        s.labels["partition"]: s.value
        for f in text_string_to_metric_families(text) if f.name == "streamer_source_lag_records"
        for s in f.samples if s.labels["pipeline"] == "lagged"
    }
    assert lag == expected
