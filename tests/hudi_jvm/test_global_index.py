"""A table written with the global bloom index, whose rows move between partitions when
their partition column changes, reads with one row per key in Apache Hudi 0.15, 1.0 and
1.2, hudi-rs and ours; and Hudi's own ``GLOBAL_BLOOM`` writer continues it after a
hand-over, moving rows the same way, with our writer after it again.

The expected rows come from a dict of the latest row per key (the model), never from a
reader. The moves' old rows sit in their old file groups, deleted by delete blocks that
carry the incoming ordering value: every reader merges each file group alone, so this is
what proves the move is visible as one row everywhere.
"""

from __future__ import annotations

import uuid

import pyarrow as pa
import pytest

from streamer.config import parse_pipelines
from streamer.config.policies import CompactionPolicy
from streamer.pipeline.runner import PipelineRunner
from streamer.read import Table
from streamer.services.compaction import schedule_compaction
from streamer.services.executor import execute
from streamer.services.handover import handover_to_hudi
from streamer.table.identity import IndexConfig, IndexType
from streamer.write import HudiWriter, TableConfig
from tests.hudi_jvm.compare import Expected, Query, assert_readers_match
from tests.support import block_tables as tg
from tests.support.cdc import capture, wait_for_events

pytestmark = [pytest.mark.hudi_jvm, pytest.mark.conformance]

SCHEMA = pa.schema([("id", pa.int64()), ("status", pa.string()), ("ts", pa.int64()), ("v", pa.string())])
COLUMNS = ["id", "status", "ts", "v"]
STATUSES = ("new", "paid", "shipped", "returned")
READERS = {6: ("0.15", "1.0", "1.2"), 9: ("1.2",)}
QUERIES = [Query("snapshot"), Query("read_optimized")]


class _Model:
    """The latest row per key, as the changes say (a delete removes the key)."""

    def __init__(self) -> None:
        self.rows: dict[int, dict] = {}

    def upsert(self, rows: list[dict]) -> pa.Table:
        for r in rows:
            have = self.rows.get(r["id"])
            if have is None or have["ts"] <= r["ts"]:
                self.rows[r["id"]] = r
        return pa.Table.from_pylist(rows, SCHEMA)

    def delete(self, ids: list[int], ts: int) -> pa.Table:
        for i in ids:
            self.rows.pop(i, None)
        return pa.Table.from_pylist([{"id": i, "status": None, "ts": ts, "v": None} for i in ids], SCHEMA)

    def expected(self) -> Expected:
        return Expected.of_rows(sorted(self.rows.values(), key=lambda r: r["id"]), COLUMNS)


def _changes(w: HudiWriter, model: _Model, path: str) -> None:
    """Inserts, moves (each key's status changes; some move back), deletes that carry the
    key alone, replays of older changes, with a compaction between."""
    w.upsert(model.upsert([{"id": i, "status": STATUSES[i % 2], "ts": 1, "v": f"v{i}"} for i in range(60)]))
    for step in range(2, 6):
        moves = [{"id": i, "status": STATUSES[(i + step) % 4], "ts": step, "v": f"v{i}.{step}"}
                 for i in range(0, 60, step)]
        r = w.upsert(model.upsert(moves))
        assert r.moved > 0
        if step == 3:
            force = CompactionPolicy()
            plan = schedule_compaction(Table.open(path), force, force=True)
            assert plan is not None and execute(Table.open(path), plan).status == "completed"
    w.delete(model.delete([7, 11, 13], ts=9))
    replays = [{"id": i, "status": "returned", "ts": 1, "v": "replayed"} for i in (2, 4, 8)]
    assert w.upsert(pa.Table.from_pylist(replays, SCHEMA)).stale == 3


@pytest.mark.parametrize("version", sorted(READERS))
def test_moved_rows_read_as_one_row_per_key_in_every_reader(tmp_path, hudi_sessions, version):
    path = str(tmp_path / "t")
    cfg = TableConfig("orders", ("id",), ("status",), "ts", index=IndexConfig(IndexType.GLOBAL_BLOOM),
                      table_version=version)
    w = HudiWriter.create(path, cfg, schema=SCHEMA, options=tg.SMALL)
    model = _Model()
    _changes(w, model, path)
    sessions = {v: hudi_sessions[v] for v in READERS[version]}
    assert_readers_match(path, sessions, model.expected(), QUERIES)


HUDI_GLOBAL = {
    "hoodie.table.name": "orders",
    "hoodie.datasource.write.table.type": "MERGE_ON_READ",
    "hoodie.datasource.write.recordkey.field": "id",
    "hoodie.datasource.write.partitionpath.field": "status",
    "hoodie.datasource.write.precombine.field": "ts",
    "hoodie.datasource.write.payload.class": "org.apache.hudi.common.model.DefaultHoodieRecordPayload",
    "hoodie.datasource.write.operation": "upsert",
    "hoodie.index.type": "GLOBAL_BLOOM",
    "hoodie.bloom.index.update.partition.path": "true",
}


