"""Services never stall a stream (issue 14): with the policies left at their defaults a
continuous pipeline's compactions run in its background service thread, not in the
writer after a commit (the report says which ran them, no clocks involved)."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

from streamer.config import parse_pipelines
from streamer.config.policies import CompactionPolicy
from streamer.pipeline.multi import run_pipelines
from streamer.pipeline.report import BatchReport
from streamer.read import Table
from streamer.services.compaction import schedule_compaction
from tests.support.readers import hudi_rs_table

pytestmark = pytest.mark.integration

YAML = """
pipelines:
  - name: stream
    source: {{type: generator, records_per_batch: 200, num_keys: 300, update_ratio: 0.8}}
    target: {{path: "{t}", record_key: [uuid], partition_by: [city], ordering_field: ts}}
    policies: {{compaction: {{trigger: {{delta_commits: 2}}}}}}
    trigger: {{mode: continuous, interval: 200ms}}
    engine: local
"""


def test_default_policies_compact_in_the_background_in_continuous_mode(tmp_path, spark):
    table = str(tmp_path / "t")
    (config,), problems = parse_pipelines(YAML.format(t=table))
    assert not problems
    assert config.policies.compaction.mode == "inline"  # as written: unset, resolved per run
    stop = threading.Event()
    reports: list[BatchReport] = []

    def on_report(r: BatchReport) -> None:
        reports.append(r)
        if any(s.action == "compaction" and s.outcome == "completed" for s in r.services):
            stop.set()

    run_pipelines([config], once=False, stop=stop, spark=spark, on_report=on_report, timeout_s=180)
    runs = [s for r in reports for s in r.services]
    compactions = [s for s in runs if s.action == "compaction" and s.outcome == "completed"]
    assert compactions, f"no compaction completed in {len(reports)} batches: {runs}"
    assert all(s.mode == "async" for s in compactions)
    # the writer's part is scheduling only (under the writers' lock, between two commits)
    assert all(s.outcome == "scheduled" for s in runs if s.mode == "inline" and s.action == "compaction")
    done = {i.timestamp for i in Table.open(table).timeline.completed() if i.action == "commit"}
    assert {s.instant for s in compactions} <= done


FILES_YAML = """
pipelines:
  - name: resumed
    source: {{type: files, path: "{src}", format: json, max_files_per_batch: 1}}
    target: {{path: "{t}", record_key: [id], partition_by: [city], ordering_field: v}}
    policies: {{compaction: {{trigger: {{delta_commits: 50}}}}}}
    trigger: {{mode: {mode}, interval: 200ms}}
    engine: local
"""


def _write_file(folder: Path, name: str, bump: int) -> None:
    rows = [{"id": f"r{i}", "city": "sf" if i % 2 else "la", "v": i + bump} for i in range(10)]
    (folder / name).write_text("".join(json.dumps(r) + "\n" for r in rows))


def _table_with_a_pending_compaction(tmp_path: Path, spark) -> tuple[Path, str, str]:
    """A table of two commits (inserts, then updates of every key) and a compaction plan
    that no run executed, as a run killed after planning leaves it."""
    src, table = tmp_path / "in", str(tmp_path / "t")
    src.mkdir()
    _write_file(src, "a.json", 0)
    _write_file(src, "b.json", 100)
    (config,), problems = parse_pipelines(FILES_YAML.format(src=src, t=table, mode="available_now"))
    assert not problems
    written: list[BatchReport] = []
    run_pipelines([config], once=False, spark=spark, on_report=written.append)
    assert [r.written for r in written] == [10, 10]
    plan = schedule_compaction(Table.open(table), CompactionPolicy(), force=True)
    assert plan is not None
    assert [i.timestamp for i in Table.open(table).timeline.pending_compactions()] == [plan.timestamp]
    return src, table, plan.timestamp


def _compacted(table: str, plan: str) -> bool:
    t = Table.open(table)
    return plan in {i.timestamp for i in t.timeline.completed() if i.action == "commit"}


def _assert_rows(table: str) -> None:
    """Our reader and hudi-rs (which reads a pending compaction's file groups wrongly, so
    only once it completed) both return the second file's values."""
    for name, rows in (("ours", Table.open(table).read()), ("hudi-rs", hudi_rs_table(table))):
        assert rows is not None, name
        got = set(zip(rows.column("id").to_pylist(), rows.column("v").to_pylist(), strict=True))
        assert got == _expected_rows(), name


def _expected_rows() -> set[tuple[str, int]]:
    return {(f"r{i}", i + 100) for i in range(10)}  # the second file's values, written from scratch


def test_a_run_with_nothing_to_read_completes_the_compaction_an_earlier_run_left_pending(tmp_path, spark):
    src, table, plan = _table_with_a_pending_compaction(tmp_path, spark)
    (config,), _ = parse_pipelines(FILES_YAML.format(src=src, t=table, mode="once"))
    reports: list[BatchReport] = []
    run_pipelines([config], once=False, spark=spark, on_report=reports.append)
    assert [r.skipped for r in reports] == ["no new data"]
    assert _compacted(table, plan), "the pending compaction is still pending after a run"
    _assert_rows(table)


def test_a_continuous_run_compacts_a_pending_plan_before_anything_new_arrives(tmp_path, spark):
    src, table, plan = _table_with_a_pending_compaction(tmp_path, spark)
    (config,), _ = parse_pipelines(FILES_YAML.format(src=src, t=table, mode="continuous"))
    stop = threading.Event()
    reports: list[BatchReport] = []

    def on_report(r: BatchReport) -> None:
        reports.append(r)
        if _compacted(table, plan) or len(reports) >= 300:
            stop.set()

    run_pipelines([config], once=False, stop=stop, spark=spark, on_report=on_report, timeout_s=120)
    assert all(r.skipped == "no new data" for r in reports)
    assert _compacted(table, plan), f"the pending compaction is still pending after {len(reports)} empty batches"
    _assert_rows(table)
