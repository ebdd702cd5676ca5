"""``streamer.sources.lines.split_lines``: every line with its number and exact bytes, bounded memory."""

from __future__ import annotations

import io

import pyarrow as pa
import pytest

from streamer.sources.lines import LINE_SCHEMA, split_lines


def _split(data: bytes, limit: int = 1 << 20, keep: int = 1 << 20, chunk: int = 8 << 20) -> list[tuple]:
    batches = list(split_lines(io.BytesIO(data), "f.json", limit, keep, chunk_bytes=chunk))
    table = pa.Table.from_batches(batches, schema=LINE_SCHEMA)
    assert set(table.column("_source_file").to_pylist()) <= {"f.json"}
    return list(zip(table.column("_line").to_pylist(), table.column("_raw").to_pylist(),
                    table.column("_size").to_pylist(), strict=True))


@pytest.mark.parametrize("chunk", [1, 2, 3, 5, 8 << 20])
def test_lines_numbers_and_bytes_whatever_the_chunking(chunk):
    data = b'\xef\xbb\xbf{"a": 1}\r\n\n{"b": "\xff"}\nlast'
    assert _split(data, chunk=chunk) == [
        (1, b'{"a": 1}', 8), (2, b"", 0), (3, b'{"b": "\xff"}', 10), (4, b"last", 4),
    ]


@pytest.mark.parametrize("chunk", [3, 7, 64])
def test_an_oversized_line_keeps_its_head_and_true_size(chunk):
    big = b"x" * 100
    data = b"ok\n" + big + b"\r\n" + b"y" * 10 + b"\n" + big
    assert _split(data, limit=20, keep=4, chunk=chunk) == [
        (1, b"ok", 2), (2, b"xxxx", 100), (3, b"y" * 10, 10), (4, b"xxxx", 100),
    ]


def test_empty_input_and_a_trailing_newline():
    assert _split(b"") == []
    assert _split(b"a\n") == [(1, b"a", 1)]
