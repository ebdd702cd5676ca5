"""A dict model of a keyed topic, and the snapshot checks every pipeline test shares.

The model is what the table must equal: the latest record per key by the ordering
field ``ts``, keys whose latest record is a delete (``_hoodie_is_deleted: true``)
removed. ``ts`` grows with production order, and every key is produced with its
uuid as the Kafka key (so it always lands in the same partition, in order): commit
order and ordering-field order then agree, and any correct MOR reader must return
exactly the model (ours and hudi-rs).
"""

from __future__ import annotations

import json
import random
import textwrap
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from tests.support.readers import hudi_rs_table

CITIES = ("sf", "nyc", "ams", "chennai")
SCHEMA_DDL = "uuid STRING, ts BIGINT, city STRING, fare DOUBLE, _hoodie_is_deleted BOOLEAN"
#: Fast-starting driver JVM for short test runs (C1 only, serial GC) plus our log config.
FAST_JVM = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"


@dataclass
class TripModel:
    """Generates upserts/deletes and remembers the expected table."""

    seed: int
    key_space: int = 20_000
    delete_ratio: float = 0.1
    update_ratio: float = 0.4
    latest: dict[str, dict[str, Any]] = field(default_factory=dict)
    produced: int = 0
    _rng: random.Random = field(init=False)
    _next_key: int = 0

    def __post_init__(self) -> None:
        self._rng = random.Random(self.seed)

    def records(self, n: int) -> list[dict[str, Any]]:
        out = []
        live = [k for k, r in self.latest.items() if not r["_hoodie_is_deleted"]]
        in_live = set(live)
        for _ in range(n):
            roll = self._rng.random()
            if live and roll < self.delete_ratio:
                key, deleted = live[self._rng.randrange(len(live))], True
            elif self.latest and roll < self.delete_ratio + self.update_ratio:
                keys = live or list(self.latest)
                key, deleted = keys[self._rng.randrange(len(keys))], False
            else:
                key, deleted = f"trip-{self._next_key % self.key_space:06d}", False
                self._next_key += 1
            self.produced += 1
            rec = {
                "uuid": key,
                "ts": 1_700_000_000_000 + self.produced,
                "city": CITIES[int(key[5:]) % len(CITIES)],
                "fare": round(self._rng.uniform(3, 90), 2),
                "_hoodie_is_deleted": deleted,
            }
            self.apply(rec)
            if not deleted and key not in in_live:
                live.append(key)
                in_live.add(key)
            out.append(rec)
        return out

    def apply(self, rec: dict[str, Any]) -> None:
        have = self.latest.get(rec["uuid"])
        if have is None or rec["ts"] >= have["ts"]:
            self.latest[rec["uuid"]] = rec

    def expected(self) -> dict[str, tuple[int, float, str]]:
        return {
            k: (r["ts"], r["fare"], r["city"]) for k, r in self.latest.items() if not r["_hoodie_is_deleted"]
        }


def produce_records(kafka, topic: str, records: list[dict[str, Any]]) -> int:
    return kafka.produce(topic, [json.dumps(r) for r in records], keys=[r["uuid"] for r in records])


def as_snapshot(table: pa.Table) -> dict[str, tuple[int, float, str]]:
    rows = table.select(["uuid", "ts", "fare", "city"]).to_pylist()
    out = {r["uuid"]: (r["ts"], r["fare"], r["city"]) for r in rows}
    assert len(out) == len(rows), "duplicate keys in the snapshot"
    return out


def read_ours(path: str) -> pa.Table:
    from streamer.read import Table

    return Table.open(path).read()


def read_hudi_rs(path: str) -> pa.Table:
    """hudi-rs's read, the model's columns when the table has no rows."""
    table = hudi_rs_table(path)
    return pa.table({c: [] for c in ("uuid", "ts", "fare", "city")}) if table is None else table


def assert_matches_model(path: str, expected: dict[str, tuple[int, float, str]]) -> None:
    """Our reader and hudi-rs both return exactly ``expected``."""
    for name, reader in (("mor-streamer reader", read_ours), ("hudi-rs", read_hudi_rs)):
        got = as_snapshot(reader(path))
        missing = sorted(set(expected) - set(got))
        extra = sorted(set(got) - set(expected))
        wrong = sorted(k for k in set(got) & set(expected) if got[k] != expected[k])
        assert not (missing or extra or wrong), (
            f"{name}: {len(missing)} missing (e.g. {missing[:3]}), {len(extra)} extra (e.g. {extra[:3]}), "
            f"{len(wrong)} stale (e.g. {[(k, got[k], expected[k]) for k in wrong[:3]]})"
        )


