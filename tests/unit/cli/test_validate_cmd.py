"""``streamer validate`` parses SQL with Spark's own parser (parse only: no table needed)."""

from __future__ import annotations

from pathlib import Path

import pytest

from streamer.cli import main
from streamer.config import check_pipelines
from streamer.spark import SparkSqlSyntax

pytestmark = pytest.mark.integration

CONFIGS = Path(__file__).resolve().parents[3] / "configs"

BAD = """\
pipelines:
  - name: trips
    source: {{type: files, path: {src}, format: json, schema: "id BIGINT, city STRNG"}}
    transforms:
      - {{type: sql, query: "SELEC * FROM {{input}}"}}
      - type: sql
        query: |
          SELECT id,
                 city
          FROM {{input}} GROUP BY
      - {{type: filter, condition: "id > > 1"}}
      - {{type: derive, columns: {{ok: "id + 1", bad: "upper(city"}}}}
      - {{type: cast, columns: {{id: timestmp}}}}
      - {{type: sql, query: "SELECT id, upper(city) AS city FROM {{input}} WHERE id > 0"}}
    target: {{path: {table}, record_key: id, ordering_field: id}}
"""


def test_selec_is_reported_with_file_line_and_yaml_path(spark, tmp_path, capsys):
    (tmp_path / "in").mkdir()
    f = tmp_path / "p.yaml"
    f.write_text(BAD.format(src=tmp_path / "in", table=tmp_path / "t"))
    assert main(["validate", str(f)]) == 1
    err = capsys.readouterr().err.splitlines()
    assert err[-1] == "6 problem(s) found"
    want = [
        (3, "pipelines[0].source.schema: not a Spark DDL schema", 'Unsupported data type "STRNG"'),
        (5, "pipelines[0].transforms[0].query: Spark SQL does not parse", "near 'SELEC'"),
        (10, "pipelines[0].transforms[1].query: Spark SQL does not parse", "(line 3, pos"),
        (11, "pipelines[0].transforms[2].condition: Spark SQL does not parse", "near '>'"),
        (12, "pipelines[0].transforms[3].columns.bad: Spark SQL does not parse", "missing ')'"),
        (13, "pipelines[0].transforms[4].columns.id: not a Spark SQL type", '"TIMESTMP"'),
    ]
    for (line, where, detail), got in zip(want, err, strict=False):
        assert got.startswith(f"{f}:{line}: {where}: "), got
        assert detail in got, got
    assert "SQLSTATE" not in "\n".join(err)


def test_the_session_parser_needs_no_table():
    parser = SparkSqlSyntax()
    try:
        assert parser.query("SELECT a, b FROM no_such_table_anywhere WHERE c > 1") is None
        assert "SELEC" in parser.query("SELEC * FROM t")
        assert parser.data_type("decimal(10,2)") is None
    finally:
        parser.close()


def test_every_example_config_parses_with_spark(spark):
    parser = SparkSqlSyntax()
    _, problems = check_pipelines(CONFIGS, env={}, sql=parser)
    assert [p for p in problems if p.is_error] == []


@pytest.mark.slow
def test_without_a_session_a_bare_jvm_parses_and_stays_quiet(tmp_path):
    import subprocess
    import sys

    from tests.conftest import REPO

    (tmp_path / "in").mkdir()
    f = tmp_path / "p.yaml"
    f.write_text(BAD.format(src=tmp_path / "in", table=tmp_path / "t"))
    done = subprocess.run([sys.executable, "-m", "streamer", "validate", str(f)], cwd=REPO, capture_output=True,
                          text=True, timeout=300, check=False)
    assert done.returncode == 1
    lines = done.stderr.splitlines()
    assert lines[-1] == "6 problem(s) found"
    assert all(line.startswith(f"{f}:") for line in lines[:-1]), lines  # no JVM chatter
    assert "near 'SELEC'" in done.stderr
