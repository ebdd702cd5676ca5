"""A Kafka pipeline's consumer group defaults to one per pipeline, so two pipelines reading
one topic into two tables never overwrite each other's mirrored offsets."""

from __future__ import annotations

from streamer.config import parse_pipelines

YAML = """
pipelines:
  - name: {name}
    source: {{type: kafka, bootstrap_servers: "127.0.0.1:9092", topic: trips, format: json,
              schema: "uuid STRING, ts BIGINT"{extra}}}
    target: {{path: lake/{name}, record_key: uuid, ordering_field: ts}}
"""


def _source(name: str, extra: str = ""):
    (config,), problems = parse_pipelines(YAML.format(name=name, extra=extra))
    assert not problems
    return config.source


def test_default_group_is_per_pipeline():
    assert _source("trips-a").commit_group_id == "mor-streamer-trips-a"
    assert _source("trips-b").commit_group_id == "mor-streamer-trips-b"


def test_an_explicit_group_wins():
    assert _source("trips-a", ", group_id: etl").commit_group_id == "etl"
