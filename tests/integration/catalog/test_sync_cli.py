"""``streamer sync``: the one-off Hive sync (Hudi's standalone HiveSyncTool)."""

from __future__ import annotations

import uuid

import pyarrow as pa
import pytest

from streamer.catalog.metastore import Metastore
from streamer.cli import main
from streamer.fs import resolve
from streamer.table.identity import KeyGenType, TableConfig
from streamer.write.writer import HudiWriter

pytestmark = pytest.mark.integration


def _table(path: str) -> None:
    fs, p = resolve(path)
    cfg = TableConfig(name="rides", record_key_fields=("id",), partition_fields=("country", "city"),
                      ordering_field="ts", keygen=KeyGenType.parse("complex"), hive_style_partitioning=True)
    batch = pa.table({"id": ["a", "b"], "country": ["us", "fr"], "city": ["sf", "paris"], "ts": [1, 2]})
    HudiWriter.create(p, cfg, schema=batch.schema, fs=fs).upsert(batch)


def test_sync_an_existing_table_once_then_nothing_to_do(tmp_path, hive_metastore, capsys):
    path = str(tmp_path / "rides")
    _table(path)
    db = f"adhoc_{uuid.uuid4().hex[:8]}"
    args = ["sync", "--path", path, "--uri", hive_metastore.uri, "--database", db, "--skip-ro-suffix"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert f"{db}.rides, {db}.rides_rt" in out and "created rides, rides_rt" in out and "4 partition(s)" in out
    with Metastore(hive_metastore.uri) as ms:
        ro = ms.get_table(db, "rides")  # skip_ro_suffix: the plain name is the read-optimized table
        assert ro.sd.serdeInfo.parameters["hoodie.query.as.ro.table"] == "true"
        assert [(c.name, c.type) for c in ro.partitionKeys] == [("country", "string"), ("city", "string")]
        # hive-style multi-level paths: one value per level, key= cut
        assert {tuple(p.values): p.sd.location for p in ms.partitions(db, "rides_rt")} == {
            ("us", "sf"): f"file:{path}/country=us/city=sf", ("fr", "paris"): f"file:{path}/country=fr/city=paris"}
    assert main(args) == 0
    assert "up to date" in capsys.readouterr().out


def test_sync_names_the_unreachable_metastore_and_fails(tmp_path, capsys):
    from streamer.local.kafka import free_port

    path = str(tmp_path / "rides")
    _table(path)
    uri = f"thrift://127.0.0.1:{free_port()}"
    assert main(["sync", "--path", path, "--uri", uri]) == 1
    err = capsys.readouterr().err
    assert "default.rides" in err and uri in err and "unreachable" in err


def test_sync_needs_a_yaml_or_a_path(capsys):
    assert main(["sync"]) == 2
    assert "--path" in capsys.readouterr().err


WHOLE_DATABASE = r"""
pipelines:
  - name: shop
    source: {{type: kafka, bootstrap_servers: "{bootstrap}", topic_pattern: '{prefix}\..*', format: json,
              schema: "id STRING, ts BIGINT"}}
    target: {{path: "{lake}/{{table}}", record_key: [id], ordering_field: ts,
              catalog: {{type: hive, uri: "{uri}", database: {db}}}}}
"""


@pytest.mark.kafka
def test_sync_of_a_whole_database_pipeline_syncs_each_table_written(tmp_path, kafka, hive_metastore, capsys):
    """A ``topic_pattern`` pipeline stands for one table per topic: each table written so far
    is synced under its own name; a topic whose table is not written yet is said, not
    synced; ``--pipeline shop-a`` syncs that table alone."""
    prefix, db = f"sy{uuid.uuid4().hex[:6]}", f"whole_{uuid.uuid4().hex[:8]}"
    for t in ("a", "b", "c"):
        kafka.create_topic(f"{prefix}.{t}")
    lake = tmp_path / "lake"
    for t in ("a", "c"):
        fs, p = resolve(str(lake / t))
        batch = pa.table({"id": ["1"], "ts": [1]})
        HudiWriter.create(p, TableConfig(name=t, record_key_fields=("id",), ordering_field="ts"),
                          schema=batch.schema, fs=fs).upsert(batch)
    yaml = tmp_path / "shop.yaml"
    yaml.write_text(WHOLE_DATABASE.format(bootstrap=kafka.bootstrap_servers, prefix=prefix, lake=lake,
                                          uri=hive_metastore.uri, db=db))
    assert main(["sync", str(yaml)]) == 0
    out, err = capsys.readouterr()
    assert f"{db}.a_ro" in out and f"{db}.c_ro" in out and f"{db}.b" not in out
    assert f"shop-b: no table at {lake}/b yet" in err
    with Metastore(hive_metastore.uri) as ms:
        assert ms.get_table(db, "a_rt").sd.location == f"file:{lake}/a"
    assert main(["sync", str(yaml), "--pipeline", "shop-c"]) == 0
    out = capsys.readouterr().out
    assert f"{db}.c_ro" in out and "up to date" in out and f"{db}.a" not in out
