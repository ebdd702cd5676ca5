"""``Table.schema()`` after schema evolution: a column added by an upsert that went into
log blocks only (no compaction yet) is part of the table's schema, as in Hudi's
``TableSchemaResolver`` (the latest commit's schema)."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from streamer.read import Table
from streamer.write import HudiWriter, TableConfig

SCHEMA = pa.schema([("id", pa.int64()), ("city", pa.string()), ("ts", pa.int64()), ("fare", pa.float64())])


def test_a_column_only_in_log_blocks_is_in_the_schema_and_filterable(tmp_path):
    path = str(tmp_path / "evo")
    w = HudiWriter.create(path, TableConfig("evo", ("id",), ("city",), "ts"), schema=SCHEMA)
    w.bulk_insert(pa.table({"id": [1, 2, 3], "city": ["sf", "sf", "ny"], "ts": [1, 1, 1],
                            "fare": [1.0, 2.0, 3.0]}, schema=SCHEMA))
    w.upsert(pa.table({"id": [2], "city": ["sf"], "ts": [2], "fare": [20.0], "tip": [5.5]}))

    table = Table.open(path)
    assert not any(s.base_file is not None and "tip" in s.base_file.path for s in table.fsview.latest_merged_slices())
    schema = table.schema()
    assert schema.names[-1] == "tip" and schema.field("tip").type == pa.float64()
    assert schema.names.index("fare") < schema.names.index("tip")  # base file's order first

    got = table.read(columns=["id", "tip"], filter=pc.field("tip") > 1)
    assert got.to_pylist() == [{"id": 2, "tip": 5.5}]
    snapshot = table.read(columns=["id", "tip"]).sort_by("id").to_pylist()
    assert snapshot == [{"id": 1, "tip": None}, {"id": 2, "tip": 5.5}, {"id": 3, "tip": None}]


def test_a_filter_on_the_new_column_reads_nulls_in_files_older_than_it(tmp_path):
    """Slices whose files predate the column (base only, or base + logs without it) are
    filtered as if the column were null there - never an 'unreadable base file' error."""
    path = str(tmp_path / "evo")
    w = HudiWriter.create(path, TableConfig("evo", ("id",), ("city",), "ts"), schema=SCHEMA)
    w.bulk_insert(pa.table({"id": [1, 2, 3, 4], "city": ["sf", "sf", "ny", "la"], "ts": [1, 1, 1, 1],
                            "fare": [1.0, 2.0, 3.0, 4.0]}, schema=SCHEMA))
    w.upsert(pa.table({"id": [4], "city": ["la"], "ts": [2], "fare": [40.0]}, schema=SCHEMA))  # a log without tip
    w.upsert(pa.table({"id": [2], "city": ["sf"], "ts": [2], "fare": [20.0], "tip": [5.5]}))

    table = Table.open(path)
    missing = table.read(columns=["id"], filter=pc.field("tip").is_null()).column("id").to_pylist()
    assert sorted(missing) == [1, 3, 4]
    both = table.read(filter=(pc.field("tip") > 1) | (pc.field("fare") > 30))
    assert sorted(both.column("id").to_pylist()) == [2, 4]
    assert table.read(filter=pc.field("tip") > 100).num_rows == 0


def test_a_read_has_every_column_whichever_files_its_filter_left(tmp_path):
    """A partition written before a column was added, read alone (filter) or from its base
    files (read-optimized), still has the column (null), as Hudi's readers return the
    latest schema; a time travel to before the column has the columns of then."""
    path = str(tmp_path / "evo")
    w = HudiWriter.create(path, TableConfig("evo", ("id",), ("city",), "ts"), schema=SCHEMA)
    first = w.bulk_insert(pa.table({"id": [1, 2], "city": ["sf", "ny"], "ts": [1, 1], "fare": [1.0, 2.0]},
                                   schema=SCHEMA))
    w.upsert(pa.table({"id": [3], "city": ["ny"], "ts": [2], "fare": [3.0], "tip": [0.5]}))
    table = Table.open(path)
    data = [*SCHEMA.names, "tip"]
    sf = table.read(filter=pc.field("city") == "sf")
    assert [c for c in sf.column_names if not c.startswith("_hoodie")] == data
    assert sf.select(data).to_pylist() == [{"id": 1, "city": "sf", "ts": 1, "fare": 1.0, "tip": None}]
    ro = table.read("read_optimized").sort_by("id")  # "tip" lives in a log block only
    assert ro.select(data).to_pylist() == [{"id": 1, "city": "sf", "ts": 1, "fare": 1.0, "tip": None},
                                           {"id": 2, "city": "ny", "ts": 1, "fare": 2.0, "tip": None}]
    before = table.read(as_of=first.instant)
    assert [c for c in before.column_names if not c.startswith("_hoodie")] == SCHEMA.names


def test_the_schema_is_worked_out_once_per_state_of_the_handle(tmp_path, monkeypatch):
    """Repeated reads of one handle read no base-file footer again for the schema; a
    refresh that sees a new column does (the cache follows the handle's state)."""
    import pyarrow.parquet as pq

    path = str(tmp_path / "evo")
    w = HudiWriter.create(path, TableConfig("evo", ("id",), ("city",), "ts"), schema=SCHEMA)
    w.bulk_insert(pa.table({"id": [1], "city": ["sf"], "ts": [1], "fare": [1.0]}, schema=SCHEMA))
    footers = []
    read_schema = pq.read_schema
    monkeypatch.setattr(pq, "read_schema", lambda *a, **k: footers.append(a) or read_schema(*a, **k))
    table = Table.open(path)
    for _ in range(3):
        table.read(filter=pc.field("fare") > 0)
    assert len(footers) == 1
    w.upsert(pa.table({"id": [2], "city": ["sf"], "ts": [2], "fare": [2.0], "tip": [0.5]}))
    table.refresh()
    assert table.schema().names[-1] == "tip" and "tip" in table.read().column_names
