"""Hudi 1.2 writes to one of our table-version-6 tables: what a user of both sees.

Hudi 1.2 upgrades any table it writes to (6 -> 8 -> 9: a new timeline layout with
completion times, new commit metadata). Our writer must then continue the table at its
new version - never write a v6 commit into a v9 timeline - and no reader may silently
misread it: Hudi 1.2, hudi-rs and our reader return the model's rows. A table newer than
the writer knows is refused in one line. ``streamer upgrade`` takes a v6 table to v9 the
same way on our side.
"""

from __future__ import annotations

import os

import pytest

from streamer.cli import main as cli
from streamer.errors import StreamerError
from streamer.read import Table
from streamer.services.handover import handover_to_hudi
from streamer.table.properties import load_properties, write_properties
from streamer.write import HudiWriter
from tests.hudi_jvm.compare import (
    Expected,
    Query,
    assert_readers_match,
    canon,
    canon_rows,
    read_ours,
)
from tests.support import block_tables as tg
from tests.support.hudi_options import HUDI_WRITE

pytestmark = [pytest.mark.hudi_jvm, pytest.mark.conformance]


def _instants(path: str) -> list[tuple[str, str, str]]:
    timeline = Table.open(path).timeline
    return sorted((i.timestamp, i.action, i.state) for i in [*timeline.completed(), *timeline.pending()])


def test_hudi12_upgrades_our_table_to_v9_and_our_writer_refuses_it_in_one_line(tmp_path, hudi12, capsys):
    path = str(tmp_path / "t")
    w, gen, model = tg.build(path, 4, deletes_every=3)
    handover_to_hudi(path)  # every key in a base file: Hudi's index sees them all
    batch = gen.upserts(30, tag="h12")
    hudi12.write(path, batch, dict(HUDI_WRITE, **{"hoodie.index.type": "BLOOM"}))
    model.apply(batch)
    t = Table.open(path)
    assert load_properties(t.fs, path).version == 9, "Hudi 1.2 did not upgrade the table"

    # Hudi 1.2 reads what it wrote on top of ours: the model
    want = canon_rows(model.snapshot(), tg.COLUMNS)
    assert canon(hudi12.read(path), tg.COLUMNS) == want

    # our reader: the model, or a refusal naming the version - never other rows
    try:
        ours = canon(read_ours(path, Query("snapshot")), tg.COLUMNS)
    except StreamerError as e:
        assert "version" in str(e), e
    else:
        assert ours == want, "our reader misreads the table Hudi 1.2 upgraded"
        assert_readers_match(path, {"1.2": hudi12}, Expected.of_rows(model.snapshot(), tg.COLUMNS),
                             [Query("snapshot"), Query("read_optimized")])

    # our writer continues the upgraded table at its own version (9), and every reader
    # still equals the model with no key twice
    w2 = HudiWriter.open(path, options=tg.SMALL)
    assert w2.config.table_version == 9
    for i in range(3):
        tg.step(w2, gen, model, 15, delete=(i == 1))
    assert load_properties(t.fs, path).version == 9
    want = canon_rows(model.snapshot(), tg.COLUMNS)
    assert canon(read_ours(path, Query("snapshot")), tg.COLUMNS) == want
    ours = tg.read_ours(path)
    assert len({(r["city"], r["id"]) for r in ours}) == len(ours), "a key twice"
    assert_readers_match(path, {"1.2": hudi12}, Expected.of_rows(model.snapshot(), tg.COLUMNS),
                         [Query("snapshot"), Query("read_optimized")])


