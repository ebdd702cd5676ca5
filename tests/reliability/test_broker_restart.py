"""A Kafka broker that dies (``kill -9``) and comes back on the same data, mid-stream.

The pipeline's positions live in its commits, not in the broker, so a broker that
vanishes mid-batch may fail the batch (and the run, which a supervisor restarts) but
must never make it skip or repeat a record. Two ways of running are bounced, each by
a seeded plan (``MOR_CAMPAIGN_SEED`` replays it; smoke size in ``make test``, full in
``make test-campaigns``):

* **continuous** (Structured Streaming): the broker is killed while a round of records
  is in flight (the stream held in one of its batches by ``faults.pause_at``) or while
  the pipeline idles, every round committed, stays down a seeded while, and is restarted
  on the same port and log dir; a run that fails is started again (what a supervisor
  does), in this process, with the suite's Spark session;
* **available_now** (a scheduled job): the broker is killed while the run reads up to
  its fixed end (its thread held at a seeded point by ``faults.pause_at``), then
  restarted; the next run finishes what the failed one left.

Afterwards a final drain: the snapshot equals the model through our reader and
hudi-rs, the commit-time audit proves each record was committed by exactly one
commit, and the pipeline's consumer group (``commit_offsets``, what lag monitors
read) sits at the end of every partition: nothing stuck.
"""

from __future__ import annotations

import contextlib
import random
import threading
import time
import uuid
from collections import Counter

import pytest

from streamer.config import parse_pipelines
from streamer.local.kafka import LocalKafkaBroker
from streamer.pipeline.runner import PipelineRunner
from tests.support.campaign import assert_phases_hit, held_at, seeded, sized
from tests.support.supervisor import Supervisor
from tests.support.trip_model import (
    TripModel,
    assert_each_record_committed_once,
    assert_matches_model,
    committed_offsets,
    kafka_pipeline_yaml,
    produce_records,
    wait_until,
)

pytestmark = [pytest.mark.integration, pytest.mark.kafka, pytest.mark.slow, pytest.mark.campaign,
              pytest.mark.timeout(sized(smoke=900, full=2400))]

#: Broker kills per mode: the bar of 10 per campaign at full size (each mode); at smoke size
#: two (the continuous run's two phases: records in flight, then idle).
FAULTS = sized(smoke=2, full=10)
#: Records produced before each kill (the batches the kill lands in).
RECORDS_PER_ROUND = 600
#: Where an available_now run is held while the broker dies (``faults.pause_at`` prefixes):
#: a batch read, about to be prepared (the rows come from the broker as it is); a commit
#: begun; a commit done, the next batch still to read (a round is 600 records, 400 a batch).
MID_RUN = ("batch read", "requested", "completed")
#: Where the continuous stream is held while the broker dies with records in flight: a
#: batch of the round read, or its commit begun (never its last commit done).
IN_FLIGHT = ("batch read", "requested")
#: A hang guard per wait, not a speed bound (a broker start is ~5-20 s on 2 loaded cores).
WAIT_S = 300.0


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    """The campaign's own broker (the session's is shared, and never killed): both tests
    bounce it, on topics of their own."""
    b = LocalKafkaBroker(workdir=tmp_path_factory.mktemp("broker"), heap="384m")
    b.start()
    try:
        yield b
    finally:
        b.stop()


def _config(broker: LocalKafkaBroker, topic: str, lake: str, group: str, trigger: str):
    yaml = "pipelines:\n" + kafka_pipeline_yaml(
        "bounced", broker.bootstrap_servers, topic, lake, trigger=trigger,
        source_extra=f", group_id: {group}, max_records_per_batch: 400, metadata_timeout: 60s")
    (config,), problems = parse_pipelines(yaml)
    assert not problems, problems
    return config


def _group_lag(broker: LocalKafkaBroker, topic: str, group: str) -> int:
    """How far the group's committed offsets are behind the topic's end (all partitions)."""
    from confluent_kafka import Consumer, TopicPartition

    ends = broker.end_offsets(topic)
    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": group,
                         "enable.auto.commit": False})
    try:
        got = consumer.committed([TopicPartition(topic, p) for p in ends], timeout=30)
    finally:
        consumer.close()
    return sum(ends[tp.partition] - max(tp.offset, 0) for tp in got)


