"""Read one file slice into Arrow: the unit of work a driver thread or a Spark executor runs.

Everything a slice read needs travels in a picklable :class:`SliceReadSpec`, so the
same function serves the local reader and the Spark data source.

Pruning a base file under a filter (see :func:`_read_base_pruned`). The filter is always
applied to the *merged* rows; before the merge, a base row (or a whole row group, by its
Parquet min/max statistics) may be dropped when the filter is false or unknown for it
**and** no data record of the slice's log names its key. Why that is exact, whatever the
merge mode: a base row no log record names is its key's final version, so the final
filter would drop it anyway; a base row a log record names must stay, because under
event-time ordering it may beat that (older) log record, and dropping it would let the
loser through. Deletes never need the base row (they only remove). Row groups are matched
to log keys by the key column's min/max; no key statistics means the group is kept.
Log blocks are never skipped on data statistics: a block's record that fails the filter
may still be the version that hides an older, matching one.
"""

from __future__ import annotations

from collections.abc import Container, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq

from streamer.errors import CorruptDataError, MissingFileError, first_line
from streamer.fs import FileSystem, read_failure
from streamer.table.fsview import FileSlice
from streamer.table.merge import (
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
from streamer.table.naming import partition_values

if TYPE_CHECKING:
    from streamer.table.log_format import LogBlock


@dataclass(frozen=True)
class SliceReadSpec:
    """How to read slices of one query (shipped to executors as is)."""

    merge: MergeSpec
    #: the instants whose blocks count (a set, or :class:`~streamer.table.timeline.CommittedInstants`)
    completed: Container[str | None]
    columns: tuple[str, ...] | None = None
    filter: pc.Expression | None = None
    include_logs: bool = True
    commit_times: frozenset[str] | None = None  # incremental: keep rows of these commits
    #: incremental, with archived writes in a layout-1 range: also keep every commit time in
    #: ``(begin, end]`` (``None`` bounds: open; :mod:`streamer.read.incremental`)
    commit_range: tuple[str | None, str | None] | None = None
    #: incremental over archived writes: the base rows and each data block's records are
    #: kept by commit time *before* they merge, deletes all apply (Hudi 1.x's scan)
    sources_by_commit_time: bool = False
    url_encode: bool = False  # partition values in paths are escaped (Hudi's urlencode)
    partition_fields: tuple[str, ...] = ()
    hive_style: bool = False
    add_partition_columns: bool = False
    #: the columns ``filter`` reads (``None``: not known, every column is read)
    filter_columns: tuple[str, ...] | None = None
    #: those columns as the table's schema types them: a file written before a column
    #: was added (schema evolution) lacks it, and the filter then reads it as nulls
    filter_fields: tuple[pa.Field, ...] = ()
    #: drop base rows / row groups the filter rules out before merging (module doc)
    prune: bool = True

    @property
    def incremental(self) -> bool:
        return self.commit_times is not None


#: Parquet reads that verify page checksums where the file has them (see ``parquet_bytes``).
_VERIFYING_PARQUET = ds.ParquetFileFormat(
    default_fragment_scan_options=ds.ParquetFragmentScanOptions(page_checksum_verification=True))


def with_filter_fields(table: pa.Table, fields: tuple[pa.Field, ...]) -> pa.Table:
    """``table`` with a null column for each filter field it lacks (a file older than the
    column), so the filter reads nulls there - as a reader of the whole table would."""
    for f in fields:
        if f.name not in table.column_names:
            table = table.append_column(f.with_nullable(True), pa.nulls(len(table), f.type))
    return table


def _read_base(fs: FileSystem, path: str, filter_: pc.Expression | None,
               columns: list[str] | None = None, filter_fields: tuple[pa.Field, ...] = ()) -> pa.Table:
    try:
        if filter_ is not None:
            dataset = ds.dataset(path, format=_VERIFYING_PARQUET, filesystem=fs.arrow)
            names = set(dataset.schema.names)
            wanted = [c for c in columns if c in names] if columns else None
            if any(f.name not in names for f in filter_fields):  # older than a filtered column
                return with_filter_fields(dataset.to_table(columns=wanted), filter_fields).filter(filter_)
            return dataset.to_table(filter=filter_, columns=wanted)
        with fs.open_input_file(path) as f:
            pf = pq.ParquetFile(f, page_checksum_verification=True)
            if columns is not None:
                names = set(pf.schema_arrow.names)
                columns = [c for c in columns if c in names]
            return pf.read(columns=columns)
    except FileNotFoundError as e:
        raise MissingFileError("base file missing", path) from e
    except (pa.ArrowInvalid, OSError) as e:  # a torn or flipped footer: "Couldn't deserialize thrift"
        if (failed := read_failure(e, path, "reading a base file")) is not None:
            raise failed from e
        raise CorruptDataError(f"unreadable base file ({first_line(e)})", path) from e


def _one_type(columns: list[pa.ChunkedArray]) -> bool:
    return len({str(c.type) for c in columns}) <= 1


def _log_blocks(fs: FileSystem, paths: Sequence[str]) -> list[tuple[str, LogBlock]]:
    from streamer.table.log_format import read_log_file

    out: list[tuple[str, LogBlock]] = []
    for p in paths:
        # a snapshot needs (nearly) every block's content: one read of the whole file
        # beats a footer read plus column-chunk reads per Parquet block
        try:
            out.extend((p, b) for b in read_log_file(fs, p, lazy=False))
        except FileNotFoundError as e:  # removed since the listing (a clean): not ours to hide
            raise MissingFileError("log file missing", p) from e
    return out


def _projection(spec: SliceReadSpec) -> list[str] | None:
    """The columns a slice read needs: those kept after the merge (:func:`_kept_columns`)
    and what merging needs (key, ordering value, delete marker). ``None`` (all) when a
    filter's columns are not known."""
    kept = _kept_columns(spec)
    return None if kept is None else list(dict.fromkeys([*kept, *spec.merge.needed_columns()]))


def _kept_columns(spec: SliceReadSpec) -> list[str] | None:
    """The columns a slice read still needs after the merge: the query's, the filter's
    and (incremental) the commit time. ``None``: all."""
    if spec.columns is None or (spec.filter is not None and spec.filter_columns is None):
        return None
    extra = [COMMIT_TIME] if spec.incremental else []
    return list(dict.fromkeys([*spec.columns, *(spec.filter_columns or ()), *extra]))


def _key_column(spec: SliceReadSpec) -> str | None:
    """The stored column the merge keys on, when there is one (composite keys have none)."""
    keys = spec.merge.key_columns()
    return keys[0] if len(keys) == 1 else None


def _read_base_pruned(fs: FileSystem, path: str, spec: SliceReadSpec, columns: list[str] | None,
                      log_keys: pa.ChunkedArray | None, stats: ScanStats) -> pa.Table:
    """The base rows the merge needs under ``spec.filter`` (the rule in the module doc):
    row groups whose statistics rule the filter out and whose key range holds no log key
    are not read; of the rest, rows the filter rules out and no log record names are
    dropped."""
    key = _key_column(spec)
    try:
        frag = next(iter(ds.dataset(path, format=_VERIFYING_PARQUET, filesystem=fs.arrow).get_fragments()))
        names = set(frag.physical_schema.names)
        if key is None or key not in names or not set(spec.filter_columns or ()) <= names:
            return _read_base(fs, path, None, columns)
        if columns is not None:
            columns = [c for c in columns if c in names]
        groups = frag.row_groups
        maybe = {rg.id for rg in frag.subset(spec.filter).row_groups}
        keep = [rg.id for rg in groups if rg.id in maybe or _keys_in_range(log_keys, rg.statistics.get(key))]
        stats.base_row_groups_pruned += len(groups) - len(keep)
        if not keep:
            return frag.physical_schema.empty_table().select(columns) if columns else frag.physical_schema.empty_table()
        if len(keep) < len(groups):
            frag = frag.subset(row_group_ids=keep)
        rows = spec.filter if log_keys is None or not len(log_keys) else (
            spec.filter | pc.field(key).isin(log_keys.combine_chunks()))
        table = frag.to_table(filter=rows, columns=columns)
        stats.base_rows_pruned += sum(groups[i].num_rows for i in keep) - len(table)
        return table
    except FileNotFoundError as e:
        raise MissingFileError("base file missing", path) from e
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError, OSError):
        # a filter Arrow cannot apply here, or damage: the plain read names damage as
        # such, and the filter then fails (or not) on the merged rows as without pruning
        return _read_base(fs, path, None, columns)


