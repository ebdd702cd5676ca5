"""Run-wide ``metrics``/``progress``: top level of the YAML, inherited, overridden by flags."""

from __future__ import annotations

import argparse

import pytest

from streamer.cli.run_cmd import _settings, register
from streamer.config import parse_pipelines
from streamer.errors import ConfigError
from streamer.observe.run import run_settings

PIPELINE = """
  - name: {name}
    source: {{type: generator, seed: 1}}
    target: {{path: /tmp/lake/{name}, record_key: [id]}}
"""


def _parse(head: str, *names: str):
    configs, problems = parse_pipelines(head + "pipelines:" + "".join(PIPELINE.format(name=n) for n in names))
    return configs, problems


def test_top_level_settings_reach_every_pipeline():
    configs, problems = _parse('metrics: {port: 9464, push_gateway: {url: "http://gw:9091", interval: 15s}}\n'
                               'progress: {path: "-"}\n', "a", "b")
    assert not problems
    s = run_settings(configs)
    assert s.metrics is not None and s.metrics.port == 9464
    assert s.metrics.push_gateway is not None and s.metrics.push_gateway.interval.total_seconds() == 15
    assert s.progress is not None and s.progress.path == "-"
    assert all(c.metrics == s.metrics for c in configs)


def test_bad_settings_are_reported_once_with_their_line():
    _, problems = _parse("\nmetrics: {port: 70000, push_gateway: {url: gw:9091}}\n", "a", "b")
    assert [(p.line, p.path) for p in problems] == [(2, "metrics.port"), (2, "metrics.push_gateway.url")]


def test_pipelines_of_one_run_must_agree():
    a, _ = _parse("metrics: {port: 1}\n", "a")
    b, _ = _parse("metrics: {port: 2}\n", "b")
    with pytest.raises(ConfigError, match="set different 'metrics'"):
        run_settings(a + b)
    assert run_settings(_parse("", "c")[0]).metrics is None


def test_command_line_overrides():
    parser = argparse.ArgumentParser()
    register(parser.add_subparsers())
    configs, _ = _parse('metrics: {port: 9464, host: 127.0.0.1}\nprogress: {path: p.jsonl}\n', "a")
    args = parser.parse_args(["run", "p.yaml", "--metrics-port", "0", "--progress-json"])
    s = _settings(configs, args)
    assert (s.metrics.port, s.metrics.host, s.progress.path) == (0, "127.0.0.1", "-")
    plain, _ = _parse("", "a")
    s = _settings(plain, parser.parse_args(["run", "p.yaml", "--metrics-port", "9000"]))
    assert s.metrics.port == 9000 and s.progress is None
