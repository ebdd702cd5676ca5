"""A table merging by commit time although it names an ordering field (Hudi 1.x's
``COMMIT_TIME_ORDERING`` beside ``ordering.fields``): a key's last row of a batch wins,
as Hudi 1.2's writer keeps it, not its highest ordering value. A version-6
``OverwriteWithLatestAvroPayload`` table keeps Hudi 0.x's rule (its ``preCombine``
compares the field)."""

from __future__ import annotations

import pyarrow as pa
import pytest

from streamer.errors import ConfigError
from streamer.read import Table
from streamer.table.properties import load_properties
from streamer.write import HudiWriter, TableConfig, WriteOptions
from tests.support.readers import hudi_rs_table

BATCH = pa.table({"id": [1, 2, 1], "ts": [50, 7, 40], "v": ["hi", "other", "lo-last"]})


def _values(table: pa.Table | None) -> dict:
    assert table is not None
    return dict(zip(table.column("id").to_pylist(), table.column("v").to_pylist(), strict=True))


@pytest.mark.parametrize("version", [8, 9])
def test_a_commit_time_table_keeps_a_keys_last_row_of_a_batch(tmp_path, version):
    path = str(tmp_path / "t")
    cfg = TableConfig("t", ("id",), (), "ts", table_version=version, latest_write_wins=True)
    HudiWriter.create(path, cfg, options=WriteOptions(engine="local"))
    props = load_properties(Table.open(path).fs, path)
    assert props.merge_mode == "COMMIT_TIME_ORDERING" and props.precombine_field == "ts"
    writer = HudiWriter.open(path, options=WriteOptions(engine="local"))
    assert writer.config.latest_write_wins  # read back from the table's properties
    writer.upsert(BATCH)
    expected = {1: "lo-last", 2: "other"}
    assert _values(Table.open(path).read()) == expected
    assert _values(hudi_rs_table(path)) == expected


@pytest.mark.parametrize("version", [6, 9])
def test_an_event_time_table_keeps_a_keys_highest_ordering_value(tmp_path, version):
    path = str(tmp_path / "t")
    writer = HudiWriter.create(path, TableConfig("t", ("id",), (), "ts", table_version=version),
                               options=WriteOptions(engine="local"))
    assert not writer.config.latest_write_wins
    writer.upsert(BATCH)
    assert _values(Table.open(path).read()) == {1: "hi", 2: "other"}


def test_commit_time_merging_beside_a_field_needs_version_8():
    with pytest.raises(ConfigError, match="version 8 or later"):
        TableConfig("t", ("id",), (), "ts", table_version=6, latest_write_wins=True)


def test_a_delete_without_its_partition_is_combined_by_arrival_too(tmp_path):
    """A delete that names no partition goes to the partitions holding its key, where it
    meets the batch's update of that key: the later of the two wins, not the higher
    ordering value."""
    path = str(tmp_path / "t")
    cfg = TableConfig("t", ("id",), ("city",), "ts", table_version=9, latest_write_wins=True)
    writer = HudiWriter.create(path, cfg, options=WriteOptions(engine="local"))
    writer.upsert(pa.table({"id": ["J", "L"], "city": ["sf", "sf"], "ts": [1, 1], "v": ["stored", "stored"]}))
    writer.upsert(pa.table({
        "id": ["J", "J", "L", "L"], "city": ["sf", None, None, "sf"], "ts": [5, 1, 9, 5],
        "v": ["upd", None, None, "upd"], "_hoodie_is_deleted": [False, True, True, False],
    }))
    expected = {"L": "upd"}  # J's last row deletes it; L's last row updates it
    assert _values(Table.open(path).read()) == expected
    assert _values(hudi_rs_table(path)) == expected
