"""An object store that throttles, times out and drops connections in the middle of commits.

The table is on S3 (the local s3proxy), reached through a fault-injecting proxy
(``tests/support/s3_faults.py``) while a continuous Kafka pipeline writes it. In seeded
windows the proxy answers a seeded fraction of requests with ``503 SlowDown``, applies
a request and drops its reply, holds a reply past the client's timeout, or resets the
connection before the request arrives (an endpoint restarting). Writes must retry
within bounds or fail cleanly: a run that fails is started again from the table's
committed position (what a supervisor does; the next run rolls the failed commit back).

After each window the table is read directly (no faults): it must read, with unique
keys - never left unreadable, no completed instant torn. After a final drain the
snapshot equals the model through our reader and hudi-rs, and the commit-time audit
proves each record was committed by exactly one commit. ``MOR_CAMPAIGN_SEED`` replays a
run; smoke size in ``make test``, full size (at least 10 windows, every fault kind) in
``make test-campaigns``.

A restart of the store is an outage of the endpoint: every open connection reset, the
port refusing for a while, then answering again with the objects kept. The s3proxy
process itself is not killed: it keeps objects in memory (its filesystem backend lists
inconsistently while written, see ``streamer.local.s3``), so a restart would lose the
bucket, which no real store does.
"""

from __future__ import annotations

import random
import time
import uuid
from collections import Counter

import pytest

from streamer.config import parse_pipelines
from tests.support.campaign import assert_phases_hit, held_at, seeded, sized
from tests.support.s3_faults import KINDS, OUTAGE, FaultProxy
from tests.support.supervisor import Supervisor
from tests.support.trip_model import (
    TripModel,
    as_snapshot,
    assert_each_record_committed_once,
    assert_matches_model,
    kafka_pipeline_yaml,
    produce_records,
    read_ours,
    wait_until,
)

pytestmark = [pytest.mark.integration, pytest.mark.kafka, pytest.mark.s3, pytest.mark.slow,
              pytest.mark.campaign, pytest.mark.timeout(sized(smoke=900, full=2400))]

#: The fault kinds the windows rotate through, each of which must have injected a fault: all
#: at full size (four per request, an outage); at smoke size a reply lost after the store
#: applied the request (the conditional put that must be recognised as ours), a reset and
#: an outage mid-commit.
WINDOW_KINDS = sized(smoke=("lost-reply", "reset", OUTAGE), full=(*KINDS, OUTAGE))
#: Fault windows (each at least one injected fault, the kinds in turn).
WINDOWS = sized(smoke=3, full=15)
RECORDS_PER_ROUND = 500
#: A hang guard per wait, not a speed bound.
WAIT_S = 300.0


def _config(kafka, topic: str, lake: str, checkpoints, endpoint: str):
    yaml = "pipelines:\n" + kafka_pipeline_yaml(
        "throttled", kafka.bootstrap_servers, topic, lake, source_extra=", max_records_per_batch: 300",
        extra=f"storage: {{s3: {{endpoint: \"{endpoint}\"}}}}\n",
    ).replace("- name: throttled\n", f"- name: throttled\n    checkpoint_dir: {checkpoints}\n", 1)
    (config,), problems = parse_pipelines(yaml)
    assert not problems, problems
    return config


def _window(proxy: FaultProxy, rng: random.Random, kind: str) -> None:
    """Faults of ``kind`` until the round's requests met at least one, and a while more."""
    before = proxy.total
    with proxy.window(rate=rng.uniform(0.05, 0.3), kinds=(kind,)):
        deadline = time.monotonic() + 60.0  # bounded: the round's commits make requests
        while time.monotonic() < deadline and proxy.total == before:
            time.sleep(0.1)
        time.sleep(rng.uniform(0.0, 3.0))  # more of the same, mid-commit


def _wait_requests(proxy: FaultProxy, n: int) -> None:
    want = proxy.requests + n
    deadline = time.monotonic() + 60.0  # bounded
    while time.monotonic() < deadline and proxy.requests < want:
        time.sleep(0.05)


def _wait_committed(sup: Supervisor, kafka, topic: str, what: str) -> None:
    end = sum(kafka.end_offsets(topic).values())
    wait_until(lambda: sup.committed() >= end or not sup.thread.is_alive(), WAIT_S, f"{what} to be committed")
    assert sup.thread.is_alive(), f"the supervised pipeline gave up: {sup.failures[-3:]}"


