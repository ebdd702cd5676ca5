"""A table on S3 (a real S3-compatible server): written by our writer through inserts,
upserts, deletes and rollback-free commits, then read identically by our reader and by
hudi-rs (an independent Rust reader, reaching the server through the AWS variables)."""

from __future__ import annotations

import uuid

import pytest

from streamer.fs import resolve
from streamer.write import HudiWriter, TableConfig, WriteOptions
from tests.support.write_model import BatchGen, Model, canon, read_hudi_rs, read_ours

pytestmark = [pytest.mark.s3, pytest.mark.integration]

SMALL = WriteOptions(small_file_limit=20_000, max_file_size=30_000, default_record_size=100,
                     slice_bloom_num_entries=500, engine="local")


@pytest.mark.parametrize("version", [6, 9])
def test_writer_and_both_readers_on_s3(s3_store, version):
    uri = f"s3://lake-bucket/t-{uuid.uuid4().hex[:8]}"
    cfg = TableConfig("model", ("id",), ("city",), "ts", hive_style_partitioning=True, table_version=version)
    w = HudiWriter.create(uri, cfg, options=SMALL)
    gen, model = BatchGen(7), Model()
    for i, op in enumerate(["upsert", "upsert", "insert", "delete", "upsert", "upsert"]):
        n = gen.rng.randrange(40, 120)
        if op == "upsert":
            batch = gen.upsert_batch(model, n)
            w.upsert(batch, extra_metadata={"checkpoint": str(i)})
            model.upsert(batch)
        elif op == "insert":
            batch = gen.insert_batch(model, n)
            w.insert(batch)
            model.insert(batch)
        else:
            batch = gen.delete_batch(model, n // 4)
            w.delete(batch)
            model.delete(batch)
        expected = model.snapshot()
        assert canon(read_ours(uri)) == expected, f"our reader differs after commit {i} ({op})"
    assert canon(read_hudi_rs(uri)) == model.snapshot(), "hudi-rs differs"
    fs, base = resolve(uri)
    names = {s.name for s in fs.list_dir(f"{base}/.hoodie")}
    if version >= 8:  # the timeline has its own folder; its completed instants too
        names |= {s.name for s in fs.list_dir(f"{base}/.hoodie/timeline")}
        assert sum("_" in n and not n.endswith((".requested", ".inflight")) for n in names) == 6
    # completed instants were single PUTs: no temp files, no lock left behind
    assert not any(n.endswith(".tmp") or n.endswith(".excl") for n in names), names
    assert ".streamer_writer.lock" not in names
    fs.delete_dir(base)


AWS_VARS = ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY",
            "AWS_SESSION_TOKEN", "AWS_REGION", "AWS_DEFAULT_REGION", "AWS_PROFILE")


def test_spark_engine_writes_with_explicit_settings(spark, s3_store, monkeypatch):
    """The executors' file-group writes reach the store the settings name (as a pipeline's
    ``storage.s3`` gives them), with no AWS variable in the driver: the filesystem travels
    in the write context, credentials included, and sets what the SDK needs where it lands."""
    from streamer.read import Table

    for name in AWS_VARS:
        monkeypatch.delenv(name, raising=False)
    fs, base = resolve(f"s3://lake-bucket/spark-{uuid.uuid4().hex[:8]}", s3_store.settings())
    cfg = TableConfig("model", ("id",), ("city",), "ts", hive_style_partitioning=True)
    w = HudiWriter.create(base, cfg, options=SMALL, fs=fs)
    gen, model = BatchGen(11), Model()
    for _ in range(2):
        batch = gen.upsert_batch(model, 80)
        assert w.upsert(spark.createDataFrame(batch), engine="spark").engine == "spark"
        model.upsert(batch)
    assert canon(Table.open(base, fs=fs).read()) == model.snapshot()
    fs.delete_dir(base)
