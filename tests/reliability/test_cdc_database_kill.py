"""A whole database to the lake under ``kill -9``: six Postgres tables through Debezium
(JSON with embedded schemas, and Avro through the registry) into one whole-database
pipeline, while the ``streamer run`` process is SIGKILLed again and again and Kafka Connect
is killed and restarted once.

The workload (seeded, :class:`Workload`) runs transactions that touch several tables at
once: bulk inserts, updates (of a large TOASTed text too, which most updates leave alone,
so Debezium sends its placeholder), deletes, primary-key changes, a composite key,
decimals, rows moving between partitions (``orders`` is partitioned by ``status`` with the
global index), a column added mid-stream and a table created mid-stream. At full size
(``make test-campaigns``) it makes at least 200,000 changes and the streamer is killed at
least ten times a random while after one of its commits (and now and then starting up);
``make test`` runs it small.

Afterwards every table equals ``SELECT * FROM`` it in Postgres, with no key twice, in our
reader, hudi-rs and each Apache Hudi release of the JVM tier (snapshot), and the error
table is empty: a change is never a bad record.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import threading
import time
import uuid
from decimal import Decimal
from pathlib import Path

import pytest

from streamer.read import Table
from streamer.services.executor import execute_pending
from streamer.table.instant import Action
from tests.reliability.streamer_kills import STREAMER, java_options, read_hudi_rs
from tests.support import hudi as oracle
from tests.support.campaign import seeded, sized
from tests.support.cdc import wait_published
from tests.support.connect import LocalConnect, postgres_connector

pytestmark = [pytest.mark.integration, pytest.mark.kafka, pytest.mark.slow, pytest.mark.campaign]

SEED = 20_261_130
#: Streamed changes (rows changed in Postgres after the snapshot), at least.
CHANGES = sized(smoke=3_000, full=200_000)
#: Rows per table before the connector starts (the snapshot).
FIRST_ROWS = sized(smoke=300, full=5_000)
#: Runs killed after one of their commits, at least.
KILLS = sized(smoke=3, full=10)
#: How long a run lives after its first commit before its SIGKILL (seconds, uniform).
AFTER_COMMIT_S = sized(smoke=(0.0, 4.0), full=(0.0, 6.0))
#: One run in this many is killed starting up instead, after this long (seconds, uniform).
STARTUP_KILLS = 4
LIFETIME_S = (2.0, 10.0)
#: Records per batch: at full size small enough that a run's first commit comes soon after
#: its start (the kills wait for it) and batch boundaries fall inside the stream often.
BATCH = sized(smoke=20_000, full=5_000)
#: How long a run may take to its first commit before it is killed anyway (not counted).
COMMIT_WAIT_S = 60.0
LIMIT_S = sized(smoke=600.0, full=2400.0)
#: Apache Hudi releases asked at the end (each is a JVM to start): all at full size.
HUDI_READERS = sized(smoke=("1.2",), full=oracle.VERSIONS)
pytestmark.append(pytest.mark.timeout(2 * LIMIT_S))

SETUP = """
CREATE TABLE customers (id int PRIMARY KEY, name text, tier int);
CREATE TABLE orders (id int PRIMARY KEY, customer_id int, status text NOT NULL, qty int, note text);
ALTER TABLE orders ALTER COLUMN note SET STORAGE EXTERNAL;
CREATE TABLE items (order_id int, line int, sku text, qty int, PRIMARY KEY (order_id, line));
CREATE TABLE payments (id bigint PRIMARY KEY, order_id int, amount numeric(12, 2), method text);
CREATE TABLE stock (sku text PRIMARY KEY, qty int, place text);
INSERT INTO customers SELECT g, 'customer ' || g, g % 5 FROM generate_series(1, {n}) g;
INSERT INTO orders SELECT g, g % {n} + 1, (ARRAY['new', 'paid', 'shipped'])[g % 3 + 1], g % 9,
       repeat(chr(97 + g % 26), 2500 + g % 1000) FROM generate_series(1, {n}) g;
