"""Debezium's placeholder in the form of each column type (streamer/pipeline/placeholder.py),
as the JSON converter without schemas and an Avro converter deliver them."""

from __future__ import annotations

import pyarrow as pa

from streamer.pipeline.errors_table import REASON_COL
from streamer.pipeline.placeholder import PLACEHOLDER, Placeholder
from streamer.pipeline.unavailable import placeholder_columns, resolve

PH = Placeholder.of()
AS_NUMBERS = list(PLACEHOLDER.encode())


def test_every_form_is_recognised_and_nothing_else():
    """Each column holds, in order: the placeholder's form, a value that only looks like it
    (longer, shorter, another element), and a null."""
    columns = {
        "text": (pa.string(), [PLACEHOLDER, PLACEHOLDER + "!", None]),
        "hstore_json": (pa.string(), ['{"__debezium_unavailable_value":"__debezium_unavailable_value"}', "{}", None]),
        "bytea_base64": (pa.string(), ["X19kZWJleml1bV91bmF2YWlsYWJsZV92YWx1ZQ==", "X19k", None]),
        "bytea": (pa.binary(), [PLACEHOLDER.encode(), b"", None]),
        "text_array": (pa.list_(pa.string()), [[PLACEHOLDER], [PLACEHOLDER, "x"], None]),
        "uuid_array": (pa.list_(pa.string()), [["b68a35a7-17ad-35b3-af2a-ae46edb4545a"], [], None]),
        "bytea_array": (pa.list_(pa.binary()), [[PLACEHOLDER.encode()], [b"x"], None]),
        "int_array": (pa.list_(pa.int32()), [AS_NUMBERS, AS_NUMBERS[:-1], None]),
        "bigint_array": (pa.list_(pa.int64()), [AS_NUMBERS, [*AS_NUMBERS[:-1], 0], None]),
        "hstore": (pa.map_(pa.string(), pa.string()), [[(PLACEHOLDER, PLACEHOLDER)], [(PLACEHOLDER, "x")], None]),
    }
    for name, (t, values) in columns.items():
        assert PH.matches(pa.chunked_array([pa.array(values, t)])).tolist() == [True, False, False], name
    assert not PH.forms(pa.int64()) and not PH.forms(pa.list_(pa.float64()))


def test_a_placeholder_in_an_array_or_a_map_is_completed_like_text():
    """From the key's earlier change in the batch, else the table's row."""
    t = pa.map_(pa.string(), pa.string())
    rows = pa.table({"id": ["a", "a", "b"], "_event_lsn": [1, 2, 3],
                     "scores": pa.array([[1, 2], AS_NUMBERS, AS_NUMBERS], pa.list_(pa.int32())),
                     "attrs": pa.array([[("k", "v")], [(PLACEHOLDER, PLACEHOLDER)], [("x", "y")]], t)})
    assert placeholder_columns(rows) == ["scores", "attrs"]

    def stored(keys: pa.Array, columns: list[str]) -> pa.Table:
        assert keys.to_pylist() == ["b"]
        return pa.table({"_hoodie_record_key": ["b"], "scores": pa.array([[7]], pa.list_(pa.int32())),
                         "attrs": pa.array([[("s", "t")]], t)})

    out = resolve(rows, rows.column("id"), "_event_lsn", stored)
    assert out.column("scores").to_pylist() == [[1, 2], [1, 2], [7]]
    assert out.column("attrs").to_pylist() == [[("k", "v")], [("k", "v")], [("x", "y")]]
    assert out.column(REASON_COL).null_count == 3