def test_hudi_global_bloom_writer_continues_and_so_do_we(tmp_path, hudi12):
    path = str(tmp_path / "t")
    cfg = TableConfig("orders", ("id",), ("status",), "ts", index=IndexConfig(IndexType.GLOBAL_BLOOM),
                      table_version=9)
    w = HudiWriter.create(path, cfg, schema=SCHEMA, options=tg.SMALL)
    model = _Model()
    _changes(w, model, path)
    handover_to_hudi(path)
    # Hudi 1.2 moves keys our writer placed (and moved) into other partitions
    hudi_moves = [{"id": i, "status": STATUSES[(i + 1) % 4], "ts": 20, "v": f"hudi{i}"} for i in range(0, 60, 5)]
    hudi12.write(path, model.upsert(hudi_moves), HUDI_GLOBAL)
    assert_readers_match(path, {"1.2": hudi12}, model.expected(), QUERIES)
    # and our writer moves some of them again
    w = HudiWriter.open(path, options=tg.SMALL)
    ours = [{"id": i, "status": STATUSES[(i + 2) % 4], "ts": 30, "v": f"ours{i}"} for i in range(0, 60, 10)]
    assert w.upsert(model.upsert(ours)).moved == len(ours)
    assert_readers_match(path, {"1.2": hudi12}, model.expected(), QUERIES)


CDC_YAML = """
pipelines:
  - name: orders
    source: {{type: kafka, bootstrap_servers: "{bootstrap}", topic: {topic}, debezium: postgres}}
    target: {{path: "{t}", record_key: [id], partition_by: [status], index: {{type: global_bloom}}}}
    trigger: {{mode: once}}
"""


@pytest.mark.kafka
def test_a_postgres_row_whose_status_changes_is_in_one_partition_in_every_reader(
        kafka, kafka_connect, postgres, spark, tmp_path, hudi_sessions):
    """Postgres → Debezium → our pipeline, partitioned by a column the updates change:
    each key ends in the partition of its current status, once, in every reader. Deletes
    carry the key alone (replica identity default), so the index must find their rows."""
    tag = uuid.uuid4().hex[:6]
    db, prefix = f"moves_{tag}", f"mv{tag}"
    topic = f"{prefix}.public.orders"
    capture(postgres, kafka_connect, db=db, prefix=prefix,
            setup="CREATE TABLE orders (id int PRIMARY KEY, status text NOT NULL, qty int);"
                  "INSERT INTO orders SELECT g, 'new', g FROM generate_series(1, 40) g")
    (config,), problems = parse_pipelines(CDC_YAML.format(bootstrap=kafka.bootstrap_servers, topic=topic,
                                                          t=tmp_path / "orders"))
    assert not problems
    wait_for_events(kafka, topic, 40)
    assert PipelineRunner(config, spark=spark).run_once().errored == 0
    events = 40
    rounds = [
        ("UPDATE orders SET status = 'paid' WHERE id <= 20", 20),
        # moved twice in one transaction (one batch), moved back, deleted after a move
        ("BEGIN; UPDATE orders SET status = 'shipped' WHERE id <= 5;"
         "UPDATE orders SET status = 'returned', qty = 0 WHERE id <= 2; COMMIT", 7),
        ("UPDATE orders SET status = 'new' WHERE id BETWEEN 6 AND 8; DELETE FROM orders WHERE id IN (9, 30)", 3 + 4),
        # a key change with a status change: delete of 10 in 'paid', create of 110 in 'shipped'
        ("UPDATE orders SET id = 110, status = 'shipped' WHERE id = 10", 3),
    ]
    for sql, count in rounds:
        postgres.sql(sql, database=db)
        events += count
        wait_for_events(kafka, topic, events)
        report = PipelineRunner(config, spark=spark).run_once()
        assert report.errored == 0
    rows = [{"id": int(i), "status": s, "qty": None if q is None else int(q)}
            for i, s, q in postgres.rows("SELECT id, status, qty FROM orders ORDER BY id", database=db)]
    assert {r["status"] for r in rows} == {"new", "paid", "shipped", "returned"}
    by_partition = Table.open(config.target.path).read(columns=["id", "status", "_hoodie_partition_path"])
    assert all(s == p for s, p in zip(by_partition.column("status").to_pylist(),
                                      by_partition.column("_hoodie_partition_path").to_pylist(), strict=True))
    assert_readers_match(config.target.path, hudi_sessions, Expected.of_rows(rows, ["id", "status", "qty"]),
                         [Query("snapshot")])
