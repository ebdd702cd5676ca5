"""Poison records and ``kill -9``: a seeded campaign over ``streamer run``.

A producer keeps dropping JSON-lines files into a folder: upserts and deletes of a key
space, with poison lines mixed in (malformed JSON, a null or empty record key, a
wrong-typed value, a line over ``max_record_bytes``, bytes that are not UTF-8, now and
then a file in which no line parses). A continuous pipeline
(``streamer run FILE --standby``) ingests them as real processes; every run alternates
between a YAML whose table services run inline and one whose services run async (in
the writer's background thread). Each process is SIGKILLed once, per a seeded plan
(``MOR_CAMPAIGN_SEED`` replays it; smoke size in ``make test``, full in ``make
test-campaigns``):

* ``startup``: a seeded delay after spawn, before its JVM is up;
* ``standby``: while it waits for the lease behind the active process;
* ``takeover``: the moment it took the lease over from a killed process;
* ``outside``: a seeded delay after its first commit, between two writes;
* ``inside``: by the fault hook at a step of a chosen phase (a data or error commit, the
  rollback of the commit the process before it was killed in, a compaction, a log
  compaction, a clean, an archive: ``MOR_STREAMER_KILL_AT_LABEL``), and at full size also
  at seeded step numbers (``MOR_STREAMER_KILL_AT_STEP``).

Each kill's phase is read from the process's own I/O step trace and the lease; every
phase in ``PHASES`` (all ten at full size, six at smoke size) must be hit (a missed one
is topped up with steered kills, bounded),
and few kills may miss their plan. After a final clean run the table equals the model
through our reader and hudi-rs, every poison line is in the error table exactly once,
nothing is pending, the stored positions never went back, and every row carries the
commit time of the one commit whose position first covers its file (nothing was
written twice).
"""

from __future__ import annotations

import base64
import json
import os
import random
import sys
import threading
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from streamer.config import load_pipelines
from streamer.pipeline.runner import PipelineRunner
from streamer.read import Table
from tests.reliability.streamer_kills import (
    BETWEEN,
    COMMIT,
    ROLLBACK,
    STANDBY,
    STARTUP,
    STREAMER,
    TAKEOVER,
    Kill,
    assert_rows_committed_once,
    campaign,
    java_options,
    read_hudi_rs,
    service,
    spawn,
    steer,
    steered,
)
from tests.support.campaign import assert_few_missed, assert_phases_hit, seeded, sized

pytestmark = [pytest.mark.integration, pytest.mark.slow]

SEED = 20_261_122
#: Every phase a kill must land in: all of them at full size; at smoke size the lease's
#: phases and a commit and its rollback (the smoke run of the shared-table campaign kills
#: a log compaction; kills inside the other services are full size only).
PHASES = sized(
    smoke=(STARTUP, STANDBY, TAKEOVER, BETWEEN, COMMIT, ROLLBACK),
    full=(STARTUP, STANDBY, TAKEOVER, BETWEEN, COMMIT, ROLLBACK, service("compaction"),
          service("logcompaction"), service("clean"), service("archive")),
)
#: How many times the plan holds each steered group (see :func:`_plan`), and how many
#: further kills of each kind it mixes in; startup kills are the cheap ones (they never
#: finish starting a JVM), the others each cost a process that got going.
ROUNDS = sized(smoke=1, full=2)
EXTRA = sized(smoke={"startup": 1}, full={"startup": 6, "outside": 2, "inside": 3})
#: Guards against a hang only (a smoke run takes a few minutes on 2 cores, a full one ~15).
LIMIT_S = sized(smoke=1500.0, full=3000.0)
FILE_EVERY_S = 0.35
MAX_FILES = 10_000  # a bound, not a target: the producer runs until the last kill
KEYS = 240
CITIES = ("sf", "nyc", "ams")
#: Lines longer than this go to the error table (``source.max_record_bytes``).
MAX_RECORD = 2_048
POISON_KINDS = ("malformed", "null_key", "empty_key", "wrong_type", "oversized", "not_utf8")
SCHEMA = "id STRING, city STRING, ts BIGINT, v STRING, _hoodie_is_deleted BOOLEAN"

