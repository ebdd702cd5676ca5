"""Damaged copies of a Hudi fixture: intact committed blocks still read, the damage is reported.

Two faults, injected into copies (the fixtures stay untouched): a torn block at the end of
the last log file, past every committed append (a writer crashed mid-append), and flipped
bytes in a block's length field inside committed bytes. The torn tail is skipped with a
warning; the committed damage is refused by default, naming the file, and read past only
with ``allow_corrupt``. Either way the rows returned are exactly the fixture's expected
snapshot, one corrupt block is counted (``ScanStats`` and the result's schema metadata),
and the read finishes promptly.
"""

from __future__ import annotations

import glob
import logging
import shutil
import struct
from pathlib import Path

import pytest

from tests.support.fixture_tables import canonical_lines, expected_lines, table_path

pytestmark = [pytest.mark.conformance, pytest.mark.timeout(120)]

NAME = "quickstart_trips_table__mor__avro__v9_mor_nonpart_3commits"


@pytest.fixture
def table_copy(hudi_fixtures_dir, tmp_path) -> Path:
    dst = tmp_path / "t"
    shutil.copytree(table_path(hudi_fixtures_dir, NAME), dst)
    return dst


def _logs(root: Path) -> list[Path]:
    return sorted(Path(p) for p in glob.glob(str(root / ".*.log.*")))


def _read(root: Path, caplog, allow_corrupt: bool = False):
    from streamer.read import Table
    from streamer.read.table import CORRUPT_BLOCKS_METADATA_KEY

    with caplog.at_level(logging.WARNING):
        result = Table.open(str(root)).scan(allow_corrupt=allow_corrupt)
    assert canonical_lines(result.table.to_pylist()) == expected_lines(NAME, "snapshot")
    assert result.table.schema.metadata[CORRUPT_BLOCKS_METADATA_KEY] == b"1"
    assert any("corrupt" in r.getMessage() for r in caplog.records)
    return result


def test_truncated_last_block_is_skipped_and_reported(table_copy, caplog):
    last = _logs(table_copy)[-1]
    block = last.read_bytes()
    last.write_bytes(block + block[: len(block) // 2])  # a torn second append
    result = _read(table_copy, caplog)
    assert result.stats.corrupt_block_count == 1
    assert result.stats.corrupt_blocks[0].path.endswith(last.name)


def test_flipped_length_bytes_resync_on_next_block(table_copy, caplog):
    first, last = _logs(table_copy)
    delete_block = first.read_bytes()
    damaged = bytearray(delete_block)
    damaged[6:14] = bytes(b ^ 0xFF for b in damaged[6:14])  # int64 block length after "#HUDI#"
    assert struct.unpack(">q", bytes(damaged[6:14]))[0] != struct.unpack(">q", delete_block[6:14])[0]
    # The damaged copy of the (committed) delete block precedes the intact data block:
    # inside the bytes the last commit wrote, so by default the read refuses, naming it.
    last.write_bytes(bytes(damaged) + last.read_bytes())
    from streamer.errors import CorruptDataError
    from streamer.read import Table

    with pytest.raises(CorruptDataError, match="corrupt log block at offset 0") as e:
        Table.open(str(table_copy)).read()
    assert last.name in str(e.value) and "allow_corrupt" in str(e.value)
    result = _read(table_copy, caplog, allow_corrupt=True)
    assert result.stats.corrupt_block_count == 1
    assert result.stats.log_blocks_read == 2


def test_cli_warns_on_corrupt_blocks(table_copy, capsys):
    from streamer.cli import main

    last = _logs(table_copy)[-1]
    last.write_bytes(last.read_bytes() + b"#HUDI#\x00\x00")
    assert main(["read", str(table_copy), "--format", "jsonl"]) == 0
    captured = capsys.readouterr()
    assert "1 corrupt log block" in captured.err
    assert len(captured.out.splitlines()) == len(expected_lines(NAME, "snapshot"))
