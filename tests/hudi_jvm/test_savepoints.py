"""A savepoint Apache Hudi made on our table survives our services, and Hudi restores to it.

Hudi creates the savepoint (``CALL create_savepoint``) at one of our writes; we then write
on, compact, clean and archive; Hudi restores the table to the savepoint
(``CALL rollback_to_savepoint``) and reads what the table held at that write - the model's
rows as of then. Our cleaner must keep the files the savepoint reads and our archive the
timeline from the savepoint on, or the restore has nothing to go back to."""

from __future__ import annotations

import copy
import uuid

import pytest

from streamer.read import Table
from tests.support import block_tables as tg
from tests.support.archived_writes import written_and_served
from tests.support.hudi import OWNERS


@pytest.mark.parametrize(("version", "release"), OWNERS)
def test_hudi_restores_its_savepoint_after_our_writes_and_services(tmp_path, hudi_sessions, version, release):
    session = hudi_sessions[release]
    path = str(tmp_path / "t")
    with tg.at_version(version):
        w, gen, model = tg.build(path, 3)
        saved = Table.open(path).timeline.completed_writes()[-1].timestamp
        at_savepoint = copy.deepcopy(model)
        name = f"sp_{uuid.uuid4().hex[:12]}"  # a procedure wants a catalog table
        session.sql(f"CREATE TABLE {name} USING hudi LOCATION '{path}'")
        _without_metadata_table(session, f"CALL create_savepoint(table => '{name}', commit_time => '{saved}')")
        assert [i.timestamp for i in Table.open(path).timeline.savepoints] == [saved]
        archived = written_and_served(path, w, gen, model)
    assert all(ts < saved for ts in archived)
    assert tg.canon(session.read(path)) == model.snapshot(), "Hudi reads our writes after the savepoint"
    _without_metadata_table(session, f"CALL rollback_to_savepoint(table => '{name}', instant_time => '{saved}')")
    assert tg.canon(session.read(path)) == at_savepoint.snapshot()
    assert tg.read_ours(path) == at_savepoint.snapshot()


def _without_metadata_table(session, statement: str) -> None:
    """``statement`` with Hudi's metadata table off, as the table has it: our writers
    drop it, and Hudi's restore refuses a metadata table rebuilt after the savepoint."""
    session.sql("SET hoodie.metadata.enable=false")
    try:
        session.sql(statement)
    finally:
        session.sql("RESET hoodie.metadata.enable")
