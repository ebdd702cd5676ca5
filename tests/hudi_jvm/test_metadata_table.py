"""Hudi's metadata table: our commits keep Hudi's readers right when a table has one.

Hudi 1.0 writes a version-6 table with its metadata table (Hudi's default); our writer
commits to it and, not maintaining the metadata table, disables and deletes it as Hudi's
own writer does with ``hoodie.metadata.enable=false``. Hudi 1.0 readers with the metadata
table enabled then read the model; a later Hudi write rebuilds the metadata table.
"""

from __future__ import annotations

import os

import pytest

from streamer.read import Table
from streamer.table.metadata_table import has_metadata_table
from streamer.write import HudiWriter
from tests.hudi_jvm.compare import Expected, Query, assert_readers_match
from tests.support import block_tables as tg
from tests.support.hudi_options import HUDI_WRITE, V6

pytestmark = [pytest.mark.hudi_jvm, pytest.mark.conformance]
MDT_ON = {"hoodie.metadata.enable": "true"}


def _expect(model: tg.Model) -> Expected:
    """The model's rows on the data columns (it cannot name the instants of Hudi's commits)."""
    return Expected.of_rows(model.snapshot(), tg.COLUMNS)


def test_our_commit_to_a_table_with_hudis_metadata_table(tmp_path, hudi10):
    path = str(tmp_path / "t")
    gen, model = tg.Gen(3), tg.Model()
    first = gen.upserts(80)
    hudi10.write(path, first, dict(HUDI_WRITE, **V6, **MDT_ON), mode="overwrite")
    model.apply(first)
    assert os.path.isdir(os.path.join(path, ".hoodie", "metadata"))
    assert has_metadata_table(Table.open(path).properties)

    w = HudiWriter.open(path, options=tg.SMALL)
    tg.step(w, gen, model, rows=30)
    tg.step(w, gen, model, rows=10, delete=True)
    assert not os.path.exists(os.path.join(path, ".hoodie", "metadata"))
    assert not has_metadata_table(Table.open(path).properties)
    sessions = {"1.0": hudi10}
    assert_readers_match(path, sessions, _expect(model), [Query("snapshot")], hudi_options=MDT_ON)

    # Hudi writes again with its metadata table enabled: rebuilt from a listing, still right
    more = gen.upserts(20, tag="h")
    hudi10.write(path, more, dict(HUDI_WRITE, **V6, **MDT_ON))
    model.apply(more)
    assert has_metadata_table(Table.open(path).properties)
    assert_readers_match(path, sessions, _expect(model), [Query("snapshot")], hudi_options=MDT_ON)