INSERT INTO items SELECT g / 2 + 1, g % 2, 'sku-' || (g % 500), g % 7 FROM generate_series(0, {n} * 2 - 1) g;
INSERT INTO payments SELECT g, g, (g % 1000) * 1.25, 'card' FROM generate_series(1, {n}) g;
INSERT INTO stock SELECT 'sku-' || g, g, 'hall ' || (g % 4) FROM generate_series(0, 499) g;
"""
STATUSES = ("new", "paid", "shipped", "returned")
#: The mid-stream events, at these fractions of the changes.
ADD_COLUMN_AT, NEW_TABLE_AT, RESTART_CONNECT_AT = 0.3, 0.5, 0.6
#: Transactions without a key change just before Kafka Connect is killed (what it dies among).
QUIET = 2


def _yaml(kafka, prefix: str, lake: Path, registry_url: str | None) -> str:
    avro = f', format: avro, schema_registry: {{url: "{registry_url}"}}' if registry_url else ""
    return f"""
pipelines:
  - name: shop
    source: {{type: kafka, bootstrap_servers: "{kafka.bootstrap_servers}", topic_pattern: '{prefix}\\.public\\..*',
              debezium: postgres, discover_every: 2s, max_records_per_batch: {BATCH}{avro}}}
    target: {{path: "{lake}/{{table}}"}}
    tables:
      orders: {{partition_by: status, index: {{type: global_bloom}}}}
    trigger: {{mode: continuous, interval: 1s}}
    engine: local
    spark:
      master: "local[2]"
      conf: {{spark.sql.shuffle.partitions: "2", spark.default.parallelism: "2",
             spark.driver.extraJavaOptions: "{java_options()}"}}
