"""``streamer run --pipeline PARENT-TABLE``: one table of a ``topic_pattern`` pipeline.

A whole-database pipeline's children are only known once the broker is listed, so a
child's name picks its parent and, of the parent's topics, only that table's; a name no
topic answers to fails the run naming the tables there are, instead of running nothing.
Tables are read by hudi-rs and compared with the records produced.
"""

from __future__ import annotations

import json
import os
import uuid

import pytest

from streamer.cli import main
from tests.support.write_model import read_hudi_rs

pytestmark = [pytest.mark.integration, pytest.mark.kafka]

YAML = r"""
pipelines:
  - name: shop
    source: {{type: kafka, bootstrap_servers: "{bootstrap}", topic_pattern: '{prefix}\..*', format: json,
              schema: "id STRING, v INT", starting_offsets: earliest}}
    target: {{path: "{lake}/{{table}}", record_key: [id]}}
    trigger: {{mode: once}}
    engine: local
"""


ROWS = {"a": [{"id": "1", "v": 10}, {"id": "2", "v": 20}], "b": [{"id": "9", "v": 90}]}


def _database(kafka, tmp_path):
    prefix = f"sel{uuid.uuid4().hex[:6]}"
    for table, records in ROWS.items():
        kafka.create_topic(f"{prefix}.{table}")
        kafka.produce(f"{prefix}.{table}", [json.dumps(r) for r in records], keys=[r["id"] for r in records])
    path = tmp_path / "p.yaml"
    path.write_text(YAML.format(bootstrap=kafka.bootstrap_servers, prefix=prefix, lake=tmp_path / "lake"))
    return path


def _rows(path) -> list[dict]:
    return sorted(read_hudi_rs(str(path)).select(["id", "v"]).to_pylist(), key=lambda r: r["id"])


@pytest.mark.timeout(120)
def test_a_run_once_takes_every_table_and_ends(kafka, spark, tmp_path):
    """``trigger.mode: once`` is one batch per table, then the end: the run does not go on
    looking for new tables (it did, until stopped)."""
    path = _database(kafka, tmp_path)
    assert main(["run", str(path)]) == 0
    assert _rows(tmp_path / "lake" / "a") == ROWS["a"] and _rows(tmp_path / "lake" / "b") == ROWS["b"]


@pytest.mark.timeout(120)
def test_a_child_by_name_runs_that_table_alone(kafka, spark, tmp_path, capsys):
    path = _database(kafka, tmp_path)
    rows = ROWS

    assert main(["run", str(path), "--pipeline", "shop-a"]) == 0
    assert _rows(tmp_path / "lake" / "a") == rows["a"]
    assert not os.path.exists(tmp_path / "lake" / "b"), "a table not asked for was written"

    assert main(["run", str(path), "--pipeline", "shop-c"]) == 1
    err = capsys.readouterr().err
    assert "no topic matching shop's topic_pattern holds table c (its tables: a, b)" in err
    assert not os.path.exists(tmp_path / "lake" / "b")


@pytest.mark.timeout(120)
def test_two_topics_holding_one_table_name_are_refused_naming_both(kafka, spark, tmp_path, capsys):
    """``x.a.b`` and ``x.b`` (a dotted table name, or one table in two schemas) would both
    be table ``b``: the second's rows upserted into the first's. Both are refused by name;
    the other tables run."""
    prefix = f"sel{uuid.uuid4().hex[:6]}"
    produced = {f"{prefix}.a": ROWS["a"], f"{prefix}.b": ROWS["b"], f"{prefix}.x.b": [{"id": "1", "v": -1}]}
    for topic, records in produced.items():
        kafka.create_topic(topic)
        kafka.produce(topic, [json.dumps(r) for r in records], keys=[r["id"] for r in records])
    path = tmp_path / "p.yaml"
    path.write_text(YAML.format(bootstrap=kafka.bootstrap_servers, prefix=prefix, lake=tmp_path / "lake"))

    assert main(["run", str(path)]) == 1
    err = capsys.readouterr().err
    assert f"topics {prefix}.b, {prefix}.x.b all hold table b" in err
    assert _rows(tmp_path / "lake" / "a") == ROWS["a"]
    assert not os.path.exists(tmp_path / "lake" / "b"), "a table two topics claim was written"


KEYED_YAML = r"""
pipelines:
  - name: shop
    source: {{type: kafka, bootstrap_servers: "{bootstrap}", topic_pattern: '{prefix}\..*', format: json,
              schema: "id STRING, region STRING, v INT", starting_offsets: earliest}}
    target: {{path: "{lake}/{{table}}"}}
    trigger: {{mode: once}}
    engine: local
"""


def _produce_keyed(kafka, topic: str, rows: list[dict], key: tuple[str, ...]) -> None:
    kafka.produce(topic, [json.dumps(r) for r in rows], keys=[json.dumps({k: r[k] for k in key}) for r in rows])


@pytest.mark.timeout(180)
def test_a_changed_primary_key_is_learned_from_the_newest_messages(kafka, spark, tmp_path, capsys):
    """A table's primary key changed from (id) to (id, region): later messages are keyed by
    both. A new table is keyed by the newest messages' fields (the first message's would
    merge rows the database keeps apart); a table created before the change is refused by
    name when its pipeline opens it, rather than merging them."""
    prefix = f"pk{uuid.uuid4().hex[:6]}"
    topic = f"{prefix}.orders"
    kafka.create_topic(topic)
    _produce_keyed(kafka, topic, [{"id": "1", "region": "us", "v": 1}], ("id",))
    early = tmp_path / "early.yaml"
    early.write_text(KEYED_YAML.format(bootstrap=kafka.bootstrap_servers, prefix=prefix, lake=tmp_path / "early"))
    assert main(["run", str(early)]) == 0  # keyed by (id): the only key there is yet
    _produce_keyed(kafka, topic, [{"id": "1", "region": "eu", "v": 2}], ("id", "region"))

    fresh = tmp_path / "fresh.yaml"
    fresh.write_text(KEYED_YAML.format(bootstrap=kafka.bootstrap_servers, prefix=prefix, lake=tmp_path / "fresh"))
    assert main(["run", str(fresh)]) == 0
    rows = read_hudi_rs(str(tmp_path / "fresh" / "orders")).select(["id", "region", "v"]).to_pylist()
    assert sorted(rows, key=lambda r: r["region"]) == [{"id": "1", "region": "eu", "v": 2},
                                                       {"id": "1", "region": "us", "v": 1}]

    capsys.readouterr()
    assert main(["run", str(early)]) == 1
    assert "target.record_key is ('id', 'region') but the table" in capsys.readouterr().err
    rows = read_hudi_rs(str(tmp_path / "early" / "orders")).select(["id", "region", "v"]).to_pylist()
    assert rows == [{"id": "1", "region": "us", "v": 1}]  # nothing merged into the old key
