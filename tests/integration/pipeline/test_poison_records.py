"""Issue 12, cases 4-6: poison records never stop a pipeline, and the error table is exact.

Each test reproduces a failure of the files source as it was and checks what a user
gets now: the good rows written, every bad record in the error table once, under its
own position (file:line), with its original bytes and a reason naming the problem, and
``read == written + errored + filtered`` agreeing with the error table's rows.
"""

from __future__ import annotations

import base64
import json

import pytest

from streamer.config import parse_pipelines
from streamer.pipeline.runner import PipelineRunner
from streamer.read import Table

pytestmark = pytest.mark.integration

YAML = """
pipelines:
  - name: poison
    source: {{type: files, path: "{src}", format: {fmt}{extra}}}
    target: {{path: "{t}", record_key: [id]{target_extra}}}
    trigger: {{mode: once}}
    engine: local
"""


def _pipeline(tmp_path, fmt: str = "json", extra: str = "", target_extra: str = ""):
    src = tmp_path / "in"
    src.mkdir(exist_ok=True)
    text = YAML.format(src=src, t=tmp_path / "t", fmt=fmt, extra=extra, target_extra=target_extra)
    (config,), problems = parse_pipelines(text)
    assert not problems
    return src, config


def _errors(config) -> list[dict]:
    return sorted(Table.open(config.errors.path).read().to_pylist(), key=lambda e: e["source_position"])


def _consistent(report, config) -> None:
    assert report.read == report.written + report.errored + report.filtered
    assert len(_errors(config)) == report.errored


def test_one_wrong_typed_value_does_not_block_the_pipeline(tmp_path, spark):
    """Case 5: ``{"ts": "not-a-number"}`` used to make the batch's ``ts`` a string, and
    the table refused the batch (int64 -> string) on every retry."""
    src, config = _pipeline(tmp_path, target_extra=", ordering_field: ts")
    (src / "1.json").write_text('{"id": "a", "ts": 1}\n{"id": "b", "ts": 2}\n')
    assert PipelineRunner(config, spark=spark).run_once().written == 2
    bad_line = '{"id": "x",  "ts": "not-a-number"}'
    (src / "2.json").write_text(f'{{"id": "c", "ts": 3}}\n{bad_line}\n{{"id": "d", "ts": 4}}\n')
    report = PipelineRunner(config, spark=spark).run_once()
    assert (report.read, report.written, report.errored) == (3, 2, 1)
    rows = Table.open(config.target.path).read()
    assert sorted(rows.column("id").to_pylist()) == ["a", "b", "c", "d"]
    (err,) = _errors(config)
    assert err["raw_payload"] == bad_line and err["payload_encoding"] == "utf-8"
    assert err["source_position"] == f"{src / '2.json'}:2"
    assert "field 'ts'" in err["reason"] and "bigint" in err["reason"] and "not-a-number" in err["reason"]
    _consistent(report, config)


def test_a_declared_schema_wins_over_inference(tmp_path, spark):
    src, config = _pipeline(tmp_path, extra=', schema: "id STRING, n BIGINT"')
    (src / "1.json").write_text('{"id": "a", "n": "many"}\n{"id": "b", "n": 2}\n')
    report = PipelineRunner(config, spark=spark).run_once()
    assert (report.written, report.errored) == (1, 1)
    (err,) = _errors(config)
    assert err["reason"].startswith("field 'n'") and err["raw_payload"] == '{"id": "a", "n": "many"}'


def test_oversized_and_undecodable_records_go_to_the_error_table(tmp_path, spark):
    """Case 4: a huge record and a non-UTF-8 byte used to crash or stick the run."""
    src, config = _pipeline(tmp_path, extra=", max_record_bytes: 64KiB")
    huge = json.dumps({"id": "huge", "pad": "x" * (3 * 1024 * 1024)}).encode()
    undecodable = b'{"id": "latin1", "name": "caf\xe9"}'
    (src / "1.json").write_bytes(b'{"id": "a"}\n' + huge + b"\n" + undecodable + b'\n{"id": "b"}\n')
    report = PipelineRunner(config, spark=spark).run_once()
    assert (report.read, report.written, report.errored) == (4, 2, 2)
    big, latin = _errors(config)
    assert big["source_position"].endswith("1.json:2")
    assert f"record of {len(huge)} bytes exceeds source.max_record_bytes (65536)" in big["reason"]
    assert big["raw_payload"].encode() == huge[: 64 * 1024]
    assert latin["payload_encoding"] == "base64" and base64.b64decode(latin["raw_payload"]) == undecodable
    assert "UTF-8" in latin["reason"]
    _consistent(report, config)


