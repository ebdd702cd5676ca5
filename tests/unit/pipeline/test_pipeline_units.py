"""Pipeline pieces that need no JVM: error ids, error rows, the batch gate, the lease, CLI flags."""

from __future__ import annotations

import argparse
import os
import posixpath
import subprocess
import sys
import threading

import pyarrow as pa
import pytest

from streamer.pipeline.errors_table import (
    ERROR_ARROW_SCHEMA,
    ERROR_ID,
    PAYLOAD_COL,
    REASON_COL,
    unkeyable_error_rows,
    with_error_ids,
)
from streamer.pipeline.lease import LeaseHeldError, PipelineLease
from streamer.pipeline.report import BatchReport
from streamer.pipeline.stream import BatchGate, _owner_alive

#: The record identity a Kafka source declares (``KafkaSource.record_identity``).
_KAFKA_IDS = (("topic", "_kafka_topic"), ("partition", "_kafka_partition"), ("offset", "_kafka_offset"))


def _flagged(offsets: list[int | None]) -> pa.Table:
    n = len(offsets)
    return pa.table({
        "uuid": [None] * n,
        "_kafka_topic": ["t" if o is not None else None for o in offsets],
        "_kafka_partition": [1 if o is not None else None for o in offsets],
        "_kafka_offset": pa.array(offsets, pa.int64()),
        REASON_COL: ["record key field 'uuid' is null or empty"] * n,
        PAYLOAD_COL: ['{"ts":1}'] * n,
    })


def test_error_ids_depend_on_the_record_not_on_the_batch_it_came_in():
    """A Kafka record keeps its id whichever micro-batch (end position) it was read in."""
    a = with_error_ids(unkeyable_error_rows(_flagged([5, 6]), "kafka", '{"end": 1}', _KAFKA_IDS))
    b = with_error_ids(unkeyable_error_rows(_flagged([5, 6]), "kafka", '{"end": 2}', _KAFKA_IDS))
    assert a.column(ERROR_ID).to_pylist() == b.column(ERROR_ID).to_pylist()
    assert len(set(a.column(ERROR_ID).to_pylist())) == 2
    assert a.column("source_position").to_pylist() == ["t/1/5", "t/1/6"]
    assert a.schema.remove(0) == ERROR_ARROW_SCHEMA


def test_records_without_offsets_fall_back_to_the_batch_position():
    rows = unkeyable_error_rows(_flagged([None]), "files", '{"kind": "files"}', _KAFKA_IDS)
    assert rows.column("source_position").to_pylist() == ['{"kind": "files"}']
    assert rows.column("offset").to_pylist() == [None]
    assert rows.column("raw_payload").to_pylist() == ['{"ts":1}']


def test_report_line_and_counts():
    r = BatchReport("p", 3, 10, 7, 2, 1, "2024", None, 0.5, "{}")
    assert r.read == r.written + r.errored + r.filtered
    assert "in 10 -> written 7, errors 2, filtered 1 | deltacommit 2024" in r.line()
    skipped = BatchReport("p", 4, 0, 0, 0, 0, None, None, 0.0, "{}", skipped="no new data")
    assert skipped.line().endswith("skipped (no new data)")


def test_gate_waits_for_the_batch_inside_and_refuses_new_ones():
    gate = BatchGate()
    inside, release = threading.Event(), threading.Event()
    ran: list[bool] = []

    def batch() -> None:
        with gate.enter() as ok:
            ran.append(ok)
            inside.set()
            release.wait(120)

    t = threading.Thread(target=batch)
    t.start()
    assert inside.wait(120), "the batch never entered the gate"
    assert not gate.close(timeout_s=0.2)  # still inside: it waits for `release`, however long
    release.set()
    t.join(120)  # generous: a loaded machine, not a hang
    assert not t.is_alive(), "the batch did not leave the gate"
    assert gate.close(timeout_s=120)
    with gate.enter() as ok:
        assert not ok
    assert ran == [True]


def test_dead_runs_checkpoints_are_recognised_by_pid():
    assert _owner_alive(f"run-{os.getpid()}-abc")
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    assert not _owner_alive(f"run-{int(dead.stdout)}-abc")
    assert not _owner_alive("run-junk")


def test_a_dead_runs_checkpoint_is_recognised_when_its_pid_is_reused():
    """The folder names the run's start time: a live process with the same pid but another
    start is not its owner (pids are reused; the folder would otherwise stay forever)."""
    from streamer.pipeline.stream import _fresh_checkpoint
    from streamer.write.lock import process_start

    me, start = os.getpid(), process_start(os.getpid())
    assert start is not None
    assert _owner_alive(f"run-{me}.{start}-abc")
    assert not _owner_alive(f"run-{me}.{start + 1}-abc")
    assert not _owner_alive(f"run-{me}.x-abc")
    name = posixpath.basename(_fresh_checkpoint(None))
    assert name.startswith(f"run-{me}.{start}-") and _owner_alive(name)


def test_lease_fails_fast_names_the_holder_and_is_taken_over_when_the_holder_dies(tmp_path):
    first = PipelineLease(str(tmp_path), "trips")
    assert first.acquire()
    second = PipelineLease(str(tmp_path), "trips")
    with pytest.raises(LeaseHeldError, match=f"pid {os.getpid()}"):
        second.acquire()
    stop = threading.Event()
    stop.set()
    assert not second.acquire(standby=True, stop=stop)  # a standby stopped while waiting
    first.release()
    assert second.acquire()
    second.release()

    # A holder killed without releasing: its pid is gone, so the lease is taken over at once.
    code = (
        "import os, sys; from streamer.pipeline.lease import PipelineLease; "
        f"PipelineLease({str(tmp_path)!r}, 'trips').acquire(); os._exit(0)"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=os.getcwd())
    assert PipelineLease(str(tmp_path), "trips").holder() is not None
    third = PipelineLease(str(tmp_path), "trips")
    # at once: the fail-fast acquire (which raises on a live holder and never waits) wins,
    # long before the 30 s expiry would free the lease
    assert third.acquire(standby=False)
    assert third._lock.took_over is not None and third._lock.took_over.pid != os.getpid()
    third.release()


def test_run_command_flags():
    from streamer.cli.run_cmd import register

    parser = argparse.ArgumentParser()
    register(parser.add_subparsers())
    args = parser.parse_args(["run", "p.yaml", "--standby", "--timeout", "5", "--pipeline", "a"])
    assert (args.standby, args.timeout, args.pipeline, args.once) == (True, 5.0, ["a"], False)
