"""A standby of a files pipeline warms its read path without writing or moving a position.

``streamer run --standby`` waits with its Spark session up and calls ``warm_up()`` once;
for a polling source (files) that reads and decodes one file after the stored position
(the first batch after a takeover then costs a batch, not a JVM's code generation and
Python worker start). It must commit nothing and leave the runner to read its position
when it starts: the active holder moves the position on meanwhile.
"""

from __future__ import annotations

import json

import pytest

from streamer.config import parse_pipelines
from streamer.pipeline.runner import PipelineRunner
from streamer.read import Table

pytestmark = pytest.mark.integration

YAML = """
pipelines:
  - name: warm
    source: {{type: files, path: "{src}", format: json}}
    target: {{path: "{table}", record_key: [id], partition_by: [], ordering_field: ts}}
    trigger: {{mode: once}}
    engine: local
"""


def _drop(folder, name: str, ids: range) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text("".join(json.dumps({"id": f"k{i}", "ts": i}) + "\n" for i in ids))


def test_warm_up_reads_without_writing(tmp_path, spark):
    src, table = tmp_path / "src", tmp_path / "t"
    (config,), problems = parse_pipelines(YAML.format(src=src, table=table))
    assert not problems
    _drop(src, "a.json", range(0, 5))
    standby = PipelineRunner(config, spark=spark)
    standby.warm_up()  # no table yet: reads the first file, writes nothing
    assert not table.exists()
    assert PipelineRunner(config, spark=spark).run_once().written == 5  # the active holder
    _drop(src, "b.json", range(5, 8))
    standby.warm_up()  # reads b.json (after the stored position), writes nothing
    assert len(Table.open(str(table)).timeline.completed()) == 1
    assert standby.run_once().written == 3, "the standby starts from the position the holder left"
    assert sorted(Table.open(str(table)).read().column("id").to_pylist()) == [f"k{i}" for i in range(8)]
