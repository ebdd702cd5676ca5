"""Checks beyond shape without Spark: source folders (a warning in validate, an error at run)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from streamer.cli import main
from streamer.config import check_pipelines, load_pipelines
from streamer.config.preflight import require_source_folders
from streamer.errors import ConfigError
from tests.conftest import REPO

YAML = """\
pipelines:
  - name: trips
    source:
      type: files
      path: {folder}
      format: json
    transforms:
      - {{type: sql, query: "SELECT * FROM {{input}}"}}
    target: {{path: {table}, record_key: id, ordering_field: ts}}
"""


def _write(tmp_path, folder: str) -> str:
    f = tmp_path / "p.yaml"
    f.write_text(YAML.format(folder=folder, table=tmp_path / "lake" / "t"))
    return str(f)


def test_a_missing_source_folder_is_a_warning_with_file_line_and_path(tmp_path):
    f = _write(tmp_path, str(tmp_path / "landing"))
    pipelines, problems = check_pipelines(f, folders=True)
    assert [p.name for p in pipelines] == ["trips"]  # a warning does not make the file invalid
    (w,) = problems
    assert (w.file, w.line, w.path, w.severity) == (f, 5, "pipelines[0].source.path", "warning")
    assert str(w).startswith(f"{f}:5: pipelines[0].source.path: warning: folder {tmp_path}/landing does not exist")


def test_a_file_where_the_folder_should_be(tmp_path):
    (tmp_path / "landing").write_text("x")
    _, (w,) = check_pipelines(_write(tmp_path, f"file:{tmp_path}/landing"), folders=True)
    assert "is a file, not a folder" in w.message


def test_an_existing_folder_and_remote_folders_are_fine(tmp_path):
    (tmp_path / "landing").mkdir()
    assert check_pipelines(_write(tmp_path, str(tmp_path / "landing")), folders=True)[1] == []
    assert check_pipelines(_write(tmp_path, "s3://bucket/landing"), folders=True)[1] == []


def test_validate_warns_and_exits_0(tmp_path, capsys):
    f = _write(tmp_path, str(tmp_path / "landing"))
    assert main(["validate", "--no-spark", f]) == 0
    out, err = capsys.readouterr()
    assert out.startswith("ok  trips") and "warning: folder" in err and "does not exist" in err
    assert main(["validate", "--no-spark", "--json", f]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["valid"] and report["problems"][0]["severity"] == "warning"
    assert report["sql_parsed_by_spark"] is False


def test_run_refuses_a_missing_folder_naming_it(tmp_path):
    (config,) = load_pipelines(_write(tmp_path, "landing/trips"))
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        with pytest.raises(ConfigError, match=r"pipeline trips: source.path: folder landing/trips "
                                              rf"\({tmp_path}/landing/trips\) does not exist"):
            require_source_folders([config])
        (tmp_path / "landing" / "trips").mkdir(parents=True)
        require_source_folders([config])
    finally:
        os.chdir(cwd)


def test_without_java_the_sql_check_is_skipped_with_a_note(tmp_path):
    (tmp_path / "landing").mkdir()
    f = _write(tmp_path, str(tmp_path / "landing"))
    env = {k: v for k, v in os.environ.items() if k != "JAVA_HOME"}
    env.update(PATH=str(tmp_path), PYTHONPATH=str(REPO))
    done = subprocess.run([sys.executable, "-m", "streamer", "validate", f], env=env, capture_output=True,
                          text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("ok  trips")
    assert "note: SQL was not parsed with Spark (no `java` on PATH" in done.stderr


def test_two_spellings_of_one_target_are_one_table(tmp_path):
    from streamer.config import parse_pipelines

    text = f"""\
pipelines:
  - name: a
    source: {{type: generator, records_per_batch: 1}}
    target: {{path: "file:{tmp_path}/t", record_key: id, ordering_field: ts}}
  - name: b
    source: {{type: generator, records_per_batch: 1}}
    target: {{path: "{tmp_path}/t/", record_key: other, ordering_field: ts}}
"""
    _, problems = parse_pipelines(text)
    assert any("also written by pipelines[0]" in p.message for p in problems), problems


PYTHON_STEP = """\
pipelines:
  - name: trips
    source: {{type: files, path: {folder}, format: json}}
    transforms:
      - {{type: python, callable: "{spec}"}}
    target: {{path: {table}, record_key: id, ordering_field: ts}}
"""


@pytest.mark.parametrize(("spec", "finding"), [
    ("tests.unit.config.no_such_module:f", "ImportError: cannot import module 'tests.unit.config.no_such_module'"),
    ("json:no_such_function", "ImportError: module 'json' has no 'no_such_function'"),
    ("json:decoder.JSONDecodeError", None),
    ("json:dumps", None),
])
def test_a_python_step_is_imported_by_validate_naming_file_line_and_step(tmp_path, spec, finding):
    f = tmp_path / "p.yaml"
    f.write_text(PYTHON_STEP.format(folder=tmp_path, table=tmp_path / "t", spec=spec))
    _, problems = check_pipelines(str(f), folders=True)
    if finding is None:
        assert problems == []
        return
    (p,) = problems
    assert (p.line, p.path, p.severity) == (5, "pipelines[0].transforms[0].callable", "error")
    assert p.message.startswith(finding), p.message


def test_a_python_step_needs_module_colon_name(tmp_path):
    f = tmp_path / "p.yaml"
    f.write_text(PYTHON_STEP.format(folder=tmp_path, table=tmp_path / "t", spec="json.dumps"))
    with pytest.raises(ConfigError, match=r"p\.yaml:5: .*transforms\[0\]\.callable.*'json\.dumps' is not "
                                          r"'package\.module:name'"):
        load_pipelines(f)
