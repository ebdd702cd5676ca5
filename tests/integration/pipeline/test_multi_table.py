"""One YAML, two pipelines, two tables, each with its own table-service policies."""

from __future__ import annotations

import os
import uuid

import pytest

from streamer.config import parse_pipelines
from streamer.pipeline.multi import run_pipelines
from tests.support.trip_model import (
    TripModel,
    assert_matches_model,
    kafka_pipeline_yaml,
    produce_records,
)

pytestmark = [pytest.mark.integration, pytest.mark.kafka]

ROUNDS = 4


def _instants(path: str, suffix: str) -> set[str]:
    return {n.split(".", 1)[0] for n in os.listdir(os.path.join(path, ".hoodie")) if n.endswith(suffix)}


def test_two_pipelines_two_tables_own_policies(kafka, spark, tmp_path):
    topics = {n: kafka.create_topic(f"multi-{n}-{uuid.uuid4().hex[:6]}", partitions=2) for n in ("a", "b")}
    lake = str(tmp_path / "lake")
    yaml = "pipelines:\n" + kafka_pipeline_yaml(
        "table_a", kafka.bootstrap_servers, topics["a"], lake, trigger="{mode: once}",
        policies="{log_compaction: {mode: inline, min_blocks: 3}, compaction: {mode: off}, clean: {mode: off}, "
        "archive: {mode: off}}",
    ) + kafka_pipeline_yaml(
        "table_b", kafka.bootstrap_servers, topics["b"], lake, trigger="{mode: once}",
        policies="{log_compaction: {mode: off}, compaction: {mode: off}, clean: {mode: off}, archive: {mode: off}}",
    )
    configs, problems = parse_pipelines(yaml)
    assert not problems and [c.name for c in configs] == ["table_a", "table_b"]
    # Updates of the same few keys every round: each round appends a log block per file group.
    models = {n: TripModel(seed=i, key_space=200, delete_ratio=0.05, update_ratio=0.9) for i, n in enumerate("ab")}
    reports = []
    for _ in range(ROUNDS):
        for n in "ab":
            produce_records(kafka, topics[n], models[n].records(400))
        runners = run_pipelines(configs, once=True, spark=spark, on_report=reports.append)
        assert [r.config.name for r in runners] == ["table_a", "table_b"]
    per_table = {n: [r for r in reports if r.pipeline == n and r.instant] for n in ("table_a", "table_b")}
    assert all(len(v) == ROUNDS for v in per_table.values()), per_table

    path_a, path_b = (c.target.path for c in configs)
    assert_matches_model(path_a, models["a"].expected())
    assert_matches_model(path_b, models["b"].expected())

    # table_a ran inline log compaction (a completed deltacommit per plan); table_b never did.
    planned_a = _instants(path_a, ".logcompaction.requested")
    assert planned_a, "table_a: no log compaction was scheduled"
    assert planned_a <= _instants(path_a, ".deltacommit"), "table_a: a log compaction plan did not complete"
    assert not _instants(path_b, ".logcompaction.requested")
    assert len(_instants(path_b, ".deltacommit")) == ROUNDS
    assert len(_instants(path_a, ".deltacommit")) == ROUNDS + len(planned_a)
