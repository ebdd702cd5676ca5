"""Storage refuses a write mid-file: one line naming the instant and the file, nothing lost.

A full disk without root: the compaction runs as a child process whose file size limit
(``RLIMIT_FSIZE``) leaves room for the small files of the timeline, the plan's lock and
markers, but not for the base files it writes. The kernel then refuses the write part-way
through a file, as on a full disk: with ``SIGXFSZ`` ignored (its default action would kill
the process, which the crash tests cover) ``write(2)`` fails with ``EFBIG`` ("File too
large") where a full disk gives ``ENOSPC``. The product's handling is the same ``OSError``
path for both - the one under test: the run exits non-zero with one line naming the
instant and the file, leaves no half-written file, and the table still reads the model.
With the limit lifted, the next run finishes the pending plan.
"""

from __future__ import annotations

import resource
import shutil
import signal
import subprocess
import sys
from pathlib import Path

from streamer.cli import main as cli
from streamer.read import Table
from tests.support import block_tables as tg

STREAMER = str(Path(sys.executable).with_name("streamer"))
#: Bigger than any timeline file, lock or marker of the table; smaller than a base file.
FILE_LIMIT = 48 * 1024
#: Random characters per value: base files of ~20 rows each run well over FILE_LIMIT.
PAD = 6_000


def _no_room_for_big_files() -> None:
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # the write fails (EFBIG) instead of killing
    resource.setrlimit(resource.RLIMIT_FSIZE, (FILE_LIMIT, FILE_LIMIT))


def test_compact_when_storage_refuses_the_base_files(tmp_path, capsys):
    p = tmp_path / "t"
    _, _, model = tg.build(str(p), 6, pad=PAD)
    assert cli(["compact", str(p), "--force", "--schedule"]) == 0
    capsys.readouterr()
    small = [f for f in p.rglob("*") if f.is_file() and f.stat().st_size >= FILE_LIMIT and ".hoodie" in f.parts]
    assert not small, f"timeline files over the limit, the test would fail for the wrong reason: {small}"

    proc = subprocess.run([STREAMER, "compact", str(p), "--run"], capture_output=True, text=True, timeout=300,
                          preexec_fn=_no_room_for_big_files)
    err = proc.stderr
    assert proc.returncode == 2, err
    lines = [line for line in err.strip().splitlines() if line.startswith("error:")]
    assert len(lines) == 1 and "File too large" in lines[0], err
    assert "compaction" in lines[0] and ".parquet" in lines[0], err  # the instant and the file
    assert "Traceback" not in err
    assert not list(p.rglob("*.tmp")), "a half-written temp file was left behind"
    big = [f for f in p.rglob("*") if f.is_file() and f.stat().st_size == FILE_LIMIT]
    assert not big, f"a file cut at the limit was left behind: {big}"
    assert tg.read_ours(str(p)) == model.snapshot()
    pending = Table.open(str(p)).timeline.pending()
    assert [i.action for i in pending] == ["compaction"], pending

    assert cli(["compact", str(p), "--run"]) == 0  # the limit lifted: the pending plan finishes
    t = Table.open(str(p))
    assert [i for i in t.timeline.completed() if i.action == "commit"], "the pending compaction finished"
    assert not t.timeline.pending()
    assert tg.read_ours(str(p)) == model.snapshot()
    shutil.rmtree(p)