def test_our_writer_refuses_a_table_newer_than_it_knows_in_one_line(tmp_path, capsys):
    """A table version above 9 (or a layout that does not match its version): one line
    naming both versions, from the API and from the CLI, and the table left as it was."""
    path = str(tmp_path / "t")
    tg.build(path, 1)
    fs = Table.open(path).fs
    write_properties(fs, path, load_properties(fs, path).with_updates({"hoodie.table.version": "10"}))
    with pytest.raises(StreamerError) as refused:
        HudiWriter.open(path, options=tg.SMALL)
    message = str(refused.value)
    assert "\n" not in message and "version 10" in message and "5, 6, 8, 9" in message, message
    before = sorted(os.listdir(os.path.join(path, ".hoodie")))
    yaml = tmp_path / "continue.yaml"
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "a.json").write_text('{"id": 1, "city": "sf", "ts": 99, "value": "x"}\n')
    yaml.write_text(f"""
pipelines:
  - name: cont
    source: {{type: files, path: "{tmp_path / 'in'}", format: json, schema: "id BIGINT, city STRING, ts BIGINT, value STRING"}}
    target: {{path: "{path}", record_key: [id], partition_by: [city], ordering_field: ts}}
    trigger: {{mode: available_now}}
""")
    capsys.readouterr()
    assert cli(["run", str(yaml)]) != 0
    err = capsys.readouterr().err
    assert "version 10" in err and "Traceback" not in err, err
    assert sorted(os.listdir(os.path.join(path, ".hoodie"))) == before


def test_streamer_upgrade_to_9_then_hudi12_reads_and_continues(tmp_path, hudi12, capsys):
    """Issue 29 acc 5: ``streamer upgrade --to 9`` on a version-6 table of ours (logs,
    inserts into logs, deletes, a log compaction, a compaction, a clean, an archive, and
    logs again after them) gives a v9 table
    that Hudi 1.2 reads and continues, and that our writer continues after Hudi."""
    from streamer.config.policies import (
        ArchivePolicy,
        CleanPolicy,
        CompactionPolicy,
        LogCompactionPolicy,
    )
    from streamer.services.archive import run_archive
    from streamer.services.clean import run_clean
    from streamer.services.compaction import schedule_compaction
    from streamer.services.executor import execute
    from streamer.services.log_compaction import schedule_log_compaction

    path = str(tmp_path / "t")
    w, gen, model = tg.build(path, 8, deletes_every=3)
    lc = schedule_log_compaction(Table.open(path), LogCompactionPolicy(min_blocks=3))
    assert lc is not None and execute(Table.open(path), lc).status == "completed"
    comp = schedule_compaction(Table.open(path), CompactionPolicy(), force=True)
    assert execute(Table.open(path), comp).status == "completed"
    for i in range(4):
        tg.step(w, gen, model, delete=(i == 1))
    run_clean(Table.open(path), CleanPolicy(retain_commits=1))
    assert run_archive(Table.open(path), ArchivePolicy(min_commits=2, max_commits=3)).archived
    sessions = {"1.2": hudi12}
    want = Expected.of_rows(model.snapshot(), tg.COLUMNS)
    checks = [Query("snapshot"), Query("read_optimized")]

    capsys.readouterr()
    assert cli(["upgrade", path, "--to", "9"]) == 0
    assert "table version 6 -> 9" in capsys.readouterr().out
    t = Table.open(path)
    assert (t.properties.version, t.timeline.layout_version) == (9, 2)
    assert all(i.completion_time for i in t.timeline.completed())
    assert not [n for n in os.listdir(os.path.join(path, ".hoodie")) if n[:1].isdigit()], "layout-1 files left"
    assert_readers_match(path, sessions, want, checks)

    batch = gen.upserts(30, tag="h12")
    hudi12.write(path, batch, dict(HUDI_WRITE, **{"hoodie.index.type": "BLOOM"}))
    model.apply(batch)
    gone = gen.deletes(model, 5)
    hudi12.write(path, gone, dict(HUDI_WRITE, **{"hoodie.index.type": "BLOOM",
                                                  "hoodie.datasource.write.operation": "delete"}))
    model.apply(deletes=gone)
    assert load_properties(t.fs, path).version == 9
    assert_readers_match(path, sessions, Expected.of_rows(model.snapshot(), tg.COLUMNS), checks)

    w2 = HudiWriter.open(path, options=tg.SMALL)
    for i in range(3):
        tg.step(w2, gen, model, 15, delete=(i == 1))
    assert_readers_match(path, sessions, Expected.of_rows(model.snapshot(), tg.COLUMNS), checks)
    ours = tg.read_ours(path)
    assert len({(r["city"], r["id"]) for r in ours}) == len(ours), "a key twice"
