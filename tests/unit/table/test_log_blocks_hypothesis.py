"""Property tests: log blocks written by our encoders read back identical.

* framing (:mod:`streamer.table.log_format`): any sequence of blocks - any block type we
  write, any header values, any content bytes - appended in one or several appends,
  reads back block for block, lazily and eagerly; a torn block between two appends is
  one CORRUPT region and the blocks on both sides of it survive;
* delete blocks (:mod:`streamer.table.log_content`): any keys, partition paths and
  ordering values of every Arrow type the writer wraps decode to the same rows.
"""

from __future__ import annotations

import datetime as dt
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from streamer.fs import FileSystem
from streamer.table import log_content
from streamer.table.log_format import (
    LOG_FORMAT_VERSION,
    BlockType,
    HeaderKey,
    encode_block,
    encode_delete_block,
    read_log_file,
)
from tests.support.log_appends import append_blocks

FS = FileSystem()
LOG_NAME = ".f-0_20250101000000000.log.1_0-0-0"

#: Block types a writer frames (CORRUPT is only ever made up by the reader).
WRITTEN_TYPES = [t for t in BlockType if t != BlockType.CORRUPT]
HEADERS = st.dictionaries(st.sampled_from(list(HeaderKey)), st.text(max_size=60), max_size=len(HeaderKey))
BLOCKS = st.lists(
    st.tuples(st.sampled_from(WRITTEN_TYPES), HEADERS, st.binary(max_size=600)), min_size=1, max_size=5
)


@contextmanager
def _log_path() -> Iterator[str]:
    with tempfile.TemporaryDirectory() as d:
        yield os.path.join(d, LOG_NAME)


def _assert_block(got, block_type, header, content) -> None:
    assert got.corrupt_reason is None
    assert got.block_type == block_type
    assert got.format_version == LOG_FORMAT_VERSION
    assert got.header == header
    assert got.footer == {}
    assert got.content() == content
    assert got.instant_time == header.get(HeaderKey.INSTANT_TIME)


@settings(max_examples=50, deadline=None)
@given(BLOCKS, st.integers(min_value=0, max_value=5), st.booleans())
def test_blocks_read_back_identical(blocks, split, lazy):
    framed = [encode_block(t, h, c) for t, h, c in blocks]
    with _log_path() as path:
        append_blocks(FS, path, framed[:split])  # a first append, then appends to the file
        for b in framed[split:]:
            append_blocks(FS, path, [b])
        got = read_log_file(FS, path, lazy=lazy)
        size = os.path.getsize(path)
        assert len(got) == len(blocks)
        pos = 0
        for g, (t, h, c), raw in zip(got, blocks, framed, strict=True):
            _assert_block(g, t, h, c)
            assert (g.offset, g.size) == (pos, len(raw))
            pos += g.size
        assert pos == size


@settings(max_examples=50, deadline=None)
@given(BLOCKS, BLOCKS, st.tuples(st.sampled_from(WRITTEN_TYPES), HEADERS, st.binary(max_size=600)),
       st.floats(min_value=0.0, max_value=1.0, exclude_max=True), st.booleans())
def test_a_torn_block_between_appends_is_skipped(before, after, torn, cut, lazy):
    """A writer died mid-block; a later writer appended after it (as Hudi does)."""
    raw = encode_block(*torn)
    torn_prefix = raw[: max(1, int(len(raw) * cut))]
    with _log_path() as path:
        append_blocks(FS, path, [encode_block(*b) for b in before] + [torn_prefix])
        append_blocks(FS, path, [encode_block(*b) for b in after])
        got = read_log_file(FS, path, lazy=lazy)
        head, tail = got[: len(before)], got[len(got) - len(after):]
        middle = got[len(before): len(got) - len(after)]
        for g, b in zip(head, before, strict=True):
            _assert_block(g, *b)
        for g, b in zip(tail, after, strict=True):
            _assert_block(g, *b)
        # resynchronising on the next magic may split the torn region, never lose a block
        assert middle and all(m.block_type == BlockType.CORRUPT and m.corrupt_reason for m in middle)
        assert middle[0].offset == sum(len(encode_block(*b)) for b in before)


