"""A number widened by a later batch (Avro's promotions) reads back as the wider type,
every value of it, in our reader and hudi-rs, before and after a compaction rewrote the
older file: no value becomes null because its older type cannot be cast exactly."""

from __future__ import annotations

import re

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from streamer.config.policies import CompactionPolicy
from streamer.errors import SchemaError
from streamer.read import Table
from streamer.services.compaction import schedule_compaction
from streamer.services.executor import execute
from streamer.table.merge import concat_aligned
from streamer.write import HudiWriter, TableConfig, WriteOptions
from tests.support.gaps import HUDI_RS_NESTED_FIELD_ADDED
from tests.support.readers import hudi_rs_table

BIG = 2**62  # above 2**53: no double holds it exactly, so Arrow's safe cast refuses it


def _values(table: pa.Table | None) -> dict[int, object]:
    assert table is not None
    return dict(zip(table.column("id").to_pylist(), table.column("j").to_pylist(), strict=True))


@pytest.mark.parametrize("wider", [pa.float64(), pa.float32()])
def test_a_long_widened_to_a_floating_type_keeps_every_older_value(tmp_path, wider):
    path = str(tmp_path / "t")
    cfg = TableConfig(name="t", record_key_fields=("id",), partition_fields=("p",), ordering_field="ts")
    w = HudiWriter.create(path, cfg, options=WriteOptions(engine="local"))
    w.upsert(pa.table({"id": [1, 2], "p": ["a", "a"], "ts": [1, 1], "j": pa.array([BIG, 7], pa.int64())}))
    w.upsert(pa.table({"id": [3], "p": ["a"], "ts": [2], "j": pa.array([0.25], wider)}))
    expected = {1: float(pa.scalar(float(BIG), wider).as_py()), 2: 7.0, 3: 0.25}
    assert Table.open(path).schema().field("j").type == wider  # the committed type, not the base file's
    assert _values(Table.open(path).read()) == expected
    assert _values(hudi_rs_table(path)) == expected
    plan = schedule_compaction(Table.open(path), CompactionPolicy(), force=True)
    assert plan is not None and execute(Table.open(path), plan).status == "completed"
    assert _values(Table.open(path).read()) == expected
    assert _values(hudi_rs_table(path)) == expected
    [base] = [s.base_file for s in Table.open(path).fsview.latest_merged_slices()]
    assert _values(pq.read_table(base.path)) == expected  # the compacted file holds the values


def test_a_column_whose_values_the_table_type_cannot_hold_is_an_error_not_nulls():
    older = pa.table({"j": pa.array(["seven"], pa.string())})
    with pytest.raises(SchemaError, match="field 'j': cannot cast string to int64"):
        concat_aligned([older], pa.schema([pa.field("j", pa.int64())]))


def test_a_batch_of_a_narrower_type_is_cast_up_to_the_tables(tmp_path):
    """A topic whose producers moved to a wider schema still carries records of the older
    one: an ``int`` batch into the ``long`` column the newer records made is written as
    ``long`` (Hudi reconciles the batch the same way), not refused."""
    path = str(tmp_path / "t")
    cfg = TableConfig(name="t", record_key_fields=("id",), partition_fields=("p",), ordering_field="ts")
    w = HudiWriter.create(path, cfg, options=WriteOptions(engine="local"))
    w.upsert(pa.table({"id": [1], "p": ["a"], "ts": [1], "j": pa.array([BIG], pa.int64())}))
    w.upsert(pa.table({"id": [2], "p": ["a"], "ts": [1], "j": pa.array([7], pa.int32())}))
    assert Table.open(path).schema().field("j").type == pa.int64()
    assert _values(Table.open(path).read()) == {1: BIG, 2: 7}
    assert _values(hudi_rs_table(path)) == {1: BIG, 2: 7}


def test_a_lists_elements_evolve_as_columns_do(tmp_path):
    """A list's widened elements and a new field of its struct elements are kept, in the
    table's schema and its values, where they were cast away to the older element type."""
    path = str(tmp_path / "t")
    cfg = TableConfig(name="t", record_key_fields=("id",), partition_fields=("p",), ordering_field="ts")
    w = HudiWriter.create(path, cfg, options=WriteOptions(engine="local"))
    old_items = pa.list_(pa.struct([("a", pa.int64())]))
    w.upsert(pa.table({"id": [1], "p": ["a"], "ts": [1], "xs": pa.array([[1.5]], pa.list_(pa.float32())),
                       "items": pa.array([[{"a": 1}]], old_items)}))
    new_items = pa.list_(pa.struct([("a", pa.int64()), ("b", pa.string())]))
    w.upsert(pa.table({"id": [2], "p": ["a"], "ts": [2], "xs": pa.array([[0.1, 1e300]], pa.list_(pa.float64())),
                       "items": pa.array([[{"a": 2, "b": "kept"}]], new_items)}))
    expected = [{"id": 1, "xs": [1.5], "items": [{"a": 1, "b": None}]},
                {"id": 2, "xs": [0.1, 1e300], "items": [{"a": 2, "b": "kept"}]}]
    for rows in (Table.open(path).read(), hudi_rs_table(path)):
        assert rows is not None
        assert sorted(rows.select(["id", "xs", "items"]).to_pylist(), key=lambda r: r["id"]) == expected