"""


def _converters(registry_url: str | None) -> dict[str, str]:
    """The connector's own converters: JSON with embedded schemas, or Apicurio's Avro."""
    if registry_url is None:
        return {f"{side}.{k}": v for side in ("key", "value") for k, v in (
            ("converter", "org.apache.kafka.connect.json.JsonConverter"), ("converter.schemas.enable", "true"))}
    from tests.integration.sources.test_debezium_postgres_avro import apicurio_avro

    return apicurio_avro(registry_url)


class Workload:
    """Seeded multi-table transactions; counts the rows they change (psql's command tags)."""

    def __init__(self, postgres, db: str, rng: random.Random, first_rows: int) -> None:
        self.postgres, self.db, self.rng = postgres, db, rng
        self.next_order = first_rows + 1
        self.next_payment = first_rows + 1
        self.changes = 0
        self.transactions = 0
        self.milestones: list[str] = []

    def statements(self, *, key_changes: bool = True) -> list[str]:
        """One transaction's statements, over several tables (``key_changes``: a key change's
        draw may change keys, else it updates the rows' quantity)."""
        rng = self.rng
        out: list[str] = []
        for _ in range(rng.randint(2, 4)):
            kind = rng.randrange(9)
            k = rng.randrange(50)
            if kind == 0:  # bulk update, TOASTed note left alone: Debezium's placeholder
                out.append(f"UPDATE orders SET qty = qty + 1 WHERE id % 50 = {k}")
            elif kind == 1:  # rows move between partitions
                out.append(f"UPDATE orders SET status = '{rng.choice(STATUSES)}' WHERE id % 60 = {k}")
            elif kind == 2:
                out.append(f"UPDATE orders SET note = repeat('{rng.choice('xyz')}', {rng.randint(2100, 3500)}) "
                           f"WHERE id % 200 = {k}")
            elif kind == 3:  # new orders with their items and payments: one transaction, three tables
                n = rng.randint(5, 40)
                first = self.next_order
                self.next_order += n
                out.append(f"INSERT INTO orders SELECT g, g % 97, 'new', 1, repeat('n', 2200) "
                           f"FROM generate_series({first}, {first + n - 1}) g")
                out.append(f"INSERT INTO items SELECT g, l, 'sku-' || (g % 500), l FROM generate_series({first}, "
                           f"{first + n - 1}) g, generate_series(0, 2) l")
                out.append(f"INSERT INTO payments SELECT g + {self.next_payment - first}, g, g * 0.5, 'wire' "
                           f"FROM generate_series({first}, {first + n - 1}) g")
                self.next_payment += n
            elif kind == 4:
                out.append(f"DELETE FROM items WHERE order_id % 150 = {k} AND line = {rng.randrange(3)}")
            elif kind == 5 and not key_changes:
                out.append(f"UPDATE orders SET qty = qty + 1 WHERE id % 300 = {k}")
            elif kind == 5:  # key changes, their TOASTed note left alone half the time
                note = ", note = note || 'k'" if rng.random() < 0.5 else ""
                out.append(f"UPDATE orders SET id = id + 1000000{note} WHERE id IN "
                           f"(SELECT id FROM orders WHERE id < 1000000 AND id % 300 = {k} LIMIT 3)")
            elif kind == 6:
                out.append(f"UPDATE customers SET tier = tier + 1, name = name || '.' WHERE id % 40 = {k}")
            elif kind == 7:
                out.append(f"UPDATE stock SET qty = qty - 1 WHERE sku LIKE 'sku-{k}%'")
                out.append(f"UPDATE payments SET amount = amount + 0.01 WHERE id % 80 = {k}")
            else:
                out.append(f"DELETE FROM payments WHERE id % 400 = {k}")
        return out

    def transaction(self, *, key_changes: bool = True) -> None:
        statements = self.statements(key_changes=key_changes)
        # each statement's command tag (UPDATE 12, INSERT 0 30, DELETE 4) counts its rows
        script = "BEGIN;\n" + ";\n".join(statements) + ";\nCOMMIT;\n"
        done = subprocess.run(  # statement by statement from stdin: psql prints each one's tag
            ["psql", "-h", "127.0.0.1", "-p", str(self.postgres.port), "-U", "postgres", "-d", self.db,
             "-v", "ON_ERROR_STOP=1", "-X", "-f", "-"], input=script, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr[-2000:]
        self.changes += _rows_changed(done.stdout)
        self.transactions += 1

    def milestone(self, fraction: float, name: str, sql: str) -> None:
        if name not in self.milestones and self.changes >= fraction * CHANGES:
            self.postgres.sql(sql, database=self.db)
            self.milestones.append(name)


def _rows_changed(psql_output: str) -> int:
    total = 0
    for line in psql_output.splitlines():
        parts = line.split()
        if parts and parts[0] in ("UPDATE", "DELETE", "INSERT") and parts[-1].isdigit():
            total += int(parts[-1])
    return total


#: ``make test`` runs the Avro variant (registry, converter plug-in and all); both at full size.
CONVERTERS = sized(smoke=["avro"], full=["json", "avro"])


@pytest.mark.parametrize("converter", CONVERTERS)
def test_a_whole_database_under_kills_equals_postgres_in_every_reader(kafka, postgres, tmp_path, converter,
                                                                     hudi_sessions, request):
    # the session's registry (subjects are named by the run's own topic prefix)
    registry_url = request.getfixturevalue("schema_registry").url if converter == "avro" else None
    with seeded(SEED) as seed:
        _campaign(kafka, postgres, tmp_path, random.Random(seed), registry_url, hudi_sessions)


def _campaign(kafka, postgres, tmp_path: Path, rng: random.Random, registry_url: str | None,
              hudi_sessions) -> None:
    tag = uuid.uuid4().hex[:6]
    db, prefix = f"whole_{tag}", f"whole{tag}"
    log = lambda line: print(line, file=sys.stderr, flush=True)  # noqa: E731
    postgres.sql(f"CREATE DATABASE {db}")
    postgres.sql(SETUP.format(n=FIRST_ROWS), database=db)
    yaml_path = tmp_path / "shop.yaml"
    lake = tmp_path / "lake"
    yaml_path.write_text(_yaml(kafka, prefix, lake, registry_url))
    connector = {**postgres_connector(port=postgres.port, database=db, prefix=prefix, tables="public.*",
                                      slot=f"slot_{db}", publication="all_tables"),
                 **_converters(registry_url)}
    workload = Workload(postgres, db, rng, FIRST_ROWS)
    stop = threading.Event()
    killed = threading.Event()  # set once the kill loop has its kills
    failure: list[BaseException] = []
    (tmp_path / "connect").mkdir()
    with LocalConnect(bootstrap_servers=kafka.bootstrap_servers, workdir=tmp_path / "connect") as connect:
        connect.create(prefix, connector)
        connect.wait_running(prefix)
        restarted: list[int] = []

        def work() -> None:
            try:
                deadline = time.monotonic() + LIMIT_S / 2
                while ((workload.changes < CHANGES or not killed.is_set()) and not stop.is_set()
                       and time.monotonic() < deadline):
                    if workload.changes >= CHANGES:  # a trickle, for the kill loop's runs to commit
                        stop.wait(1.0)
                    workload.transaction()
                    workload.milestone(ADD_COLUMN_AT, "column added", "ALTER TABLE customers ADD COLUMN email text; "
                                       "UPDATE customers SET email = 'c' || id || '@shop' WHERE id % 3 = 0")
                    workload.milestone(NEW_TABLE_AT, "table created",
                                       "CREATE TABLE shipments (id int PRIMARY KEY, order_id int, carrier text);"
                                       "INSERT INTO shipments SELECT g, g, 'dhl' FROM generate_series(1, 200) g")
                    if "table created" in workload.milestones and workload.rng.random() < 0.3:
                        k = workload.rng.randrange(20)
                        workload.postgres.sql(f"UPDATE shipments SET carrier = 'ups' WHERE id % 20 = {k}",
                                              database=workload.db)
                    if not restarted and workload.changes >= RESTART_CONNECT_AT * CHANGES:
                        waited = time.monotonic()
                        _streaming_offset_committed(tmp_path / "connect" / "offsets")
                        log(f"streaming offset stored after {time.monotonic() - waited:.1f}s more")
                        # Connect killed between a key change's delete and create loses the
                        # create for good (debezium/dbz#2549): every key change is published
                        # first, and the changes it dies among change no key
                        wait_published(kafka, f"{prefix}.public.orders")
                        for _ in range(QUIET):
                            workload.transaction(key_changes=False)
                        connect.crash()  # Debezium resumes from its flushed offsets: some changes twice
                        connect.start()
                        connect.create(prefix, connector)
                        connect.wait_running(prefix)
                        restarted.append(workload.changes)
                        log(f"Kafka Connect restarted after {workload.changes} changes")
            except BaseException as e:  # noqa: BLE001 - reported by the test
                failure.append(e)

        worker = threading.Thread(target=work, daemon=True)
        worker.start()
        try:
            kills = _kill_loop(yaml_path, tmp_path, rng, worker, log, killed)
        finally:
            stop.set()
            worker.join(timeout=300)
        assert not failure, failure
        connect.wait_running(prefix, timeout_s=10)  # a failed task raises with its trace
        assert workload.changes >= CHANGES, f"only {workload.changes} changes in the time allowed"
        assert restarted and len(workload.milestones) == 2, (restarted, workload.milestones)
        assert kills >= KILLS
        log(f"{workload.changes} changes in {workload.transactions} transactions; {kills} kills")
        _drain(yaml_path, tmp_path, log)
    _compare(postgres, db, lake, log, hudi_sessions)


def _streaming_offset_committed(offsets: Path, timeout_s: float = 120.0) -> None:
    """Until the worker has stored an offset of Debezium's streaming phase (a WAL position,
    ``lsn_proc``), bounded. Killed before that, Debezium takes its snapshot again on restart,
    and a row deleted between the two snapshots is in neither: no consumer can delete it
    (docs/cdc-postgres.md). The restart this campaign wants is that of a worker in service."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if offsets.exists() and b"lsn_proc" in offsets.read_bytes():
            return
        time.sleep(0.2)
    raise AssertionError(f"Kafka Connect stored no streaming offset in {offsets} within {timeout_s:.0f}s")


def _kill_loop(yaml_path: Path, workdir: Path, rng: random.Random, worker: threading.Thread, log,
               killed: threading.Event) -> int:
    """``streamer run`` again and again, each SIGKILLed, until :data:`KILLS` runs were
    killed after one of their commits and the workload is done; returns those kills.

    A run is killed a random while after its first commit (its tables' timelines show a
    new completed instant), so the kills land mid-stream, not only in start-up, whatever
    the machine's speed (the workload goes on, a trickle, until they are done); one run in
    :data:`STARTUP_KILLS` dies starting up instead."""
    kills = runs = 0
    deadline = time.monotonic() + LIMIT_S
    while (kills < KILLS or worker.is_alive()) and time.monotonic() < deadline:
        out = open(workdir / f"run{runs:03d}.log", "w")  # noqa: SIM115 - closed below
        started = time.time()
        proc = subprocess.Popen([STREAMER, "run", str(yaml_path)], stdout=out, stderr=subprocess.STDOUT,
                                cwd=workdir, start_new_session=True)
        try:
            at_start = rng.random() < 1 / STARTUP_KILLS
            committed = None if at_start else _first_commit(workdir / "lake", started, proc, COMMIT_WAIT_S)
            lived = rng.uniform(*(LIFETIME_S if at_start else AFTER_COMMIT_S))
            if proc.poll() is not None or _exited(proc, lived):
                raise AssertionError(f"streamer run exited by itself ({proc.returncode}): "
                                     f"{(workdir / f'run{runs:03d}.log').read_text()[-3000:]}")
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
            runs += 1
            if committed is not None:
                kills += 1
            if kills >= KILLS:
                killed.set()  # the workload may stop once it has made its changes
            log(f"kill {runs} after {time.time() - started:.1f}s"
                + ("" if committed is None else f", {lived:.1f}s after its first commit ({committed:.1f}s)"))
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=30)
            out.close()
    return kills


def _first_commit(lake: Path, since: float, proc: subprocess.Popen, timeout_s: float) -> float | None:
    """Seconds from ``since`` until a table under ``lake`` completed an instant (None:
    none within ``timeout_s``, or the run exited)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and proc.poll() is None:
        for pattern in ("*/.hoodie/*.deltacommit", "*/.hoodie/timeline/*.deltacommit"):
            done = [p.stat().st_mtime for p in lake.glob(pattern) if p.stat().st_mtime >= since]
            if done:
                return min(done) - since
        time.sleep(0.2)
    return None


def _exited(proc: subprocess.Popen, seconds: float) -> bool:
    try:
        proc.wait(timeout=seconds)
        return True
    except subprocess.TimeoutExpired:
        return False


def _drain(yaml_path: Path, workdir: Path, log) -> None:
    """Everything Debezium published, ingested by one ``--available-now`` run (after the
    topics stop growing: Debezium may still be sending the last changes)."""
    time.sleep(5)
    done = subprocess.run([STREAMER, "run", str(yaml_path), "--available-now"], cwd=workdir,
                          capture_output=True, text=True, timeout=900)
    if done.returncode != 0:  # the lines that name a failure first: a Spark warning can fill the tail
        output = done.stdout + done.stderr
        named = [line for line in output.splitlines() if " ERROR " in line or "failed" in line]
        raise AssertionError("\n".join(named[-20:]) + "\n...\n" + output[-3000:])
    log("drained")


def _database(postgres, db: str, table: str) -> tuple[list[str], list[tuple]]:
    columns = [r[0] for r in postgres.rows(
        f"SELECT column_name FROM information_schema.columns WHERE table_name = '{table}' ORDER BY ordinal_position",
        database=db)]
    rows = postgres.rows(f"SELECT {', '.join(columns)} FROM {table}", database=db)
    return columns, sorted(rows, key=repr)


def _text(v: object) -> str | None:
    if v is None:
        return None
    if isinstance(v, Decimal | float):
        return f"{Decimal(str(v)):.2f}"
    return str(v)


def _as_text(rows: list[dict], columns: list[str]) -> list[tuple]:
    return sorted((tuple(_text(r.get(c)) for c in columns) for r in rows), key=repr)


def _same(table: str, reader: str, got: list[tuple], want: list[tuple], raw: list[dict] | None = None) -> None:
    """``got == want``, or an error naming the first rows (by their leading column) that differ."""
    if got == want:
        return
    extra, missing = sorted(set(got) - set(want), key=repr), sorted(set(want) - set(got), key=repr)
    detail = ""
    if raw is not None and extra:
        firsts = {r[0] for r in extra[:5]}
        meta = ("_hoodie_partition_path", "_hoodie_file_name", "_hoodie_commit_time", "_event_lsn", "_change_operation_type")
        detail = "; stored: " + repr([{k: r.get(k) for k in (*meta, "id", "status")} for r in raw
                                      if _text(next(iter(r.values()), None)) in firsts or str(r.get("id")) in firsts][:10])
    raise AssertionError(f"{table}: {reader} differs from Postgres ({len(got)} vs {len(want)} rows): "
                         f"not in Postgres {[r[:3] for r in extra[:10]]}, missing {[r[:3] for r in missing[:10]]}{detail}")


def _compare(postgres, db: str, lake: Path, log, hudi_sessions) -> None:
    # first: an error row says why a row is missing from its table (a change is never a bad record)
    errors = lake / "_errors"
    for props in (errors.rglob("hoodie.properties") if errors.exists() else []):
        if ".hoodie" in props.parent.parent.parts:
            continue  # a metadata table
        bad = Table.open(str(props.parent.parent)).read(columns=["source_position", "reason"]).to_pylist()
        assert not bad, f"error rows in {props.parent.parent}: {bad[:5]}"
    tables = ("customers", "orders", "items", "payments", "stock", "shipments")
    want = {t: _database(postgres, db, t) for t in tables}
    for t, (columns, rows) in want.items():
        path = str(lake / t)
        ours = Table.open(path).read().to_pylist()
        _same(t, "our reader", _as_text(ours, columns), rows, ours)
        keys = [r["_hoodie_record_key"] for r in Table.open(path).read(columns=["_hoodie_record_key"]).to_pylist()]
        assert len(set(keys)) == len(keys), f"{t}: a key twice"
    orders = Table.open(str(lake / "orders")).read(columns=["status", "_hoodie_partition_path"])
    assert orders.column("status").to_pylist() == orders.column("_hoodie_partition_path").to_pylist()
    for version in HUDI_READERS:
        hudi = hudi_sessions[version]
        for t, (columns, rows) in want.items():
            _same(t, f"Apache Hudi {version}", _as_text(hudi.read(str(lake / t)).to_pylist(), columns), rows)
        log(f"Apache Hudi {version} reads every table as Postgres has it")
    # Our reader and Hudi's are checked as the kills left the tables: a compaction a kill
    # interrupted may still be pending (a run resumes it after its next commit, and the
    # drain may have had none to make). hudi-rs 0.5.0 leaves out the logs of a pending
    # compaction's new slice (tests/support/gaps.py, HUDI_RS_PENDING_COMPACTION_SLICE), so
    # it reads once the pending plans ran, as the next round or `streamer compact` would,
    # and our reader is checked again after them.
    for t, (columns, rows) in want.items():
        path = str(lake / t)
        left = [str(i) for i in Table.open(path).timeline.pending()]
        for action in (Action.LOG_COMPACTION, Action.COMPACTION):
            execute_pending(Table.open(path), action)
        if left:
            log(f"{t}: ran the plans the kills left pending ({', '.join(left)})")
        _same(t, "our reader after the pending plans", _as_text(Table.open(path).read().to_pylist(), columns), rows)
        _same(t, "hudi-rs", _as_text(read_hudi_rs(path), columns), rows)
