"""`streamer show` names the table's index, and for a bucket table the settings a Hudi
writer needs to continue it (instead of suggesting a hand-over, which it does not need)."""

from __future__ import annotations

from streamer.cli import main
from streamer.table.identity import IndexConfig, IndexType
from streamer.write import HudiWriter, TableConfig
from tests.support import block_tables as tg


def _table(path: str, index: IndexConfig | None) -> None:
    cfg = TableConfig("svc", ("id",), ("city",), "ts", **({"index": index} if index else {}))
    w = HudiWriter.create(path, cfg, schema=tg.SCHEMA, options=tg.SMALL)
    tg.step(w, tg.Gen(1, key_space=50), tg.Model(), rows=20)


def test_show_names_the_bucket_index_and_hudi_writer_settings(tmp_path, capsys):
    p = str(tmp_path / "t")
    _table(p, IndexConfig(IndexType.BUCKET, 4))
    assert main(["show", p]) == 0
    out = capsys.readouterr().out
    assert "  index: bucket (4 buckets" in out
    assert "hoodie.index.type=BUCKET" in out and "hoodie.bucket.index.num.buckets=4" in out
    assert "streamer handover" not in out


def test_show_names_the_bloom_index_by_default(tmp_path, capsys):
    p = str(tmp_path / "t")
    _table(p, None)
    assert main(["show", p]) == 0
    assert "  index: bloom\n" in capsys.readouterr().out