PIPELINE = """
pipelines:
  - name: poisoned
    source: {{type: files, path: "{src}", format: json, schema: "{schema}", max_files_per_batch: 40, max_record_bytes: {max_record}}}
    target: {{path: "{table}", record_key: [id], partition_by: [city], ordering_field: ts}}
    errors: {{path: "{errors}"}}
    trigger: {{mode: continuous, interval: 1s}}
    engine: {{mode: local}}
    policies:
      log_compaction: {{mode: {mode}, min_blocks: 2}}
      compaction: {{mode: {mode}, trigger: {{delta_commits: 4}}}}
      clean: {{mode: {mode}, retain_commits: 4}}
      archive: {{mode: {mode}, min_commits: 6, max_commits: 9}}
    spark:
      master: "local[1]"
      conf: {{spark.sql.shuffle.partitions: "1", spark.default.parallelism: "1", spark.driver.extraJavaOptions: "{java}"}}
"""


# ---------------------------------------------------------------------------- the source
@dataclass
class Producer:
    """Drops JSON-lines files (oldest first by mtime) and remembers what the table must hold."""

    folder: Path
    rng: random.Random
    expected: dict[str, dict] = field(default_factory=dict)
    #: key -> (file, mtime_ns) its latest version came from (deletes included).
    latest_file: dict[str, tuple[str, int]] = field(default_factory=dict)
    #: poison token -> kind; each poison line carries its token, so it is found exactly.
    poison: dict[str, str] = field(default_factory=dict)
    files: int = 0
    rows: int = 0
    ts: int = 0

    def _next_ts(self) -> int:
        self.ts += 1
        return self.ts

    def _poison_line(self) -> bytes:
        token = f"POISON-{len(self.poison):05d}"
        kind = self.rng.choice(POISON_KINDS)
        self.poison[token] = kind
        key = f"k{self.rng.randrange(KEYS)}"
        if kind == "malformed":
            return f'{{"id": "{key}", "city": "sf", "ts": {self._next_ts()}, "v": "{token}"'.encode()
        if kind == "null_key":
            return json.dumps({"id": None, "city": "sf", "ts": self._next_ts(), "v": token}).encode()
        if kind == "empty_key":
            return json.dumps({"id": "", "city": "nyc", "ts": self._next_ts(), "v": token}).encode()
        if kind == "wrong_type":
            return json.dumps({"id": key, "city": "ams", "ts": token, "v": "wrong-typed ts"}).encode()
        if kind == "oversized":  # well-formed, but over source.max_record_bytes
            return json.dumps({"id": key, "city": "sf", "ts": self._next_ts(), "v": token + "x" * MAX_RECORD}).encode()
        # not UTF-8: a Latin-1 byte inside an otherwise good record
        return json.dumps({"id": key, "city": "sf", "ts": self._next_ts(), "v": token}).encode()[:-2] + b' caf\xe9"}'

    def drop(self) -> None:
        lines: list[bytes] = []
        touched: list[str] = []
        if self.files % 13 == 12:  # a file in which no line parses
            for _ in range(3):
                token = f"POISON-{len(self.poison):05d}"
                self.poison[token] = "all_malformed_file"
                lines.append(f"{{not json at all {token}".encode())
        else:
            for _ in range(self.rng.randint(5, 30)):
                n = self.rng.randrange(KEYS)
                key, city = f"k{n}", CITIES[n % len(CITIES)]
                if key in self.expected and self.rng.random() < 0.12:
                    lines.append(json.dumps({"id": key, "city": city, "ts": self._next_ts(), "v": "gone",
                                             "_hoodie_is_deleted": True}).encode())
                    del self.expected[key]
                else:
                    row = {"id": key, "city": city, "ts": self._next_ts(), "v": f"r{self.ts}"}
                    lines.append(json.dumps(row).encode())
                    self.expected[key] = row
                touched.append(key)
                self.rows += 1
            for _ in range(self.rng.choice([0, 0, 1, 1, 2])):
                lines.insert(self.rng.randrange(len(lines) + 1), self._poison_line())
        tmp = self.folder / f"_part-{self.files:05d}.json"  # `_` files are never picked up
        tmp.write_bytes(b"\n".join(lines) + b"\n")
        final = self.folder / f"f{self.files:05d}.json"
        tmp.rename(final)
        where = (str(final), os.stat(final).st_mtime_ns)
        for key in touched:
            self.latest_file[key] = where
        self.files += 1


