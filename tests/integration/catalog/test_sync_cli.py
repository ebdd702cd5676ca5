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