# -- delete blocks ----------------------------------------------------------------------------
UTC = dt.timezone.utc
#: (Arrow type written, values, Arrow type read back): the wrapper the writer picks decides
#: the type a reader gets (narrow ints widen to IntWrapper's int32, unsigned 32-bit to long,
#: any decimal to DecimalWrapper's decimal(30, 15)).
ORDERING = [
    (pa.int8(), st.integers(-(2**7), 2**7 - 1), pa.int32()),
    (pa.int32(), st.integers(-(2**31), 2**31 - 1), pa.int32()),
    (pa.uint32(), st.integers(0, 2**32 - 1), pa.int64()),
    (pa.int64(), st.integers(-(2**63), 2**63 - 1), pa.int64()),
    (pa.float32(), st.floats(width=32, allow_nan=False), pa.float32()),
    (pa.float64(), st.floats(allow_nan=False), pa.float64()),
    (pa.bool_(), st.booleans(), pa.bool_()),
    (pa.string(), st.text(max_size=20), pa.string()),
    (pa.binary(), st.binary(max_size=20), pa.binary()),
    (pa.date32(), st.dates(), pa.date32()),
    (pa.timestamp("us", tz="UTC"), st.datetimes(timezones=st.just(UTC)), pa.timestamp("us", tz="UTC")),
    (pa.time64("us"), st.times(), pa.time64("us")),
    (pa.decimal128(30, 15),
     st.decimals(min_value=-(10**14), max_value=10**14, places=15, allow_nan=False, allow_infinity=False),
     pa.decimal128(30, 15)),
    (pa.decimal128(10, 2),
     st.decimals(min_value=-(10**7), max_value=10**7, places=2, allow_nan=False, allow_infinity=False),
     pa.decimal128(30, 15)),
]


@st.composite
def delete_keys(draw) -> tuple[pa.Table, pa.DataType | None, list]:
    n = draw(st.integers(min_value=0, max_value=12))
    keys = draw(st.lists(st.text(max_size=30), min_size=n, max_size=n))
    parts = draw(st.lists(st.text(max_size=30), min_size=n, max_size=n))
    cols = {log_content.RECORD_KEY: pa.array(keys, pa.string()),
            log_content.PARTITION_PATH: pa.array(parts, pa.string())}
    if draw(st.booleans()):  # no ordering column: Hudi's default IntWrapper(0)
        return pa.table(cols), None, []
    written, values, read_type = draw(st.sampled_from(ORDERING))
    vals = draw(st.lists(st.none() | values, min_size=n, max_size=n))
    cols[log_content.ORDERING_VALUE] = pa.array(vals, written)
    return pa.table(cols), read_type, vals


def _check_deletes(got: pa.Table, table: pa.Table, read_type, vals) -> None:
    n = table.num_rows
    assert got.column(log_content.RECORD_KEY).to_pylist() == table.column(log_content.RECORD_KEY).to_pylist()
    assert got.column(log_content.PARTITION_PATH).to_pylist() == table.column(log_content.PARTITION_PATH).to_pylist()
    ordering = got.column(log_content.ORDERING_VALUE)
    if read_type is None:
        assert ordering.to_pylist() == [0] * n
    elif all(v is None for v in vals):  # nothing to tell the type by
        assert ordering.type == pa.null() and ordering.null_count == n
    else:
        assert ordering.type == read_type
        assert ordering.to_pylist() == vals  # decimals compare by value across scales


@settings(max_examples=50, deadline=None)
@given(delete_keys())
def test_delete_content_round_trips(case):
    table, read_type, vals = case
    got = log_content.decode_deletes(log_content.encode_deletes(table), "test")
    _check_deletes(got, table, read_type, vals)


@settings(max_examples=50, deadline=None)
@given(delete_keys(), HEADERS, st.booleans())
def test_delete_block_round_trips_through_a_log_file(case, header, lazy):
    table, read_type, vals = case
    with _log_path() as path:
        append_blocks(FS, path, [encode_delete_block(table, header)])
        (block,) = read_log_file(FS, path, lazy=lazy)
        assert block.block_type == BlockType.DELETE and block.header == header
        _check_deletes(block.deletes(), table, read_type, vals)


def test_a_uint64_ordering_value_beyond_a_java_long_is_a_schema_error():
    import pyarrow as pa
    import pytest

    from streamer.errors import SchemaError

    table = pa.table({"_hoodie_record_key": ["k"], "_hoodie_partition_path": [""],
                      "ordering_value": pa.array([1 << 63], pa.uint64())})
    with pytest.raises(SchemaError, match="LongWrapper"):
        log_content.encode_deletes(table)
