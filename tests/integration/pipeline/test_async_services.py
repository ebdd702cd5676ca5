"""Services never stall a stream (issue 14): with the policies left at their defaults a
continuous pipeline's compactions run in its background service thread, not in the
writer after a commit (the report says which ran them, no clocks involved)."""

from __future__ import annotations

import threading

import pytest

from streamer.config import parse_pipelines
from streamer.pipeline.multi import run_pipelines
from streamer.pipeline.report import BatchReport
from streamer.read import Table

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
