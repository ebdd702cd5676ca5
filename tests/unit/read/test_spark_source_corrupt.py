"""The Spark data source's executors refuse a corrupt committed log block, as the local
reader does, and skip a torn tail no instant committed.

Driven through the source's own planning and per-partition read (what Spark calls on
the driver and on executors), without starting a JVM. Judged by the model of what was
written.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from streamer.errors import CorruptDataError
from streamer.read import Table
from tests.support import block_tables as tg

pytest.importorskip("pyspark.sql.datasource")


def _spark_rows(root: Path, **options: str) -> list[dict]:
    from streamer.read import spark_source

    opts = {"path": str(root), **options}
    fs, plan, schema = spark_source._plan(opts)
    reader = spark_source.MorHudiReader(fs, plan.slices, plan.spec, schema, opts)
    reader.committed = plan.committed
    batches = [b for part in reader.partitions() for b in reader.read(part)]
    return tg.canon(pa.Table.from_batches(batches, schema=batches[0].schema)) if batches else []


@pytest.fixture
def table(tmp_path) -> tuple[Path, list[dict], Path]:
    root = tmp_path / "t"
    _, _, model = tg.build(str(root), 3, deletes_every=0)
    t = Table.open(str(root))
    log = next(Path(s.log_files[0].path) for s in t.fsview.latest_merged_slices() if s.log_files)
    return root, model.snapshot(), log


def test_a_corrupt_committed_block_fails_the_read_naming_the_file(table):
    root, model, log = table
    assert _spark_rows(root) == model
    data = bytearray(log.read_bytes())
    for i in range(6, 14):  # the block's int64 length, right after "#HUDI#": same file size
        data[i] ^= 0xFF
    log.write_bytes(bytes(data))
    with pytest.raises(CorruptDataError, match=log.name):
        _spark_rows(root)
    short = _spark_rows(root, allow_corrupt="true")
    assert len(short) <= len(model) and short != model


def test_a_torn_tail_no_instant_committed_is_skipped(table):
    root, model, log = table
    with log.open("ab") as f:  # a writer that crashed mid-append: bytes past every commit
        f.write(b"#HUDI#" + b"\x00\x00\x00\x00\x00\x00\x10\x00" + b"torn")
    assert _spark_rows(root) == model
