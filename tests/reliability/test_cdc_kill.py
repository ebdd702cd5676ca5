"""Exactly once from a database under ``kill -9``: Postgres changes through Debezium into a
table while the ``streamer run`` processes die in seeded phases and Kafka Connect is
killed and restarted once.

A workload thread keeps changing a Postgres table - inserts, updates that leave a large
(TOASTed) text alone, so Debezium sends its placeholder, updates of that text, deletes
and primary-key changes, several statements to a transaction - while the continuous
pipeline runs as real processes with a hot standby (``streamer run FILE --standby``),
each SIGKILLed once per a seeded plan (``MOR_CAMPAIGN_SEED`` replays it; smoke size in
``make test``, at least ten kills in ``make test-campaigns``). Halfway, the Connect worker
is SIGKILLed and started again: Debezium resumes from its last flushed offset, so Kafka
receives some changes twice, which must change nothing. After a final drain the table
equals ``SELECT * FROM orders`` through our reader and hudi-rs, with no key twice and no
placeholder, and the error table holds exactly the records it should: none.
"""

from __future__ import annotations

import random
import sys
import threading
import time
import uuid
from collections import Counter
from pathlib import Path

import pytest

from streamer.config import load_pipelines
from streamer.pipeline.runner import PipelineRunner
from streamer.read import Table
from tests.reliability.streamer_kills import (
    BETWEEN,
    COMMIT,
    ROLLBACK,
    Kill,
    campaign,
    java_options,
    read_hudi_rs,
    spawn,
    steer,
    steered,
)
from tests.support.binlog import topic_events
from tests.support.campaign import assert_few_missed, assert_phases_hit, seeded, sized
from tests.support.cdc import PLACEHOLDER, capture, wait_published
from tests.support.connect import LocalConnect

pytestmark = [pytest.mark.integration, pytest.mark.kafka, pytest.mark.slow, pytest.mark.campaign]

SEED = 20_261_129
PHASES = (BETWEEN, COMMIT, ROLLBACK)
#: Kills beyond the outside one and the (commit, rollback) pair: at full size ten or more.
EXTRA = sized(smoke={}, full={"outside": 4, "inside": 3})
PAIRS = sized(smoke=1, full=2)
LIMIT_S = sized(smoke=900.0, full=2400.0)
pytestmark.append(pytest.mark.timeout(3 * LIMIT_S))
#: Bounds of the workload, not targets: it runs until the last kill.
MAX_TRANSACTIONS = 5_000
FIRST_ROWS = 200
#: Kafka Connect is killed and restarted after this many transactions: while the streamer's
#: kill campaign runs (its first runs take longer than this workload does to get here).
RESTART_AFTER = 40
#: Transactions without a key change just before Kafka Connect is killed: they are what it
#: dies among, so some of them reach Kafka twice.
QUIET = 6


def _yaml(kafka, topic: str, lake: Path) -> str:
    return f"""
pipelines:
  - name: cdc
    source: {{type: kafka, bootstrap_servers: "{kafka.bootstrap_servers}", topic: {topic},
              debezium: postgres, max_records_per_batch: 400}}
    target: {{path: "{lake}/orders", record_key: [id]}}
    policies: {{log_compaction: {{mode: off}}, compaction: {{mode: off}}, clean: {{mode: off}}, archive: {{mode: off}}}}
    trigger: {{mode: continuous, interval: 500ms}}
    engine: local
    spark:
      master: "local[2]"
      conf: {{spark.sql.shuffle.partitions: "2", spark.default.parallelism: "2",
             spark.driver.extraJavaOptions: "{java_options()}"}}
"""


