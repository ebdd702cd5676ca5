"""Error-table exactness (issue 12, case 6): one row per bad record, its own position and bytes."""

from __future__ import annotations

import datetime as dt

import pyarrow as pa

from streamer.pipeline.errors_table import (
    ERROR_ARROW_SCHEMA,
    ERROR_ID,
    with_error_ids,
    with_originals,
)

NOW = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


def _rows(*rows: dict) -> pa.Table:
    base = dict.fromkeys(ERROR_ARROW_SCHEMA.names)
    return pa.Table.from_pylist([{**base, "error_time": NOW, **r} for r in rows], schema=ERROR_ARROW_SCHEMA)


def test_identical_rows_of_one_batch_get_distinct_ids_and_replays_the_same_ones():
    row = {"source_type": "files", "source_position": "{}", "raw_payload": "{broken", "reason": "malformed"}
    ids = with_error_ids(_rows(row, row, row)).column(ERROR_ID).to_pylist()
    assert len(set(ids)) == 3
    assert with_error_ids(_rows(row, row, row)).column(ERROR_ID).to_pylist() == ids  # a replay: same ids
    assert with_error_ids(_rows(row)).column(ERROR_ID).to_pylist() == ids[:1]  # the first keeps the plain hash


def test_originals_replace_the_batch_position_and_the_reserialised_payload():
    rows = _rows(
        {"source_type": "files", "source_position": "batch-end", "raw_payload": '{"id":null}', "reason": "null key"},
        {"source_type": "files", "source_position": "batch-end", "raw_payload": '{"id":null}', "reason": "null key"},
        {"source_type": "files", "source_position": "batch-end", "raw_payload": '{"x":1}', "reason": "lost"},
    )
    keys = pa.table({"_mor_record": pa.array([7, 3, 99], pa.int64())})

    def originals(asked: pa.Table) -> pa.Table:
        assert asked.column(0).to_pylist() == [7, 3, 99]
        found = _rows(
            {"source_type": "files", "source_position": "f.json:3", "file": "f.json", "raw_payload": '{"id": null }',
             "payload_encoding": "utf-8"},
            {"source_type": "files", "source_position": "f.json:7", "file": "f.json", "raw_payload": '{ "id":null}',
             "payload_encoding": "utf-8"},
        )
        return found.add_column(0, "_mor_record", pa.array([3, 7], pa.int64()))

    out = with_originals(rows, keys, originals).to_pylist()
    assert [r["source_position"] for r in out] == ["f.json:7", "f.json:3", "batch-end"]
    assert [r["raw_payload"] for r in out] == ['{ "id":null}', '{"id": null }', '{"x":1}']
    assert [r["reason"] for r in out] == ["null key", "null key", "lost"]
