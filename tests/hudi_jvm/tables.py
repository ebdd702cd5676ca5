"""Every kind of table our writer and services produce, built small for the Hudi tier.

Each builder writes a table at ``path`` and returns its model (a
:class:`~tests.support.write_model.History` of every commit, built from the batches
written and the instants the commits returned): the answer every reader is judged by. The tables use the
small-file settings of the services tests, so several file groups per partition exist,
inserts are routed into log blocks (RFC-06), delete blocks appear, and services have
many small blocks to work on.
"""

from __future__ import annotations

import datetime as dt
import decimal
from collections.abc import Callable
from types import SimpleNamespace

import pyarrow as pa

from streamer.config.policies import (
    ArchivePolicy,
    CleanPolicy,
    CompactionPolicy,
    LogCompactionPolicy,
)
from streamer.read import Table
from streamer.services.archive import run_archive
from streamer.services.clean import run_clean
from streamer.services.compaction import schedule_compaction
from streamer.services.executor import execute
from streamer.services.log_compaction import schedule_log_compaction
from streamer.write import HudiWriter, TableConfig
from tests.support import block_tables as tg
from tests.support.failed_write import fail_before_complete
from tests.support.write_model import History, KeySpec

LC = LogCompactionPolicy(min_blocks=3)


class Recorder:
    """A writer whose every completed commit is also applied to a :class:`History`.

    The model sees only the batches handed to the writer and the instant each commit
    returned, never a read: it is the independent answer the tier judges readers by.
    """

    def __init__(self, writer: HudiWriter, history: History | None = None) -> None:
        self.w = writer
        self.history = history or History()

    def upsert(self, batch: pa.Table, **kw) -> str:
        res = self.w.upsert(batch, **kw)
        self.history.upsert(res.instant, batch)
        return res.instant

    def delete(self, keys: pa.Table, **kw) -> str:
        res = self.w.delete(keys, **kw)
        self.history.delete(res.instant, keys)
        return res.instant

    def live(self) -> SimpleNamespace:
        """The model's live keys as ``tg.Gen.deletes`` picks from them (``.rows`` by (city, id))."""
        return SimpleNamespace(rows={(r["city"], r["id"]): r for r in self.history.snapshot()})

    def step(self, gen: tg.Gen, *, rows: int = 12, delete: bool = False) -> str:
        """As :func:`tests.support.block_tables.step`: ``rows`` upserts, or a third as many deletes."""
        if delete:
            return self.delete(gen.deletes(self.live(), max(1, rows // 3)))
        return self.upsert(gen.upserts(rows))


def _ingest(path: str, *, fmt: str = "parquet", commits: int = 8) -> tuple[Recorder, tg.Gen]:
    """As ``tg.build(path, commits, block_format=fmt, deletes_every=3)``, recorded."""
    rec = Recorder(tg.create(path, fmt))
    gen = tg.Gen(0)
    rec.upsert(gen.upserts(120))
    for i in range(commits):
        rec.step(gen, delete=(i % 3 == 2))
    return rec, gen


def upserts_deletes_parquet(path: str) -> History:
    return _ingest(path)[0].history


def upserts_deletes_avro(path: str) -> History:
    return _ingest(path, fmt="avro")[0].history


def mixed_block_formats(path: str) -> History:
    """Parquet blocks, then Avro blocks in the same file groups (a per-writer setting)."""
    rec, gen = _ingest(path, commits=4)
    rec.w.config = rec.w.config.with_changes(log_block_format="avro")
    for i in range(4):
        rec.step(gen, delete=(i == 2))
    return rec.history


def is_deleted_flag(path: str) -> History:
    """Deletes expressed as ``_hoodie_is_deleted`` rows inside an upsert."""
    rec, gen = _ingest(path, commits=3)
    keys = sorted((r["city"], r["id"]) for r in rec.history.snapshot())[:10]
    batch = pa.table({
        "id": pa.array([k[1] for k in keys], pa.int64()),
        "city": [k[0] for k in keys],
        "ts": pa.array([10_000 + i for i in range(len(keys))], pa.int64()),
        "value": [None if i % 2 == 0 else f"kept{i}" for i in range(len(keys))],
        "_hoodie_is_deleted": [i % 2 == 0 for i in range(len(keys))],
    })
    rec.upsert(batch)
    # later batches order above the flagged rows, so event time and write order agree
    # (a re-insert below a delete's ordering value is where Hudi 0.15 and 1.0 differ)
    gen.ts = 20_000
    rec.step(gen)
    return rec.history


def log_compacted(path: str) -> History:
    rec, gen = _ingest(path, commits=10)
    lc = schedule_log_compaction(Table.open(path), LC)
    assert lc is not None and execute(Table.open(path), lc).status == "completed"
    rec.step(gen)
    return rec.history


def compacted_cleaned_archived(path: str) -> History:
    rec, gen = _ingest(path, commits=6)
    comp = schedule_compaction(Table.open(path), CompactionPolicy(), force=True)
    assert execute(Table.open(path), comp).status == "completed"
    for _ in range(3):
        rec.step(gen)
    run_clean(Table.open(path), CleanPolicy(retain_commits=1))
    # version 6 into .hoodie/archived, 8 and 9 into the LSM history
    assert run_archive(Table.open(path), ArchivePolicy(min_commits=2, max_commits=3)).archived
    rec.step(gen)
    return rec.history


def pending_compaction(path: str) -> History:
    """A requested compaction and writes after it: log-only file slices on the plan's instant."""
    rec, gen = _ingest(path, commits=5)
    assert schedule_compaction(Table.open(path), CompactionPolicy(), force=True) is not None
    rec.step(gen)
    rec.step(gen, delete=True)
    return rec.history


def rolled_back_write(path: str) -> History:
    """A write that failed after writing its files, rolled back by the next writer."""
    rec, gen = _ingest(path, commits=3)
    fail_before_complete(lambda: rec.w.upsert(gen.upserts(15, tag="lost")))  # not in the model
    rec.step(gen)
    t = Table.open(path)
    assert any(i.action == "rollback" for i in t.timeline.completed()), "no rollback happened"
    return rec.history


def spark_engine(path: str, spark) -> History:
    """Upserts and a delete written through the Spark engine (a table of the version of
    the enclosing ``tg.at_version``)."""
    rec = Recorder(tg.create(path))
    gen = tg.Gen(5)
    for i in range(4):
        batch = gen.upserts(40) if i != 2 else gen.deletes(rec.live(), 10)
        df = spark.createDataFrame(batch.to_pylist(), schema="id long, city string, ts long, value string")
        if i == 2:
            rec.history.delete(rec.w.delete(df, engine="spark").instant, batch)
        else:
            rec.history.upsert(rec.w.upsert(df, engine="spark").instant, batch)
    return rec.history


#: Columns Hudi's Spark reader replaces for a key generator, for Hudi's own tables too:
#: with TimestampBasedKeyGenerator, Hudi 0.15's read-optimized query returns the source
#: field as the partition path string ("2023/11/14") and Hudi 1.0 as a string of the
#: value ("1700000000001") - checked on a table Hudi 0.15 wrote itself in
#: test_hudi_reads_its_own_timestamp_keygen_table_the_same_way.
KEYGEN_IGNORED = {"timestamp": ("ts",)}


def key_generators(root: str) -> dict[str, tuple[str, History]]:
    """Complex (hive-style), non-partitioned and timestamp key generators: name -> (path, model).

    The model follows Hudi's event-time merge: the last upsert re-sends id 1 with an
    older ``ts`` (it loses where ``ts`` orders) and a newer ``seq`` (it wins where
    ``seq`` orders); the delete carries its row's ordering value (a tie: the delete wins).

    The timestamp table orders by ``seq``, not by its partition source ``ts``: Hudi 1.0
    reads that source field as a string and then fails comparing it with a delete's
    long ordering value (``ClassCastException`` in ``FileGroupRecordBuffer.merge``), for
    Hudi-written tables too.
    """
    rows = pa.table({
        "id": pa.array([1, 2, 3, 1, 4], pa.int64()),
        "name": ["a", "b", "c", "a", "d"],
        "city": ["sf", "sf", "nyc", "sf", "oslo"],
        "ts": pa.array([1_700_000_000_000, 1_700_003_600_000, 1_700_090_000_000,
                        1_700_000_000_001, 1_700_190_000_000], pa.int64()),
        "v": [1.0, 2.0, 3.0, 4.0, 5.0],
        "seq": pa.array([1, 2, 3, 4, 5], pa.int64()),
    })
    cases = {
        "complex_hive": TableConfig("c", ("id", "name"), ("city", "name"), "ts", keygen="complex",
                                    hive_style_partitioning=True),
        "simple_hive": TableConfig("s", ("id",), ("city",), "ts", hive_style_partitioning=True),
        "non_partitioned": TableConfig("n", ("id",), (), "ts", keygen="non_partitioned"),
        "timestamp": TableConfig("d", ("id",), ("ts",), "seq", keygen="timestamp"),
    }
    out = {}
    for name, cfg in cases.items():
        path = f"{root}/{name}"
        keygen = {"complex_hive": "complex", "non_partitioned": "non_partitioned", "timestamp": "timestamp"}
        keys = KeySpec(cfg.record_key_fields, cfg.partition_fields, keygen.get(name, "simple"),
                       cfg.hive_style_partitioning)
        rec = Recorder(HudiWriter.create(path, tg.versioned(cfg), options=tg.SMALL), History(keys, cfg.ordering_field))
        rec.upsert(rows)
        rec.upsert(rows.slice(1, 2).set_column(4, "v", pa.array([20.0, 30.0])))
        rec.delete(rows.slice(4, 1))
        rec.upsert(rows.slice(0, 1).set_column(5, "seq", pa.array([9], pa.int64())))
        out[name] = (path, rec.history)
    return out


ALL_TYPES_SCHEMA = pa.schema([
    ("id", pa.int64()),
    ("city", pa.string()),
    ("ts", pa.int64()),
    ("flag", pa.bool_()),
    ("i32", pa.int32()),
    ("f32", pa.float32()),
    ("f64", pa.float64()),
    ("dec", pa.decimal128(10, 3)),
    ("day", pa.date32()),
    ("at", pa.timestamp("us", tz="UTC")),
    ("raw", pa.binary()),
    ("tags", pa.list_(pa.string())),
    ("attrs", pa.map_(pa.string(), pa.int64())),
    ("point", pa.struct([("x", pa.float64()), ("label", pa.string())])),
    ("items", pa.list_(pa.struct([("k", pa.string()), ("n", pa.int32())]))),
])


def _all_types_rows(ids: list[int], version: int) -> pa.Table:
    base = dt.datetime(2026, 1, 2, 3, 4, 5, 678901, tzinfo=dt.timezone.utc)
    rows = []
    for i in ids:
        rows.append({
            "id": i, "city": ["sf", "nyc"][i % 2], "ts": version * 1000 + i,
            "flag": (i + version) % 2 == 0, "i32": i * 7 - version, "f32": i / 4 + version,
            "f64": i / 3 + version, "dec": decimal.Decimal(f"{i}.{version:03d}"),
            "day": dt.date(2026, 1, 1) + dt.timedelta(days=i + version),
            "at": base + dt.timedelta(seconds=i, microseconds=version),
            "raw": bytes([i % 256, version % 256, 0, 255]),
            "tags": [f"t{i}", f"v{version}"] if i % 3 else [],
            "attrs": [("a", i), ("b", version)],
            "point": {"x": i * 1.5, "label": None if i % 4 == 0 else f"p{i}"},
            "items": [{"k": f"k{i}", "n": version}],
        })
    return pa.Table.from_pylist(rows, schema=ALL_TYPES_SCHEMA)


def all_types(path: str, *, fmt: str = "parquet") -> History:
    rec = Recorder(HudiWriter.create(path, tg.versioned(TableConfig("types", ("id",), ("city",), "ts", log_block_format=fmt)),
                                     schema=ALL_TYPES_SCHEMA, options=tg.SMALL))
    rec.upsert(_all_types_rows(list(range(40)), 1))
    rec.upsert(_all_types_rows(list(range(30, 60)), 2))  # updates and inserts into logs
    rec.delete(_all_types_rows([3, 4, 31], 3).select(["id", "city"]))
    rec.upsert(_all_types_rows([5, 6, 61], 4))
    return rec.history


def all_types_avro(path: str) -> History:
    return all_types(path, fmt="avro")


def schema_evolution(path: str) -> History:
    """A column added in a later commit (older base files and blocks lack it)."""
    rec, gen = _ingest(path, commits=3)
    later = gen.upserts(20)
    later = later.append_column("score", pa.array([float(i) for i in range(later.num_rows)]))
    rec.upsert(later)
    rec.step(gen)  # the next batch without the column: null there
    return rec.history


BUILDERS: dict[str, Callable[[str], History]] = {
    "upserts_deletes_parquet": upserts_deletes_parquet,
    "upserts_deletes_avro": upserts_deletes_avro,
    "mixed_block_formats": mixed_block_formats,
    "is_deleted_flag": is_deleted_flag,
    "log_compacted": log_compacted,
    "compacted_cleaned_archived": compacted_cleaned_archived,
    "pending_compaction": pending_compaction,
    "rolled_back_write": rolled_back_write,
    "all_types": all_types,
    "all_types_avro": all_types_avro,
    "schema_evolution": schema_evolution,
}