def test_a_read_of_older_slices_only_has_the_tables_types_and_the_columns_asked_for(tmp_path):
    """A read that touches only slices written before a column widened, or before a column
    was added, returns the table's type and the asked-for column (nulls), whichever slices
    it read."""
    import pyarrow.compute as pc

    path = str(tmp_path / "t")
    cfg = TableConfig(name="t", record_key_fields=("id",), partition_fields=("p",), ordering_field="ts")
    w = HudiWriter.create(path, cfg, options=WriteOptions(engine="local"))
    w.upsert(pa.table({"id": [1, 2], "p": ["a", "b"], "ts": [1, 1], "i": pa.array([1, 2], pa.int32())}))
    w.upsert(pa.table({"id": [3], "p": ["b"], "ts": [2], "i": pa.array([2**40], pa.int64()), "n": ["new"]}))
    older = Table.open(path).read(filter=pc.field("p") == "a")
    assert older.schema.field("i").type == pa.int64()
    asked = Table.open(path).read(columns=["id", "i", "n"], filter=pc.field("p") == "a")
    assert asked.schema.names == ["id", "i", "n"]
    assert asked.to_pylist() == [{"id": 1, "i": 1, "n": None}]


def test_a_column_named_as_another_but_for_case_is_refused(tmp_path):
    """Spark and Hive resolve ``V`` and ``v`` as one column: a batch adding ``V`` to a table
    with ``v`` is refused, naming both, and nothing is written."""
    path = str(tmp_path / "t")
    cfg = TableConfig(name="t", record_key_fields=("id",), partition_fields=("p",), ordering_field="ts")
    w = HudiWriter.create(path, cfg, options=WriteOptions(engine="local"))
    w.upsert(pa.table({"id": [1], "p": ["a"], "ts": [1], "v": ["x"]}))
    with pytest.raises(SchemaError, match="field 'V': its name and 'v' differ only in case"):
        w.upsert(pa.table({"id": [2], "p": ["a"], "ts": [2], "V": ["y"]}))
    assert Table.open(path).read().select(["id", "v"]).to_pylist() == [{"id": 1, "v": "x"}]


@pytest.mark.parametrize(("column", "named"), [
    ("my col", "my col"), ("user.id", "user.id"), ("1st", "1st"),
    (pa.array([{"a.b": 1}]), "s.a.b"), (pa.array([[{"x-y": 1}]]), "s.x-y"),
])
def test_a_column_hudi_could_not_read_is_refused_by_name(tmp_path, column, named):
    """A name that is not an Avro name (the schema in every commit is Avro) would make the
    table unreadable to Apache Hudi and hudi-rs, whose Avro parsers refuse it: a new table
    or a new column with one is refused naming it, and nothing is written."""
    path = str(tmp_path / "t")
    w = HudiWriter.create(path, TableConfig(name="t", record_key_fields=("id",)), options=WriteOptions(engine="local"))
    w.upsert(pa.table({"id": [1], "v": ["x"]}))
    batch = pa.table({"id": [2], "v": ["y"], **({named: ["z"]} if isinstance(column, str) else {"s": column})})
    with pytest.raises(SchemaError, match=f"field '{re.escape(named)}': not an Avro name"):
        w.upsert(batch)
    with pytest.raises(SchemaError, match="not an Avro name"):
        HudiWriter.create(str(tmp_path / "new"), TableConfig(name="t", record_key_fields=("id",)),
                          options=WriteOptions(engine="local")).upsert(batch)
    assert Table.open(path).read().select(["id", "v"]).to_pylist() == [{"id": 1, "v": "x"}]
    assert hudi_rs_table(path).select(["id", "v"]).to_pylist() == [{"id": 1, "v": "x"}]


@pytest.mark.parametrize("reader", ["ours", HUDI_RS_NESTED_FIELD_ADDED.param("hudi-rs")])
def test_a_struct_that_gains_a_field_reads_every_row(tmp_path, reader):
    """``s: {x}`` then ``s: {x, y}`` (a field a stream added): every row reads, ``y`` null in
    the older ones - the model of the writes, as Apache Hudi 0.15 and 1.0 read it."""
    old, new = pa.struct([("x", pa.int64())]), pa.struct([("x", pa.int64()), ("y", pa.string())])

    def row(key: str, ts: int, s: dict, kind: pa.DataType) -> pa.Table:
        return pa.Table.from_pylist([{"id": key, "ts": ts, "s": s}],
                                    schema=pa.schema([("id", pa.string()), ("ts", pa.int64()), ("s", kind)]))

    path = str(tmp_path / "t")
    w = HudiWriter.create(path, TableConfig("t", ("id",), (), "ts"), options=WriteOptions(engine="local"))
    w.upsert(row("a", 1, {"x": 1}, old))
    w.upsert(row("b", 2, {"x": 2}, old))
    w.upsert(row("c", 3, {"x": 3, "y": "new"}, new))
    model = [("a", {"x": 1, "y": None}), ("b", {"x": 2, "y": None}), ("c", {"x": 3, "y": "new"})]
    got = sorted((r["id"], r["s"]) for r in Table.open(path).read().to_pylist())
    assert got == model
    if reader == "hudi-rs":
        try:
            table = hudi_rs_table(path)
        except Exception as e:  # noqa: BLE001 - hudi-rs raises its own error types
            HUDI_RS_NESTED_FIELD_ADDED.check(False, f"{type(e).__name__}: {e}")
        else:
            rows = [] if table is None else table.to_pylist()
            HUDI_RS_NESTED_FIELD_ADDED.check(sorted((r["id"], r["s"]) for r in rows) == model, "snapshot")