# ---------------------------------------------------------------------------- the test
@pytest.mark.campaign
@pytest.mark.timeout(3 * LIMIT_S)  # the last resort past the hang guards (the campaign and its top-ups)
def test_poison_records_and_sigkill_campaign(tmp_path, spark):
    with seeded(SEED) as seed:
        _poison_campaign(tmp_path, spark, seed)


def _poison_campaign(tmp_path, spark, seed: int) -> None:
    rng = random.Random(seed)
    src, lake = tmp_path / "src", tmp_path / "lake"
    src.mkdir()
    table, errors = lake / "poisoned", lake / "_errors" / "poisoned"
    yamls = []
    for mode in ("inline", "async"):
        path = tmp_path / f"{mode}.yaml"
        path.write_text(PIPELINE.format(src=src, schema=SCHEMA, table=table, errors=errors, mode=mode,
                                        max_record=MAX_RECORD, java=java_options()))
        yamls.append(path)
    (config,) = load_pipelines(yamls[0])
    lease_path = Path(PipelineRunner(config).lease().path)

    producer = Producer(src, random.Random(seed + 1))
    stop_producing = threading.Event()
    produce_failure: list[BaseException] = []

    def produce() -> None:
        try:
            while not stop_producing.is_set() and producer.files < MAX_FILES:
                producer.drop()
                stop_producing.wait(FILE_EVERY_S)
        except BaseException as e:  # noqa: BLE001 - reported by the test
            produce_failure.append(e)

    def start(index: int, kill: Kill):
        yaml_path = yamls[index % 2]  # inline services, async services, inline, ...
        return spawn(index, kill, rng, ["run", str(yaml_path)], f"{yaml_path.stem:6s}", tmp_path, lease_path,
                     max_step=35)

    plan = _plan(rng)
    log = lambda line: print(line, file=sys.stderr, flush=True)  # noqa: E731
    log(f"plan of {len(plan)} kills: {[str(k) for k in plan]}")
    thread = threading.Thread(target=produce, daemon=True)
    thread.start()
    try:
        runs = campaign(plan, start, limit_s=LIMIT_S, log=log)
        runs = steered(runs, PHASES, start, rng, limit_s=LIMIT_S, log=log)
    finally:
        stop_producing.set()
        thread.join(timeout=60)
    assert not produce_failure, produce_failure

    print(f"\n{len(runs)} kills; {producer.files} files, {producer.rows} rows, {len(producer.poison)} poison lines")
    print("kill kinds:", dict(Counter(str(r.kill_plan) for r in runs)),
          "| runs that committed, by services mode:", dict(Counter(r.label.strip() for r in runs if r.commits)))
    assert_phases_hit(PHASES, (r.where for r in runs), what="poison campaign kills")
    missed = [r for r in runs if not r.as_planned]
    assert_few_missed(missed, len(runs), at_most=0.25, what="kills",
                      detail="; ".join(f"run {r.index} [{r.kill_plan}] {r.how}: {r.where}" for r in missed))
    assert sum(1 for r in runs if r.commits) >= sum(1 for k in plan if k.kind == "outside"), "too few runs made progress"

    # ---- the final clean run, in this process (warm JVM): catch up, then finish every service
    final = config.model_copy(update={"source": config.source.model_copy(update={"max_files_per_batch": 10_000})})
    drain = PipelineRunner(final, spark=spark)
    for _ in range(5):
        if drain.run_once().skipped:
            break
    else:
        pytest.fail("the final run did not catch up in 5 batches")
    from streamer.services.executor import execute_pending
    from streamer.services.runner import run_services
    from streamer.table.instant import Action
    from streamer.write.writer import HudiWriter

    HudiWriter.open(str(table)).rollback_failed_writes()
    for action in (Action.LOG_COMPACTION, Action.COMPACTION):
        execute_pending(Table.open(str(table)), action)
    run_services(str(table), final.policies, modes=("inline",))
    for path in (table, errors):
        HudiWriter.open(str(path)).rollback_failed_writes()
        pending = Table.open(str(path)).timeline.pending()
        assert not pending, f"pending instants left in {path}: {pending}"

    rows = _assert_table_is_model(str(table), producer.expected)
    audited = assert_rows_committed_once(str(table), "poisoned", rows, lambda r: producer.latest_file[r["id"]],
                                         complete_history=False)
    _assert_each_poison_once(str(errors), producer.poison)
    rollbacks = sum(step == "rollback completed" for r in runs for step in r.trace())
    print(f"{audited} rows audited against their commit; {rollbacks} rollbacks of killed writes by later runs")