def _keys_in_range(keys: pa.ChunkedArray | None, key_stats: dict | None) -> bool:
    """Whether some log key may fall in a row group (no statistics: assume so)."""
    if keys is None or not len(keys):
        return False
    if not key_stats or key_stats.get("min") is None or key_stats.get("max") is None:
        return True
    try:
        inside = pc.and_(pc.greater_equal(keys, key_stats["min"]), pc.less_equal(keys, key_stats["max"]))
        return bool(pc.any(inside).as_py())
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, TypeError):
        return True


def read_file_slice(fs: FileSystem, fslice: FileSlice, spec: SliceReadSpec) -> tuple[pa.Table | None, ScanStats]:
    """Merged rows of one slice after projection/filter (``None`` when it has none)."""
    stats = ScanStats(file_slices=1)
    logs = fslice.log_files if spec.include_logs else ()
    pushdown = spec.filter if (not logs and not spec.add_partition_columns) else None
    project = _projection(spec)
    blocks: list[tuple[str, pa.Table]] = []
    if logs:  # the logs first: their keys say which base rows pruning must keep
        for b in effective_blocks(_log_blocks(fs, [lf.path for lf in logs]), spec.completed, stats):
            code = block_type_code(b)
            if code == DELETE:
                blocks.append(("delete", b.deletes()))
            elif code in DATA_TYPES:
                blocks.append(("data", b.records(project, missing_ok=True)))
    base = None
    if fslice.base_file is not None:
        path = fslice.base_file.path
        if pushdown is None and spec.filter is not None and spec.prune and not spec.add_partition_columns:
            key = _key_column(spec)
            named = [t.column(key) for kind, t in blocks if kind == "data" and key in t.column_names]
            log_keys = pa.chunked_array([c for k in named for c in k.chunks], named[0].type) if named else None
            if len(named) == sum(kind == "data" for kind, _ in blocks) and _one_type(named):
                base = _read_base_pruned(fs, path, spec, project, log_keys, stats)
        if base is None:
            base = _read_base(fs, path, pushdown, project, spec.filter_fields)
    if spec.sources_by_commit_time:
        base = _of_the_range_only(base, spec)
        blocks = [(kind, _of_the_range_only(t, spec) if kind == "data" else t) for kind, t in blocks]
    table = merge_records(base, blocks, spec.merge, _kept_columns(spec))
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
    if spec.incremental and not spec.sources_by_commit_time and COMMIT_TIME in table.column_names:
        table = table.filter(_of_the_range(table.column(COMMIT_TIME), spec))  # (a scan's sources were)
    if spec.filter is not None and pushdown is None:
        table = with_filter_fields(table, spec.filter_fields).filter(spec.filter)
    if spec.columns is not None:
        table = table.select([c for c in spec.columns if c in table.column_names])
    return table, stats


def _of_the_range(times: pa.ChunkedArray, spec: SliceReadSpec) -> pa.ChunkedArray:
    """Which rows an incremental read keeps: those of its commits, or of its range."""
    keep = pc.is_in(times, value_set=pa.array(sorted(spec.commit_times or ()), pa.string()))
    if spec.commit_range is not None:
        begin, end = spec.commit_range
        inside = pc.and_(pc.greater(times, begin) if begin is not None else pc.is_valid(times),
                         pc.less_equal(times, end) if end is not None else pc.is_valid(times))
        keep = pc.or_(keep, inside)
    return keep


def _of_the_range_only(table: pa.Table | None, spec: SliceReadSpec) -> pa.Table | None:
    """``table``'s rows of the incremental range (:func:`_of_the_range`)."""
    if table is None or COMMIT_TIME not in table.column_names:
        return table
    return table.filter(_of_the_range(table.column(COMMIT_TIME), spec))
