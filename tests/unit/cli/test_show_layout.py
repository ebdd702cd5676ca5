"""`streamer show TABLE --layout PNG`: the layout drawn is the table's, pending plans marked."""

from __future__ import annotations

import pyarrow as pa

from streamer.cli import main
from streamer.read import Table
from streamer.viz.layout import table_layout
from streamer.write import HudiWriter, TableConfig

PNG = b"\x89PNG\r\n\x1a\n"


def _rows(start: int, n: int, ts: int) -> pa.Table:
    ids = list(range(start, start + n))
    return pa.table({"id": [f"k{i}" for i in ids], "city": ["ams" if i % 2 else "nyc" for i in ids],
                     "ts": [ts] * n, "fare": [float(i) for i in ids]})


def _table(path: str) -> str:
    w = HudiWriter.create(path, TableConfig("lay", ("id",), ("city",), "ts"))
    w.upsert(_rows(0, 20, 1))  # new keys: base files, one file group per city
    w.upsert(_rows(0, 10, 2))  # updates: a log file per touched group
    w.upsert(_rows(5, 10, 3))
    return path


def test_layout_counts_groups_and_logs_and_marks_pending_plans(tmp_path, capsys):
    path = _table(str(tmp_path / "t"))
    before = table_layout(Table.open(path))
    assert {g.partition for g in before.groups} == {"ams", "nyc"}
    assert len(before.groups) == 2
    for g in before.groups:
        assert [f.kind for f in g.files] == ["base", "log", "log"]
        assert all(f.bytes > 0 for f in g.files)
        assert g.pending == ()
    assert before.log_files == 4 and before.pending == ()

    assert main(["compact", path, "--schedule", "--force"]) == 0
    capsys.readouterr()
    png = tmp_path / "layout.png"
    assert main(["show", path, "--limit", "1", "--layout", str(png)]) == 0
    assert png.read_bytes()[:8] == PNG
    assert f"layout: 2 file group(s), 4 log file(s), 1 pending instant(s) -> {png}" in capsys.readouterr().out

    after = table_layout(Table.open(path))
    (instant,) = after.pending
    assert instant.startswith("compaction ")
    assert all(g.pending == (instant,) for g in after.groups)  # the plan names both slices
