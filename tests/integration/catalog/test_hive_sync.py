"""Hive sync after each pipeline commit, checked through the metastore's thrift API.

A real standalone Hive metastore (tests/integration/catalog/conftest.py); commits that add
partitions, then a column; a metastore that is down at one commit and up at the next.
"""

from __future__ import annotations

import json
import uuid

import pytest

from streamer.catalog.hudi_layout import INPUT_FORMAT_RO, INPUT_FORMAT_RT, OUTPUT_FORMAT, SERDE
from streamer.catalog.metastore import Metastore
from streamer.config import parse_pipelines
from streamer.local.hive import LocalHiveMetastore
from streamer.local.kafka import free_port
from streamer.pipeline.runner import PipelineRunner
from streamer.read import Table
from streamer.table.snapshot import TableSnapshot

pytestmark = pytest.mark.integration

YAML = """
pipelines:
  - name: trips
    source: {{type: files, path: "{src}", format: json, max_files_per_batch: 1}}
    target:
      path: "{table}"
      record_key: [id]
      partition_by: [city]
      ordering_field: ts
      catalog: {{type: hive, uri: "{uri}", database: {db}}}
    engine: local
"""

META = ["_hoodie_commit_time", "_hoodie_commit_seqno", "_hoodie_record_key", "_hoodie_partition_path",
        "_hoodie_file_name"]


def _write(folder, name: str, rows: list[dict]) -> None:
    (folder / name).write_text("".join(json.dumps(r) + "\n" for r in rows))


def _runner(tmp_path, uri: str, db: str, spark) -> PipelineRunner:
    src = tmp_path / "in"
    src.mkdir(exist_ok=True)
    (config,), problems = parse_pipelines(YAML.format(src=src, table=tmp_path / "trips", uri=uri, db=db))
    assert not problems
    return PipelineRunner(config, spark=spark)


def _db() -> str:
    return f"lake_{uuid.uuid4().hex[:8]}"


def _partitions(ms: Metastore, db: str, table: str) -> dict[tuple[str, ...], str]:
    return {tuple(p.values): p.sd.location for p in ms.partitions(db, table)}


def test_commits_register_tables_partitions_then_a_new_column(tmp_path, spark, hive_metastore):
    db = _db()
    runner = _runner(tmp_path, hive_metastore.uri, db, spark)
    src = tmp_path / "in"
    _write(src, "1.json", [{"id": "a", "city": "sf", "ts": 1, "fare": 1.5},
                           {"id": "b", "city": "la", "ts": 2, "fare": 2.5}])
    first = runner.run_once()
    assert first.instant and runner.catalog.error is None
    base = f"file:{tmp_path / 'trips'}"

    with Metastore(hive_metastore.uri) as ms:
        assert ms.database_exists(db)
        assert sorted(ms.client.get_all_tables(db)) == ["trips", "trips_ro", "trips_rt"]
        for name, input_format, ro in (("trips_ro", INPUT_FORMAT_RO, "true"), ("trips_rt", INPUT_FORMAT_RT, "false"),
                                       ("trips", INPUT_FORMAT_RT, "false")):
            t = ms.get_table(db, name)
            assert t.tableType == "EXTERNAL_TABLE" and t.parameters["EXTERNAL"] == "TRUE"
            assert (t.sd.inputFormat, t.sd.outputFormat, t.sd.serdeInfo.serializationLib) == (
                input_format, OUTPUT_FORMAT, SERDE)
            assert t.sd.location == base
            serde = t.sd.serdeInfo.parameters
            assert (serde["path"], serde["hoodie.query.as.ro.table"], serde["serialization.format"]) == (base, ro, "1")
            # meta columns first, then the data columns (JSON inference orders them by name)
            assert [(c.name, c.type) for c in t.sd.cols] == [(m, "string") for m in META] + [
                ("fare", "double"), ("id", "string"), ("ts", "bigint")]
            assert [(c.name, c.type) for c in t.partitionKeys] == [("city", "string")]
            p = t.parameters
            assert p["spark.sql.sources.provider"] == "hudi"
            assert (p["spark.sql.sources.schema.numPartCols"], p["spark.sql.sources.schema.partCol.0"]) == ("1", "city")
            spark_schema = json.loads(p["spark.sql.sources.schema.part.0"])
            assert [f["name"] for f in spark_schema["fields"]] == [*META, "fare", "id", "ts", "city"]
            assert p["last_commit_time_sync"] == first.instant
            assert _partitions(ms, db, name) == {("sf",): f"{base}/sf", ("la",): f"{base}/la"}

    _write(src, "2.json", [{"id": "c", "city": "ny", "ts": 3, "fare": 3.5, "tip": 0.5},
                           {"id": "a", "city": "sf", "ts": 4, "fare": 9.5, "tip": 1.0}])
    synced = []
    after_commit = runner.catalog.after_commit
    runner.catalog.after_commit = lambda snapshot: synced.append(after_commit(snapshot)) or synced[-1]
    second = runner.run_once()
    assert second.instant and runner.catalog.error is None
    assert synced[-1].partitions_added == 3  # ny, once per table
    with Metastore(hive_metastore.uri) as ms:
        for name in ("trips_ro", "trips_rt", "trips"):
            t = ms.get_table(db, name)
            assert ("tip", "double") in [(c.name, c.type) for c in t.sd.cols]
            fields = [f["name"] for f in json.loads(t.parameters["spark.sql.sources.schema.part.0"])["fields"]]
            assert "tip" in fields and fields[-1] == "city"
            assert t.parameters["last_commit_time_sync"] == second.instant
            assert set(_partitions(ms, db, name)) == {("sf",), ("la",), ("ny",)}
            # the new column reached the existing partitions too (ALTER TABLE ... CASCADE)
            (sf,) = [p for p in ms.partitions(db, name) if p.values == ["sf"]]
            assert "tip" in [c.name for c in sf.sd.cols]

    # a one-off sync now (streamer sync) finds nothing to do: the after-commit sync was complete
    again = runner.catalog.sync.sync(TableSnapshot.load(runner.sink.fs, runner.sink.path))
    assert not again.changed and again.last_commit == second.instant
    assert Table.open(str(tmp_path / "trips")).read().num_rows == 3


