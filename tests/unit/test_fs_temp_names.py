"""A temp file a killed writer left behind is never read as table data.

``FileSystem.write_atomic`` stages each file under :func:`streamer.fs.temp_name`; a kill
between writing and renaming leaves it in the partition folder. The Spark-cluster kill
test found hudi-rs reading the old name (``.<log file name>.<hex>.tmp``) as a log file of
another file group - every key of the block twice. The pattern below is Apache Hudi's
``FSUtils.LOG_FILE_PATTERN`` (hudi-common), used with ``find()``: anchored at the start only.
"""

from __future__ import annotations

import re
import shutil

import pyarrow as pa

from streamer.fs import temp_name
from streamer.read import Table
from streamer.table.naming import parse_base_file_name, parse_log_file_name
from tests.support.bloom_tables import build_indexed_table
from tests.support.trip_model import read_hudi_rs

HUDI_LOG_FILE_PATTERN = re.compile(r"^\.(.+)_(.*)\.(log|archive)\.(\d+)(_((\d+)-(\d+)-(\d+))(.cdc)?)?")
LOG = ".7331c544-620b-4892-9f1e-867f563a2420-0_20261126183235572.log.1_0-0-0"
BASE = "7331c544-620b-4892-9f1e-867f563a2420-0_0-0-0_20261126183235572.parquet"


def _legacy(name: str) -> str:
    return f".{name}.ad117cd7cd3a4a629c89a10c137651ce.tmp"


def test_temp_names_match_no_hudi_file_pattern():
    for name in (LOG, BASE):
        tmp = temp_name(f"/t/sf/{name}").rsplit("/", 1)[1]
        assert name in tmp and tmp.endswith(".tmp")
        assert HUDI_LOG_FILE_PATTERN.search(tmp) is None, tmp
        assert parse_log_file_name(tmp) is None and parse_base_file_name(tmp) is None
    assert HUDI_LOG_FILE_PATTERN.search(_legacy(LOG)) is not None  # what the old name did


def _rows(table: pa.Table) -> list[tuple]:
    return sorted(zip(table.column("_hoodie_record_key").to_pylist(), table.column("v").to_pylist(), strict=True))


def test_a_leftover_temp_file_is_invisible_to_hudi_rs_and_our_reader(tmp_path):
    path = build_indexed_table(tmp_path)
    before_ours, before_rs = _rows(Table.open(path).read()), _rows(read_hudi_rs(path))
    assert before_ours == before_rs
    logs = sorted((tmp_path / "t" / "sf").glob(".*.log.*"))
    assert logs, "the fixture table has log files"
    shutil.copy(logs[0], temp_name(str(logs[0])))  # a kill between write and rename
    assert _rows(Table.open(path).read()) == before_ours
    assert _rows(read_hudi_rs(path)) == before_rs
    # the name before: hudi-rs took it for another file group's log (keys twice)
    shutil.copy(logs[0], logs[0].parent / _legacy(logs[0].name))
    assert len(_rows(read_hudi_rs(path))) > len(before_rs)
