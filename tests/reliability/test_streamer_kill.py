"""Exactly once under ``kill -9``: the Kafka pipeline's ``streamer run`` processes die in
seeded phases, its table on a local folder or on S3 (a real S3-compatible server, s3proxy).

A producer keeps producing upserts and deletes while the continuous pipeline runs as
real processes (``streamer run FILE --standby``, Structured Streaming). A restart pays a
JVM start, so a hot standby starts ahead and takes the pipeline lease over when the
active process dies (what a supervisor with a standby replica does). Each process is
SIGKILLed once per a seeded plan (``MOR_CAMPAIGN_SEED`` replays it; smoke size in ``make
test``, full in ``make test-campaigns``): from outside between two writes (a delay after
its first commit), or from inside by the fault hook - before a commit completed, then in
the next process's rollback of it (``MOR_STREAMER_KILL_AT_LABEL``) - and at full size
also at seeded I/O step numbers (``MOR_STREAMER_KILL_AT_STEP``). Every phase ``PHASES``
claims for the storage (all three at full size; at smoke size one on the local folder,
three on S3) must be hit (missed ones are topped up with steered kills, bounded), and few
runs may miss their plan (an outside kill's run must have committed: no run without
progress goes uncounted).

On S3 the table (its commits carry the pipeline's positions) and its error table are
objects, the writer lock a conditional PUT; the lease and Spark's per-run streaming
checkpoint stay on local disk (Spark here has no S3 connector; the lease on S3 is the
writer lock's FileLock, tested in tests/unit/write/test_lock_s3.py). After a final drain
the snapshot equals the model through our reader and hudi-rs, and the commit-time audit
proves every record was committed by exactly one commit.
"""

from __future__ import annotations

import random
import sys
import threading
import uuid
from collections import Counter
from pathlib import Path

import pytest

from streamer.config import load_pipelines
from streamer.fs import resolve
from streamer.pipeline.runner import PipelineRunner
from tests.reliability.streamer_kills import (
    BETWEEN,
    COMMIT,
    ROLLBACK,
    Kill,
    campaign,
    java_options,
    spawn,
    steer,
    steered,
)
from tests.support.campaign import assert_few_missed, assert_phases_hit, seeded, sized
from tests.support.trip_model import (
    TripModel,
    assert_each_record_committed_once,
    assert_matches_model,
    kafka_pipeline_yaml,
    produce_records,
    run_until_caught_up,
)

pytestmark = [pytest.mark.integration, pytest.mark.kafka, pytest.mark.slow, pytest.mark.campaign]

SEEDS = {"local": 20_240_607, "s3": 20_261_116}
#: The phases the kills must hit: all three on both storages at full size; at smoke size on
#: S3 only (where a commit is objects and a conditional-put lock; the local folder's kills
#: between writes, in a commit and in its rollback are the smoke runs of the poison and
#: shared-table campaigns).
PHASES = sized(smoke={"s3": (BETWEEN, COMMIT, ROLLBACK)},
               full={"local": (BETWEEN, COMMIT, ROLLBACK), "s3": (BETWEEN, COMMIT, ROLLBACK)})
#: The storages the campaign runs on (each a parameter of the test).
STORAGES = [pytest.param(s, marks=[pytest.mark.s3] if s == "s3" else []) for s in PHASES]
#: How many (commit kill, rollback kill) pairs (when the phases claim them) and further
#: kills of each kind the plan holds.
PAIRS = sized(smoke=1, full=2)
EXTRA = sized(smoke={}, full={"outside": 2, "inside": 2})
#: A hang guard, not a speed bound: the campaign's pace is each process's first batch (a
#: JVM start and a Spark job beside another process's, on 2 cores).
LIMIT_S = sized(smoke=1200.0, full=2400.0)
#: pytest-timeout, the last resort past the hang guards (a campaign and its top-up rounds).
pytestmark.append(pytest.mark.timeout(3 * LIMIT_S))
#: A bound on the records produced, not a target: the producer runs until the last kill.
MAX_PRODUCED = 600_000


def _yaml(kafka, topic: str, lake: str, checkpoints: Path | None) -> str:
    text = "pipelines:\n" + kafka_pipeline_yaml(
        "killed", kafka.bootstrap_servers, topic, lake, source_extra=", max_records_per_batch: 1500",
    ).replace('spark.default.parallelism: "2"}',
              f'spark.default.parallelism: "2", spark.driver.extraJavaOptions: "{java_options()}"}}')
    assert "extraJavaOptions" in text
    if checkpoints is not None:  # the lease and Spark's checkpoint on local disk
        text = text.replace("- name: killed\n", f"- name: killed\n    checkpoint_dir: {checkpoints}\n", 1)
        assert "checkpoint_dir" in text
    return text


