"""How a pipeline runs decides its services' defaults (issue 14): compaction and log
compaction left unset are async in a continuous run, inline in once/available_now runs."""

from __future__ import annotations

from streamer.config import parse_pipelines
from streamer.config.policies import PoliciesConfig, for_run
from streamer.pipeline.multi import run_mode

YAML = """
pipelines:
  - name: p
    source: {{type: generator}}
    target: {{path: /tmp/x/p, record_key: [uuid]}}
    trigger: {trigger}
{policies}
"""


def _config(trigger: str, policies: str = ""):
    (config,), problems = parse_pipelines(YAML.format(trigger=trigger, policies=policies))
    assert not problems
    return config


def test_unset_compaction_modes_are_async_only_when_continuous():
    policies = PoliciesConfig()
    assert for_run(policies, continuous=True).compaction.mode == "async"
    assert for_run(policies, continuous=True).log_compaction.mode == "async"
    assert for_run(policies, continuous=True).clean.mode == "inline"  # cheap: stays with the writer
    assert for_run(policies, continuous=False) == policies
    assert policies.compaction.mode == "inline"


def test_a_mode_given_in_the_yaml_wins():
    config = _config("{mode: continuous}", "    policies: {compaction: {mode: inline, trigger: {delta_commits: 2}}}")
    resolved = for_run(config.policies, continuous=True)
    assert resolved.compaction.mode == "inline"
    assert resolved.compaction.trigger.delta_commits == 2
    assert resolved.log_compaction.mode == "async"


def test_run_mode_from_trigger_and_command_line():
    cont = _config("{mode: continuous, interval: 1s}")
    avail = _config("{mode: available_now}")
    assert run_mode(cont, once=False, available_now=False) == "continuous"
    assert run_mode(cont, once=True, available_now=False) == "once"
    assert run_mode(cont, once=False, available_now=True) == "available_now"
    assert run_mode(avail, once=False, available_now=False) == "available_now"


def test_an_unknown_trigger_mode_is_reported_with_its_line():
    (_, problems) = parse_pipelines(YAML.format(trigger="{mode: available-now}", policies=""), file="p.yaml")
    assert problems and "available_now" in str(problems[0]) and "p.yaml:" in str(problems[0])


def test_the_pipeline_package_names_no_source():
    """Issue 14: what is particular to a source sits behind ``streamer.sources.base``'s protocol."""
    import pathlib
    import re

    root = pathlib.Path(__file__).resolve().parents[3] / "streamer" / "pipeline"
    named = {}
    for path in root.glob("*.py"):
        if path.name == "checkpoint.py":  # Hudi's checkpoint format (HoodieStreamer's Kafka string)
            continue
        code = "\n".join(line for line in path.read_text().splitlines() if not line.lstrip().startswith(("#", "``")))
        imports = re.findall(r"^\s*(?:from|import) (sources\.(?:kafka\w*|files|generator|lines|avro))", code, re.M)
        if imports or re.search(r"\.type == \"(kafka|files|generator)\"", code):
            named[path.name] = imports
    assert not named


def test_trigger_read_poll_or_stream():
    assert _config("{mode: continuous, interval: 1s}").trigger.read == "poll"  # HoodieStreamer's way
    assert _config("{mode: continuous, interval: 1s, read: stream}").trigger.read == "stream"
    assert _config("{mode: continuous, interval: 1s, read: poll}").trigger.read == "poll"
    (_, problems) = parse_pipelines(YAML.format(trigger="{mode: continuous, read: pull}", policies=""), file="p.yaml")
    assert problems and "p.yaml:" in str(problems[0])
