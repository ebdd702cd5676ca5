"""Where the JVM jars are looked for: the variable, a checkout's .jvm, the user cache."""

from __future__ import annotations

from pathlib import Path

import pytest

from streamer import jvm
from streamer.errors import EnvironmentSetupError, StreamerError

REPO = Path(__file__).resolve().parents[2]


def _jars(folder: Path, kind: str) -> Path:
    (folder / kind).mkdir(parents=True)
    (folder / kind / "a.jar").write_bytes(b"PK")
    return folder


def test_the_variable_wins_and_is_the_only_place_looked(monkeypatch, tmp_path):
    monkeypatch.setenv(jvm.ENV_VAR, str(_jars(tmp_path / "mine", "spark")))
    assert jvm.classpath("spark") == [str(tmp_path / "mine" / "spark" / "a.jar")]
    with pytest.raises(EnvironmentSetupError, match=f"{jvm.ENV_VAR}=.*streamer setup-jvm"):
        jvm.classpath("kafka")


def test_a_checkout_uses_its_dot_jvm_then_the_user_cache(monkeypatch, tmp_path):
    monkeypatch.delenv(jvm.ENV_VAR, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert jvm.checkout_dir() == REPO / ".jvm"
    assert jvm.search_dirs() == [REPO / ".jvm", tmp_path / "mor-streamer" / "jvm"]
    _jars(jvm.cache_dir(), "only-in-cache")
    assert jvm.jvm_dir("only-in-cache") == jvm.cache_dir()


def test_no_jars_anywhere_names_the_command_and_the_variable(monkeypatch, tmp_path):
    monkeypatch.delenv(jvm.ENV_VAR, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    with pytest.raises(StreamerError) as e:
        jvm.classpath("no-such-kind")
    msg = str(e.value)
    assert "streamer setup-jvm" in msg and jvm.ENV_VAR in msg and str(jvm.cache_dir()) in msg
    assert "make jars" in msg  # this test runs from a checkout


def test_the_shipped_poms_and_demo_config_are_the_repositorys():
    shipped = REPO / "streamer" / "resources"
    assert (shipped / "maven" / "pom.xml").read_text() == (REPO / "pom.xml").read_text()
    for pom in sorted((REPO / "jvm").glob("*/pom.xml")):
        copy = shipped / "maven" / "jvm" / pom.parent.name / "pom.xml"
        assert copy.is_file() and copy.read_text() == pom.read_text(), f"copy {pom} to {copy}"
    assert (shipped / "demo.yaml").read_text() == (REPO / "configs" / "demo.yaml").read_text()
    assert (REPO / "streamer" / "py.typed").is_file()
