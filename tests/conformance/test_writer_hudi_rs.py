"""Acceptance 1: random insert/upsert/delete sequences, checked after every commit.

After each commit the table must equal a plain dict model through our snapshot reader
and through hudi-rs (an independent Rust reader of the Hudi format), and the
read-optimized query of both must equal the base files' own content. Small file
limits force several file groups per partition, inserts routed into logs, Parquet and
Avro log blocks, and rollbacks are all exercised along the way.
"""

from __future__ import annotations

import pyarrow as pa
import pytest

from streamer.write import HudiWriter, TableConfig, WriteOptions
from tests.support.write_model import (
    BatchGen,
    Model,
    canon,
    read_base_files,
    read_hudi_rs,
    read_ours,
)

pytestmark = pytest.mark.conformance

SMALL = WriteOptions(
    small_file_limit=20_000,
    max_file_size=30_000,
    default_record_size=100,
    slice_bloom_num_entries=500,
    engine="local",
)


def _check(path: str, model: Model, step: str) -> None:
    expected = model.snapshot()
    assert canon(read_ours(path)) == expected, f"our reader differs after {step}"
    assert canon(read_hudi_rs(path)) == expected, f"hudi-rs differs after {step}"
    base = canon(read_base_files(path))
    assert canon(read_ours(path, "read_optimized")) == base, f"our RO differs after {step}"
    assert canon(read_hudi_rs(path, read_optimized=True)) == base, f"hudi-rs RO differs after {step}"


@pytest.mark.parametrize(
    ("seed", "block_format", "hive"),
    [(1, "parquet", False), (2, "parquet", True), (3, "avro", False)],
)
def test_random_sequences_match_model(tmp_path, seed, block_format, hive):
    path = str(tmp_path / "t")
    cfg = TableConfig(
        "model", ("id",), ("city",), "ts", hive_style_partitioning=hive, log_block_format=block_format
    )
    w = HudiWriter.create(path, cfg, options=SMALL)
    gen = BatchGen(seed)
    model = Model()
    ops = ["upsert", "upsert", "insert", "delete", "upsert", "upsert", "insert", "upsert", "delete", "upsert"]
    for i, op in enumerate(ops):
        n = gen.rng.randrange(20, 120)
        if op == "upsert":
            batch = gen.upsert_batch(model, n)
            res = w.upsert(batch, extra_metadata={"checkpoint": str(i)})
            model.upsert(batch)
        elif op == "insert":
            batch = gen.insert_batch(model, n)
            res = w.insert(batch)
            model.insert(batch)
        else:
            batch = gen.delete_batch(model, max(1, n // 4))
            res = w.delete(batch)
            model.delete(batch)
        assert res.instant
        _check(path, model, f"commit {i} ({op})")
    # several file groups per partition, and some inserts went to logs (RFC-06 routing)
    from streamer.read.table import Table

    slices = Table.open(path).fsview.latest_file_slices()
    assert len(slices) > len({s.partition_path for s in slices})


def test_commit_metadata_is_hudi_shaped(tmp_path):
    path = str(tmp_path / "t")
    w = HudiWriter.create(path, TableConfig("meta", ("id",), ("city",), "ts"), options=SMALL)
    gen, model = BatchGen(7), Model()
    w.upsert(gen.upsert_batch(model, 30))
    res = w.upsert(gen.upsert_batch(model, 30), extra_metadata={"deltastreamer.checkpoint.key": "topic,0:42"})
    from streamer.read.table import Table

    t = Table.open(path)
    inst = t.timeline.last_completed_write()
    assert inst.timestamp == res.instant and inst.action == "deltacommit"
    meta = t.fsview.commit_metadata(inst)
    assert meta.operation_type == "UPSERT"
    assert meta.extra_metadata["deltastreamer.checkpoint.key"] == "topic,0:42"
    assert '"name":"id"' in meta.schema
    stats = list(meta.write_stats())
    assert stats and all(s.file_id and s.path and s.total_write_bytes > 0 for s in stats)
    logs = [s for s in stats if s.is_log]
    assert all(s.log_version >= 1 and s.log_offset == 0 and s.prev_commit != "null" for s in logs)
    assert sum(s.num_inserts + s.num_update_writes for s in stats) == sum(s.num_writes for s in stats)
    # markers are gone after completion; partitions carry Hudi's partition metadata
    assert not (tmp_path / "t" / ".hoodie" / ".temp" / res.instant).exists()
    assert all((tmp_path / "t" / c / ".hoodie_partition_metadata").exists() for c in {r[0] for r in model.rows})
    props = (tmp_path / "t" / ".hoodie" / "hoodie.properties").read_text()
    for line in (
        "hoodie.table.version=6",
        "hoodie.table.type=MERGE_ON_READ",
        "hoodie.timeline.layout.version=1",
        "hoodie.table.base.file.format=PARQUET",
        "hoodie.populate.meta.fields=true",
    ):
        assert line in props
    # Hudi reads this key as the log *file* format: a wrong value hides every log file
    assert "hoodie.table.log.file.format" not in props


def test_other_key_generators_read_identically(tmp_path):
    """Complex (hive-style, two partition fields), non-partitioned and timestamp keys."""
    rows = pa.table(
        {
            "id": [1, 2, 3, 1],
            "name": ["a", "b", "c", "a"],
            "city": ["sf", "sf", "nyc", "sf"],
            "ts": [1_700_000_000_000, 1_700_003_600_000, 1_700_090_000_000, 1_700_000_000_001],
            "v": [1.0, 2.0, 3.0, 4.0],
        }
    )
    cases = {
        "complex": TableConfig("c", ("id", "name"), ("city", "name"), "ts", keygen="complex", hive_style_partitioning=True),
        "nonpart": TableConfig("n", ("id",), (), "ts", keygen="non_partitioned"),
        "tsday": TableConfig("d", ("id",), ("ts",), "ts", keygen="timestamp"),
    }
    for name, cfg in cases.items():
        path = str(tmp_path / name)
        w = HudiWriter.create(path, cfg)
        w.upsert(rows)
        w.upsert(rows.slice(1, 2).set_column(4, "v", pa.array([20.0, 30.0])))
        ours = sorted(read_ours(path).select(["id", "v", "_hoodie_record_key", "_hoodie_partition_path"]).to_pylist(), key=str)
        theirs = sorted(read_hudi_rs(path).select(["id", "v", "_hoodie_record_key", "_hoodie_partition_path"]).to_pylist(), key=str)
        assert ours == theirs, name
        assert sorted(r["v"] for r in ours) == [4.0, 20.0, 30.0], name
    keys = {r["_hoodie_record_key"] for r in read_ours(str(tmp_path / "complex")).to_pylist()}
    assert "id:1,name:a" in keys
    parts = {r["_hoodie_partition_path"] for r in read_ours(str(tmp_path / "tsday")).to_pylist()}
    assert parts == {"2023/11/14", "2023/11/15"}