def test_continuous_pipeline_rides_out_broker_kills(spark, broker, tmp_path):
    with seeded(20_261_127) as seed:
        rng = random.Random(seed)
        topic = broker.create_topic(f"bounced-{uuid.uuid4().hex[:6]}", partitions=2)
        group = f"bounced-{uuid.uuid4().hex[:6]}"
        config = _config(broker, topic, str(tmp_path / "lake"), group, "{mode: continuous, interval: 500ms}")
        model = TripModel(seed=seed, key_space=400, delete_ratio=0.05, update_ratio=0.6)
        phases: Counter = Counter()
        with Supervisor(config, spark) as sup:
            for i in range(FAULTS):
                pause = tmp_path / f"pause-{i}"
                # records in flight: the stream held in a batch of the round
                with held_at(rng.choice(IN_FLIGHT), pause) if i % 2 == 0 else contextlib.nullcontext():
                    produce_records(broker, topic, model.records(RECORDS_PER_ROUND))
                    end = sum(broker.end_offsets(topic).values())
                    if i % 2 == 0:
                        wait_until(lambda pause=pause: pause.exists() or not sup.thread.is_alive(), WAIT_S,
                                   "the stream to reach its pause point in the round")
                    else:  # idle: the round committed, the stream polling for more
                        wait_until(lambda end=end: sup.committed() >= end, WAIT_S, "the round to be committed")
                        time.sleep(rng.uniform(0.0, 1.0))
                    phases["records in flight" if sup.committed() < end else "idle"] += 1
                    broker.crash()
                time.sleep(rng.uniform(0.5, 4.0))  # down for a while
                broker.start(WAIT_S)
            produce_records(broker, topic, model.records(RECORDS_PER_ROUND))
            end = sum(broker.end_offsets(topic).values())
            wait_until(lambda: sup.committed() >= end or not sup.thread.is_alive(), WAIT_S,
                       "the pipeline to commit every offset after the last restart")
        assert sup.committed() >= end, f"stopped before catching up; failed runs: {sup.failures}"
        print(f"broker kills: {dict(phases)}; failed runs restarted: {len(sup.failures)} {sup.failures[:3]}")
        assert sum(phases.values()) == FAULTS
        assert_phases_hit(("records in flight", "idle"), phases.elements(), what="broker kills")
        path = config.target.path
        assert_matches_model(path, model.expected())
        assert_each_record_committed_once(path, broker, topic)
        assert _group_lag(broker, topic, group) == 0, "the consumer group is stuck behind the committed data"


def test_available_now_runs_survive_broker_kills(spark, broker, tmp_path):
    with seeded(20_261_128) as seed:
        rng = random.Random(seed)
        topic = broker.create_topic(f"bounced-an-{uuid.uuid4().hex[:6]}", partitions=2)
        group = f"bounced-an-{uuid.uuid4().hex[:6]}"
        config = _config(broker, topic, str(tmp_path / "lake"), group, "{mode: available_now}")
        model = TripModel(seed=seed, key_space=400, delete_ratio=0.05, update_ratio=0.6)
        outcomes: Counter = Counter()
        phases: Counter = Counter()
        for _ in range(FAULTS):
            produce_records(broker, topic, model.records(RECORDS_PER_ROUND))
            failed: list[BaseException] = []
            runner = PipelineRunner(config, spark=spark)

            def run(runner: PipelineRunner = runner, failed: list = failed) -> None:
                try:
                    runner.run_available_now()
                except Exception as e:
                    failed.append(e)

            # into the run at a seeded point (its first batch read, or a commit of a batch
            # begun or done with more to read): the run's thread pauses there while the
            # broker dies, so the kill lands mid-run however fast the machine is
            job = threading.Thread(target=run, name="available-now", daemon=True)
            with held_at(rng.choice(MID_RUN), tmp_path / f"pause-{len(phases)}") as pause:
                job.start()
                wait_until(lambda pause=pause, job=job: pause.exists() or not job.is_alive(), WAIT_S,
                           "the available_now run to reach its pause point")
                phases["mid-run" if job.is_alive() else "after the run"] += 1
                broker.crash()
            time.sleep(rng.uniform(0.5, 4.0))
            broker.start(WAIT_S)
            job.join(WAIT_S)
            assert not job.is_alive(), "an available_now run hung past the broker's restart"
            outcomes["failed" if failed else "finished"] += 1
            # the next scheduled run takes over from the position the last commit holds
            PipelineRunner(config, spark=spark).run_available_now()
        print(f"available_now runs under a broker kill: {dict(outcomes)}, kills {dict(phases)}")
        assert sum(outcomes.values()) == FAULTS
        assert_phases_hit(("mid-run",), phases.elements(), what="broker kills")
        path = config.target.path
        end = sum(broker.end_offsets(topic).values())
        assert committed_offsets(PipelineRunner(config, spark=spark)) == end
        assert_matches_model(path, model.expected())
        assert_each_record_committed_once(path, broker, topic)
        assert _group_lag(broker, topic, group) == 0, "the consumer group is stuck behind the committed data"
