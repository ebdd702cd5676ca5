"""Files source across batches (new files picked up, bad lines to errors) and the generator on Spark."""

from __future__ import annotations

import datetime as dt
import os
from pathlib import Path

import fastavro
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from streamer.config import load_pipelines
from streamer.config.sources import FilesSourceConfig, GeneratorSourceConfig
from streamer.sources.files import FilesSource
from streamer.sources.generator import GeneratorSource, generate_arrow
from streamer.sources.position import FileListPosition, GeneratorPosition
from streamer.transforms import apply_transforms

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[3]


def write(path: Path, text: str, mtime_s: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    os.utime(path, (mtime_s, mtime_s))


def files_source(folder: Path, fmt: str, **kw) -> FilesSource:
    return FilesSource(FilesSourceConfig(type="files", path=str(folder), format=fmt, **kw))


def test_json_folder_is_read_incrementally_with_bad_lines_split_off(spark, tmp_path):
    write(tmp_path / "a.json", '{"id": 1, "v": "x"}\n{"id": 2, "v": "y"}\n', 1000)
    write(tmp_path / "b.json", '{"id": 3, "v": "z"}\n{broken\n', 2000)
    write(tmp_path / "_SUCCESS", "", 2500)
    write(tmp_path / ".b.json.crc", "junk", 2500)
    src = files_source(tmp_path, "json", schema="id INT, v STRING", max_files_per_batch=1)

    b1 = src.read_batch(spark, None)
    assert [r.id for r in b1.df.collect()] == [1, 2] and b1.errors.count() == 0
    b2 = src.read_batch(spark, b1.end)
    assert [r.id for r in b2.df.collect()] == [3]
    (err,) = b2.errors.collect()
    assert err.raw_payload == "{broken" and err.file.endswith("/b.json") and err.source_type == "files"
    assert b2.end == FileListPosition(watermark_ns=2000 * 10**9, files=(str(tmp_path / "b.json"),))
    assert not src.read_batch(spark, b2.end).has_new_data

    write(tmp_path / "sub" / "c.json", '{"id": 4, "v": "w"}\n', 3000)  # arrives later, in a sub-folder
    b3 = src.read_batch(spark, b2.end)
    assert [r.id for r in b3.df.collect()] == [4]
    for b in (b1, b2, b3):
        b.release()


def test_csv_and_parquet_and_glob(spark, tmp_path):
    write(tmp_path / "csv" / "x.csv", "id,name\n1,a\n2,b\n", 1000)
    csv = files_source(tmp_path / "csv", "csv", schema="id INT, name STRING").read_batch(spark, None)
    assert [(r.id, r.name) for r in csv.df.orderBy("id").collect()] == [(1, "a"), (2, "b")]

    pq_dir = tmp_path / "pq"
    pq_dir.mkdir()
    pq.write_table(pa.table({"id": [1, 2]}), pq_dir / "one.parquet")
    pq.write_table(pa.table({"id": [3]}), pq_dir / "two.parquet")
    (pq_dir / "notes.txt").write_text("not data")
    batch = files_source(pq_dir, "parquet", glob="*.parquet").read_batch(spark, None)
    assert sorted(r.id for r in batch.df.collect()) == [1, 2, 3]
    assert len(batch.end.files) >= 1


def test_avro_files_are_decoded_on_executors(spark, tmp_path):
    schema = {
        "type": "record", "name": "R",
        "fields": [
            {"name": "id", "type": "long"},
            {"name": "tags", "type": {"type": "map", "values": "int"}},
            {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        ],
    }
    when = dt.datetime(2024, 1, 2, 3, 4, 5, tzinfo=dt.timezone.utc)
    with open(tmp_path / "r.avro", "wb") as f:
        fastavro.writer(f, schema, [{"id": i, "tags": {"k": i}, "at": when} for i in range(3)])
    rows = files_source(tmp_path, "avro").read_batch(spark, None).df.orderBy("id").collect()
    assert [(r.id, r.tags) for r in rows] == [(0, {"k": 0}), (1, {"k": 1}), (2, {"k": 2})]
    assert rows[0].at.replace(tzinfo=dt.timezone.utc) == when  # session time zone is UTC


def test_a_batch_of_files_keeps_every_files_columns_or_names_the_conflict(spark, tmp_path):
    """Files of one batch whose columns differ: every file's columns are read (before, a
    column only one Parquet file had, or only an older Avro file had, was dropped unseen),
    and a column two files type differently is refused naming it and both files."""
    from streamer.errors import SourceError

    for fmt in ("parquet", "avro"):
        folder = tmp_path / fmt
        folder.mkdir()
        rows = [{"id": "a", "n": 1, "old": "o"}, {"id": "b", "n": 2, "new": "x"}]
        for i, row in enumerate(rows):
            path = folder / f"f{i}.{fmt}"
            if fmt == "parquet":
                pq.write_table(pa.Table.from_pylist([row]), path)
            else:
                fields = [{"name": k, "type": "long" if k == "n" else "string"} for k in row]
                with open(path, "wb") as f:
                    fastavro.writer(f, {"type": "record", "name": "R", "fields": fields}, [row])
            os.utime(path, (1000 + i, 1000 + i))
        got = files_source(folder, fmt).read_batch(spark, None).df.orderBy("id").collect()
        assert [r.asDict() for r in got] == [{**{"old": None, "new": None}, **row} for row in rows], fmt

        clash = tmp_path / f"{fmt}-clash"
        clash.mkdir()
        for i, n in enumerate(["three", 4]):
            path = clash / f"g{i}.{fmt}"
            if fmt == "parquet":
                pq.write_table(pa.table({"id": ["c"], "n": [n]}), path)
            else:
                kind = "string" if isinstance(n, str) else "long"
                schema = {"type": "record", "name": "R", "fields": [{"name": "id", "type": "string"},
                                                                    {"name": "n", "type": kind}]}
                with open(path, "wb") as f:
                    fastavro.writer(f, schema, [{"id": "c", "n": n}])
            os.utime(path, (1000 + i, 1000 + i))
        with pytest.raises(SourceError, match=r"g0\.(parquet|avro)") as refused:
            files_source(clash, fmt).read_batch(spark, None).df.collect()
        assert "'n'" in str(refused.value), fmt


def test_generator_on_spark_matches_arrow_and_replays(spark):
    config = GeneratorSourceConfig(type="generator", records_per_batch=300, update_ratio=0.2, delete_ratio=0.1)
    src = GeneratorSource(config)
    b0 = src.read_batch(spark, None)
    b1 = src.read_batch(spark, b0.end)
    replay = src.read_batch(spark, GeneratorPosition(batch_index=1))
    assert b1.end == GeneratorPosition(batch_index=2)
    assert sorted(map(tuple, b1.df.collect())) == sorted(map(tuple, replay.df.collect()))
    assert b1.df.count() == generate_arrow(config, 1).num_rows == 300
    assert b1.df.where("_hoodie_is_deleted").count() == 30


def test_demo_config_runs_through_its_transforms(spark):
    (demo,) = load_pipelines(REPO / "configs" / "demo.yaml", env={})
    batch = GeneratorSource(demo.source).read_batch(spark, None)
    out = apply_transforms(batch.df, demo.transforms, spark)
    assert {"uuid", "ts", "city", "fare_amount", "fare_currency", "day"} <= set(out.columns)
    assert out.count() == demo.source.records_per_batch
    assert {r.city for r in out.select("city").distinct().collect()} == set(demo.source.partitions)
