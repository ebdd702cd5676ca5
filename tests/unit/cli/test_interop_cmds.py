"""``streamer repair`` and ``streamer handover``: exit codes and what they print."""

from __future__ import annotations

from streamer.cli import main as cli
from streamer.read import Table
from streamer.table.properties import LOG_FILE_FORMAT, load_properties, write_properties
from tests.support import block_tables as tg


def test_handover_check_names_the_groups_then_the_handover_clears_them(tmp_path, capsys):
    path = str(tmp_path / "t")
    tg.build(path, 4, deletes_every=0)
    assert cli(["handover", "--check", path]) == 1
    out = capsys.readouterr().out
    assert "inserted into log blocks" in out and "streamer handover" in out
    assert cli(["handover", path]) == 0
    assert "compacted every file slice with logs" in capsys.readouterr().out
    assert cli(["handover", "--check", path]) == 0
    assert "Hudi writers can continue it" in capsys.readouterr().out
    assert cli(["show", path, "--limit", "0"]) == 0
    assert "Hudi writers: can continue this table" in capsys.readouterr().out


def test_repair_dry_run_reports_and_repair_fixes_once(tmp_path, capsys):
    path = str(tmp_path / "t")
    tg.build(path, 2)
    t = Table.open(path)
    write_properties(t.fs, path, t.properties.with_updates({LOG_FILE_FORMAT: "PARQUET"}))
    assert cli(["repair", "--dry-run", path]) == 0
    assert "would repair" in capsys.readouterr().out
    assert LOG_FILE_FORMAT in load_properties(t.fs, path).raw
    assert cli(["repair", path]) == 0
    assert capsys.readouterr().out.count("repaired:") == 1
    assert LOG_FILE_FORMAT not in load_properties(t.fs, path).raw
    assert cli(["repair", path]) == 0
    assert "nothing to repair" in capsys.readouterr().out