def test_metastore_down_commit_succeeds_and_the_next_commit_syncs(tmp_path, spark, caplog):
    port = free_port()
    db = _db()
    runner = _runner(tmp_path, f"thrift://127.0.0.1:{port}", db, spark)
    src = tmp_path / "in"
    _write(src, "1.json", [{"id": "a", "city": "sf", "ts": 1}, {"id": "b", "city": "la", "ts": 2}])
    with caplog.at_level("WARNING", logger="streamer.catalog.hook"):
        first = runner.run_once()
    assert first.instant  # the commit stands
    assert Table.open(str(tmp_path / "trips")).read().num_rows == 2
    assert runner.catalog.failures == 1
    assert f"{db}.trips" in runner.catalog.error and "unreachable" in runner.catalog.error
    assert any("catalog sync failed" in r.getMessage() and f"{db}.trips" in r.getMessage() for r in caplog.records)

    with LocalHiveMetastore(port=port) as hms:
        _write(src, "2.json", [{"id": "c", "city": "ny", "ts": 3}])
        second = runner.run_once()
        assert second.instant and runner.catalog.failures == 0 and runner.catalog.error is None
        with Metastore(hms.uri) as ms:
            for name in ("trips_ro", "trips_rt", "trips"):
                t = ms.get_table(db, name)
                assert t.parameters["last_commit_time_sync"] == second.instant
                # the first commit's partitions too: a new table lists every partition
                assert sorted(tuple(p) for p in (x.values for x in ms.partitions(db, name))) == [
                    ("la",), ("ny",), ("sf",)]


def test_a_slow_or_hung_metastore_holds_a_commit_no_longer_than_the_timeout(tmp_path, spark, hive_metastore):
    """The timeout bounds the whole sync, not each call: a metastore answering every call
    just inside it (here 0.9 s a reply, 2 s for the sync) fails the sync at the call that
    would overrun, and a hung one at the first; the commits stand, and once the metastore
    answers promptly the next commit syncs what was missed."""
    from tests.support.tcp_delay import DelayRelay

    db = _db()
    src = tmp_path / "in"
    src.mkdir()
    yaml = YAML.replace('database: {db}}}', 'database: {db}, timeout: 2s}}')
    for name, relay in (("slow", DelayRelay(("127.0.0.1", hive_metastore.port), delay_s=0.9)),
                        ("hung", DelayRelay(("127.0.0.1", hive_metastore.port), hang=True))):
        with relay:
            (config,), problems = parse_pipelines(yaml.format(src=src, table=tmp_path / "trips",
                                                              uri=f"thrift://127.0.0.1:{relay.port}", db=db))
            assert not problems
            runner = PipelineRunner(config, spark=spark)
            _write(src, f"{name}.json", [{"id": name, "city": name, "ts": 1}])
            report = runner.run_once()
        assert report.instant, name  # the commit stands
        assert runner.catalog.failures == 1, name
        assert "target.catalog.timeout 2s" in runner.catalog.error or "2s spent" in runner.catalog.error, (
            name, runner.catalog.error)
    (config,), _ = parse_pipelines(yaml.format(src=src, table=tmp_path / "trips", uri=hive_metastore.uri, db=db))
    runner = PipelineRunner(config, spark=spark)
    _write(src, "prompt.json", [{"id": "prompt", "city": "prompt", "ts": 1}])
    last = runner.run_once()
    assert last.instant and runner.catalog.failures == 0
    with Metastore(hive_metastore.uri) as ms:
        assert ms.get_table(db, "trips").parameters["last_commit_time_sync"] == last.instant
        assert sorted(p.values[0] for p in ms.partitions(db, "trips")) == ["hung", "prompt", "slow"]
    assert Table.open(str(tmp_path / "trips")).read().num_rows == 3