def _plan(rng: random.Random) -> list[Kill]:
    """The kill plan, drawn from ``rng``: each steered group ``ROUNDS`` times and the
    ``EXTRA`` kills, shuffled behind an outside kill (a takeover needs a holder before it)
    and a standby kill (behind an outside kill, it is sure to be waiting when it dies).
    A rollback kill comes right after a kill before a commit completed: the run after it
    (the standby) rolls it back."""
    groups: list[list[Kill]] = []
    for _ in range(ROUNDS):
        groups += [[Kill("inside", "before complete", expect=COMMIT), steer(ROLLBACK, rng)], [Kill("takeover")]]
        groups += [[steer(service(a), rng)] for a in ("compaction", "logcompaction", "clean", "archive")
                   if service(a) in PHASES]
    # full size: kills at the other steps of a commit, more standby and takeover kills
    groups += [[steer(COMMIT, rng)], [Kill("outside"), Kill("standby")], [Kill("outside"), Kill("takeover")]] * (ROUNDS - 1)
    groups += [[Kill("inside")] if kind == "inside" else [Kill(kind)]
               for kind, n in EXTRA.items() if kind != "startup" for _ in range(n)]
    rng.shuffle(groups)
    # a standby kill behind an outside one: the outside kill waits until the standby waits
    plan = [Kill("outside"), Kill("standby"), *(k for g in groups for k in g)]
    for _ in range(EXTRA["startup"]):  # startup runs come on top of the others, anywhere
        plan.insert(rng.randrange(1, len(plan)), Kill("startup"))
    return plan


def _assert_table_is_model(path: str, expected: dict[str, dict]) -> list[dict]:
    """Our reader and hudi-rs return exactly the model: every key once, its latest version."""
    want = {k: (r["city"], r["ts"], r["v"]) for k, r in expected.items()}
    ours = Table.open(path).read().to_pylist()
    theirs = read_hudi_rs(path)
    for name, rows in (("mor-streamer reader", ours), ("hudi-rs", theirs)):
        keys = [r["id"] for r in rows]
        dupes = [k for k, n in Counter(keys).items() if n > 1]
        got = {r["id"]: (r["city"], r["ts"], r["v"]) for r in rows}
        missing = sorted(set(want) - set(got))
        extra = sorted(set(got) - set(want))
        stale = sorted(k for k in set(got) & set(want) if got[k] != want[k])
        assert not (dupes or missing or extra or stale), (
            f"{name}: {len(dupes)} duplicated keys {dupes[:3]}, {len(missing)} missing {missing[:3]}, "
            f"{len(extra)} extra {extra[:3]}, {len(stale)} stale {[(k, got[k], want[k]) for k in stale[:3]]}"
        )
    return ours


def _assert_each_poison_once(path: str, poison: dict[str, str]) -> None:
    rows = Table.open(path).read().to_pylist()
    found: dict[str, list[dict]] = {}
    strays = []
    for r in rows:
        payload = r["raw_payload"] or ""
        if r["payload_encoding"] == "base64":
            payload = base64.b64decode(payload).decode("latin-1")
        tokens = _tokens(payload)
        if len(tokens) != 1:
            strays.append(r)
        for t in tokens:
            found.setdefault(t, []).append(r)
    missing = sorted(set(poison) - set(found))
    twice = {t: [(r["source_position"][:80], r["reason"]) for r in rs] for t, rs in found.items() if len(rs) > 1}
    assert not missing, f"{len(missing)} poison lines not in the error table, e.g. {[(t, poison[t]) for t in missing[:5]]}"
    assert not twice, f"{len(twice)} poison lines in the error table more than once, e.g. {list(twice.items())[:3]}"
    assert not strays, f"error rows that are no poison line: {strays[:3]}"
    assert len(rows) == len(poison), (len(rows), len(poison))
    print("poison by kind:", dict(Counter(poison.values())))


