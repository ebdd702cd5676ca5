"""Issue 13, acceptance 4: a Spark-engine upsert in which the driver holds no keys.

The Spark engine runs the local engine's steps on executors, once per table partition
(combine, bloom lookup in the partition's slices or bucket hash, plan, write), and the
driver receives one write stat per file group and one row count per partition
(:mod:`streamer.write.engine.spark`). What the driver held is counted
(``CommitResult.engine_stats``): no record keys, and statistics bounded by the file
groups and partitions the commit touches - not by the batch. The table must hold the
same rows as the local engine's, through our reader and hudi-rs.

The bounded-driver test is a ``campaign``: at full size (``make test-campaigns``) it upserts
2M rows with the bloom index (the distributed lookup) and 300k with the bucket index; at
smoke size (``make test``) 200k and 60k, with the same assertions (the bound is counted,
not measured, so it holds or fails at any size). ``MOR_STREAMER_BIG_ROWS`` sets both.
``benchmarks/bench_engines.py`` measures speed and memory at 1M and 3M.

The engines test also checks what the former tests/integration/test_write_engines.py did
(each write reports the engine it ran on; a small slice bloom so lookups meet false
positives), and an ``auto`` engine collects a small DataFrame to the driver.
"""

from __future__ import annotations

import os

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from streamer.table.identity import IndexConfig, IndexType
from streamer.write import HudiWriter, TableConfig, WriteOptions
from tests.support.campaign import sized
from tests.support.write_model import BatchGen, Model, canon, read_hudi_rs, read_ours

pytestmark = pytest.mark.integration

#: a small slice bloom (500 entries): the lookups meet false positives and confirm them
OPTS = WriteOptions(small_file_limit=20_000, max_file_size=30_000, default_record_size=100,
                    slice_bloom_num_entries=500)
INDEXES = {"bloom": IndexConfig(), "bucket": IndexConfig(IndexType.BUCKET, 4)}


def _table(path: str, index: str, opts: WriteOptions = OPTS) -> HudiWriter:
    cfg = TableConfig("tag", ("id",), ("city",), "ts", index=INDEXES[index])
    return HudiWriter.create(path, cfg, options=opts)


@pytest.mark.parametrize("index", ["bloom", "bucket"])
def test_executor_tagging_writes_what_the_local_engine_writes(spark, tmp_path, index):
    """Upserts with duplicates and delete flags, inserts, deletes of known and unknown keys."""
    gen, model = BatchGen(21), Model()
    batches = []
    for op in ["upsert", "upsert", "insert", "delete", "upsert"]:
        if op == "upsert":
            b = gen.upsert_batch(model, 80)
            model.upsert(b)
        elif op == "insert":
            b = gen.insert_batch(model, 50)
            model.insert(b)
        else:
            b = gen.delete_batch(model, 20)
            model.delete(b)
        batches.append((op, b))

    results = {}
    for engine in ("local", "spark"):
        path = str(tmp_path / engine)
        w = _table(path, index)
        for op, b in batches:
            data = spark.createDataFrame(b) if engine == "spark" else b
            res = getattr(w, op)(data, engine=engine)
            assert res.engine == engine
            stats = res.engine_stats
            assert stats is not None and stats.engine == engine
            if engine == "spark":
                assert stats.driver_keys == 0 and stats.driver_summary_rows > 0
            else:
                assert stats.driver_keys > 0
        results[engine] = (canon(read_ours(path)), canon(read_hudi_rs(path)))

    expected = model.snapshot()
    assert results["local"][0] == results["spark"][0] == expected
    assert results["local"][1] == results["spark"][1] == expected


def _narrow(spark, n: int, first_id: int, step: int, seq: int):
    """``n`` narrow rows (id, city, ts, v), every 97th id flagged deleted after the first
    batch; built on executors, so the input itself never passes through the driver."""
    from pyspark.sql import functions as F

    df = spark.range(n).select((F.col("id") * step + first_id).alias("id"))
    return df.select(
        "id",
        F.concat(F.lit("p"), (F.col("id") % 8).cast("string")).alias("city"),
        F.lit(seq).cast("long").alias("ts"),
        (F.col("id") * 0.5 + seq).alias("v"),
        ((F.col("id") % 97 == 0) & F.lit(seq > 1)).alias("_hoodie_is_deleted"),
    )