def _plan(rng: random.Random, phases: tuple[str, ...]) -> list[Kill]:
    """An outside kill first (between writes), then, shuffled: each commit kill followed by
    a rollback kill (the standby behind the killed run rolls its commit back) and the extras."""
    pairs = PAIRS if ROLLBACK in phases or COMMIT in phases else 0
    groups = [[Kill("inside", "before complete", expect=COMMIT), steer(ROLLBACK, rng)] for _ in range(pairs)]
    groups += [[Kill(kind)] for kind, n in EXTRA.items() for _ in range(n)]
    rng.shuffle(groups)
    return [Kill("outside"), *(k for g in groups for k in g)]


@pytest.mark.parametrize("storage", STORAGES)
def test_sigkill_in_seeded_phases_loses_nothing_and_applies_nothing_twice(storage, kafka, spark, tmp_path, request):
    if storage == "s3":
        request.getfixturevalue("local_s3")  # the AWS variables point here and in the children
    with seeded(SEEDS[storage]) as seed:
        _kill_campaign(storage, kafka, spark, tmp_path, seed)


def _kill_campaign(storage: str, kafka, spark, tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    topic = kafka.create_topic(f"kill-{storage}-{uuid.uuid4().hex[:8]}", partitions=3)
    if storage == "s3":
        lake, checkpoints = f"s3://lake-bucket/kill-{uuid.uuid4().hex[:8]}", tmp_path / "checkpoints"
    else:
        lake, checkpoints = str(tmp_path / "lake"), None
    yaml_path = tmp_path / "killed.yaml"
    yaml_path.write_text(_yaml(kafka, topic, lake, checkpoints))
    (config,) = load_pipelines(yaml_path)
    assert config.target.path.startswith("s3://") == (storage == "s3")
    lease_path = Path(PipelineRunner(config).lease().path)
    model = TripModel(seed=seed, key_space=8_000)

    stop_producing = threading.Event()
    produce_failure: list[BaseException] = []

    def produce() -> None:
        try:
            while not stop_producing.is_set() and model.produced < MAX_PRODUCED:
                produce_records(kafka, topic, model.records(150))
                stop_producing.wait(0.5)
        except BaseException as e:  # noqa: BLE001 - reported by the test
            produce_failure.append(e)

    def start(index: int, kill: Kill):
        return spawn(index, kill, rng, ["run", str(yaml_path)], storage, tmp_path, lease_path, max_step=30)

    plan = _plan(rng, PHASES[storage])
    log = lambda line: print(line, file=sys.stderr, flush=True)  # noqa: E731
    log(f"plan of {len(plan)} kills: {[str(k) for k in plan]}")
    producer = threading.Thread(target=produce, daemon=True)
    producer.start()
    try:
        runs = campaign(plan, start, limit_s=LIMIT_S, log=log)
        runs = steered(runs, PHASES[storage], start, rng, limit_s=LIMIT_S, log=log)
    finally:
        stop_producing.set()
        producer.join(timeout=60)
    assert not produce_failure, produce_failure
    print("kill phases:", dict(Counter(r.where for r in runs).most_common()))
    assert_phases_hit(PHASES[storage], (r.where for r in runs), what=f"{storage} kill campaign")
    missed = [r for r in runs if not r.as_planned]
    assert_few_missed(missed, len(runs), at_most=0.25, what="kills",
                      detail="; ".join(f"run {r.index} [{r.kill_plan}] {r.how}: {r.where}, {r.commits} commits"
                                       for r in missed))

    # The final drain runs in this process (its JVM is warm), in large batches.
    source = config.source.model_copy(update={"max_records_per_batch": 50_000})
    drain = PipelineRunner(config.model_copy(update={"source": source}), spark=spark)
    run_until_caught_up(drain, kafka, topic, lambda: True, timeout_s=180)

    assert_matches_model(config.target.path, model.expected())  # ours and hudi-rs
    commits = assert_each_record_committed_once(config.target.path, kafka, topic)
    fs, base = resolve(config.target.path)
    rollbacks = [s.name for s in fs.list_dir(f"{base}/.hoodie") if s.name.endswith(".rollback")]
    print(f"{model.produced} records, {commits} data commits, {len(rollbacks)} rollbacks of killed commits")
    if ROLLBACK in PHASES[storage]:
        assert rollbacks, "no killed commit was rolled back"
    if storage == "s3":
        fs.delete_dir(base)
