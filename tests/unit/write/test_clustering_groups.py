"""Writes and a pending Hudi clustering: the clustering rewrites each group its plan names
from what the plan read, so a write into such a group would be lost. As Hudi's writer
(``SparkRejectUpdateStrategy``), a commit that updates one fails, and inserts are not routed
into them (tests/support/hudi_actions.py makes the plan)."""

from __future__ import annotations

import os

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from streamer import faults
from streamer.errors import CommitConflictError
from streamer.read import Table
from tests.support import block_tables as tg
from tests.support.hudi_actions import clustering_plan, replace_partition


def _stored_in(path: str, partition: str, file_id: str) -> pa.Table:
    rows = Table.open(path).read()
    return rows.filter(pc.starts_with(rows.column("_hoodie_file_name"), file_id))


def _clustered(path: str):
    """Two writes, then a pending Hudi clustering of the first file group; returns the
    writer, generator, model, that group's slice and the clustering's time."""
    w, gen, model = tg.build(path, 2)
    group = Table.open(path).fsview.latest_merged_slices()[0]
    return w, gen, model, group, clustering_plan(path, [(group.partition_path, group.file_id)])


def _late_update_in(path: str, group) -> pa.Table:
    """An update of one row stored in ``group``'s slice."""
    stored = _stored_in(path, group.partition_path, group.file_id).to_pylist()[0]
    return pa.Table.from_pylist([{"id": stored["id"], "city": stored["city"], "ts": 10**6, "value": "late"}],
                                schema=tg.SCHEMA)


def _write_elsewhere(w, gen, model, partition: str) -> None:
    """A batch of upserts outside ``partition``, committed and applied to the model."""
    batch = gen.upserts(12)
    batch = batch.filter(pc.not_equal(batch.column("city"), partition))
    w.upsert(batch)
    model.apply(batch)


def _files_of(path: str, partition: str, file_id: str) -> set[str]:
    return {f for f in os.listdir(os.path.join(path, partition)) if file_id in f}


@pytest.mark.parametrize("version", [6, 9])
def test_an_update_into_a_group_a_pending_clustering_rewrites_fails_the_commit(tmp_path, version):
    path = str(tmp_path / "t")
    with tg.at_version(version):
        w, gen, model, group, plan = _clustered(path)
        update = _late_update_in(path, group)
        with pytest.raises(CommitConflictError, match=f"{group.file_id}.*pending clustering {plan}"):
            w.upsert(update)
        assert tg.read_ours(path) == model.snapshot()
        _write_elsewhere(w, gen, model, group.partition_path)  # rolls the refused write back first
    assert tg.read_ours(path) == tg.read_hudi_rs(path) == model.snapshot()
    assert [i.timestamp for i in Table.open(path).timeline.pending()] == [plan]


@pytest.mark.parametrize("version", [6, 9])
def test_inserts_go_around_a_group_a_pending_clustering_rewrites(tmp_path, version):
    path = str(tmp_path / "t")
    with tg.at_version(version):
        w, gen, model, group, _ = _clustered(path)
        before = _files_of(path, group.partition_path, group.file_id)
        new = pa.Table.from_pylist([{"id": 5000 + i, "city": group.partition_path, "ts": 10**6, "value": "new"}
                                    for i in range(20)], schema=tg.SCHEMA)
        w.upsert(new)
        model.apply(new)
    assert _files_of(path, group.partition_path, group.file_id) == before
    assert tg.read_ours(path) == tg.read_hudi_rs(path) == model.snapshot()


@pytest.mark.parametrize("version", [6, 9])
@pytest.mark.parametrize("hudi", ["schedules a clustering", "replaces the partition"])
def test_a_group_hudi_rewrites_while_our_commit_writes_fails_the_commit(tmp_path, monkeypatch, version, hudi):
    """Hudi schedules a clustering, or completes a replacecommit, under its own lock, so
    either can land while our commit writes. The commit used to ask only its listing from
    before the write, and committed an update into the group that the clustering then
    rewrote from what it had read, or that the replacecommit had already replaced: the
    update was lost. The timeline is now listed again after the write, and the commit
    refused as Hudi's concurrency control refuses it."""
    path = str(tmp_path / "t")
    with tg.at_version(version):
        w, gen, model = tg.build(path, 2)
        group = Table.open(path).fsview.latest_merged_slices()[0]
        update = _late_update_in(path, group)
        acted: list[str] = []
        step = faults.step

        def hudi_acts_midway(label: str) -> None:
            step(label)
            if label == "inflight" and not acted:
                if hudi == "schedules a clustering":
                    acted.append(clustering_plan(path, [(group.partition_path, group.file_id)],
                                                 without_our_lock=True))
                else:
                    acted.append(replace_partition(path, group.partition_path, without_our_lock=True)[0])

        monkeypatch.setattr(faults, "step", hudi_acts_midway)
        what = "pending clustering" if hudi == "schedules a clustering" else "replacecommit"
        with pytest.raises(CommitConflictError) as refused:
            w.upsert(update)
        monkeypatch.undo()
        assert f"{group.file_id}, which the {what} {acted[0]}" in str(refused.value)
        if hudi == "replaces the partition":
            model.rows = {k: v for k, v in model.rows.items() if k[0] != group.partition_path}
        assert tg.read_ours(path) == model.snapshot()
        _write_elsewhere(w, gen, model, group.partition_path)  # rolls the refused write back first
    assert tg.read_ours(path) == tg.read_hudi_rs(path) == model.snapshot()
