"""Issue 12: a pipeline that fails does not stop the other pipelines of its YAML.

Before, ``multi.py`` re-raised the first exception: the pipelines after a broken one
never ran (run once) or were stopped (continuous), and which one broke was buried in a
traceback. Now each fails alone, with one line naming it, and the exit code says so.
"""

from __future__ import annotations

import threading

import pytest

from streamer.cli import main
from streamer.config import parse_pipelines
from streamer.pipeline.multi import PipelinesFailedError, run_pipelines
from streamer.read import Table

pytestmark = pytest.mark.integration

PIPELINE = """
  - name: {name}
    source: {{type: files, path: "{src}", format: json}}
    target: {{path: "{t}", record_key: [id]}}
    trigger: {{mode: {mode}, interval: 200ms}}
    engine: local
"""


def _yaml(tmp_path, mode: str = "once") -> tuple[str, str, str]:
    good_src = tmp_path / "good_in"
    good_src.mkdir()
    (good_src / "a.json").write_text('{"id": "a", "v": 1}\n{"id": "b", "v": 2}\n')
    broken_t, good_t = str(tmp_path / "broken"), str(tmp_path / "good")
    (tmp_path / "broken").write_text("a file where the table's folder should be: every commit fails")
    text = "pipelines:" + PIPELINE.format(name="broken", src=good_src, t=broken_t, mode=mode) + PIPELINE.format(
        name="healthy", src=good_src, t=good_t, mode=mode
    )
    return text, broken_t, good_t


def test_a_failing_pipeline_does_not_stop_the_next_one(tmp_path, spark):
    text, _, good_t = _yaml(tmp_path)
    configs, problems = parse_pipelines(text)
    assert not problems
    seen: list[str] = []
    with pytest.raises(PipelinesFailedError) as info:
        run_pipelines(configs, once=True, spark=spark, on_failure=lambda name, e: seen.append(name))
    assert seen == ["broken"] and list(info.value.failures) == ["broken"]
    message = str(info.value)
    assert message.startswith("pipeline broken failed: ") and "\n" not in message
    assert Table.open(good_t).read().num_rows == 2  # the healthy pipeline after it ran


def test_continuous_pipelines_fail_alone(tmp_path, spark):
    text, _, good_t = _yaml(tmp_path, mode="continuous")
    configs, _ = parse_pipelines(text)
    with pytest.raises(PipelinesFailedError) as info:
        run_pipelines(configs, once=False, spark=spark, stop=threading.Event(), timeout_s=4)
    assert list(info.value.failures) == ["broken"]
    assert Table.open(good_t).read().num_rows == 2


def test_streamer_run_exits_non_zero_when_a_pipeline_failed(tmp_path, spark, capsys):
    text, _, good_t = _yaml(tmp_path)
    path = tmp_path / "p.yaml"
    path.write_text(text)
    assert main(["run", str(path), "--once"]) == 1
    err = capsys.readouterr().err
    assert "error: pipeline broken failed: " in err
    assert "1 of 2 pipeline(s) failed (broken)" in err
    assert Table.open(good_t).read().num_rows == 2
