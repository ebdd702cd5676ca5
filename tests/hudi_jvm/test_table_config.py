"""Our ``hoodie.properties`` reader against Apache Hudi's own: ``HoodieTableConfig``.

For every fixture table Hudi can open (0.15: table version 6; 1.0: versions 6 and 8;
1.2: versions 6, 8 and 9), for a table our writer made, and for a table each Hudi wrote
with its ``CustomKeyGenerator`` (typed partition fields ``city:SIMPLE,ts:TIMESTAMP``; Hudi
1.0 and 1.2 keep the types in ``hoodie.table.partition.fields``; 1.2 writes table version 9
and its ordering fields as ``hoodie.table.ordering.fields``), Hudi's
``HoodieTableMetaClient`` reports the ordering fields, record key fields, partition fields
and key generator class, and :class:`TableProperties` must report the same. All tables
are asked in one batch per Hudi session. Hudi opens the tables as they are: asking
upgrades nothing (only a write does).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pyarrow as pa
import pytest

from streamer.fs import FileSystem
from streamer.table.properties import load_properties
from streamer.table.table_keys import TS_OUTPUT_FMT, TS_TYPE
from streamer.write import HudiWriter, TableConfig
from tests.support import block_tables as tg
from tests.support.fixture_tables import FIXTURE_NAMES, fixture_table_path
from tests.support.hudi import HudiOracleError, HudiSpark

pytestmark = [pytest.mark.hudi_jvm, pytest.mark.conformance]

#: The table versions each Hudi bundle opens.
OPENS = {"0.15": {6}, "1.0": {6, 8}, "1.2": {6, 8, 9}}

ROWS = pa.table({
    "id": pa.array([1, 2, 3], pa.int64()),
    "name": ["a", "b", "c"],
    "city": ["sf", "nyc", "sf"],
    "ts": pa.array([1_700_000_000_000, 1_700_090_000_000, 1_700_190_000_000], pa.int64()),
    "seq": pa.array([1, 2, 3], pa.int64()),
})

#: A Hudi Spark write with the custom key generator: two record key fields, one plain
#: and one timestamp partition field, ``seq`` as the ordering field.
CUSTOM_KEYGEN_WRITE = {
    "hoodie.table.name": "custom_kg",
    "hoodie.datasource.write.table.type": "MERGE_ON_READ",
    "hoodie.datasource.write.operation": "upsert",
    "hoodie.datasource.write.recordkey.field": "id,name",
    "hoodie.datasource.write.partitionpath.field": "city:SIMPLE,ts:TIMESTAMP",
    "hoodie.datasource.write.keygenerator.class": "org.apache.hudi.keygen.CustomKeyGenerator",
    "hoodie.datasource.write.precombine.field": "seq",
    TS_TYPE: "EPOCHMILLISECONDS",
    TS_OUTPUT_FMT: "yyyyMMdd",
    "hoodie.metadata.enable": "false",
}


def _ours(path: Path) -> str:
    cfg = TableConfig("ours", ("id", "name"), ("city", "name"), "ts", keygen="complex",
                      hive_style_partitioning=True)
    HudiWriter.create(str(path), cfg, options=tg.SMALL).upsert(ROWS)
    return str(path)


def _reported_by_us(path: str) -> dict:
    props = load_properties(FileSystem(), path)
    return {
        "version": props.version,
        "ordering_fields": list(props.ordering_fields),
        "record_key_fields": list(props.record_key_fields),
        "partition_fields": list(props.partition_fields),
        "keygen_class": props.key_generator_class,
    }


def _reported_by_hudi(answer: dict) -> dict:
    return {**answer, "record_key_fields": answer["record_key_fields"] or [],
            "partition_fields": answer["partition_fields"] or []}


def test_hudi_table_config_reports_what_we_parse(hudi015: HudiSpark, hudi10: HudiSpark, hudi12: HudiSpark,
                                                 hudi_fixtures_dir, tmp_path):
    sessions = (hudi015, hudi10, hudi12)
    tables: dict[str, str] = {}
    for name in FIXTURE_NAMES:
        dst = tmp_path / "fixtures" / name
        shutil.copytree(fixture_table_path(hudi_fixtures_dir, name), dst)
        tables[name] = str(dst)
    tables["ours"] = _ours(tmp_path / "ours")
    for session in sessions:
        path = str(tmp_path / f"custom_keygen_hudi_{session.version}")
        session.write(path, ROWS, CUSTOM_KEYGEN_WRITE)
        tables[f"custom_keygen_hudi_{session.version}"] = path
    ours = {name: _reported_by_us(path) for name, path in tables.items()}
    # the custom key generator keeps the partition types in the table from version 8 on
    for version in ("1.0", "1.2"):
        typed = load_properties(FileSystem(), tables[f"custom_keygen_hudi_{version}"]).typed_partition_fields
        assert typed == (("city", "SIMPLE"), ("ts", "TIMESTAMP")), version

    mismatches, hudi = [], {}
    for session in sessions:
        names = [n for n in tables if ours[n]["version"] in OPENS[session.version]]
        answers = session.table_configs([tables[n] for n in names])
        for name, answer in zip(names, answers, strict=True):
            hudi[session.version, name] = answer
            if isinstance(answer, HudiOracleError):
                mismatches.append(f"Hudi {session.version} could not open {name}: {answer}")
            elif _reported_by_hudi(answer) != ours[name]:
                mismatches.append(f"Hudi {session.version}, {name}: Hudi {answer} != ours {ours[name]}")
    assert not mismatches, "\n".join(mismatches)
    # every version 6 table by the three Hudis, the version 8 tables by 1.0 and 1.2, the
    # version 9 tables (the fixtures and 1.2's own write) by 1.2
    versions = [ours[n]["version"] for n in tables]
    assert versions.count(9) >= 2, versions
    assert len(hudi) == 3 * versions.count(6) + 2 * versions.count(8) + versions.count(9)
    # and what Hudi 1.0 and 1.2 made of their own typed partition fields: the bare names
    for version, table_version in (("1.0", 8), ("1.2", 9)):
        custom = hudi[version, f"custom_keygen_hudi_{version}"]
        assert (custom["version"], custom["partition_fields"], custom["ordering_fields"]) == (
            table_version, ["city", "ts"], ["seq"]), version
        assert custom["keygen_class"] == "org.apache.hudi.keygen.CustomKeyGenerator"
