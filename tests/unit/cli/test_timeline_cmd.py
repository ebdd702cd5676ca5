"""``streamer timeline``: Hudi's savepoints are listed, each after the commit it keeps."""

from __future__ import annotations

import pytest

from streamer.cli.timeline_cmd import rows
from streamer.read import Table
from tests.support import block_tables as tg
from tests.support.hudi_actions import savepoint


@pytest.mark.parametrize("version", [6, 9])
def test_a_savepoint_is_listed_after_its_commit(tmp_path, version):
    path = str(tmp_path / "t")
    with tg.at_version(version):
        tg.build(path, 3)
    writes = [i.timestamp for i in Table.open(path).timeline.completed_writes()]
    savepoint(path, writes[1])
    listed = [(r["instant"], r["action"], r["state"]) for r in rows(path)]
    at = listed.index((writes[1], "deltacommit", "completed"))
    assert listed[at + 1] == (writes[1], "savepoint", "completed")
    assert [r for r in listed if r[1] != "savepoint"] == [(w, "deltacommit", "completed") for w in writes]
