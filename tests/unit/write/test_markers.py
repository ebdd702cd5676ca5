"""Rolling back a failed write by its markers, in either of Hudi's forms: a file per marker
(ours, Hudi's direct markers) or the lines of ``MARKERS<n>`` files that Hudi Spark's
timeline server writes by default on local and object storage. And what is no failed write:
a pending Hudi clustering at version 6."""

from __future__ import annotations

import os
import shutil

import pyarrow as pa
import pytest

from streamer.config.policies import ArchivePolicy, CompactionPolicy
from streamer.read import Table
from streamer.services.archive import run_archive
from streamer.services.compaction import schedule_compaction
from streamer.services.executor import execute
from tests.support import block_tables as tg
from tests.support.failed_write import fail_before_complete
from tests.support.hudi_actions import clustering_plan


def _failed_hudi_write(path: str, w, form: str) -> str:
    """A write that died before completing, with its markers left in ``form``; as Hudi's
    inserts that fit no small file, it also created a new file group's base file."""
    new = pa.Table.from_pylist([{"id": 1000 + i, "city": "sf", "ts": 10**6, "value": "FAILED"} for i in range(50)],
                               schema=tg.SCHEMA)
    fail_before_complete(lambda: w.upsert(new))
    failed = Table.open(path).timeline.pending()[0].timestamp
    folder = os.path.join(path, ".hoodie", ".temp", failed)
    names = sorted(os.path.relpath(os.path.join(d, f), folder) for d, _, files in os.walk(folder) for f in files)
    base = next(f for f in sorted(os.listdir(os.path.join(path, "nyc"))) if f.endswith(".parquet"))
    created = f"nyc/0f1e2d3c-0000-4000-8000-000000000001-0_1-5-3_{failed}.parquet"
    shutil.copy(os.path.join(path, "nyc", base), os.path.join(path, created))
    names.append(f"{created}.marker.CREATE")
    shutil.rmtree(folder)
    os.makedirs(folder)
    if form == "timeline-server":
        with open(os.path.join(folder, "MARKERS.type"), "w") as f:
            f.write("TIMELINE_SERVER_BASED")
        for i, part in enumerate((names[::2], names[1::2])):
            with open(os.path.join(folder, f"MARKERS{i}"), "w") as f:
                f.write("\n".join(part) + "\n")
    else:
        for name in names:
            os.makedirs(os.path.dirname(os.path.join(folder, name)), exist_ok=True)
            open(os.path.join(folder, name), "wb").close()
    heartbeat = os.path.join(path, ".hoodie", ".heartbeat", failed)
    if os.path.exists(heartbeat):
        os.remove(heartbeat)
    return failed


@pytest.mark.parametrize("form", ["direct", "timeline-server"])
@pytest.mark.parametrize("version", [6, 9])
def test_a_failed_write_is_rolled_back_by_its_markers(tmp_path, version, form):
    path = str(tmp_path / "t")
    with tg.at_version(version):
        w, gen, model = tg.build(path, 2)
        failed = _failed_hudi_write(path, w, form)
        w = tg.open_writer(path)
        w.rollback_failed_writes()
        left = [f for _, _, files in os.walk(path) for f in files if failed in f and not f.startswith(failed)]
        assert left == [], "files of the failed write left after its rollback"
        for _ in range(6):
            tg.step(w, gen, model)
            comp = schedule_compaction(Table.open(path), CompactionPolicy(), force=True)
            if comp is not None:
                execute(Table.open(path), comp)
        run_archive(Table.open(path), ArchivePolicy(min_commits=2, max_commits=3))
    assert Table.open(path).timeline.first_instant > failed, "precondition: archived past the failed write"
    assert tg.read_ours(path) == tg.read_hudi_rs(path) == model.snapshot()


def test_a_pending_hudi_clustering_is_no_failed_write(tmp_path):
    path = str(tmp_path / "t")
    w, gen, model = tg.build(path, 2)
    plan = clustering_plan(path)
    assert Table.open(path).timeline.failed_writes() == []
    tg.step(w, gen, model)  # rolls back every failed write first
    pending = Table.open(path).timeline.pending()
    assert [(i.timestamp, i.action) for i in pending] == [(plan, "replacecommit")]
    assert tg.read_ours(path) == model.snapshot()
