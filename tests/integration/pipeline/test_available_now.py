"""``trigger.mode: available_now`` (issue 14): everything available when the run starts,
in capped batches, then stop; what arrives meanwhile is left to the next run.

"Meanwhile" is made deterministic without clocks: new input is added from the report
callback of the run's first batch, i.e. after the run fixed its end and before it ends.
"""

from __future__ import annotations

import json
import os
import uuid

import pytest

from streamer.config import parse_pipelines
from streamer.pipeline.multi import run_pipelines
from streamer.pipeline.report import BatchReport
from streamer.read import Table
from tests.support.trip_model import (
    TripModel,
    assert_matches_model,
    kafka_pipeline_yaml,
    produce_records,
)

pytestmark = pytest.mark.integration

FILES_YAML = """
pipelines:
  - name: scheduled
    source: {{type: files, path: "{src}", format: json, max_files_per_batch: 1}}
    target: {{path: "{t}", record_key: [id], partition_by: [city]}}
    trigger: {{mode: {mode}}}
    engine: local
"""


def _deltacommits(path: str) -> list[str]:
    return sorted(n for n in os.listdir(os.path.join(path, ".hoodie")) if n.endswith(".deltacommit"))


def _write_file(folder, name: str, first_id: int, n: int) -> None:
    rows = [{"id": f"r{i}", "city": "sf" if i % 2 else "la", "v": i} for i in range(first_id, first_id + n)]
    (folder / name).write_text("".join(json.dumps(r) + "\n" for r in rows))


def test_files_backlog_in_capped_batches_then_stop_and_a_later_file_waits(tmp_path, spark):
    src, table = tmp_path / "in", str(tmp_path / "t")
    src.mkdir()
    for i in range(3):
        _write_file(src, f"part-{i}.json", i * 10, 10)
    (config,), problems = parse_pipelines(FILES_YAML.format(src=src, t=table, mode="available_now"))
    assert not problems
    reports: list[BatchReport] = []

    def on_report(r: BatchReport) -> None:
        reports.append(r)
        if len(reports) == 1:  # lands after the run fixed its end: the next run's
            _write_file(src, "late.json", 100, 5)

    run_pipelines([config], once=False, spark=spark, on_report=on_report)
    assert [r.written for r in reports] == [10, 10, 10]  # capped: one file per batch
    assert all(r.instant for r in reports)
    assert Table.open(table).read().num_rows == 30

    second: list[BatchReport] = []
    run_pipelines([config], once=False, spark=spark, on_report=second.append)
    assert [r.written for r in second] == [5]
    assert Table.open(table).read().num_rows == 35

    third: list[BatchReport] = []
    run_pipelines([config], once=False, spark=spark, on_report=third.append)
    assert [r.status for r in third] == ["skipped"]
    assert len(_deltacommits(table)) == 4


def test_available_now_flag_overrides_a_once_trigger_and_exits_0(tmp_path, spark):
    """``streamer run --available-now`` on a ``once`` pipeline: all three files, exit 0;
    run again with nothing new: exit 0, no commit."""
    from streamer.cli import main

    src, table = tmp_path / "in", str(tmp_path / "t")
    src.mkdir()
    for i in range(3):
        _write_file(src, f"part-{i}.json", i * 10, 10)
    yaml = tmp_path / "p.yaml"
    yaml.write_text(FILES_YAML.format(src=src, t=table, mode="once"))
    assert main(["run", str(yaml), "--available-now"]) == 0
    assert Table.open(table).read().num_rows == 30
    assert len(_deltacommits(table)) == 3
    assert main(["run", str(yaml), "--available-now"]) == 0
    assert len(_deltacommits(table)) == 3


def test_available_now_runs_default_compaction_inline(tmp_path, spark):
    """Policies left unset are inline for a run that stops: the compaction due after the
    5th delta commit has run (not just been scheduled) when the run returns."""
    src, table = tmp_path / "in", str(tmp_path / "t")
    src.mkdir()
    for i in range(5):
        _write_file(src, f"part-{i}.json", 0, 10)  # the same keys: updates, log files
    (config,), problems = parse_pipelines(FILES_YAML.format(src=src, t=table, mode="available_now"))
    assert not problems
    reports: list[BatchReport] = []
    run_pipelines([config], once=False, spark=spark, on_report=reports.append)
    assert len(reports) == 5
    runs = [s for r in reports for s in r.services]
    assert any(s.action == "compaction" and s.outcome == "completed" and s.mode == "inline" for s in runs)
    assert Table.open(table).timeline.pending_compactions() == []


@pytest.mark.kafka
def test_kafka_backlog_is_committed_and_records_produced_meanwhile_wait(kafka, spark, tmp_path):
    topic = kafka.create_topic(f"avail-{uuid.uuid4().hex[:8]}", partitions=3)
    lake = str(tmp_path / "lake")
    (config,), problems = parse_pipelines("pipelines:\n" + kafka_pipeline_yaml(
        "avail", kafka.bootstrap_servers, topic, lake, trigger="{mode: available_now}",
        source_extra=", max_records_per_batch: 1000"))
    assert not problems
    model = TripModel(seed=11, key_space=2_000)
    produce_records(kafka, topic, model.records(3_000))
    backlog = model.expected()
    end_at_start = kafka.end_offsets(topic)
    reports: list[BatchReport] = []

    def on_report(r: BatchReport) -> None:
        reports.append(r)
        if len(reports) == 1:
            produce_records(kafka, topic, model.records(500))

    run_pipelines([config], once=False, spark=spark, on_report=on_report)
    assert [r.read for r in reports] == [1_000, 1_000, 1_000]
    assert json.loads(reports[-1].position)["partitions"] == {str(p): o for p, o in end_at_start.items()}
    assert_matches_model(config.target.path, backlog)

    second: list[BatchReport] = []
    run_pipelines([config], once=False, spark=spark, on_report=second.append)
    assert [r.read for r in second] == [500]
    assert_matches_model(config.target.path, model.expected())
    third: list[BatchReport] = []
    run_pipelines([config], once=False, spark=spark, on_report=third.append)
    assert [r.status for r in third] == ["skipped"]
