"""target.filter_dupes: an insert pipeline drops the records whose key the table holds."""

from __future__ import annotations

import json

import pytest

from streamer.config import parse_pipelines
from streamer.pipeline.runner import PipelineRunner
from streamer.read import Table

pytestmark = pytest.mark.integration

YAML = """
pipelines:
  - name: ins
    source: {{type: files, path: "{src}", format: json}}
    target: {{path: "{t}", record_key: [id], partition_by: [city], operation: insert, filter_dupes: true}}
    trigger: {{mode: once}}
    engine: {engine}
"""


def _write(folder, name: str, rows: list[dict]) -> None:
    (folder / name).write_text("".join(json.dumps(r) + "\n" for r in rows))


@pytest.mark.parametrize("engine", ["local", "spark"])
def test_filter_dupes_drops_exactly_the_keys_the_table_holds(spark, tmp_path, engine):
    src = tmp_path / "in"
    src.mkdir()
    (config,), problems = parse_pipelines(YAML.format(src=src, t=tmp_path / "t", engine=engine))
    assert not problems
    _write(src, "1.json", [{"id": i, "city": "sf" if i % 2 else "ams", "v": 1} for i in range(10)])
    assert PipelineRunner(config, spark=spark).run_once().written == 10

    # 3, 4 and 5 are held (in both partitions); 3 in another partition is a new record
    # there (the index is per partition, as Hudi's); 10 and 11 are new
    _write(src, "2.json", [{"id": 3, "city": "sf", "v": 2}, {"id": 4, "city": "ams", "v": 2},
                           {"id": 5, "city": "sf", "v": 2}, {"id": 3, "city": "ams", "v": 2},
                           {"id": 10, "city": "ams", "v": 2}, {"id": 11, "city": "sf", "v": 2}])
    report = PipelineRunner(config, spark=spark).run_once()
    assert (report.read, report.written, report.filtered, report.errored) == (6, 3, 3, 0)
    rows = Table.open(config.target.path).read(columns=["id", "city", "v"]).to_pylist()
    assert sorted((r["id"], r["city"], r["v"]) for r in rows) == sorted(
        [(i, "sf" if i % 2 else "ams", 1) for i in range(10)] + [(3, "ams", 2), (10, "ams", 2), (11, "sf", 2)])


def test_filter_dupes_is_for_inserts():
    (_, problems) = parse_pipelines(YAML.format(src="x", t="y", engine="local").replace("operation: insert",
                                                                                       "operation: upsert"))
    assert problems and "filter_dupes is for operation insert" in problems[0].message
