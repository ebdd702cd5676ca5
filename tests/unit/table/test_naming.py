"""File names and partition paths as Hudi writes them."""

from __future__ import annotations

from streamer.fs import FileSystem
from streamer.table.naming import (
    base_file_name,
    log_file_name,
    parse_base_file_name,
    parse_log_file_name,
    partition_path,
    partition_values,
    read_partition_metadata,
    write_partition_metadata,
    write_token,
)


def test_base_file_round_trip():
    name = "84e82649-b1ee-4a25-a316-17cc6872616b-0_2-13-62_20250331030642808.parquet"
    b = parse_base_file_name(name)
    assert (b.file_id, b.write_token, b.instant_time) == (
        "84e82649-b1ee-4a25-a316-17cc6872616b-0", "2-13-62", "20250331030642808")
    assert base_file_name(b.file_id, b.write_token, b.instant_time) == name
    assert parse_base_file_name("part-00000-1c5a8d32-c000.snappy.parquet") is None


def test_log_file_round_trip_and_order():
    name = ".0712b9f9-d2d5-4cae-bcf4-8fd7146af503-0_20250126040823628.log.2_1-0-1"
    lf = parse_log_file_name(name)
    assert (lf.file_id, lf.base_instant, lf.version, lf.write_token) == (
        "0712b9f9-d2d5-4cae-bcf4-8fd7146af503-0", "20250126040823628", 2, "1-0-1")
    assert log_file_name(lf.file_id, lf.base_instant, 2, "1-0-1") == name
    names = [".f-0_1.log.3_0-13-9", ".f-0_1.log.1_0-33-43", ".f-0_1.log.2_1-0-1"]
    assert [parse_log_file_name(n).version for n in sorted(names, key=lambda n: parse_log_file_name(n).sort_key)] == [1, 2, 3]
    assert parse_log_file_name(".hoodie_partition_metadata") is None
    assert write_token(1, 2, 3) == "1-2-3"


def test_partition_paths():
    assert partition_path(["a", "b"], [10, "x"], hive_style=True) == "a=10/b=x"
    assert partition_path(["a"], [None], hive_style=False) == "__HIVE_DEFAULT_PARTITION__"
    assert partition_values("byteField=10/shortField=300", ["byteField", "shortField"], True) == {
        "byteField": "10", "shortField": "300"}
    assert partition_values("10", ["byteField"], False) == {"byteField": "10"}
    assert partition_values("", [], False) == {}


def test_partition_metadata(tmp_path):
    fs = FileSystem()
    write_partition_metadata(fs, str(tmp_path), "a=1/b=2", "20250101000000000")
    meta = read_partition_metadata(fs, str(tmp_path), "a=1/b=2")
    assert meta == {"commitTime": "20250101000000000", "partitionDepth": "2"}
