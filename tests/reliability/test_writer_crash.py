"""``kill -9`` a writer process anywhere in a commit; the next one recovers.

A real child process runs one write and SIGKILLs itself at its N-th I/O step (the
fault hook in :mod:`streamer.faults`; nothing else is faked). Kill points are
spread over the whole commit — markers, base files, log files, after some file groups
are written, the inflight/complete transitions — by a seeded draw over every step of the
traced commit (``MOR_CAMPAIGN_SEED`` replays it; the first, the last two and a few more at
smoke size, ``POINTS`` at full size). The next writer must roll the failed instant back
and then the table must equal the model of committed batches only, through our reader
and hudi-rs. Other cases kill the *recovering* writer at steps of its rollback (asserted
to be rollback steps: the kill landed in the rollback), and a third writer recovers.
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from streamer.read.table import Table
from streamer.write import HudiWriter, TableConfig, WriteOptions
from tests.support.campaign import seeded, sized
from tests.support.write_model import BatchGen, Model, canon, read_hudi_rs, read_ours

pytestmark = [pytest.mark.slow, pytest.mark.campaign]

SEED = 20240601
#: Kill points of the commit, besides its first and last two steps.
POINTS = sized(smoke=3, full=14)

REPO = Path(__file__).resolve().parents[2]
OPTS = WriteOptions(small_file_limit=8_000, max_file_size=12_000, default_record_size=100,
                    slice_bloom_num_entries=500, engine="local")


def _run_child(path: str, op: str, batch: pa.Table, tmp: Path, kill_at: int | None,
               trace: Path | None = None) -> int:
    batch_file = tmp / f"batch-{random.random()}.parquet"
    pq.write_table(batch, batch_file)
    env = dict(os.environ)
    env.pop("MOR_STREAMER_KILL_AT_STEP", None)
    if kill_at is not None:
        env["MOR_STREAMER_KILL_AT_STEP"] = str(kill_at)
    if trace is not None:
        env["MOR_STREAMER_TRACE_STEPS"] = str(trace)
    proc = subprocess.run(
        [sys.executable, "-m", "tests.reliability.crash_worker", path, op, str(batch_file)],
        cwd=REPO, env=env, capture_output=True, timeout=300,  # a hang guard
    )
    if proc.returncode not in (0, -signal.SIGKILL):
        raise AssertionError(proc.stderr.decode()[-2000:])
    return proc.returncode


def _seed_table(root: Path, version: int = 6) -> tuple[str, Model, BatchGen]:
    """A table of ``version``: 6, or 9 (a layout-2 timeline, one log file per commit, a
    rollback that deletes the failed commit's files)."""
    path = str(root / "seed")
    w = HudiWriter.create(path, TableConfig("crash", ("id",), ("city",), "ts", table_version=version), options=OPTS)
    gen, model = BatchGen(11, key_space=300), Model()
    for _ in range(3):
        b = gen.upsert_batch(model, 80)
        w.upsert(b)
        model.upsert(b)
    return path, model, gen


def _assert_model(path: str, model: Model) -> None:
    expected = model.snapshot()
    assert canon(read_ours(path)) == expected
    assert canon(read_hudi_rs(path)) == expected
    t = Table.open(path)
    assert not t.timeline.pending() or all(i.action != "deltacommit" for i in t.timeline.pending())


@pytest.mark.parametrize("version", [6, 9])
def test_kill9_at_random_points_then_recover(tmp_path, version):
    with seeded(SEED) as seed:
        _kill_at_random_points(tmp_path, seed, version)


def _kill_at_random_points(tmp_path: Path, seed: int, version: int) -> None:
    seed_path, base_model, gen = _seed_table(tmp_path, version)
    crash_batch = gen.upsert_batch(base_model, 160)  # touches many file groups
    recover_batch = gen.upsert_batch(base_model, 40)

    trace = tmp_path / "trace.txt"
    probe = str(tmp_path / "probe")
    shutil.copytree(seed_path, probe)
    assert _run_child(probe, "upsert", crash_batch, tmp_path, None, trace) == 0
    steps = [line.split("\t", 1)[1] for line in trace.read_text().splitlines()]
    total = len(steps)
    assert total >= 20, steps
    rng = random.Random(seed)
    points = sorted(set(rng.sample(range(1, total + 1), min(total, POINTS))) | {1, total - 1, total})
    assert len(points) >= min(total, POINTS)
    print(f"kill points (of {total} steps): {[(n, steps[n - 1]) for n in points]}")

    for n in points:
        case = str(tmp_path / f"case-{n}")
        shutil.copytree(seed_path, case)
        code = _run_child(case, "upsert", crash_batch, tmp_path, n)
        model = Model(dict(base_model.rows))
        if code == 0:  # the kill point was after the last step: the commit completed
            model.upsert(crash_batch)
        else:
            t = Table.open(case)
            completed = {i.timestamp for i in t.timeline.completed()}
            # the commit counts only if its completed instant made it to storage
            if len(completed) == 4:
                model.upsert(crash_batch)
        res = HudiWriter.open(case, options=OPTS).upsert(recover_batch)
        model.upsert(recover_batch)
        assert res.instant
        _assert_model(case, model)
        # nothing of the failed instant is left behind
        assert not list(Path(case, ".hoodie", ".temp").glob("*/**/*.marker.*")), f"markers left at {n}"
        assert not list(Path(case).rglob("*.tmp")), f"temp files left at step {n} ({steps[n - 1]})"


@pytest.mark.parametrize("version", [6, 9])
def test_kill9_during_rollback_then_recover(tmp_path, version):
    seed_path, base_model, gen = _seed_table(tmp_path, version)
    crash_batch = gen.upsert_batch(base_model, 90)
    recover_batch = gen.upsert_batch(base_model, 30)
    # a commit killed after its log/base files are written, before completion
    trace = tmp_path / "trace.txt"
    probe = str(tmp_path / "probe")
    shutil.copytree(seed_path, probe)
    _run_child(probe, "upsert", crash_batch, tmp_path, None, trace)
    steps = [line.split("\t", 1)[1] for line in trace.read_text().splitlines()]
    before_complete = steps.index("before complete") + 1

    # the steps of the recovering writer's rollback, from a run that is not killed
    probe = str(tmp_path / "probe-rollback")
    shutil.copytree(seed_path, probe)
    assert _run_child(probe, "upsert", crash_batch, tmp_path, before_complete) == -signal.SIGKILL
    recovery = tmp_path / "recovery.txt"
    assert _run_child(probe, "upsert", recover_batch, tmp_path, None, recovery) == 0
    recovery_steps = [line.split("\t", 1)[1] for line in recovery.read_text().splitlines()]
    in_rollback = [n for n, label in enumerate(recovery_steps, 1) if label.startswith("rollback")]
    assert len(in_rollback) >= 3, recovery_steps
    # the rollback's first and last step and one of its deletes (smoke); every step (full)
    kill_points = sized(smoke=sorted({in_rollback[0], in_rollback[len(in_rollback) // 2], in_rollback[-1]}),
                        full=in_rollback)
    for m in kill_points:
        case = str(tmp_path / f"rb-{m}")
        shutil.copytree(seed_path, case)
        assert _run_child(case, "upsert", crash_batch, tmp_path, before_complete) == -signal.SIGKILL
        # the recovering writer itself dies at its m-th step, inside the rollback
        killed = tmp_path / f"rb-{m}.txt"
        assert _run_child(case, "upsert", recover_batch, tmp_path, m, killed) == -signal.SIGKILL, (
            f"the recovering writer was not killed at step {m} ({recovery_steps[m - 1]})")
        taken = [line.split("\t", 1)[1] for line in killed.read_text().splitlines()]
        assert len(taken) == m and taken[-1].startswith("rollback"), (
            f"the kill at step {m} did not land in the rollback: {taken}")
        res = HudiWriter.open(case, options=OPTS).upsert(recover_batch)
        model = Model(dict(base_model.rows))
        model.upsert(recover_batch)
        assert res.instant
        _assert_model(case, model)
