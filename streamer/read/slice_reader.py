"""Read one file slice into Arrow: the unit of work a driver thread or a Spark executor runs.

Everything a slice read needs travels in a picklable :class:`SliceReadSpec`, so the
same function serves the local reader and the Spark data source.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq

from streamer.errors import CorruptDataError, MissingFileError
from streamer.fs import FileSystem
from streamer.read.merge import (
    COMMIT_TIME,
    DATA_TYPES,
    DELETE,
    META_COLUMNS,
    MergeSpec,
    ScanStats,
    block_type_code,
    effective_blocks,
    merge_records,
)
from streamer.table.fsview import FileSlice
from streamer.table.naming import partition_values


@dataclass(frozen=True)
class SliceReadSpec:
    """How to read slices of one query (shipped to executors as is)."""

    merge: MergeSpec
    completed: frozenset[str]
    columns: tuple[str, ...] | None = None
    filter: pc.Expression | None = None
    include_logs: bool = True
    commit_times: frozenset[str] | None = None  # incremental: keep rows of these commits
    url_encode: bool = False  # partition values in paths are escaped (Hudi's urlencode)
    partition_fields: tuple[str, ...] = ()
    hive_style: bool = False
    add_partition_columns: bool = False

    @property
    def incremental(self) -> bool:
        return self.commit_times is not None


#: Parquet reads that verify page checksums where the file has them (see ``parquet_bytes``).
_VERIFYING_PARQUET = ds.ParquetFileFormat(
    default_fragment_scan_options=ds.ParquetFragmentScanOptions(page_checksum_verification=True))


def _read_base(fs: FileSystem, path: str, filter_: pc.Expression | None,
               columns: list[str] | None = None) -> pa.Table:
    try:
        if filter_ is not None:
            dataset = ds.dataset(path, format=_VERIFYING_PARQUET, filesystem=fs.arrow)
            names = set(dataset.schema.names)
            return dataset.to_table(filter=filter_, columns=[c for c in columns if c in names] if columns else None)
        with fs.open_input_file(path) as f:
            pf = pq.ParquetFile(f, page_checksum_verification=True)
            if columns is not None:
                names = set(pf.schema_arrow.names)
                columns = [c for c in columns if c in names]
            return pf.read(columns=columns)
    except FileNotFoundError as e:
        raise MissingFileError("base file missing", path) from e
    except (pa.ArrowInvalid, OSError) as e:  # a torn or flipped footer: "Couldn't deserialize thrift"
        raise CorruptDataError(f"unreadable base file ({str(e).strip().splitlines()[0]})", path) from e


def _log_blocks(fs: FileSystem, paths: Sequence[str]) -> list[tuple[str, object]]:
    from streamer.table.log_format import read_log_file

    out: list[tuple[str, object]] = []
    for p in paths:
        # a snapshot needs (nearly) every block's content: one read of the whole file
        # beats a footer read plus column-chunk reads per Parquet block
        try:
            out.extend((p, b) for b in read_log_file(fs, p, lazy=False))
        except FileNotFoundError as e:  # removed since the listing (a clean): not ours to hide
            raise MissingFileError("log file missing", p) from e
    return out


def _projection(spec: SliceReadSpec) -> list[str] | None:
    """The columns a slice read needs: the query's plus what merging needs (key,
    ordering value, delete marker, commit time for incremental queries). ``None`` (all)
    with a filter: its columns are not known here, and it runs after the merge."""
    if spec.columns is None or spec.filter is not None:
        return None
    extra = [COMMIT_TIME] if spec.incremental else []
    return list(dict.fromkeys([*spec.columns, *spec.merge.needed_columns(), *extra]))


def read_file_slice(fs: FileSystem, fslice: FileSlice, spec: SliceReadSpec) -> tuple[pa.Table | None, ScanStats]:
    """Merged rows of one slice after projection/filter (``None`` when it has none)."""
    stats = ScanStats(file_slices=1)
    logs = fslice.log_files if spec.include_logs else ()
    pushdown = spec.filter if (not logs and not spec.add_partition_columns) else None
    project = _projection(spec)
    base = _read_base(fs, fslice.base_file.path, pushdown, project) if fslice.base_file else None
    blocks: list[tuple[str, pa.Table]] = []
    if logs:
        for b in effective_blocks(_log_blocks(fs, [lf.path for lf in logs]), spec.completed, stats):
            code = block_type_code(b)
            if code == DELETE:
                blocks.append(("delete", b.deletes()))
            elif code in DATA_TYPES:
                blocks.append(("data", b.records(project, missing_ok=True)))
    table = merge_records(base, blocks, spec.merge)
    if table is None:
        return None, stats
    if not spec.merge.populate_meta_fields:
        # Hudi writes the meta columns as nulls here; readers present the data columns only.
        table = table.drop_columns([c for c in META_COLUMNS if c in table.column_names])
    if spec.add_partition_columns and spec.partition_fields:
        values = partition_values(fslice.partition_path, spec.partition_fields, spec.hive_style,
                                  spec.url_encode)
        for name in spec.partition_fields:
            if name not in table.column_names:
                table = table.append_column(name, pa.array([values.get(name)] * len(table), pa.string()))
    if spec.incremental and COMMIT_TIME in table.column_names:
        wanted = pa.array(sorted(spec.commit_times or ()), pa.string())
        table = table.filter(pc.is_in(table.column(COMMIT_TIME), value_set=wanted))
    if spec.filter is not None and pushdown is None:
        table = table.filter(spec.filter)
    if spec.columns is not None:
        table = table.select([c for c in spec.columns if c in table.column_names])
    return table, stats
