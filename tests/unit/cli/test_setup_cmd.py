"""`streamer setup-jvm`: the shipped poms, resolved by Maven, into the folder asked for."""

from __future__ import annotations

import shutil

import pytest

from streamer.cli import main
from streamer.cli.setup_cmd import maven_project, resolve
from streamer.errors import EnvironmentSetupError


def test_the_poms_ship_with_the_package():
    project = maven_project()
    assert (project / "pom.xml").is_file()
    assert (project / "jvm" / "spark-kafka" / "pom.xml").is_file()


def test_an_unknown_module_is_refused_before_maven_runs(tmp_path):
    with pytest.raises(EnvironmentSetupError, match="spark-kafka"):
        resolve(tmp_path, ["nope"])


def test_help_names_the_command(capsys):
    with pytest.raises(SystemExit):
        main(["setup-jvm", "--help"])
    assert "MOR_STREAMER_JVM_DIR" in capsys.readouterr().out


@pytest.mark.slow
def test_offline_resolution_fills_the_folder_and_says_where(tmp_path, capsys):
    if shutil.which("mvn") is None:  # a set-up step, never a skip
        pytest.fail("Maven (mvn) is not on PATH: install Maven and Java 17+, then run `make jars`")
    # Offline: the local Maven repository `make jars` filled; nothing is downloaded here.
    assert main(["setup-jvm", "--offline", "--dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert f"{tmp_path}/spark:" in out and f"{tmp_path}/kafka:" in out
    assert any((tmp_path / "spark").glob("spark-sql-kafka-*.jar"))
    assert f"MOR_STREAMER_JVM_DIR={tmp_path}" in out
