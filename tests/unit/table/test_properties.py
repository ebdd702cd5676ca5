"""hoodie.properties: Java escaping both ways and Hudi's checksum on every fixture."""

from __future__ import annotations

import pytest

from streamer.errors import CorruptDataError
from streamer.fs import FileSystem
from streamer.table.properties import (
    TableProperties,
    format_java_properties,
    load_properties,
    new_table_properties,
    parse_java_properties,
    table_checksum,
    write_properties,
)
from tests.support.fixture_tables import FIXTURE_NAMES


@pytest.mark.parametrize("name", FIXTURE_NAMES)
def test_checksum_matches_every_fixture(hudi_fixtures_dir, name):
    from tests.support.fixture_tables import fixture_table_path

    path = fixture_table_path(hudi_fixtures_dir, name)
    props = load_properties(FileSystem(), str(path))
    assert props.checksum == table_checksum(props.name, props.database)
    # Round trip through our writer keeps every key and value.
    assert TableProperties.parse(props.to_text()).raw == props.raw


def test_java_escapes_round_trip():
    raw = {"k:1": "a=b:c#d!e", "sp": " lead", "uni": "é✓", "nl": "x\ny", "bs": "c:\\dir"}
    text = format_java_properties(raw, "comment")
    assert "a\\=b\\:c\\#d\\!e" in text and "\\u00E9" in text
    assert parse_java_properties(text) == raw


def test_parse_continuations_and_separators():
    text = "# c\n! c2\na = 1\nb:2\nc 3\nlong=one\\\n    two\n"
    assert parse_java_properties(text) == {"a": "1", "b": "2", "c": "3", "long": "onetwo"}


def test_stale_checksum_rejected_with_path(tmp_path):
    fs = FileSystem()
    props = new_table_properties("t1", record_key_fields=["id"], precombine_field="ts")
    write_properties(fs, str(tmp_path), props)
    loaded = load_properties(fs, str(tmp_path))
    assert loaded.checksum_valid() and loaded.version == 6 and loaded.timeline_layout_version == 1
    assert loaded.record_key_fields == ("id",) and loaded.merge_mode == "EVENT_TIME_ORDERING"
    p = tmp_path / ".hoodie" / "hoodie.properties"
    p.write_text(p.read_text().replace("hoodie.table.name=t1", "hoodie.table.name=t2"))
    with pytest.raises(CorruptDataError) as e:
        load_properties(fs, str(tmp_path))
    assert str(p) in str(e.value)


def test_merge_mode_explicit_wins():
    p = TableProperties({"hoodie.table.ordering.fields": "ts", "hoodie.record.merge.mode": "COMMIT_TIME_ORDERING"})
    assert p.precombine_field == "ts" and p.merge_mode == "COMMIT_TIME_ORDERING"
    assert TableProperties({}).merge_mode == "COMMIT_TIME_ORDERING"


@pytest.mark.parametrize(("raw", "formatted"), [
    ({"hoodie.table.partition.fields": "city"}, set()),
    ({"hoodie.table.partition.fields": "day",
      "hoodie.table.keygenerator.class": "org.apache.hudi.keygen.TimestampBasedKeyGenerator"}, {"day"}),
    ({"hoodie.table.partition.fields": "day", "hoodie.table.keygenerator.type": "TIMESTAMP"}, {"day"}),
    ({"hoodie.table.partition.fields": "city:SIMPLE,day:TIMESTAMP",
      "hoodie.table.keygenerator.class": "org.apache.hudi.keygen.CustomKeyGenerator"}, {"day"}),
    ({"hoodie.table.partition.fields": "city,day",  # custom, types not recorded: trust none
      "hoodie.table.keygenerator.class": "org.apache.hudi.keygen.CustomKeyGenerator"}, {"city", "day"}),
])
def test_formatted_partition_fields(raw, formatted):
    assert TableProperties(raw).formatted_partition_fields == formatted