def _tokens(payload: str) -> list[str]:
    out, at = [], payload.find("POISON-")
    while at >= 0:
        out.append(payload[at:at + len("POISON-00000")])
        at = payload.find("POISON-", at + 1)
    return out


ONCE = """
pipelines:
  - name: once
    source: {{type: files, path: "{src}", format: json, schema: "{schema}"}}
    target: {{path: "{table}", record_key: [id], partition_by: [city], ordering_field: ts}}
    errors: {{path: "{errors}"}}
    trigger: {{mode: once}}
    engine: {{mode: local}}
    spark:
      master: "local[1]"
      conf: {{spark.sql.shuffle.partitions: "1", spark.default.parallelism: "1", spark.driver.extraJavaOptions: "{java}"}}
"""


def test_bad_record_of_a_batch_killed_between_its_two_commits_is_one_error_row(tmp_path, spark, monkeypatch):
    """The campaign's first find, made deterministic: the error rows of a batch commit first,
    then its data. Killed in between, the batch is read again after a restart - by then with
    a newer file in it, so it ends elsewhere. A null-key record's error id was derived from
    the batch's end position: it got a second error row (one more per such restart)."""
    import subprocess

    from streamer import faults

    def write(folder: Path, name: str, lines: list[str]) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text("\n".join(lines) + "\n")

    good = [json.dumps({"id": f"k{i}", "city": "sf", "ts": i, "v": "x"}) for i in range(3)]
    poison = json.dumps({"id": None, "city": "sf", "ts": 99, "v": "POISON-00000"})

    def yaml(root: Path) -> Path:
        path = root / "once.yaml"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(ONCE.format(src=root / "src", schema=SCHEMA, table=root / "t", errors=root / "errors",
                                    java=java_options()))
        return path

    # 1. which I/O step opens the data commit (the error commit comes first): a dry run here
    dry = tmp_path / "dry"
    write(dry / "src", "f0.json", [*good, poison])
    trace = tmp_path / "dry.steps"
    monkeypatch.setattr(faults, "_trace", str(trace))
    faults.reset()
    (config,) = load_pipelines(yaml(dry))
    assert PipelineRunner(config, spark=spark).run_once().errored == 1
    monkeypatch.setattr(faults, "_trace", None)
    steps = [ln.split("\t", 1)[1] for ln in trace.read_text().splitlines()]
    kill_at = steps.index("requested", steps.index("completed")) + 1  # 1-based: the data commit's first step

    # 2. the real run dies there: error row committed, data not
    root = tmp_path / "real"
    write(root / "src", "f0.json", [*good, poison])
    env = dict(os.environ, MOR_STREAMER_KILL_AT_STEP=str(kill_at))
    proc = subprocess.run([STREAMER, "run", str(yaml(root)), "--once"],
                          env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == -9, proc.stdout + proc.stderr
    assert len(Table.open(str(root / "errors")).read()) == 1
    # 3. a new file arrives; the restarted pipeline reads both
    write(root / "src", "f1.json", [json.dumps({"id": "k7", "city": "sf", "ts": 7, "v": "y"})])
    (config,) = load_pipelines(root / "once.yaml")
    report = PipelineRunner(config, spark=spark).run_once()
    assert (report.written, report.errored) == (4, 1)
    rows = Table.open(str(root / "errors")).read().to_pylist()
    assert [r["raw_payload"].count("POISON-00000") for r in rows] == [1], rows
    assert sorted(Table.open(str(root / "t")).read().column("id").to_pylist()) == ["k0", "k1", "k2", "k7"]
