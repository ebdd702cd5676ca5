"""``run_pipelines``: a stop asked for before the first batch runs no batch."""

from __future__ import annotations

import threading

import pytest

from streamer.config import parse_pipelines
from streamer.pipeline import multi
from streamer.pipeline.runner import PipelineRunner


@pytest.mark.integration
def test_a_stop_that_lands_while_the_session_is_being_made_runs_no_batch(spark, tmp_path, monkeypatch):
    """The window of the failed CI run: Ctrl-C after the last stop check but before the
    JVM's start-up noticed signals (pyspark's import on a loaded machine). The handler only
    sets ``stop``; the runner must look at it once the session is up."""
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "a.json").write_text('{"id": 1, "ts": 1}\n')
    table = tmp_path / "lake" / "t"
    configs, problems = parse_pipelines(
        "pipelines:\n  - name: t\n"
        f"    source: {{type: files, path: {tmp_path / 'in'}, format: json}}\n"
        f"    target: {{path: {table}, record_key: id, ordering_field: ts}}\n"
        "    trigger: {mode: once}\n")
    assert not problems
    stop = threading.Event()
    made = PipelineRunner.spark

    def session_while_ctrl_c_lands(self):
        stop.set()  # what run's handler does with a first Ctrl-C
        return made.fget(self)

    monkeypatch.setattr(PipelineRunner, "spark", property(session_while_ctrl_c_lands))
    reports = []
    multi.run_pipelines(configs, once=True, spark=spark, stop=stop, on_report=reports.append)
    assert reports == []
    assert not (table / ".hoodie").exists() or not [
        f for f in (table / ".hoodie").iterdir() if f.name.endswith(".deltacommit")]
