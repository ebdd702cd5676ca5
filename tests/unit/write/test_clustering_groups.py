"""Writes and a pending Hudi clustering: the clustering rewrites each group its plan names
from what the plan read, so a write into such a group would be lost. As Hudi's writer
(``SparkRejectUpdateStrategy``), a commit that updates one fails, and inserts are not routed
into them (tests/support/hudi_actions.py makes the plan)."""

from __future__ import annotations

import os

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from streamer.errors import CommitConflictError
from streamer.read import Table
from tests.support import block_tables as tg
from tests.support.hudi_actions import clustering_plan


def _stored_in(path: str, partition: str, file_id: str) -> pa.Table:
    rows = Table.open(path).read()
    return rows.filter(pc.starts_with(rows.column("_hoodie_file_name"), file_id))


def _clustered(path: str):
    """Two writes, then a pending Hudi clustering of the first file group; returns the
    writer, generator, model, that group's slice and the clustering's time."""
    w, gen, model = tg.build(path, 2)
    group = Table.open(path).fsview.latest_merged_slices()[0]
    return w, gen, model, group, clustering_plan(path, [(group.partition_path, group.file_id)])


def _files_of(path: str, partition: str, file_id: str) -> set[str]:
    return {f for f in os.listdir(os.path.join(path, partition)) if file_id in f}


@pytest.mark.parametrize("version", [6, 9])
def test_an_update_into_a_group_a_pending_clustering_rewrites_fails_the_commit(tmp_path, version):
    path = str(tmp_path / "t")
    with tg.at_version(version):
        w, gen, model, group, plan = _clustered(path)
        stored = _stored_in(path, group.partition_path, group.file_id).to_pylist()[0]
        update = pa.Table.from_pylist([{"id": stored["id"], "city": stored["city"], "ts": 10**6, "value": "late"}],
                                      schema=tg.SCHEMA)
        with pytest.raises(CommitConflictError, match=f"{group.file_id}.*pending clustering {plan}"):
            w.upsert(update)
        assert tg.read_ours(path) == model.snapshot()
        elsewhere = gen.upserts(12)
        elsewhere = elsewhere.filter(pc.not_equal(elsewhere.column("city"), group.partition_path))
        w.upsert(elsewhere)  # rolls the refused write back first
        model.apply(elsewhere)
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
