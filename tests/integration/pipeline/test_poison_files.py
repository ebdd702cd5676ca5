"""Issue 12, case 4: a JSON file whose every line is malformed does not stop a pipeline.

Spark infers a schema of the corrupt-record column alone for such a file and then refuses
every query of it; the run used to crash on every retry, nothing in the error table.
"""

from __future__ import annotations

import pytest

from streamer.config import parse_pipelines
from streamer.pipeline.runner import PipelineRunner
from streamer.read import Table

pytestmark = pytest.mark.integration

YAML = """
pipelines:
  - name: poison
    source: {{type: files, path: "{src}", format: json}}
    target: {{path: "{t}", record_key: [id], partition_by: [city]}}
    trigger: {{mode: once}}
    engine: local
"""


def test_an_all_malformed_json_file_goes_to_the_error_table(tmp_path, spark):
    src, table = tmp_path / "in", str(tmp_path / "t")
    src.mkdir()
    (src / "bad.json").write_text("not json\n{broken\n\nalso bad\n")
    (config,), problems = parse_pipelines(YAML.format(src=src, t=table))
    assert not problems
    report = PipelineRunner(config, spark=spark).run_once()
    assert (report.read, report.written, report.errored) == (3, 0, 3)
    errors = Table.open(config.errors.path).read()
    assert sorted(errors.column("raw_payload").to_pylist()) == ["also bad", "not json", "{broken"]
    assert all("malformed json" in r for r in errors.column("reason").to_pylist())
    # a good file next to it later: the pipeline goes on
    (src / "good.json").write_text('{"id": "a", "city": "sf"}\n{"id": "b", "city": "la"}\n')
    report = PipelineRunner(config, spark=spark).run_once()
    assert report.written == 2 and Table.open(table).read().num_rows == 2