def test_identical_bad_lines_are_one_error_row_each(tmp_path, spark):
    """Case 6: two identical malformed lines got one id and one row (7 counted, 6 stored)."""
    src, config = _pipeline(tmp_path)
    (src / "1.json").write_text('{"id": "a"}\n{broken\n{broken\n{"id": "b"}\n{broken\n')
    (src / "2.json").write_text("{broken\n")
    report = PipelineRunner(config, spark=spark).run_once()
    assert (report.read, report.written, report.errored) == (6, 2, 4)
    errors = _errors(config)
    assert [e["source_position"].rsplit("/", 1)[1] for e in errors] == ["1.json:2", "1.json:3", "1.json:5", "2.json:1"]
    assert {e["raw_payload"] for e in errors} == {"{broken"}
    _consistent(report, config)


def test_a_null_key_record_keeps_its_original_line(tmp_path, spark):
    """Case 6: the payload of a record with a null key was a JSON re-serialisation of the
    decoded row, and two such records of one batch shared the batch's position."""
    src, config = _pipeline(tmp_path)
    lines = ['{"id": null,   "v": 1}', '{"v": 1, "id": null}', '{"v": 1, "id": null}', '{"id": "ok", "v": 2}']
    (src / "1.json").write_text("\n".join(lines) + "\n")
    report = PipelineRunner(config, spark=spark).run_once()
    assert (report.read, report.written, report.errored) == (4, 1, 3)
    errors = _errors(config)
    assert [e["raw_payload"] for e in errors] == lines[:3]
    assert [e["source_position"].rsplit(":", 1)[1] for e in errors] == ["1", "2", "3"]
    assert all("record key field 'id'" in e["reason"] for e in errors)
    _consistent(report, config)


def test_csv_rows_with_missing_or_extra_columns_are_errors(tmp_path, spark):
    """Case 6: a missing column used to become null and an extra one was dropped."""
    src, config = _pipeline(tmp_path, fmt="csv")
    (src / "1.csv").write_text("id,n,name\na,1,x\nb,2\nc,3,z,surplus\nd,4,w\n")
    report = PipelineRunner(config, spark=spark).run_once()
    assert (report.read, report.written, report.errored) == (4, 2, 2)
    assert sorted(Table.open(config.target.path).read().column("id").to_pylist()) == ["a", "d"]
    errors = _errors(config)
    assert [e["raw_payload"] for e in errors] == ["b,2", "c,3,z,surplus"]
    assert all(e["reason"].startswith("malformed csv record: not 3 columns") for e in errors)
    _consistent(report, config)


def test_a_column_a_transform_converts_keeps_its_source_type(tmp_path, spark):
    """The table's types apply to the source's columns only where the transforms pass a
    column through: here ``d`` is a string in the files and a date in the table."""
    src, config = _pipeline(tmp_path)
    (config,), _ = parse_pipelines(
        YAML.format(src=src, t=tmp_path / "t", fmt="json", extra="", target_extra="")
        + """    transforms:\n      - {type: sql, query: "SELECT id, to_date(d, 'yyyy/MM/dd') AS d, n FROM {input}"}\n"""
    )
    for i in (1, 2):
        (src / f"{i}.json").write_text(f'{{"id": "r{i}", "d": "2024/01/0{i}", "n": {i}}}\n{{"id": null, "d": "2024/02/0{i}", "n": 0}}\n')
        report = PipelineRunner(config, spark=spark).run_once()
        assert (report.written, report.errored) == (1, 1), report
    assert sorted(Table.open(config.target.path).read().column("id").to_pylist()) == ["r1", "r2"]
    errors = _errors(config)
    assert len(errors) == 2 and len({e["error_id"] for e in errors}) == 2
