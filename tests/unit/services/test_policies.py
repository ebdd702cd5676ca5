"""Acceptance 4: YAML policies change what the services do, and bad ones are refused by field."""

from __future__ import annotations

import time

import pytest

from streamer.config import parse_pipelines
from streamer.config.policies import PoliciesConfig
from streamer.services.runner import run_inline_services, should_throttle
from tests.support import block_tables as tg

PIPELINE = """
pipelines:
  - name: t
    source: {{type: generator, seed: 1}}
    target: {{path: lake/t, record_key: [id], partition_by: [city], ordering_field: ts}}
    policies:
{policies}
"""


def policies_from_yaml(block: str) -> PoliciesConfig:
    text = PIPELINE.format(policies="\n".join("      " + line for line in block.strip().splitlines()))
    pipes, problems = parse_pipelines(text)
    assert not problems, problems
    return pipes[0].policies


def _writes_with_services(path: str, pol: PoliciesConfig, commits: int = 8) -> None:
    w, gen, model = tg.build(path, 0)
    for _ in range(commits):
        tg.step(w, gen, model)
        run_inline_services(path, pol)
    assert tg.read_ours(path) == model.snapshot()


def test_log_compaction_off_leaves_blocks(tmp_path):
    pol = policies_from_yaml("""
log_compaction: {mode: off}
compaction: {mode: off}
clean: {mode: off}
archive: {mode: off}
""")
    p = str(tmp_path / "t")
    _writes_with_services(p, pol)
    assert max(tg.unit_counts(p).values()) >= 8


def test_inline_log_compaction_keeps_slices_under_threshold(tmp_path):
    pol = policies_from_yaml("""
log_compaction: {mode: inline, min_blocks: 3}
compaction: {mode: off}
clean: {mode: off}
archive: {mode: off}
""")
    p = str(tmp_path / "t")
    _writes_with_services(p, pol)
    counts = tg.unit_counts(p)
    assert counts and max(counts.values()) < 3, counts
    assert tg.read_hudi_rs(p) == tg.read_ours(p)


def test_inline_compaction_every_k_delta_commits(tmp_path):
    pol = policies_from_yaml("""
log_compaction: {mode: off}
compaction: {mode: inline, trigger: {delta_commits: 3}}
clean: {mode: off}
archive: {mode: off}
""")
    p = str(tmp_path / "t")
    _writes_with_services(p, pol, commits=7)
    from streamer.read import Table

    commits = [i for i in Table.open(p).timeline.completed() if i.pending_action == "compaction"]
    assert len(commits) == 2


def test_throttle_when_max_pending_reached(tmp_path):
    pol = policies_from_yaml("compaction: {mode: async, trigger: {delta_commits: 2}, max_pending: 1}")
    p = str(tmp_path / "t")
    w, gen, model = tg.build(p, 2)
    assert run_inline_services(p, pol).scheduled  # async: the writer schedules, nobody executes
    assert not should_throttle(p, pol.compaction)
    tg.step(w, gen, model)
    tg.step(w, gen, model)
    assert should_throttle(p, pol.compaction)


@pytest.mark.parametrize(("block", "field"), [
    ("compaction: {strategy: biggest_first}", "policies.compaction.strategy"),
    ("log_compaction: {min_blocks: -3}", "policies.log_compaction.min_blocks"),
    ("log_compaction: {small_block_bytes: -1}", "policies.log_compaction.small_block_bytes"),
    ("compaction: {trigger: {delta_commits: 0}}", "policies.compaction.trigger.delta_commits"),
    ("clean: {retain_commits: -2}", "policies.clean.retain_commits"),
])
def test_invalid_policy_is_refused_naming_the_field(block, field):
    text = PIPELINE.format(policies="      " + block)
    pipes, problems = parse_pipelines(text)
    assert not pipes and problems
    assert any(field in str(p) for p in problems), [str(p) for p in problems]


def _write_retrying(w, gen, model, n: int) -> None:
    from streamer.errors import CommitConflictError

    for _ in range(n):
        while True:
            try:
                tg.step(w, gen, model)
                break
            except CommitConflictError:  # a service holds the writers' lock for a moment
                time.sleep(0.05)


def _wait(pred, seconds: float = 40) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and not pred():
        time.sleep(0.2)


def test_async_services_thread_runs_beside_the_writer(tmp_path):
    from streamer.services.runner import AsyncServices

    p = str(tmp_path / "t")
    w, gen, model = tg.build(p, 0)
    lc_only = policies_from_yaml("""
log_compaction: {mode: async, min_blocks: 3}
compaction: {mode: off}
clean: {mode: off}
archive: {mode: off}
""")
    with AsyncServices(p, lc_only, interval_s=0.1) as svc:
        _write_retrying(w, gen, model, 8)
        _wait(lambda: svc.completed("logcompaction"))
    assert not svc.errors, svc.errors
    assert svc.completed("logcompaction")
    both = policies_from_yaml("""
log_compaction: {mode: async, min_blocks: 3}
compaction: {mode: async, trigger: {delta_commits: 2}}
clean: {mode: off}
archive: {mode: off}
""")
    with AsyncServices(p, both, interval_s=0.1) as svc2:
        _write_retrying(w, gen, model, 3)
        _wait(lambda: svc2.completed("compaction"))
    assert not svc2.errors, svc2.errors
    assert svc2.completed("compaction")
    assert tg.read_ours(p) == model.snapshot() == tg.read_hudi_rs(p)