def test_commits_through_a_throttling_and_failing_store_lose_nothing(kafka, spark, local_s3, tmp_path):
    with seeded(20_261_129) as seed, FaultProxy(local_s3.endpoint, seed) as proxy:
        rng = random.Random(seed)
        topic = kafka.create_topic(f"s3faults-{uuid.uuid4().hex[:6]}", partitions=2)
        lake = f"s3://lake-bucket/faults-{uuid.uuid4().hex[:8]}"
        config = _config(kafka, topic, lake, tmp_path / "checkpoints", proxy.endpoint)
        path = config.target.path
        model = TripModel(seed=seed, key_space=300, delete_ratio=0.05, update_ratio=0.6)
        windows: Counter = Counter()
        with Supervisor(config, spark) as sup:
            produce_records(kafka, topic, model.records(RECORDS_PER_ROUND))  # the run is up first
            _wait_committed(sup, kafka, topic, "the first round")
            for i in range(WINDOWS):
                kind = WINDOW_KINDS[i % len(WINDOW_KINDS)]
                produce_records(kafka, topic, model.records(RECORDS_PER_ROUND))
                before = proxy.total
                if kind == OUTAGE:  # mid-commit: the round's first requests are under way
                    _wait_requests(proxy, rng.randint(1, 40))
                    proxy.outage(rng.uniform(1.0, 8.0))
                else:
                    _window(proxy, rng, kind)
                if proxy.total > before:
                    windows[kind] += 1
                _wait_committed(sup, kafka, topic, f"the round after the {kind} window")
                as_snapshot(read_ours(path))  # never unreadable: a direct read works, keys unique
            produce_records(kafka, topic, model.records(RECORDS_PER_ROUND))
            end = sum(kafka.end_offsets(topic).values())
            wait_until(lambda: sup.committed() >= end or not sup.thread.is_alive(), WAIT_S,
                       "the pipeline to commit every offset after the last fault window")
        print(f"S3 faults: {dict(proxy.injected)} in {proxy.requests} requests; windows {dict(windows)}; "
              f"touched {dict(proxy.touched)}; failed runs restarted: {len(sup.failures)} {sup.failures[:3]}")
        assert sup.committed() >= end, f"stopped before catching up; failed runs: {sup.failures}"
        assert sum(windows.values()) >= sized(smoke=3, full=10), f"windows that injected a fault: {windows}"
        assert_phases_hit(WINDOW_KINDS, windows.elements(), what="S3 fault windows")
        assert_matches_model(path, model.expected())
        assert_each_record_committed_once(path, kafka, topic)


#: Kills of the store's process (full: the bar of 10; smoke: one, mid-commit).
STORE_KILLS = sized(smoke=1, full=10)
#: The steps of a commit a store kill lands at (``faults.pause_at`` prefixes).
MID_COMMIT = ("requested", "inflight", "markers ", "before complete")


def test_a_store_process_killed_and_restarted_mid_commit_loses_nothing(kafka, spark, tmp_path):
    """The S3 server's process itself is ``kill -9``-ed while the round's commits run and
    started again on the same port and folder (s3proxy's filesystem backend keeps the
    objects): the pipeline's runs fail or wait, the next run repairs, nothing is lost."""
    import os
    from unittest import mock

    from streamer.local.s3 import LocalS3

    (tmp_path / "store").mkdir()
    with seeded(20_261_130) as seed, LocalS3(backend="filesystem-nio2", workdir=tmp_path / "store",
                                              heap="384m") as store, \
            mock.patch.dict(os.environ, store.environ()):
        rng = random.Random(seed)
        topic = kafka.create_topic(f"s3kill-{uuid.uuid4().hex[:6]}", partitions=2)
        lake = f"s3://lake-bucket/kill-{uuid.uuid4().hex[:8]}"
        config = _config(kafka, topic, lake, tmp_path / "checkpoints", store.endpoint)
        path = config.target.path
        model = TripModel(seed=seed, key_space=300, delete_ratio=0.05, update_ratio=0.6)
        kills = 0
        with Supervisor(config, spark) as sup:
            produce_records(kafka, topic, model.records(RECORDS_PER_ROUND))
            _wait_committed(sup, kafka, topic, "the first round")
            for i in range(STORE_KILLS):
                # into the round's commit: the stream held at a seeded step of it while
                # the store dies, however fast the machine is
                with held_at(rng.choice(MID_COMMIT), tmp_path / f"pause-{i}") as pause:
                    produce_records(kafka, topic, model.records(RECORDS_PER_ROUND))
                    wait_until(lambda pause=pause: pause.exists() or not sup.thread.is_alive(), WAIT_S,
                               "the stream to reach its pause point in the round's commit")
                    store.crash()
                    kills += pause.exists()
                time.sleep(rng.uniform(0.5, 3.0))
                store.start()
                _wait_committed(sup, kafka, topic, "the round after a store restart")
                as_snapshot(read_ours(path))  # never unreadable
        print(f"store process kills mid-commit: {kills}; failed runs restarted: {len(sup.failures)} {sup.failures[:3]}")
        assert kills == STORE_KILLS
        assert_matches_model(path, model.expected())
        assert_each_record_committed_once(path, kafka, topic)
