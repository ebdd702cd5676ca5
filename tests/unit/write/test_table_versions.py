"""Tables of version 8 and 9 from our writer: what lands on storage (the Hudi tier,
tests/hudi_jvm/test_table_versions.py, checks Hudi 1.x reads it), and what `show` and
`handover` tell a user about which Hudi writers keep each version."""

from __future__ import annotations

import os

import pytest

from streamer.cli import main as cli
from streamer.config.policies import CompactionPolicy, LogCompactionPolicy
from streamer.read import Table
from streamer.services.compaction import schedule_compaction
from streamer.services.handover import handover_to_hudi, version_advice
from streamer.services.log_compaction import schedule_log_compaction
from streamer.table.naming import parse_log_file_name
from tests.support import block_tables as tg
from tests.support.failed_write import fail_before_complete


@pytest.mark.parametrize("version", [8, 9])
def test_each_commit_writes_its_own_log_files_on_a_layout2_timeline(tmp_path, version):
    path = str(tmp_path / "t")
    with tg.at_version(version):
        w, gen, model = tg.build(path, 4, deletes_every=2)
    t = Table.open(path)
    assert (t.properties.version, t.timeline.layout_version) == (version, 2)
    assert os.path.isdir(os.path.join(path, ".hoodie", "timeline", "history"))
    assert not os.path.exists(os.path.join(path, ".hoodie", "archived"))
    writes = {i.timestamp for i in t.timeline.completed_writes()}
    logs = [parse_log_file_name(n) for _, _, names in os.walk(path) for n in names if ".log." in n]
    assert logs and all(lf.base_instant in writes and lf.version == 1 for lf in logs)
    assert tg.read_ours(path) == model.snapshot()
    raw = t.properties.raw
    assert raw["hoodie.record.merge.mode"] == "EVENT_TIME_ORDERING"
    assert raw["hoodie.table.initial.version"] == str(version)
    assert ("hoodie.table.ordering.fields" in raw) == (version == 9)
    assert ("hoodie.table.precombine.field" in raw) == (version == 8)


def test_a_failed_v9_write_is_rolled_back_by_deleting_its_log_files(tmp_path):
    path = str(tmp_path / "t")
    with tg.at_version(9):
        w, gen, model = tg.build(path, 2)
    before = {n for _, _, names in os.walk(path) for n in names if ".log." in n}
    fail_before_complete(lambda: w.upsert(gen.upserts(15, tag="lost")))
    tg.step(w, gen, model)
    t = Table.open(path)
    assert any(i.action == "rollback" for i in t.timeline.completed())
    after = {n for _, _, names in os.walk(path) for n in names if ".log." in n}
    failed = {i.timestamp for i in t.timeline.completed() if i.action == "rollback"}
    assert failed and before <= after  # nothing of the committed writes went
    rollback_logs = [n for n in after - before if parse_log_file_name(n).base_instant in failed]
    assert not rollback_logs, "version 9 rolls back by deleting files, not with command blocks"
    assert tg.read_ours(path) == model.snapshot()


def test_show_and_handover_say_which_hudi_writers_keep_the_version(tmp_path, capsys):
    for version in (6, 9):
        path = str(tmp_path / f"v{version}")
        with tg.at_version(version):
            tg.build(path, 2)
        capsys.readouterr()
        assert cli(["show", path]) == 0
        out = capsys.readouterr().out
        assert f"Hudi versions: {version_advice(version)}" in out
        assert version_advice(version) in handover_to_hudi(path).lines()
    assert "hoodie.write.table.version=6 hoodie.write.auto.upgrade=false" in version_advice(6)
    assert "hoodie.write.table.version=8" in version_advice(8)


@pytest.mark.parametrize(("key", "value"), [
    ("hoodie.record.merge.mode", "CUSTOM"),
    ("hoodie.compaction.payload.class", "org.apache.hudi.common.model.PartialUpdateAvroPayload"),
    ("hoodie.record.merge.strategy.id", "00000000-0000-0000-0000-000000000001"),
    ("hoodie.table.partial.update.mode", "IGNORE_DEFAULTS"),
    ("hoodie.table.ordering.fields", "ts,seq"),  # Hudi 1.x compares them in turn
])
def test_a_merge_rule_we_cannot_honour_is_refused_by_name(tmp_path, key, value):
    from streamer.errors import ConfigError, UnsupportedMergeError
    from streamer.table.properties import load_properties, write_properties
    from streamer.write import HudiWriter

    path = str(tmp_path / "t")
    with tg.at_version(9):
        tg.build(path, 1)
    fs = Table.open(path).fs
    write_properties(fs, path, load_properties(fs, path).with_updates({key: value}))
    with pytest.raises(ConfigError, match=f"{key}={value}"):
        HudiWriter.open(path, options=tg.SMALL)
    with pytest.raises(UnsupportedMergeError, match=f"{key}={value}"):
        Table.open(path).read()
    for schedule in (lambda: schedule_compaction(Table.open(path), CompactionPolicy(), force=True),
                     lambda: schedule_log_compaction(Table.open(path), LogCompactionPolicy())):
        with pytest.raises(UnsupportedMergeError, match=f"{key}={value}"):
            schedule()  # no plan a merge could not run
    assert not [i for i in Table.open(path).timeline.instants if not i.is_completed]


def test_timeline_shows_completion_times_and_archive_keeps_a_short_v9_timeline(tmp_path, capsys):
    path = str(tmp_path / "t")
    with tg.at_version(9):
        tg.build(path, 2)
    capsys.readouterr()
    assert cli(["timeline", path]) == 0
    out = capsys.readouterr().out
    done = Table.open(path).timeline.completed()[-1]
    assert "completed" in out.splitlines()[0] and done.completion_time in out
    assert cli(["archive", path]) == 0
    assert "archive: nothing to archive (the active timeline is within policy)" in capsys.readouterr().out
