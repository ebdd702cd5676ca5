"""Apache Hudi's ``insert_overwrite`` on our table: its replacecommit read, then cleaned
and archived by our services, and every reader still reads the model.

Hudi replaces the file groups of the partitions its batch holds (a replacecommit naming
them); our reader must hide them, our cleaner delete them once the replacecommit is older
than the retained commits, and our archive move the replacecommit only after that."""

from __future__ import annotations

import pyarrow.compute as pc
import pytest

from streamer.read import Table
from streamer.table.instant import Action
from tests.support import block_tables as tg
from tests.support.archived_writes import written_and_served
from tests.support.hudi import OWNERS
from tests.support.hudi_options import HUDI_WRITE

OVERWRITE = {**HUDI_WRITE, "hoodie.datasource.write.operation": "insert_overwrite",
             # as our writers leave the table: no metadata table, services ours
             "hoodie.metadata.enable": "false", "hoodie.compact.inline": "false",
             "hoodie.clean.automatic": "false", "hoodie.archive.automatic": "false"}


@pytest.mark.parametrize(("version", "release"), OWNERS)
def test_hudis_insert_overwrite_is_read_cleaned_and_archived_by_us(tmp_path, hudi_sessions, version, release):
    session = hudi_sessions[release]
    path = str(tmp_path / "t")
    with tg.at_version(version):
        w, gen, model = tg.build(path, 3)
    batch = gen.upserts(40, tag="ow")
    batch = batch.filter(pc.equal(batch.column("city"), "oslo"))
    assert batch.num_rows, "precondition: the overwrite has rows"
    session.write(path, batch, OVERWRITE)
    model.rows = {k: v for k, v in model.rows.items() if k[0] != "oslo"}
    model.apply(batch)
    t = Table.open(path)
    replace = [i.timestamp for i in t.timeline.completed() if i.action == Action.REPLACE_COMMIT]
    replaced = t.fsview.replaced_file_groups()
    assert len(replace) == 1 and replaced, "precondition: Hudi replaced oslo's groups"
    assert tg.read_ours(path) == model.snapshot()
    with tg.at_version(version):
        archived = written_and_served(path, tg.open_writer(path), gen, model)
    assert replace[0] in archived
    assert not replaced & {(g.partition_path, g.file_id) for g in Table.open(path).fsview.file_groups()}
    assert tg.read_ours(path) == tg.read_hudi_rs(path) == model.snapshot()
    assert tg.canon(session.read(path)) == model.snapshot()
