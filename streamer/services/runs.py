"""Write the stitched blocks of one file slice: one new log file version, made atomically.

Why a new log file instead of appending: the writer may append to the same slice at the
same moment (RFC-48 scenario 1), and two processes appending to one file would
interleave bytes. A new version under a process-unique write token cannot collide; the
reader places a stitched block where the blocks it replaces were, wherever its file sorts.

Why only the block's own index (bloom, min/max) and no key range of the slice's log
blocks in the Parquet footer: a writer may commit a block while we stitch, and a range
computed before it would, if our file sorted last, hide that block's keys from the
index. Without one, the index checks members one by one - slower, never wrong - and the
next write carries the slice's range again.
"""

from __future__ import annotations

import dataclasses
import json
import posixpath

import pyarrow as pa
import pyarrow.compute as pc

from streamer.index.rfc06 import BloomParams, KeySummary
from streamer.read.table import Table
from streamer.services.common import next_log_version, service_token
from streamer.services.slices import Unit
from streamer.services.stitch import stitch
from streamer.table.avro_schema import avro_to_arrow
from streamer.table.fsview import FileSlice
from streamer.table.log_content import ORDERING_VALUE, PARTITION_PATH, RECORD_KEY
from streamer.table.log_format import BlockType, HeaderKey, encode_data_block
from streamer.table.merge import DATA_TYPES, DELETE, block_type_code, concat_aligned
from streamer.table.metadata import WriteStat
from streamer.write.log_file import SliceTarget, delete_block, write_log_file


def block_tables(units: list[Unit]) -> list[tuple[str, pa.Table]]:
    """``("data"|"delete", rows)`` of the units' blocks, in reader order."""
    out: list[tuple[str, pa.Table]] = []
    for u in units:
        for b in u.blocks:
            code = block_type_code(b)
            if code == DELETE:
                out.append(("delete", b.deletes()))
            elif code in DATA_TYPES:
                out.append(("data", b.records()))
    return out


def _data_kind_and_schema(units: list[Unit]) -> tuple[BlockType, str | None]:
    kind, schema = BlockType.AVRO_DATA, None
    for u in units:
        for b in u.blocks:
            if b.block_type in (BlockType.PARQUET_DATA, BlockType.AVRO_DATA):
                if b.block_type == BlockType.PARQUET_DATA:
                    kind = BlockType.PARQUET_DATA
                schema = b.header.get(HeaderKey.SCHEMA) or schema
    return kind, schema


def _own_index(rows: pa.Table) -> dict[str, str]:
    """The block's own RFC-06/Hudi footer index, with a filter sized to the block."""
    keys = pc.cast(rows.column(RECORD_KEY), pa.string()).combine_chunks()
    return KeySummary.of_keys(keys, BloomParams().sized_for(len(keys))).to_kv(slice_level=False)


def encode_split(rows: pa.Table, header: dict, kind: BlockType, max_bytes: int) -> list[bytes]:
    """Data blocks of ``rows`` (sorted by key), halved until each fits ``max_bytes``."""
    kv = _own_index(rows) if kind == BlockType.PARQUET_DATA and rows.num_rows else None
    block = encode_data_block(rows, header, kind=kind, parquet_kv_metadata=kv)
    if len(block) <= max_bytes or rows.num_rows <= 1:
        return [block]
    if kind == BlockType.PARQUET_DATA:
        rows = rows.take(pc.sort_indices(rows, [(RECORD_KEY, "ascending")]))
    half = rows.num_rows // 2
    return (encode_split(rows.slice(0, half), header, kind, max_bytes)
            + encode_split(rows.slice(half), header, kind, max_bytes))


def _conform(rows: pa.Table, schema_json: str | None, kind: BlockType) -> pa.Table:
    """Avro blocks must match their SCHEMA header exactly; Parquet blocks carry their own."""
    if kind != BlockType.AVRO_DATA or not schema_json:
        return rows
    target = avro_to_arrow(json.loads(schema_json))
    aligned = concat_aligned([rows], target)
    return aligned if aligned is not None else rows


def write_stitched(table: Table, instant: str, fslice: FileSlice,
                   groups: list[tuple[list[str], list[Unit]]], max_block_bytes: int) -> WriteStat:
    """Stitch each run in ``groups`` and write all resulting blocks as one new log file."""
    spec = table.merge_spec()
    blocks: list[bytes] = []
    rows_out = dels_out = rows_in = 0
    for planned, units in groups:
        stitched = stitch(block_tables(units), spec)
        rows_in += stitched.input_rows + stitched.input_deletes
        kind, schema_json = _data_kind_and_schema(units)
        replaced = ",".join(dict.fromkeys(planned))
        header: dict = {HeaderKey.INSTANT_TIME: instant, HeaderKey.COMPACTED_BLOCK_TIMES: replaced}
        if stitched.data is not None:
            data = _conform(stitched.data, schema_json, kind)
            if schema_json:
                header[HeaderKey.SCHEMA] = schema_json
            blocks.extend(encode_split(data, header, kind, max_block_bytes))
            rows_out += data.num_rows
        if stitched.deletes is not None:
            d = stitched.deletes
            ordering = d.column(ORDERING_VALUE) if ORDERING_VALUE in d.column_names else None
            # the stitched delete block names the instants it replaces too (no schema)
            del_header = {k: v for k, v in header.items() if k != HeaderKey.SCHEMA}
            blocks.append(delete_block(d.column(RECORD_KEY), d.column(PARTITION_PATH), ordering, del_header))
            dels_out += d.num_rows
    token = service_token()
    # version 8+: the run's own log file, named by its instant (see SliceTarget)
    named_by = instant if table.properties.version >= 8 else None
    version = next_log_version(table, fslice.partition_path, fslice.file_id, named_by or fslice.base_instant)
    target = SliceTarget(table.base_path, fslice.partition_path, fslice.file_id, fslice.base_instant,
                         version, token, fslice.base_file.name if fslice.base_file else None,
                         tuple(posixpath.basename(lf.path) for lf in fslice.log_files), name_instant=named_by)
    while table.fs.exists(target.path_of(target.log_name)):
        target = dataclasses.replace(target, version=target.version + 1)
    stat = write_log_file(table.fs, target, instant, blocks)
    stat.num_writes = stat.num_update_writes = rows_out
    stat.num_deletes = dels_out
    stat.total_log_records = rows_in
    return stat