class Workload:
    """Seeded transactions on ``orders``: every kind of change Debezium turns into events."""

    def __init__(self, postgres, db: str, rng: random.Random) -> None:
        self.postgres, self.db, self.rng = postgres, db, rng
        self.next_id = FIRST_ROWS + 1
        self.transactions = 0

    def ids(self) -> list[int]:
        return [int(r[0]) for r in self.postgres.rows("SELECT id FROM orders", database=self.db)]

    def transaction(self, *, key_changes: bool = True) -> None:
        """One seeded transaction; without ``key_changes`` a key change's draw updates a row
        instead (the same draws, so the seed replays the rest alike)."""
        ids = self.ids()
        rng = self.rng
        statements = []
        for _ in range(rng.randint(1, 4)):
            kind = rng.random()
            if kind < 0.3 or len(ids) < 20:
                statements.append(f"INSERT INTO orders VALUES ({self.next_id}, 'new', 1, "
                                  f"repeat('{rng.choice('abc')}', 3000))")
                self.next_id += 1
            elif kind < 0.65:  # leaves the TOASTed note alone: Debezium's placeholder
                statements.append(f"UPDATE orders SET qty = qty + 1 WHERE id = {rng.choice(ids)}")
            elif kind < 0.75:
                statements.append(f"UPDATE orders SET note = repeat('{rng.choice('xyz')}', {rng.randint(2500, 4000)}) "
                                  f"WHERE id = {rng.choice(ids)}")
            elif kind < 0.9:
                statements.append(f"DELETE FROM orders WHERE id = {rng.choice(ids)}")
            else:  # a key change: delete, tombstone and create in Kafka; where a batch ends
                # is the kills' to decide, and the create's note, left alone half the time, is
                # then the old row's as it was before its committed delete; a renamed key
                # renamed again in one batch passes it along (docs/kafka.md)
                note = ", note = note || 'k'" if rng.random() < 0.5 else ""
                old = rng.choice(ids)
                if key_changes:
                    statements.append(f"UPDATE orders SET id = {self.next_id}{note} WHERE id = {old}")
                    self.next_id += 1
                else:
                    statements.append(f"UPDATE orders SET qty = qty + 1 WHERE id = {old}")
        self.postgres.sql("BEGIN; " + "; ".join(statements) + "; COMMIT", database=self.db)
        self.transactions += 1


def test_sigkill_of_streamer_and_connect_loses_no_change_and_applies_none_twice(kafka, postgres, spark, tmp_path):
    with seeded(SEED) as seed:
        _campaign(kafka, postgres, spark, tmp_path, seed)


