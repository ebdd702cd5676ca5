"""Hudi 1.2 writes to one of our table-version-6 tables: what a user of both sees.

Hudi 1.2 upgrades any table it writes to (6 -> 8 -> 9: a new timeline layout with
completion times, new commit metadata). This project writes version 6 only, so after such
an upgrade our writer must refuse the table in one line that says why and what to do -
never write a v6 commit into a v9 timeline - and no reader may silently misread it:
Hudi 1.2, hudi-rs and our reader each either return the model's rows or refuse.
"""

from __future__ import annotations

import pytest

from streamer.cli import main as cli
from streamer.errors import ConfigError, StreamerError
from streamer.read import Table
from streamer.services.handover import handover_to_hudi
from streamer.table.properties import load_properties
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

    # our writer: one line, naming the version and what it writes
    with pytest.raises(ConfigError) as refused:
        HudiWriter.open(path, options=tg.SMALL)
    message = str(refused.value)
    assert "\n" not in message and "table version 9" in message and "version 6" in message, message
    # ... and so does the CLI, without a traceback, leaving the table as it was
    before = _instants(path)
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
    assert "table version 9" in err and "Traceback" not in err, err
    assert _instants(path) == before
    assert canon(hudi12.read(path), tg.COLUMNS) == want
