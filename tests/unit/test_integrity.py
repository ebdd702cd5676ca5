"""``streamer check``'s deep checks of what page checksums do not cover: the key index.

A bloom filter lives in a Parquet footer's key-value metadata, outside every page
checksum. Zeroed, it would make the index miss keys and their updates land in a second
file group. ``check`` reads each file's keys and its filter and reports the file.
"""

from __future__ import annotations

from pathlib import Path

from streamer.cli import main as cli
from streamer.index.rfc06 import (
    BLOOM_KEY,
    BLOOM_TYPE_KEY,
    LOGS_BLOOM_KEY,
    LOGS_BLOOM_TYPE_KEY,
    LOGS_MAX_KEY,
)
from streamer.read import Table
from streamer.table.bloom import BloomFilter
from streamer.table.log_format import read_log_file
from tests.support import block_tables as tg


def _zero_bloom(path: Path, kv: dict[bytes, bytes], key: str) -> None:
    """The same filter with every bit cleared (same length: the footer stays valid)."""
    value = kv[key.encode()]
    type_key = LOGS_BLOOM_TYPE_KEY if key == LOGS_BLOOM_KEY else BLOOM_TYPE_KEY
    bloom = BloomFilter.from_footer(value, kv[type_key.encode()])
    for row in bloom.rows:
        row.bits[:] = False
    cleared = bloom.serialize().encode()
    assert len(cleared) == len(value)
    data = path.read_bytes()
    at = data.index(value)
    path.write_bytes(data[:at] + cleared + data[at + len(value):])


def _newest_block(root: str):
    t = Table.open(root)
    fslice = next(s for s in t.fsview.latest_file_slices() if len(s.log_files) >= 2)
    lf = fslice.log_files[-1]
    return Path(lf.path), read_log_file(t.fs, lf.path, lazy=False)[0]


def test_check_reports_a_bloom_filter_that_misses_its_keys(tmp_path, capsys):
    root = str(tmp_path / "t")
    tg.build(root, 6)
    assert cli(["check", root]) == 0
    capsys.readouterr()
    path, block = _newest_block(root)
    _zero_bloom(path, block.parquet_metadata(), BLOOM_KEY)
    assert cli(["check", root]) == 1
    out = capsys.readouterr().out
    assert path.name in out and "misses" in out and "footer's key index" in out
    assert cli(["check", root, "--quick"]) == 0  # footers parse: only the deep check reads keys


def _shrink_logs_range(path: Path, kv: dict[bytes, bytes]) -> None:
    """The log blocks' key range (issue 13: what a block's slice summary now is) made to
    end below every key: ``max_record_key`` becomes zeros of the same length."""
    value = kv[LOGS_MAX_KEY.encode()]
    data = path.read_bytes()
    at = data.index(value, data.index(LOGS_MAX_KEY.encode()))
    path.write_bytes(data[:at] + b"0" * len(value) + data[at + len(value):])


def test_check_reports_a_slice_summary_that_misses_keys(tmp_path, capsys):
    root = str(tmp_path / "t")
    tg.build(root, 6)
    path, block = _newest_block(root)
    _shrink_logs_range(path, block.parquet_metadata())
    assert cli(["check", root]) == 1
    out = capsys.readouterr().out
    assert path.name in out and "slice's key index" in out
