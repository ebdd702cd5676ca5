"""``streamer upgrade``: a version-6 table taken to 8 or 9 (Hudi 1.2 reading and continuing
the result: tests/hudi_jvm/test_hudi12_upgrade.py)."""

from __future__ import annotations

import os

import pytest

from streamer.read import Table
from streamer.services.upgrade import UpgradeError, upgrade_table
from streamer.table.metadata import CHECKPOINT_KEY, CHECKPOINT_KEY_V2, CommitMetadata
from tests.support import block_tables as tg
from tests.support.hudi_actions import replace_partition, savepoint


@pytest.mark.parametrize("version", [8, 9])
def test_upgrade_keeps_every_row_and_the_writer_continues_at_the_new_version(tmp_path, version):
    path = str(tmp_path / "t")
    w, gen, model = tg.build(path, 6, deletes_every=3)
    before = Table.open(path).timeline.completed()
    report = upgrade_table(path, to=version)
    assert report.lines()[-1] == f"table version 6 -> {version}"
    t = Table.open(path)
    assert (t.properties.version, t.timeline.layout_version) == (version, 2)
    assert t.properties.raw["hoodie.table.initial.version"] == "6"
    assert ("hoodie.table.ordering.fields" in t.properties.raw) == (version == 9)
    after = t.timeline.completed()
    assert [i.timestamp for i in after][: len(before)] == [i.timestamp for i in before]
    times = [x for i in after for x in (i.timestamp, i.completion_time)]
    assert all(i.completion_time for i in after) and times == sorted(times)
    assert not [n for n in os.listdir(os.path.join(path, ".hoodie")) if n[:1].isdigit()]
    assert not any(s.log_files for s in t.fsview.latest_merged_slices()), "every slice compacted"
    assert tg.read_ours(path) == model.snapshot()
    w = tg.open_writer(path)
    assert w.config.table_version == version
    for i in range(3):
        tg.step(w, gen, model, delete=(i == 1))
    assert tg.read_ours(path) == model.snapshot()
    assert upgrade_table(path, to=version).lines() == [f"already table version {version}: nothing to do"]


@pytest.mark.parametrize("version", [8, 9])
def test_upgrade_carries_hudis_savepoints_and_replacecommits(tmp_path, version):
    path = str(tmp_path / "t")
    _, _, model = tg.build(path, 4)
    replace, part = replace_partition(path, "oslo")
    model.rows = {k: v for k, v in model.rows.items() if k[0] != "oslo"}
    writes = [i.timestamp for i in Table.open(path).timeline.completed_writes()]
    savepoint(path, writes[1])
    upgrade_table(path, to=version)
    t = Table.open(path)
    assert [i.timestamp for i in t.timeline.completed_writes()][: len(writes)] == writes
    assert [(i.timestamp, i.is_completed) for i in t.timeline.savepoints] == [(writes[1], True)]
    done = {i.timestamp: i.completion_time for i in t.timeline.completed()}
    assert done[writes[1]] < t.timeline.savepoints[0].completion_time < done[writes[2]]
    assert {g for g in t.fsview.replaced_file_groups() if g[0] == part}, "the replaced groups stay replaced"
    assert tg.read_ours(path) == model.snapshot()


def test_upgrade_refuses_a_savepoint_of_no_commit(tmp_path):
    path = str(tmp_path / "t")
    tg.build(path, 2)
    t = Table.open(path)
    stray = "20000101000000000"  # no instant at this time
    with open(os.path.join(t.timeline.folder, f"{stray}.savepoint"), "wb"):
        pass
    with pytest.raises(UpgradeError, match=f"savepoint.*{stray}.*name no completed commit"):
        upgrade_table(path, to=9)
    assert Table.open(path).properties.version == 6


def test_upgrade_moves_a_hoodie_streamer_checkpoint_to_the_v2_key(tmp_path):
    path = str(tmp_path / "t")
    w, gen, model = tg.build(path, 1)
    meta = {CHECKPOINT_KEY: "orders,0:10,1:12"}
    w.upsert(gen.upserts(5), extra_metadata=meta)
    upgrade_table(path, to=9)
    t = Table.open(path)
    found = [CommitMetadata.from_bytes(t.timeline.read_details(i)).extra_metadata
             for i in t.timeline.completed_writes()]
    assert [f.get(CHECKPOINT_KEY_V2) for f in found].count("orders,0:10,1:12") == 1
    assert not any(CHECKPOINT_KEY in f for f in found)


def test_upgrade_refuses_what_it_cannot_do(tmp_path):
    path = str(tmp_path / "t")
    with tg.at_version(8):
        tg.build(path, 1)
    with pytest.raises(UpgradeError, match="only version 6"):
        upgrade_table(path, to=9)
    with pytest.raises(UpgradeError, match="targets: 8, 9"):
        upgrade_table(path, to=7)
