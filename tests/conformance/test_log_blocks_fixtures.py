"""Every log block Hudi wrote in the fixtures: we read it, its rows agree with the expected
query results, and blocks re-encode byte for byte (framing, Avro records, delete lists)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from streamer.fs import FileSystem
from streamer.table.log_format import (
    BlockType,
    HeaderKey,
    encode_block,
    encode_command_block,
    encode_data_block,
    encode_delete_block,
    read_log_file,
)
from tests.support.log_appends import append_blocks

pytestmark = pytest.mark.conformance

EXPECTED = Path(__file__).resolve().parents[2].parent / "shared" / "fixtures" / "hudi" / "expected"


def _log_files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob(".*.log.*") if ".hoodie" not in p.parts and "__MACOSX" not in p.parts)


@pytest.fixture(scope="module")
def all_blocks(hudi_fixtures_dir):
    fs = FileSystem()
    out = []
    for p in _log_files(hudi_fixtures_dir):
        for lazy in (True, False):
            blocks = read_log_file(fs, str(p), lazy=lazy)
            out.extend((p, lazy, b) for b in blocks)
    return out


def test_every_fixture_block_reads_cleanly(all_blocks) -> None:
    kinds = {b.block_type for _, _, b in all_blocks}
    assert {BlockType.AVRO_DATA, BlockType.PARQUET_DATA, BlockType.DELETE, BlockType.COMMAND} <= kinds
    for path, _, b in all_blocks:
        assert b.block_type != BlockType.CORRUPT, (path, b.corrupt_reason)
        assert b.format_version == 1
        assert b.instant_time and len(b.instant_time) == 17, path
        if b.block_type in (BlockType.AVRO_DATA, BlockType.PARQUET_DATA):
            t = b.records()
            assert t.num_rows >= 1
            assert b.record_keys().to_pylist() == t.column("_hoodie_record_key").to_pylist()
            proj = b.records(["_hoodie_record_key", "_hoodie_commit_time"])
            assert proj.column_names == ["_hoodie_record_key", "_hoodie_commit_time"]
            assert set(proj.column("_hoodie_commit_time").to_pylist()) == {b.instant_time}
        if b.block_type == BlockType.COMMAND:
            assert b.is_rollback and b.target_instant_time == "20250126040826878"


def test_log_rows_appear_in_expected_snapshots(all_blocks, hudi_fixtures_dir) -> None:
    """Latest-version log rows of these tables are exactly rows hudi-rs returned."""
    checked = 0
    for path, lazy, b in all_blocks:
        name = path.relative_to(hudi_fixtures_dir).parts[0]
        exp_file = EXPECTED / f"{name}.snapshot.jsonl"
        if not lazy or b.block_type != BlockType.AVRO_DATA or not exp_file.exists():
            continue
        expected = set(exp_file.read_text().splitlines())
        for row in b.records().to_pylist():
            row.pop("_hoodie_commit_seqno")
            row.pop("_hoodie_file_name")
            line = json.dumps(dict(sorted(row.items())), default=str)
            # a later update/delete may supersede a row; but types/values must match when present
            if row["_hoodie_record_key"] in {json.loads(x)["_hoodie_record_key"] for x in expected}:
                same_key = [x for x in expected if json.loads(x)["_hoodie_record_key"] == row["_hoodie_record_key"]]
                if any(json.loads(x)["_hoodie_commit_time"] == b.instant_time for x in same_key):
                    assert line in expected, (path, line)
                    checked += 1
    assert checked >= 5


def test_deletes_have_keys_partitions_and_ordering(all_blocks) -> None:
    seen = 0
    for path, _, b in all_blocks:
        if b.block_type != BlockType.DELETE:
            continue
        d = b.deletes()
        assert d.column_names == ["_hoodie_record_key", "_hoodie_partition_path", "ordering_value"]
        assert d.num_rows >= 1 and d.column(0).null_count == 0
        if "v9_mor_nonpart_3commits" in str(path):
            assert d.to_pylist()[0] == {"_hoodie_record_key": "1", "_hoodie_partition_path": "", "ordering_value": 101}
        seen += 1
    assert seen >= 5


def test_fixture_blocks_reencode_byte_for_byte(all_blocks) -> None:
    done = 0
    for path, lazy, b in all_blocks:
        if not lazy or any(not isinstance(k, HeaderKey) for k in b.header):
            continue  # Hudi 1.x headers (keys 5..8) are read, never written by us
        raw = path.read_bytes()[b.offset : b.offset + b.size]
        if b.block_type == BlockType.COMMAND:
            enc = encode_command_block(b.header)
        elif b.block_type == BlockType.DELETE:
            enc = encode_delete_block(b.deletes(), b.header)
        elif b.block_type == BlockType.AVRO_DATA:
            enc = encode_data_block(b.records(), b.header, kind=BlockType.AVRO_DATA)
        else:  # Parquet bytes come from Spark's writer; check the framing only
            enc = encode_block(b.block_type, b.header, b.content())
        assert enc == raw, path
        done += 1
    assert done >= 20


# -- hudi-rs reads what we write ---------------------------------------------------------------
@pytest.mark.parametrize("kind", [BlockType.PARQUET_DATA, BlockType.AVRO_DATA])
def test_hudi_rs_reads_table_with_our_base_file_and_log_blocks(hudi_fixtures_dir, tmp_path, kind) -> None:
    """A hand-built v6 MOR table: Hudi's hoodie.properties, our base file, our log file
    (an update block and a delete block), two completed deltacommits. hudi-rs must merge it."""
    import shutil

    import hudi  # hudi-rs, a pinned test dependency (the test extras)
    import pyarrow as pa
    import pyarrow.compute as pc

    from streamer.table.avro_schema import arrow_to_avro
    from streamer.table.base_file import read_base_file, read_footer, write_base_file
    from tests.support.fixture_tables import fixture_table_path

    src = fixture_table_path(hudi_fixtures_dir, "sample_table__mor__parquet__v6_nonpartitioned")
    dst = tmp_path / "v6_nonpartitioned"
    (dst / ".hoodie").mkdir(parents=True)
    shutil.copy(src / ".hoodie" / "hoodie.properties", dst / ".hoodie")
    fs = FileSystem()
    fixture_base = next(p for p in src.glob("d206*.parquet"))
    rows = read_base_file(fs, str(fixture_base))
    i1, i2 = "20250201000000000", "20250201000000001"
    fid = "11111111-2222-3333-4444-555555555555-0"
    base_name = f"{fid}_0-0-0_{i1}.parquet"
    n = rows.num_rows
    rows = rows.set_column(0, "_hoodie_commit_time", pa.array([i1] * n))
    rows = rows.set_column(1, "_hoodie_commit_seqno", pa.array([f"{i1}_0_{i}" for i in range(n)]))
    rows = rows.set_column(4, "_hoodie_file_name", pa.array([base_name] * n))
    schema = arrow_to_avro(rows.schema, "v6_nonpartitioned_record", "hoodie.v6_nonpartitioned")
    data_schema = {**schema, "fields": schema["fields"][5:]}
    stats = write_base_file(fs, str(dst / base_name), rows, avro_schema=data_schema)
    assert (stats.min_record_key, stats.max_record_key) == ("1", "3")
    assert read_footer(fs, str(dst / base_name)).bloom_filter().might_contain("2")

    def commit(instant: str, write_stats: list[dict]) -> None:
        meta = {
            "partitionToWriteStats": {"": write_stats},
            "compacted": False,
            "extraMetadata": {"schema": json.dumps(data_schema)},
            "operationType": "UPSERT",
        }
        for suffix in (".deltacommit.requested", ".deltacommit.inflight"):
            (dst / ".hoodie" / f"{instant}{suffix}").write_text("")
        (dst / ".hoodie" / f"{instant}.deltacommit").write_text(json.dumps(meta))

    commit(i1, [{"fileId": fid, "path": base_name, "prevCommit": "null", "numWrites": n, "numInserts": n,
                 "partitionPath": "", "fileSizeInBytes": stats.size_bytes}])
    upd = rows.filter(pc.equal(rows.column("_hoodie_record_key"), "1"))
    upd = upd.set_column(0, "_hoodie_commit_time", pa.array([i2]))
    upd = upd.set_column(6, "name", pa.array(["Alice v2"]))
    upd = upd.set_column(11, "longField", pa.array([2_000_000_000], pa.int64()))
    header = {HeaderKey.INSTANT_TIME: i2, HeaderKey.SCHEMA: json.dumps(schema)}
    deletes = pa.table({"_hoodie_record_key": ["2"], "_hoodie_partition_path": [""]})
    log_name = f".{fid}_{i1}.log.1_0-0-0"
    append_blocks(fs, str(dst / log_name), [encode_data_block(upd, header, kind=kind)])
    append_blocks(fs, str(dst / log_name), [encode_delete_block(deletes, header)])
    commit(i2, [{"fileId": fid, "path": log_name, "prevCommit": i1, "numWrites": 2, "numDeletes": 1,
                 "numUpdateWrites": 1, "partitionPath": "", "logVersion": 1, "logOffset": 0,
                 "baseFile": base_name, "logFiles": [log_name]}])

    table = hudi.HudiTableBuilder.from_base_uri(str(dst)).build()
    got = pa.Table.from_batches(table.read()).sort_by("_hoodie_record_key")
    assert got.select(["_hoodie_record_key", "_hoodie_commit_time", "name", "longField"]).to_pylist() == [
        {"_hoodie_record_key": "1", "_hoodie_commit_time": i2, "name": "Alice v2", "longField": 2_000_000_000},
        {"_hoodie_record_key": "3", "_hoodie_commit_time": i1, "name": "Carol", "longField": 1928374650},
    ]
    # every other column of the updated row survives the round trip unchanged
    mine = upd.drop_columns(["_hoodie_commit_seqno", "_hoodie_file_name"]).to_pylist()[0]
    theirs = got.drop_columns(["_hoodie_commit_seqno", "_hoodie_file_name"]).to_pylist()[0]
    assert json.dumps(theirs, default=str, sort_keys=True) == json.dumps(mine, default=str, sort_keys=True)