def _campaign(kafka, postgres, spark, tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    tag = uuid.uuid4().hex[:6]
    db, prefix = f"kill_{tag}", f"kill{tag}"
    topic = f"{prefix}.public.orders"
    setup = ("CREATE TABLE orders (id int PRIMARY KEY, name text, qty int, note text);"
             "ALTER TABLE orders ALTER COLUMN note SET STORAGE EXTERNAL;"
             f"INSERT INTO orders SELECT g, 'item ' || g, g, repeat('s', 3000) FROM generate_series(1, {FIRST_ROWS}) g")
    yaml_path = tmp_path / "cdc.yaml"
    yaml_path.write_text(_yaml(kafka, topic, tmp_path / "lake"))
    (config,) = load_pipelines(yaml_path)
    lease_path = Path(PipelineRunner(config).lease().path)
    workload = Workload(postgres, db, random.Random(seed + 1))
    stop = threading.Event()
    failure: list[BaseException] = []
    log = lambda line: print(line, file=sys.stderr, flush=True)  # noqa: E731

    (tmp_path / "connect").mkdir()
    with LocalConnect(bootstrap_servers=kafka.bootstrap_servers, workdir=tmp_path / "connect") as connect:
        connector = capture(postgres, connect, db=db, prefix=prefix, setup=setup)
        restarted: list[int] = []

        def work() -> None:
            try:
                while not stop.is_set() and workload.transactions < MAX_TRANSACTIONS:
                    workload.transaction()
                    if workload.transactions == RESTART_AFTER and not restarted:
                        # Connect dies and comes back: standalone keeps its offsets in a file,
                        # not its connectors, so the connector is created again, as a
                        # supervisor's start script does; Debezium resumes from the offsets.
                        # Debezium loses the rest of one change's records for good when
                        # Connect dies between them (debezium/dbz#2549: a key change's
                        # create after its delete): every key change is published first,
                        # and the changes Connect dies among change no key
                        wait_published(kafka, topic)
                        for _ in range(QUIET):
                            workload.transaction(key_changes=False)
                        connect.crash()
                        connect.start()
                        connect.create(prefix, connector)
                        connect.wait_running(prefix)
                        restarted.append(workload.transactions)
                        log(f"Kafka Connect restarted after transaction {workload.transactions}")
                    stop.wait(0.05)
            except BaseException as e:  # noqa: BLE001 - reported by the test
                failure.append(e)

        def start(index: int, kill: Kill):
            return spawn(index, kill, rng, ["run", str(yaml_path)], "cdc", tmp_path, lease_path, max_step=30)

        groups = [[Kill("inside", "before complete", expect=COMMIT), steer(ROLLBACK, rng)] for _ in range(PAIRS)]
        groups += [[Kill(kind)] for kind, n in EXTRA.items() for _ in range(n)]
        rng.shuffle(groups)
        plan = [Kill("outside"), *(k for g in groups for k in g)]
        log(f"plan of {len(plan)} kills: {[str(k) for k in plan]}")
        worker = threading.Thread(target=work, daemon=True)
        worker.start()
        try:
            runs = campaign(plan, start, limit_s=LIMIT_S, log=log)
            runs = steered(runs, PHASES, start, rng, limit_s=LIMIT_S, log=log)
            # the restart must have happened while the streamer ran
            deadline = time.monotonic() + 120
            while not restarted and not failure and time.monotonic() < deadline:
                time.sleep(0.5)
        finally:
            stop.set()
            worker.join(timeout=120)
        assert not failure, failure
        assert restarted, "Kafka Connect was never restarted"
        print("kill phases:", dict(Counter(r.where for r in runs).most_common()))
        assert_phases_hit(PHASES, (r.where for r in runs), what="CDC kill campaign")
        missed = [r for r in runs if not r.as_planned]
        assert_few_missed(missed, len(runs), at_most=0.25, what="kills",
                          detail="; ".join(f"run {r.index} [{r.kill_plan}] {r.how}: {r.where}" for r in missed))
        _drain_and_compare(config, spark, postgres, db, kafka, topic)
    print(f"{workload.transactions} transactions, {len(runs)} streamer kills")


def _evidence(kafka, topic: str, config, keys: set[int]) -> str:
    """What the topic and the error table hold of ``keys``: each change as ``offset op
    before->after @lsn`` (``~`` where the note is the placeholder), then the error rows'
    reasons, so a failure says whether a change never reached Kafka or was lost after."""
    try:
        return _evidence_of(kafka, topic, config, keys)
    except Exception as e:  # noqa: BLE001 - evidence for a failure's message must not replace it
        return f"(no evidence: {e!r})"


def _evidence_of(kafka, topic: str, config, keys: set[int]) -> str:
    events = []
    for offset, event in enumerate(topic_events(kafka, topic)):
        change = (event or {}).get("payload", event) or {}
        before, after = change.get("before") or {}, change.get("after") or {}
        if {before.get("id"), after.get("id")} & keys:
            toast = "~" if PLACEHOLDER in str(after.get("note")) else ""
            events.append(f"{offset} {change.get('op')} {before.get('id')}->{after.get('id')}{toast} "
                          f"@{(change.get('source') or {}).get('lsn')}")
    errors = Path(config.errors.path)
    reasons = []
    if (errors / ".hoodie").exists():
        reasons = [str(r)[:300] for r in Table.open(str(errors)).read().to_pylist()
                   if any(str(k) in str(r) for k in keys)][:10]
    return f"the topic's changes of them: {events}; error rows: {reasons}"


def _database(postgres, db: str) -> dict[int, tuple]:
    return {int(i): (n, int(q), note) for i, n, q, note in postgres.rows("SELECT id, name, qty, note FROM orders",
                                                                         database=db)}


def _drain_and_compare(config, spark, postgres, db: str, kafka, topic: str) -> None:
    """Run the pipeline in this process until the table equals the database (Debezium may
    still be publishing the last changes): bounded in time, then compared by every reader."""
    want = _database(postgres, db)
    runner = PipelineRunner(config.model_copy(update={"source": config.source.model_copy(
        update={"max_records_per_batch": 50_000})}), spark=spark)
    deadline = time.monotonic() + 180
    got: dict = {}
    while time.monotonic() < deadline:
        runner.run_once()
        rows = Table.open(config.target.path).read(columns=["id", "name", "qty", "note"]).to_pylist()
        assert len({r["id"] for r in rows}) == len(rows), "a key is in the table twice"
        got = {r["id"]: (r["name"], r["qty"], r["note"]) for r in rows}
        if got == want:
            break
        time.sleep(1)
    differing = sorted(k for k in set(got) | set(want) if got.get(k) != want.get(k))[:20]
    assert got == want, f"{len(got)} rows in the table, {len(want)} in Postgres; differing keys: {differing}; " \
                        f"{_evidence(kafka, topic, config, set(differing))}"
    assert not any(PLACEHOLDER in (r[2] or "") for r in got.values())
    hudi_rs = {r["id"]: (r["name"], r["qty"], r["note"]) for r in read_hudi_rs(config.target.path)}
    assert hudi_rs == want, "hudi-rs reads the table otherwise"
    errors = Path(config.errors.path)
    assert not (errors / ".hoodie").exists() or Table.open(str(errors)).read().num_rows == 0, \
        "Debezium's changes are never bad records: the error table must be empty"
