"""Issue 12, case 7: a full disk is one line naming the instant and file, and loses nothing.

The table lives on a tiny tmpfs (mounting needs root, as on the CI machines; elsewhere
the test is skipped and says why). A scheduled compaction runs out of space while writing
its base files: it exits non-zero with one line naming the instant and the file, leaves no
half-written file, and the table still reads the model. With room again, the next run
finishes the pending plan.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from streamer.cli import main as cli
from streamer.read import Table
from tests.support import block_tables as tg


@pytest.fixture
def tiny_fs(tmp_path):
    mnt = tmp_path / "tiny"
    mnt.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", str(mnt)], capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({r.stderr.strip() or r.returncode}): needs root")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


def _fill(mnt: Path, leave: int) -> None:
    """Take all free space but ``leave`` bytes."""
    free = shutil.disk_usage(mnt).free
    (mnt / "ballast").write_bytes(b"\0" * max(0, free - leave))


def test_compact_on_a_full_disk(tmp_path, tiny_fs, capsys):
    src = tmp_path / "src"
    _, _, model = tg.build(str(src), 6)
    p = tiny_fs / "t"
    shutil.copytree(src, p)
    assert cli(["compact", str(p), "--force", "--schedule"]) == 0
    capsys.readouterr()
    _fill(tiny_fs, 12 * 1024)  # room for the inflight file and the plan's lock, not for base files
    rc = cli(["compact", str(p), "--run"])
    err = capsys.readouterr().err
    assert rc == 2, err
    lines = [line for line in err.strip().splitlines() if line.startswith("error:")]
    assert len(lines) == 1 and "No space left on device" in lines[0], err
    assert "compaction" in lines[0] and ".parquet" in lines[0], err  # the instant and the file
    assert "Traceback" not in err
    assert not list(p.rglob("*.tmp")), "a half-written temp file was left behind"
    assert tg.read_ours(str(p)) == model.snapshot()

    (tiny_fs / "ballast").unlink()
    assert cli(["compact", str(p), "--run"]) == 0
    t = Table.open(str(p))
    assert [i for i in t.timeline.completed() if i.action == "commit"], "the pending compaction finished"
    assert not t.timeline.pending()
    assert tg.read_ours(str(p)) == model.snapshot()
