"""The one reader of ``hoodie.properties`` against tables Apache Hudi wrote.

Every fixture table (table versions 6, 8 and 9, written by Hudi's Spark writer) goes
through :class:`TableProperties`, and its ordering field, record key fields and
partition fields are checked against Hudi, not against our own parser:

- ``HUDI_WROTE`` holds the values Hudi put into each table's ``hoodie.properties``
  (``precombine.field`` for versions 6/8, ``ordering.fields`` for 9);
- the fixture's expected rows (``expected/<name>.snapshot.jsonl``, produced by a Hudi
  reader) carry Hudi's own ``_hoodie_record_key`` and ``_hoodie_partition_path``: the
  record key and partition path rebuilt from the fields we parsed must be those.

What Hudi's JVM reader (``HoodieTableConfig``, Hudi 0.15 and 1.0) reports for the same
tables is checked in ``tests/hudi_jvm/test_table_config.py``. The rules for keys Hudi
renamed (ordering fields, key generator type vs class, typed partition fields) are
pinned below on hand-made properties, each against the Hudi rule it follows.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from streamer.errors import ConfigError, CorruptDataError
from streamer.fs import FileSystem
from streamer.table import table_keys
from streamer.table.identity import KeyGenType, TableConfig
from streamer.table.properties import TableProperties, load_properties, new_table_properties
from streamer.table.table_keys import (
    KEYGEN_CLASS,
    KEYGEN_TYPE,
    ORDERING_FIELDS,
    PARTITION_FIELDS,
    PRECOMBINE_FIELD,
    RECORD_KEY_FIELDS,
    REGISTRY,
    TABLE_NAME,
)
from tests.support.fixture_tables import FIXTURE_NAMES, FIXTURES, fixture_table_path

#: (table version, ordering fields, record key fields, partition fields) as Hudi wrote
#: them into each fixture's hoodie.properties.
HUDI_WROTE: dict[str, tuple[int, tuple[str, ...], tuple[str, ...], tuple[str, ...]]] = {
    "quickstart_trips_table__mor__avro__table_log_only": (9, (), ("key",), ()),
    "quickstart_trips_table__mor__avro__v6_trips_8i1u": (6, ("ts",), ("uuid",), ("city",)),
    "quickstart_trips_table__mor__avro__v6_trips_8i3d": (6, ("ts",), ("uuid",), ("city",)),
    "quickstart_trips_table__mor__avro__v8_trips_8i3u1d": (8, ("ts",), ("uuid",), ("city",)),
    "quickstart_trips_table__mor__avro__v9_mor_nonpart_3commits": (9, ("ts",), ("id",), ()),
    "sample_table__cow__v6_complexkeygen_hivestyle": (
        6, ("longField",), ("id", "name"), ("byteField", "shortField")),
    "sample_table__cow__v6_nonpartitioned": (6, ("longField",), ("id",), ()),
    "sample_table__cow__v8_simplekeygen_nonhivestyle": (8, ("longField",), ("id",), ("byteField",)),
    "sample_table__mor__avro__v9_txns_simple_nometa": (9, ("txn_ts",), ("txn_id",), ("region",)),
    "sample_table__mor__parquet__v6_complexkeygen_hivestyle": (
        6, ("longField",), ("id", "name"), ("byteField", "shortField")),
    "sample_table__mor__parquet__v6_empty": (6, (), ("id",), ()),
    "sample_table__mor__parquet__v6_nonpartitioned": (6, ("longField",), ("id",), ()),
    "sample_table__mor__parquet__v6_nonpartitioned_rollback": (6, ("longField",), ("id",), ()),
    "sample_table__mor__parquet__v6_simplekeygen_hivestyle_no_metafields": (
        6, ("longField",), ("id",), ("byteField",)),
    "sample_table__mor__parquet__v6_simplekeygen_nonhivestyle": (
        6, ("longField",), ("id",), ("byteField",)),
    "sample_table__mor__parquet__v6_simplekeygen_nonhivestyle_overwritetable": (
        6, ("longField",), ("id",), ("byteField",)),
}


def test_every_fixture_has_expectations():
    assert sorted(HUDI_WROTE) == FIXTURE_NAMES


def _props(fixtures_dir: Path, name: str) -> TableProperties:
    return load_properties(FileSystem(), str(fixture_table_path(fixtures_dir, name)))


@pytest.mark.parametrize("name", FIXTURE_NAMES)
def test_fields_as_hudi_wrote_them(hudi_fixtures_dir, name):
    props = _props(hudi_fixtures_dir, name)
    version, ordering, keys, parts = HUDI_WROTE[name]
    assert props.version == version
    assert props.ordering_fields == ordering
    assert props.record_key_fields == keys
    assert props.partition_fields == parts
    # the writer's identity is derived from the same reader, so it cannot differ
    cfg = TableConfig.from_properties(props)
    assert cfg.ordering_field == (ordering[0] if ordering else None)
    assert cfg.record_key_fields == keys and cfg.partition_fields == parts
    assert TableConfig.from_properties(props.raw) == cfg


def _hudi_rows(name: str) -> list[dict]:
    path = FIXTURES / "expected" / f"{name}.snapshot.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()]


def _text(value) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


def _meta_rows(name: str) -> list[dict]:
    return [r for r in _hudi_rows(name) if "_hoodie_record_key" in r]


#: The fixtures whose rows carry no meta fields to rebuild: the empty table, and the one
#: written with ``hoodie.populate.meta.fields=false``.
WITHOUT_META_ROWS = ("sample_table__mor__parquet__v6_empty",
                     "sample_table__mor__parquet__v6_simplekeygen_hivestyle_no_metafields")


def test_only_the_known_fixtures_have_no_meta_rows():
    assert sorted(n for n in FIXTURE_NAMES if not _meta_rows(n)) == sorted(WITHOUT_META_ROWS)


@pytest.mark.parametrize("name", [n for n in FIXTURE_NAMES if n not in WITHOUT_META_ROWS])
def test_fields_rebuild_hudis_keys_and_paths(hudi_fixtures_dir, name):
    """Hudi's key generator output in the rows Hudi's reader returned: the parsed fields
    must rebuild every ``_hoodie_record_key`` and ``_hoodie_partition_path``."""
    props = _props(hudi_fixtures_dir, name)
    rows = _meta_rows(name)
    assert rows, f"{name}: no rows with meta fields"
    keys, parts = props.record_key_fields, props.partition_fields
    complex_keys = TableConfig.from_properties(props).keygen is KeyGenType.COMPLEX
    for row in rows:
        if complex_keys:
            key = ",".join(f"{f}:{_text(row[f])}" for f in keys)
        else:
            (field,) = keys
            key = _text(row[field])
        assert row["_hoodie_record_key"] == key
        segments = [
            f"{f}={_text(row[f])}" if props.hive_style_partitioning else _text(row[f]) for f in parts
        ]
        assert row["_hoodie_partition_path"] == "/".join(segments)
    for field in props.ordering_fields:
        assert field in rows[0], f"ordering field {field} is not a column Hudi returned"


@pytest.mark.parametrize("name", FIXTURE_NAMES)
def test_registry_versions_match_what_hudi_wrote(hudi_fixtures_dir, name):
    """Every registered key a Hudi-written table carries is registered for its version."""
    props = _props(hudi_fixtures_dir, name)
    wrong = [k for k in props.raw if k in REGISTRY and props.version not in REGISTRY[k].versions]
    assert not wrong, f"table version {props.version} carries {wrong}"


def test_our_new_table_keys_are_registered_for_version_6():
    cfg = TableConfig("t", ("id",), ("p",), "ts")
    props = new_table_properties("t", record_key_fields=["id"], partition_fields=["p"],
                                 precombine_field="ts", keygen_class=cfg.keygen.value,
                                 create_schema="{}", extra=cfg.extra_properties())
    assert set(props.raw) <= table_keys.known_in(6)


def test_no_key_spelled_outside_the_registry():
    """Only the registry module spells a registered key; everything else imports it."""
    root = Path(__file__).resolve().parents[3]
    pattern = re.compile("|".join(re.escape(f'"{k}"') for k in REGISTRY))
    found = []
    for folder in ("streamer", "sources", "transforms"):
        for path in sorted((root / folder).rglob("*.py")):
            if path.name == "table_keys.py":
                continue
            found += [f"{path.relative_to(root)}: {m.group()}" for m in pattern.finditer(path.read_text())]
    assert not found


# --------------------------------------------------------------------------- Hudi's rules
def _p(**raw: str) -> TableProperties:
    return TableProperties({TABLE_NAME: "t", **{_KEYS[k]: v for k, v in raw.items()}})


_KEYS = {
    "ordering": ORDERING_FIELDS, "precombine": PRECOMBINE_FIELD, "keys": RECORD_KEY_FIELDS,
    "parts": PARTITION_FIELDS, "kg_class": KEYGEN_CLASS, "kg_type": KEYGEN_TYPE,
}


def test_ordering_fields_key_wins_over_precombine_field():
    # HoodieTableConfig.ORDERING_FIELDS has precombine.field as its alternative; the
    # main key is taken whenever it is present.
    assert _p(ordering="a,b", precombine="c").ordering_fields == ("a", "b")
    assert _p(precombine="c").ordering_fields == ("c",)
    assert _p(ordering="", precombine="c").ordering_fields == ()
    assert _p().ordering_fields == () and _p().precombine_field is None


def test_partition_type_suffixes_are_stripped_record_key_suffixes_are_not():
    p = _p(keys="id,tenant", parts="city:SIMPLE,ts:timestamp,,region", kg_type="CUSTOM")
    assert p.partition_fields == ("city", "ts", "region")
    assert p.typed_partition_fields == (("city", "SIMPLE"), ("ts", "TIMESTAMP"), ("region", None))
    assert p.formatted_partition_fields == {"ts", "region"}
    assert _p(keys="a:b, c").record_key_fields == ("a:b", "c")


def test_key_generator_class_before_type():
    assert _p(kg_class="x.My", kg_type="SIMPLE").key_generator_class == "x.My"
    assert _p(kg_type="NON_PARTITION").key_generator_class == KeyGenType.NON_PARTITIONED.value
    assert _p(kg_type="USER_PROVIDED").key_generator_class is None
    assert _p().key_generator_class is None
    with pytest.raises(CorruptDataError):
        _ = _p(kg_type="NOPE").key_generator_class


def test_writer_config_refuses_what_it_cannot_write():
    with pytest.raises(ConfigError, match="one ordering field"):
        TableConfig.from_properties(_p(keys="id", ordering="a,b"))
    with pytest.raises(ConfigError, match="CustomKeyGenerator is not supported"):
        TableConfig.from_properties(_p(keys="id", parts="c:SIMPLE", kg_type="CUSTOM"))
    cfg = TableConfig.from_properties(_p(keys="id", parts="c", kg_type="SIMPLE", ordering="ts"))
    assert cfg.keygen is KeyGenType.SIMPLE and cfg.ordering_field == "ts"
    # no key generator named: the one Hudi 0.x infers from the fields
    assert TableConfig.from_properties(_p(keys="a,b", parts="c")).keygen is KeyGenType.COMPLEX
    assert TableConfig.from_properties(_p(keys="a")).keygen is KeyGenType.NON_PARTITIONED
