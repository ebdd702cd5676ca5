"""Every example in configs/ validates, and `streamer validate` reports like it says."""

from __future__ import annotations

from pathlib import Path

import pytest

from streamer.cli import main
from streamer.config import load_pipelines, validate_file

CONFIGS = Path(__file__).resolve().parents[3] / "configs"
EXAMPLES = sorted(CONFIGS.glob("*.yaml"))


def test_the_examples_exist():
    assert {p.name for p in EXAMPLES} >= {"demo.yaml", "kafka_json.yaml", "kafka_avro.yaml", "multi_table.yaml"}


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_every_example_validates_with_an_empty_environment(path):
    assert validate_file(path, env={}) == []


def test_examples_honour_their_environment():
    (p,) = load_pipelines(CONFIGS / "kafka_json.yaml", env={"KAFKA_BOOTSTRAP": "kafka.prod:9093"})
    assert p.source.bootstrap_servers == "kafka.prod:9093"
    (a,) = load_pipelines(CONFIGS / "kafka_avro.yaml", env={"SCHEMA_REGISTRY_URL": "https://sr.example:8081"})
    assert a.source.schema_registry.url == "https://sr.example:8081"
    assert a.source.schema_registry.basic_auth_user is None  # `${X:-}` means unset, not ""
    rides, payments = load_pipelines(CONFIGS / "multi_table.yaml", env={})
    assert rides.policies.compaction.mode == "async" and payments.policies.compaction.mode == "inline"
    assert payments.policies.log_compaction.mode == "off"  # YAML's bare `off` (a boolean) still means off
    assert payments.target.key_generator_class.endswith("TimestampBasedKeyGenerator")


def test_the_whole_folder_is_one_multi_table_config():
    names = [p.name for p in load_pipelines(CONFIGS, env={})]
    assert len(names) == len(set(names)) >= 5


def test_cli_prints_one_line_per_pipeline(capsys):
    assert main(["validate", "--no-spark", str(CONFIGS / "multi_table.yaml")]) == 0
    out = capsys.readouterr().out.splitlines()
    assert [line.split(":")[0] for line in out] == ["ok  rides", "ok  payments"]


def test_cli_lists_every_problem_and_fails(tmp_path, capsys):
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "pipelines:\n"
        "  - name: x\n"
        "    source: {type: files, path: p, format: xml}\n"
        "    target: {path: q, record_key: id}\n"
        "    policies: {compaction: {trigger: {delta_commits: -3}}}\n"
    )
    assert main(["validate", str(bad)]) == 1
    err = capsys.readouterr().err
    assert f"{bad}:3: pipelines[0].source.format:" in err and "got 'xml'" in err
    assert f"{bad}:5: pipelines[0].policies.compaction.trigger.delta_commits:" in err
    assert "2 problem(s) found" in err


def test_cli_json_output(tmp_path, capsys):
    import json

    assert main(["validate", "--no-spark", "--json", str(CONFIGS / "demo.yaml")]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["valid"] and report["pipelines"][0]["name"] == "demo_trips"
