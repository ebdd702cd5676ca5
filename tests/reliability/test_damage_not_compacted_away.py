"""Issue 12, cases 2 and 3: compaction and log compaction never turn damage into loss.

A committed log file deleted, or a committed block torn: the services refuse the slice
with one error naming the file (and the instant that wrote it), write nothing, and the
table keeps every file a repair would need. Before, ``compact --force`` exited 0 with a
base file missing those records, and ``clean`` then removed the old slice.
"""

from __future__ import annotations

import pytest

from streamer.cli import main as cli
from streamer.config.policies import CompactionPolicy, LogCompactionPolicy
from streamer.errors import ServiceError
from streamer.read import Table
from streamer.services.compaction import schedule_compaction
from streamer.services.executor import execute
from streamer.services.log_compaction import schedule_log_compaction
from tests.support import block_tables as tg


def _build(tmp_path) -> str:
    path = str(tmp_path / "t")
    tg.build(path, 8, deletes_every=3)
    return path


def _damage(path: str, victim: str, how: str) -> None:
    t = Table.open(path)
    if how == "missing":
        t.fs.delete_file(victim)
    else:  # torn: the last bytes of the block are gone
        data = t.fs.read_bytes(victim)
        t.fs.write_bytes(victim, data[: len(data) - 40])


def _damaged(tmp_path, how: str) -> tuple[str, str]:
    path = _build(tmp_path)
    t = Table.open(path)
    # a slice that keeps logs after the damage, so the compaction still plans it
    victim = next(s.log_files[0].path for s in t.fsview.latest_file_slices() if len(s.log_files) >= 2)
    _damage(path, victim, how)
    return path, victim


@pytest.mark.parametrize("how", ["missing", "torn"])
def test_compaction_refuses_a_damaged_slice_and_names_the_file(tmp_path, how, capsys):
    path, victim = _damaged(tmp_path, how)
    before = sorted(str(p) for p in (tmp_path / "t").rglob("*.parquet"))
    comp = schedule_compaction(Table.open(path), CompactionPolicy(), force=True)
    with pytest.raises(ServiceError, match="refused") as e:
        execute(Table.open(path), comp)
    assert victim.rsplit("/", 1)[-1] in str(e.value)
    t = Table.open(path)
    assert not [i for i in t.timeline.completed() if i.action == "commit"], "a compaction completed"
    # the CLI: one line, non-zero exit, no traceback
    assert cli(["compact", path, "--run"]) != 0
    err = capsys.readouterr().err
    assert "refused" in err and "Traceback" not in err
    # a later rollback of the inflight plan deletes only what it wrote: old files all there
    after = sorted(str(p) for p in (tmp_path / "t").rglob("*.parquet"))
    assert set(before) <= set(after)


@pytest.mark.parametrize("how", ["missing", "torn"])
def test_log_compaction_refuses_a_damaged_slice(tmp_path, how):
    path = _build(tmp_path)
    lc = schedule_log_compaction(Table.open(path), LogCompactionPolicy(min_blocks=3))
    assert lc is not None, "precondition: runs of small blocks qualified"
    t = Table.open(path)
    from streamer.services.common import read_plan

    op = read_plan(t, lc).operations[0]
    victim = next(lf.path for s in t.fsview.latest_file_slices() for lf in s.log_files
                  if s.file_id == op.file_id and s.partition_path == op.partition_path)
    _damage(path, victim, how)  # a file of a slice the plan stitches
    with pytest.raises(ServiceError, match="refused"):
        execute(Table.open(path), lc)
    t = Table.open(path)
    assert not [i for i in t.timeline.completed() if i.pending_action == "logcompaction"]
