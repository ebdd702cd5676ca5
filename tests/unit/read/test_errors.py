"""Clear errors that name the path: not a table, unsupported version, missing file."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from streamer.errors import MissingFileError, NotAHudiTableError, UnsupportedTableVersionError
from streamer.read import QueryError, Table
from tests.support.fixture_tables import table_path


def test_not_a_table_names_path(tmp_path):
    with pytest.raises(NotAHudiTableError) as e:
        Table.open(str(tmp_path))
    assert str(tmp_path) in str(e.value)


def test_unsupported_version_names_path(hudi_fixtures_dir, tmp_path):
    dst = tmp_path / "t"
    shutil.copytree(table_path(hudi_fixtures_dir, "sample_table__mor__parquet__v6_empty"), dst)
    props = dst / ".hoodie" / "hoodie.properties"
    props.write_text(props.read_text().replace("hoodie.table.version=6", "hoodie.table.version=3"))
    with pytest.raises(UnsupportedTableVersionError) as e:
        Table.open(str(dst))
    assert str(props) in str(e.value) and "3" in str(e.value)


def test_missing_file_of_completed_instant_names_path(hudi_fixtures_dir, tmp_path):
    dst = tmp_path / "t"
    shutil.copytree(table_path(hudi_fixtures_dir, "quickstart_trips_table__mor__avro__v6_trips_8i1u"), dst)
    victim = next(Path(dst, "city=sao_paulo").glob("*.parquet"))
    victim.unlink()
    with pytest.raises(MissingFileError) as e:
        Table.open(str(dst)).read()
    assert str(victim) in str(e.value)


def test_missing_log_file_names_path(hudi_fixtures_dir, tmp_path):
    dst = tmp_path / "t"
    shutil.copytree(table_path(hudi_fixtures_dir, "quickstart_trips_table__mor__avro__v6_trips_8i1u"), dst)
    victim = next(Path(dst, "city=san_francisco").glob(".*.log.*"))
    victim.unlink()
    with pytest.raises(MissingFileError) as e:
        Table.open(str(dst)).read()
    assert victim.name in str(e.value)


def test_bad_query_arguments(hudi_fixtures_dir):
    t = Table.open(table_path(hudi_fixtures_dir, "sample_table__mor__parquet__v6_nonpartitioned"))
    with pytest.raises(QueryError):
        t.read(query="streaming")
    with pytest.raises(QueryError):
        t.read(as_of="yesterday")


def test_cli_reports_error_with_path(tmp_path, capsys):
    from streamer.cli import main

    assert main(["read", str(tmp_path)]) == 2
    assert str(tmp_path) in capsys.readouterr().err


def test_time_travel_before_the_first_commit_names_it(hudi_fixtures_dir):
    """An empty answer would look like an empty table; the library says why there is none."""
    t = Table.open(table_path(hudi_fixtures_dir, "quickstart_trips_table__mor__avro__v6_trips_8i1u"))
    first = t.timeline.completed_writes()[0].timestamp
    with pytest.raises(QueryError, match=f"before the first commit {first} .*did not exist yet"):
        t.read(as_of="20000101000000000")
    assert t.read(as_of=first).num_rows > 0