def kafka_pipeline_yaml(
    name: str,
    bootstrap: str,
    topic: str,
    lake: str,
    *,
    trigger: str = "{mode: continuous, interval: 500ms}",
    source_extra: str = "",
    policies: str = "{log_compaction: {mode: off}, compaction: {mode: off}, clean: {mode: off}, archive: {mode: off}}",
    engine: str = "local",
    extra: str = "",
) -> str:
    """One pipeline entry (indented for a ``pipelines:`` list) reading JSON trips from Kafka."""
    return textwrap.indent(
        textwrap.dedent(
            f"""\
            - name: {name}
              source: {{type: kafka, bootstrap_servers: "{bootstrap}", topic: {topic}, format: json,
                        schema: "{SCHEMA_DDL}"{source_extra}}}
              target: {{path: {lake}/{name}, record_key: [uuid], partition_by: [city], ordering_field: ts}}
              policies: {policies}
              trigger: {trigger}
              engine: {engine}
              spark:
                master: "local[2]"
                conf: {{spark.sql.shuffle.partitions: "2", spark.default.parallelism: "2"}}
            """
        )
        + textwrap.indent(textwrap.dedent(extra), "  "),
        "  ",
    )


def committed_offsets(runner) -> int:
    pos = runner.position
    return sum(pos.partitions.values()) if pos is not None and hasattr(pos, "partitions") else 0


def wait_until(cond: Callable[[], bool], timeout_s: float, what: str, poll_s: float = 0.25) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(poll_s)
    raise AssertionError(f"timed out after {timeout_s:.0f}s waiting for {what}")


def run_until_caught_up(runner, kafka, topic: str, producer_done: Callable[[], bool], timeout_s: float) -> None:
    """Run ``runner`` continuously (in a thread) until it has committed every offset of ``topic``
    and the producer is done; bounded by ``timeout_s``; re-raises the runner's failure."""
    import threading

    stop = threading.Event()
    failure: list[BaseException] = []

    def run() -> None:
        try:
            runner.run_continuous(stop, timeout_s=timeout_s)
        except BaseException as e:
            failure.append(e)

    thread = threading.Thread(target=run, name="pipeline-under-test", daemon=True)
    thread.start()

    def caught_up() -> bool:
        if failure or not thread.is_alive():
            return True
        return producer_done() and committed_offsets(runner) >= sum(kafka.end_offsets(topic).values())

    try:
        wait_until(caught_up, timeout_s, f"the pipeline to commit every offset of {topic}", poll_s=0.5)
    finally:
        stop.set()
        thread.join(timeout=150)
    if failure:
        raise failure[0]
    assert not thread.is_alive(), "the pipeline did not stop within 150s of being asked to"
    assert committed_offsets(runner) >= sum(kafka.end_offsets(topic).values()), "stopped before catching up"


def offsets_by_ts(kafka, topic: str, timeout_s: float = 60.0) -> dict[int, tuple[int, int]]:
    """``ts -> (partition, offset)`` of every record in ``topic`` (``ts`` is unique per record)."""
    import uuid

    from confluent_kafka import Consumer, TopicPartition

    ends = kafka.end_offsets(topic)
    want = sum(ends.values())
    consumer = Consumer({"bootstrap.servers": kafka.bootstrap_servers, "group.id": f"audit-{uuid.uuid4().hex[:8]}",
                         "enable.auto.commit": False})
    out: dict[int, tuple[int, int]] = {}
    seen = 0
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in ends])
        deadline = time.monotonic() + timeout_s
        while seen < want and time.monotonic() < deadline:
            for msg in consumer.consume(num_messages=5000, timeout=0.5):
                if msg.error() is not None:
                    continue
                seen += 1
                if msg.value() is not None:
                    rec = json.loads(msg.value())
                    if isinstance(rec, dict) and isinstance(rec.get("ts"), int):
                        out[rec["ts"]] = (msg.partition(), msg.offset())
    finally:
        consumer.close()
    assert seen == want, f"read {seen} of {want} records of {topic}"
    return out


def assert_each_record_committed_once(path: str, kafka, topic: str) -> int:
    """The exactly-once audit; returns the number of data commits.

    1. The positions of consecutive commits never go back, and each commit moves on.
    2. Every row of the snapshot carries the commit time of the one commit whose offset
       range holds that row's record: a batch written twice would have rewritten its
       rows under the later commit's time (or, with newer data since, resurrected old
       values, which the model check catches).
    """
    from streamer.fs import resolve
    from streamer.pipeline.checkpoint import checkpoint_history

    fs, base = resolve(path)
    history = checkpoint_history(fs, base)
    previous: dict[int, int] = {}
    for h in history:
        now = h.position.partitions
        assert all(now.get(p, 0) >= o for p, o in previous.items()), f"position went back at {h.instant}"
        assert now != previous, f"commit {h.instant} repeats the previous position"
        previous = dict(now)
    where = offsets_by_ts(kafka, topic)
    rows = read_ours(path).select(["uuid", "ts", "_hoodie_commit_time"]).to_pylist()
    for row in rows:
        p, o = where[row["ts"]]
        owner = next(h.instant for h in history if h.position.partitions.get(p, 0) > o)
        assert row["_hoodie_commit_time"] == owner, (
            f"{row['uuid']} (offset {p}/{o}) was written by {row['_hoodie_commit_time']}, "
            f"but the commit covering that offset is {owner}: a batch was applied twice"
        )
    return len(history)