def _rows(path: str, reader) -> pa.Table:
    t = reader(path).select(["id", "city", "ts", "v"])
    return t.sort_by([("id", "ascending")])


#: rows of the bounded-driver upsert: full size (2M bloom, about 2 minutes with the local
#: engine's reference and both reads on 2 shared cores) in ``make test-campaigns``; the smoke
#: size keeps several row groups per file group and every partition busy
BIG_ROWS = {"bloom": sized(smoke=200_000, full=2_000_000), "bucket": sized(smoke=60_000, full=300_000)}


@pytest.mark.slow
@pytest.mark.campaign
@pytest.mark.parametrize("index", ["bloom", "bucket"])
def test_spark_upsert_keeps_the_driver_free_of_keys(spark, tmp_path, index):
    n = int(os.environ.get("MOR_STREAMER_BIG_ROWS", BIG_ROWS[index]))
    opts = WriteOptions(max_file_size=4_000_000, small_file_limit=2_000_000)
    first = _narrow(spark, n // 2, 0, 2, 1)  # even ids
    second = _narrow(spark, n, 0, 3, 2)  # ids 3j: a third of them even and < n (updates)
    tables = {}
    for engine in ("local", "spark"):
        path = str(tmp_path / engine)
        w = _table(path, index, opts)
        for df in (first, second):
            res = w.upsert(df if engine == "spark" else df.toArrow(), engine=engine)
        tables[engine] = path
        stats = res.engine_stats
        if engine == "spark":
            # the bound: one write stat per file group written, one row count per Spark task
            # that had rows - which held at least one partition (bloom: 8) or bucket's group
            groups = len({(s.partition_path, s.file_id) for s in w.snapshot.fsview.latest_file_slices()})
            assert stats.driver_keys == 0
            tasks = 8 if index == "bloom" else groups
            assert 0 < stats.driver_summary_rows <= groups + tasks
        else:
            assert stats.driver_keys == n

    ours = {e: _rows(p, read_ours) for e, p in tables.items()}
    assert ours["spark"].num_rows == ours["local"].num_rows > n
    assert ours["spark"].equals(ours["local"])
    assert _rows(tables["spark"], read_hudi_rs).equals(ours["local"])
    t = ours["spark"]
    flagged = pc.and_(pc.equal(t.column("ts"), 2),
                      pc.equal(pc.subtract(t.column("id"), pc.multiply(pc.divide(t.column("id"), 97), 97)), 0))
    assert not pc.any(flagged).as_py()  # rows flagged deleted are gone (or never inserted)


@pytest.mark.parametrize("engine", ["local", "spark"])
def test_a_corrupt_committed_block_refuses_the_write_on_either_engine(spark, tmp_path, engine):
    """Executors meet the damage while tagging; the driver raises our error, not Spark's."""
    import glob

    from streamer.errors import CorruptDataError

    path = str(tmp_path / "t")
    w = _table(path, "bloom", WriteOptions())
    gen, model = BatchGen(3), Model()
    for _ in range(3):
        b = gen.upsert_batch(model, 50)
        model.upsert(b)
        w.upsert(b, engine="local")
    log = sorted(glob.glob(f"{path}/*/.*.log.*"))[0]
    with open(log, "r+b") as f:
        f.seek(6)  # the first block's size: impossible now
        f.write(b"\xff\xff\xff\x7f")
    b = gen.upsert_batch(model, 50)
    with pytest.raises(CorruptDataError, match="write refused: .*corrupt log block"):
        w.upsert(spark.createDataFrame(b) if engine == "spark" else b, engine=engine)


def test_auto_engine_collects_small_dataframes(spark, tmp_path):
    path = str(tmp_path / "auto")
    w = _table(path, "bloom")
    gen, model = BatchGen(9), Model()
    b = gen.upsert_batch(model, 30)
    model.upsert(b)
    res = w.upsert(spark.createDataFrame(b))
    assert res.engine == "local"
    assert canon(read_ours(path)) == model.snapshot()


@pytest.mark.parametrize("index", ["bloom", "bucket"])
def test_a_delete_without_its_partition_value_reaches_its_key_on_the_spark_engine(spark, tmp_path, index):
    """Each Spark task writes one table partition: a delete with no partition value
    (Debezium's ``before`` under Postgres's default replica identity) whose key other
    partitions hold is copied to each of them before the shuffle, as the local engine
    sends it (tests/unit/write/test_moves.py), and combined there with an update of the
    key in the same batch (the later stands)."""
    path = str(tmp_path / "t")
    w = _table(path, index)
    rows = pa.table({"id": ["1", "2", "3"], "city": ["sf", "la", "la"], "ts": [1, 1, 1]})
    w.upsert(spark.createDataFrame(rows), engine="spark")
    w.upsert(spark.createDataFrame(pa.table({"id": ["1"], "city": ["la"], "ts": [2]})), engine="spark")
    # key 1 is now in sf and la (a partition change under the per-partition index);
    # key 3 is updated then deleted in one batch; key 2 stays
    batch = pa.table({"id": ["3", "1", "3"], "city": pa.array(["la", None, None], pa.string()), "ts": [3, 3, 4],
                      "_hoodie_is_deleted": [False, True, True]})
    w.upsert(spark.createDataFrame(batch, schema="id string, city string, ts long, _hoodie_is_deleted boolean"),
             engine="spark")
    assert sorted(read_hudi_rs(path).column("id").to_pylist()) == ["2"]
    assert sorted(read_ours(path).column("id").to_pylist()) == ["2"]


@pytest.mark.parametrize("engine", ["local", "spark"])
def test_an_update_then_a_delete_both_without_a_partition_value_delete_the_key(spark, tmp_path, engine):
    """The batch's last row of key K deletes it; both rows lack the partition value. The
    delete goes to the partition holding K and also stays in the default one, where it
    supersedes the update: K is gone on both engines (Spark's tasks combine after the
    delete was routed, and wrote the update into the default partition)."""
    path = str(tmp_path / "t")
    w = _table(path, "bloom")
    w.upsert(pa.table({"id": ["K", "2"], "city": ["sf", "la"], "ts": [1, 1]}), engine="local")
    batch = pa.table({"id": ["K", "K"], "city": pa.array([None, None], pa.string()), "ts": [2, 2],
                      "_hoodie_is_deleted": [False, True]})
    w.upsert(spark.createDataFrame(batch, schema="id string, city string, ts long, _hoodie_is_deleted boolean")
             if engine == "spark" else batch, engine=engine)
    assert sorted(read_hudi_rs(path).column("id").to_pylist()) == ["2"]
    assert sorted(read_ours(path).column("id").to_pylist()) == ["2"]


@pytest.mark.parametrize("index", ["bloom", "bucket"])
def test_the_keys_collected_path_refuses_a_delete_it_cannot_route(spark, tmp_path, index, monkeypatch):
    """``tag_on_executors=False`` (kept for the benchmarks' comparison) joins its plan back
    on key and partition: a delete without its partition value, whose key another
    partition holds, would match no row and be lost. The batch is refused, naming the key,
    and the table keeps what it had."""
    from streamer.errors import ConfigError
    from streamer.write.engine import spark as spark_engine

    plain = spark_engine.SparkEngine.__init__

    def collecting(self, buckets=None, tag_on_executors=True):
        plain(self, buckets, tag_on_executors=False)

    monkeypatch.setattr(spark_engine.SparkEngine, "__init__", collecting)
    path = str(tmp_path / "t")
    w = _table(path, index)
    w.upsert(spark.createDataFrame(pa.table({"id": ["1", "2"], "city": ["sf", "la"], "ts": [1, 1]})), engine="spark")
    batch = pa.table({"id": ["1"], "city": pa.array([None], pa.string()), "ts": [2], "_hoodie_is_deleted": [True]})
    with pytest.raises(ConfigError, match="key '1'"):
        w.upsert(spark.createDataFrame(batch, schema="id string, city string, ts long, _hoodie_is_deleted boolean"),
                 engine="spark")
    assert sorted(read_hudi_rs(path).column("id").to_pylist()) == ["1", "2"]
    assert sorted(read_ours(path).column("id").to_pylist()) == ["1", "2"]
