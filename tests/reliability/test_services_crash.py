"""RFC-48 scenario (b) and compactor crashes: kill -9 a service mid-way, then recover.

A subprocess runs the plan with the fault hook armed (SIGKILL at its N-th I/O step). The
next executor finds the plan lock owned by a dead pid, takes it over and:
* log compaction: rolls the run back (rollback command block, instant removed) - the
  table reads exactly as before, and a new plan stitches the blocks again;
* compaction: deletes the partial base files, reverts to requested and executes again -
  exactly one base file per slice at the plan's instant.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from streamer.config.policies import CompactionPolicy, LogCompactionPolicy
from streamer.read import Table
from streamer.services.compaction import schedule_compaction
from streamer.services.executor import execute, execute_pending
from streamer.services.log_compaction import schedule_log_compaction
from streamer.table.instant import Action
from streamer.table.log_format import read_log_file
from streamer.table.naming import parse_base_file_name
from tests.support import block_tables as tg

# Each case kills a service subprocess (SIGKILL at an I/O step) and recovers: not in `make fast`.
pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[2]
LC = LogCompactionPolicy(min_blocks=3)


def run_killed(path: str, action: str, kill_at: int) -> int:
    env = dict(os.environ, MOR_STREAMER_KILL_AT_STEP=str(kill_at))
    proc = subprocess.run([sys.executable, "-m", "tests.reliability.services_worker", path, action],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=300)  # a hang guard
    return proc.returncode


def check(path: str, model: tg.Model, step: str) -> None:
    expected = model.snapshot()
    assert tg.read_ours(path) == expected, f"our reader differs after {step}"
    if not Table.open(path).timeline.pending_compactions():
        # hudi-rs 0.5.0 leaves out a pending compaction's new slice (writes made while
        # it is pending): HUDI_RS_PENDING in tests/unit/services/test_pending_compaction_writes.py
        assert tg.read_hudi_rs(path) == expected, f"hudi-rs differs after {step}"


@pytest.mark.parametrize("version", [6, 9])
@pytest.mark.parametrize("kill_at", [2, 3, 6])
def test_scenario_b_killed_log_compaction_is_rolled_back(tmp_path, kill_at, version):
    p = str(tmp_path / "t")
    with tg.at_version(version):  # 9: the dead run's own log file is deleted, no command block
        w, gen, model = tg.build(p, 8)
    lc = schedule_log_compaction(Table.open(p), LC)
    assert run_killed(p, Action.LOG_COMPACTION, kill_at) == -9
    t = Table.open(p)
    assert t.timeline.get(lc.timestamp).is_inflight
    check(p, model, "kill (inflight log compaction is not visible)")
    out = execute(Table.open(p), t.timeline.get(lc.timestamp), log_policy=LC)
    assert out.status == "rolled-back"
    t = Table.open(p)
    assert t.timeline.get(lc.timestamp) is None
    rollbacks = [i for i in t.timeline.completed() if i.action == Action.ROLLBACK]
    assert rollbacks
    published = [b for s in t.fsview.latest_file_slices() for lf in s.log_files
                 for b in read_log_file(t.fs, lf.path) if b.instant_time == lc.timestamp]
    if published:  # whatever the dead run published is cancelled by a command block
        cmds = [b for s in t.fsview.latest_file_slices() for lf in s.log_files
                for b in read_log_file(t.fs, lf.path) if b.is_rollback and b.target_instant_time == lc.timestamp]
        assert cmds
    if version >= 8:
        left = [st.path for st in t.fs.walk_files(p) if f"_{lc.timestamp}.log." in st.path]
        assert not left, f"the dead log compaction's own log files were not deleted: {left}"
    check(p, model, "rollback")
    tg.step(w, gen, model)
    again = schedule_log_compaction(Table.open(p), LC)
    assert again is not None
    assert execute(Table.open(p), again, log_policy=LC).status == "completed"
    check(p, model, "log compaction after rollback")


def steps_of_a_full_run(path: str, action: str, tmp_path) -> int:
    """The I/O steps an unkilled run takes, counted on a copy of the table (how many
    depends on the layout: file groups, blocks)."""
    import shutil

    copy, trace = str(tmp_path / "copy"), tmp_path / "steps.trace"
    shutil.copytree(path, copy)
    env = dict(os.environ, MOR_STREAMER_TRACE_STEPS=str(trace))
    proc = subprocess.run([sys.executable, "-m", "tests.reliability.services_worker", copy, action],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=300)  # a hang guard
    assert proc.returncode == 0, proc.stderr
    return len(trace.read_text().splitlines())


@pytest.mark.parametrize("version", [6, 9])
@pytest.mark.parametrize("kill_at", ["2", "4", "last"])
def test_killed_compaction_is_reexecuted_once(tmp_path, kill_at, version):
    p = str(tmp_path / "t")
    with tg.at_version(version):
        w, gen, model = tg.build(p, 6)
    comp = schedule_compaction(Table.open(p), CompactionPolicy(), force=True)
    total = steps_of_a_full_run(p, Action.COMPACTION, tmp_path)
    at = total - 1 if kill_at == "last" else int(kill_at)  # "last": before the completed instant
    assert total > 4 and at < total, total
    assert run_killed(p, Action.COMPACTION, at) == -9
    tg.step(w, gen, model)  # the writer goes on while the compaction is half done
    check(p, model, "killed compaction")
    outs = execute_pending(Table.open(p), Action.COMPACTION)
    assert [o.status for o in outs] == ["completed"]
    t = Table.open(p)
    assert t.timeline.get(comp.timestamp).is_completed
    per_group: dict[str, int] = {}
    for st in t.fs.walk_files(p):
        b = parse_base_file_name(os.path.basename(st.path))
        if b is not None and b.instant_time == comp.timestamp:
            per_group[b.file_id] = per_group.get(b.file_id, 0) + 1
    assert per_group and set(per_group.values()) == {1}, per_group
    check(p, model, "re-executed compaction")
    tg.step(w, gen, model)
    check(p, model, "write after compaction")
