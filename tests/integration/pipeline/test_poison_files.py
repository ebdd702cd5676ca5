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


ORDERED = """
pipelines:
  - name: ordered
    source: {{type: files, path: "{src}", format: json}}
    target: {{path: "{t}", record_key: [id], ordering_field: ts}}
    trigger: {{mode: once}}
    engine: local
"""


def test_one_text_ordering_value_in_a_new_tables_first_batch_goes_to_the_error_table(tmp_path, spark):
    """Inference made ``ts`` text for one record's ``"yesterday"``, and the new table kept
    that type: its versions then ordered as text, and ``"9"`` beat ``"10"`` for good.
    Any record giving the ordering field as a number makes it a number; a field every
    record gives as text (an ISO time) stays text. Expected rows: what the files hold."""
    import os

    src, table = tmp_path / "in", str(tmp_path / "t")
    src.mkdir()
    files = [('{"id": "x", "ts": 1, "v": "first"}\n{"id": "bad", "ts": "yesterday", "v": "poison"}\n'),
             '{"id": "x", "ts": 10, "v": "newest"}\n', '{"id": "x", "ts": 9, "v": "older, late"}\n']
    (config,), problems = parse_pipelines(ORDERED.format(src=src, t=table))
    assert not problems
    for i, text in enumerate(files):
        (src / f"{i}.json").write_text(text)
        os.utime(src / f"{i}.json", (1000 + i, 1000 + i))
        PipelineRunner(config, spark=spark).run_once()
    rows = Table.open(table).read()
    assert str(rows.schema.field("ts").type) == "int64"
    assert [(r["id"], r["ts"], r["v"]) for r in rows.to_pylist()] == [("x", 10, "newest")]
    errors = Table.open(config.errors.path).read().to_pylist()
    assert [(e["raw_payload"], "'ts'" in e["reason"]) for e in errors] == [
        ('{"id": "bad", "ts": "yesterday", "v": "poison"}', True)]

    iso, iso_table = tmp_path / "iso", str(tmp_path / "iso_t")
    iso.mkdir()
    (iso / "a.json").write_text('{"id": "y", "ts": "2024-01-02T00:00:00Z"}\n{"id": "z", "ts": "2024-01-01"}\n')
    (config,), _ = parse_pipelines(ORDERED.format(src=iso, t=iso_table))
    assert PipelineRunner(config, spark=spark).run_once().written == 2
    assert str(Table.open(iso_table).read().schema.field("ts").type) == "string"


CAST = """
pipelines:
  - name: cast
    source: {{type: files, path: "{src}", format: json, schema: "id STRING, n STRING"}}
    transforms: [{{type: rename, columns: {{id: key}}}}, {{type: cast, columns: {{n: int}}}}]
    target: {{path: "{t}", record_key: [key]}}
    trigger: {{mode: once}}
    engine: local
"""


def test_a_transform_that_fails_on_a_value_is_named_with_the_value(tmp_path, spark):
    """Spark runs a step only when the batch is collected, so ``CAST('seven' AS INT)``
    (ANSI) failed the run naming no step: the error now names the step and Spark's reason,
    which names the value. The batch is not committed, so nothing is lost."""
    from streamer.transforms import TransformError

    src = tmp_path / "in"
    src.mkdir()
    (src / "a.json").write_text('{"id": "a", "n": "1"}\n{"id": "b", "n": "seven"}\n')
    (config,), problems = parse_pipelines(CAST.format(src=src, t=tmp_path / "t"))
    assert not problems
    with pytest.raises(TransformError, match=r"transforms\[1\] \(cast\) failed on a record of the batch: .*'seven'"):
        PipelineRunner(config, spark=spark).run_once()
