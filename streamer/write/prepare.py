"""Turn a user's batch into one row per key: keys built, duplicates combined, deletes split.

A micro-batch routinely carries several versions of the same key (a Kafka topic with
retries, a CDC stream). Hudi combines them before writing ("precombine"): the row with
the greatest ordering value wins, ties go to the row that came last. Doing this once,
vectorised, up front means every later stage (index, routing, file-group writers) can
assume unique keys, which is what makes their per-key logic simple.

A row is a delete when the operation is ``delete`` or its ``_hoodie_is_deleted`` column
is true; deletes take part in combining (a later upsert of the same key revives it).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from streamer.errors import SchemaError
from streamer.table import meta_fields
from streamer.table.identity import TableConfig
from streamer.write.keygen import PARTITION_PATH_COL, RECORD_KEY_COL, build_keys

IS_DELETED_COL = meta_fields.IS_DELETED
_ROW_COL = "__row"


@dataclass(frozen=True)
class PreparedBatch:
    """Unique keys, split into rows to upsert and keys to delete.

    ``upserts`` holds the user's columns plus ``_hoodie_record_key`` and
    ``_hoodie_partition_path``; ``deletes`` holds the two key columns and the ordering
    value (Hudi delete blocks carry it so readers can order a delete against updates).
    """

    upserts: pa.Table
    deletes: pa.Table
    input_rows: int

    @property
    def num_deletes(self) -> int:
        return self.deletes.num_rows


def with_keys(table: pa.Table, cfg: TableConfig) -> pa.Table:
    """``table`` plus the two Hudi key columns (replacing any stale ones)."""
    keys = build_keys(table, cfg)
    for col in (RECORD_KEY_COL, PARTITION_PATH_COL):
        if col in table.column_names:
            table = table.drop_columns([col])
    return table.append_column(RECORD_KEY_COL, keys.record_keys).append_column(
        PARTITION_PATH_COL, keys.partition_paths
    )


def latest_per_key(table: pa.Table, ordering_field: str | None, *,
                   key_fields: tuple[str, ...] = (), by_partition: bool = True) -> pa.Table:
    """Keep, for each (partition, record key), the row with the greatest ordering value (last on ties).
    ``by_partition=False`` (a global index): for each record key, whatever its partition.

    Rows whose record key occurs once are kept as they are; only the rows of repeated
    keys (a few in a micro-batch of upserts) are sorted by (partition, key, ordering,
    arrival), keeping each pair's last: one hash pass over the keys and a small sort
    instead of sorting the whole batch by string keys (~40 ms of a 100k batch's commit,
    benchmarks/RESULTS.md). ``key_fields``: the record key's source fields, when known (see
    :func:`_int_keys_unique`). The result keeps arrival order.
    """
    n = table.num_rows
    if n <= 1:
        return table
    if ordering_field is not None and ordering_field not in table.column_names:
        raise SchemaError(f"ordering field {ordering_field!r} is missing from the batch")
    if _int_keys_unique(table, key_fields):
        return table  # nothing to combine: every row is its key's last, in arrival order
    keys = table.column(RECORD_KEY_COL)
    if keys.null_count:
        return _combine(table, ordering_field, np.arange(n, dtype=np.int64), by_partition)
    codes = pc.dictionary_encode(keys.combine_chunks()).indices.to_numpy(zero_copy_only=False)
    repeated = np.bincount(codes)[codes] > 1
    if not repeated.any():
        return table
    rows = np.flatnonzero(repeated)
    keep = ~repeated
    keep[_combine(table.take(pa.array(rows)), ordering_field, rows, by_partition)] = True
    return table.filter(pa.array(keep))


def _combine(table: pa.Table, ordering_field: str | None, rows: np.ndarray,
             by_partition: bool = True) -> np.ndarray:
    """``rows`` (the table's own row numbers, ascending) of the last row of each (partition,
    key) of ``table`` - each key, unless ``by_partition`` - by (ordering, arrival)."""
    n = table.num_rows
    key_cols = [PARTITION_PATH_COL, RECORD_KEY_COL] if by_partition else [RECORD_KEY_COL]
    work = table.select(key_cols + ([ordering_field] if ordering_field is not None else []))
    work = work.append_column(_ROW_COL, pa.array(np.arange(n, dtype=np.int64)))
    sort_keys = [(c, "ascending", "at_start") for c in key_cols]
    if ordering_field is not None:
        sort_keys.append((ordering_field, "ascending", "at_start"))
    sort_keys.append((_ROW_COL, "ascending", "at_start"))
    idx = pc.sort_indices(work, sort_keys=sort_keys)
    # last row of each run of equal (partition, key): differs from the next row, or final
    differs = None
    for col in key_cols:
        s = pc.take(work.column(col), idx).combine_chunks()
        d = pc.not_equal(s.slice(0, n - 1), s.slice(1))
        differs = d if differs is None else pc.or_(differs, d)
    is_last = pa.concat_arrays([differs, pa.array([True])])  # n >= 2: only repeated keys come here
    return rows[pc.filter(idx, is_last).to_numpy(zero_copy_only=False)]


def _int_keys_unique(table: pa.Table, key_fields: tuple[str, ...] = ()) -> bool:
    """True when the record key is made from one integer field whose values do not repeat.

    Such a key (``id``, Hudi's ``SimpleKeyGenerator`` or the complex one with a single
    field) is a one-to-one function of that integer, so the integers are tested instead:
    a sort of 8-byte values is several times cheaper than hashing their decimal strings.
    """
    if len(key_fields) == 1 and key_fields[0] in table.column_names:
        source = table.column(key_fields[0])
        if pa.types.is_integer(source.type) and not source.null_count:
            return _distinct(source.to_numpy())
    return False


def _distinct(values: np.ndarray) -> bool:
    """No value repeats: ids within a span of a few times their count (a table's key
    sequence) are marked in a byte per possible value, one pass; others are sorted."""
    if len(values) < 2:
        return True
    lo, hi = int(values.min()), int(values.max())
    if hi - lo < 8 * len(values):
        seen = np.zeros(hi - lo + 1, dtype=bool)
        seen[values - lo] = True
        return int(np.count_nonzero(seen)) == len(values)
    ordered = np.sort(values)
    return not bool((ordered[1:] == ordered[:-1]).any())


def _deleted_mask(table: pa.Table) -> pa.Array | None:
    if IS_DELETED_COL not in table.column_names:
        return None
    col = table.column(IS_DELETED_COL).combine_chunks()
    if not pa.types.is_boolean(col.type):
        raise SchemaError(f"{IS_DELETED_COL} must be boolean, got {col.type}")
    return pc.fill_null(col, False)


def delete_rows(keys_and_ordering: pa.Table, ordering_field: str | None) -> pa.Table:
    cols = [RECORD_KEY_COL, PARTITION_PATH_COL]
    if ordering_field is not None and ordering_field in keys_and_ordering.column_names:
        cols.append(ordering_field)
    return keys_and_ordering.select(cols)


def prepare_batch(
    table: pa.Table, cfg: TableConfig, *, all_deletes: bool = False, combine: bool = True
) -> PreparedBatch:
    """Build keys, combine duplicates and split deletes (the first stage of every write)."""
    n = table.num_rows
    keyed = with_keys(table, cfg)
    if combine:
        keyed = latest_per_key(keyed, cfg.combine_field, key_fields=cfg.record_key_fields,
                               by_partition=not cfg.index.is_global)
    if all_deletes:
        return PreparedBatch(keyed.slice(0, 0), delete_rows(keyed, cfg.ordering_field), n)
    mask = _deleted_mask(keyed)
    if mask is None or not pc.any(mask).as_py():
        return PreparedBatch(keyed, delete_rows(keyed.slice(0, 0), cfg.ordering_field), n)
    deletes = keyed.filter(mask)
    upserts = keyed.filter(pc.invert(mask))
    return PreparedBatch(upserts, delete_rows(deletes, cfg.ordering_field), n)


# --------------------------------------------------------------------------- engine core
IS_DELETE_COL = "_mor_is_delete"
KEY_COLUMNS = (RECORD_KEY_COL, PARTITION_PATH_COL, IS_DELETE_COL)


@dataclass(frozen=True)
class PrepareSpec:
    """What both engines need to turn a raw batch into write-ready rows (picklable)."""

    cfg: TableConfig
    schema: pa.Schema  # the commit's data schema
    all_deletes: bool = False


def prepare_rows(table: pa.Table, spec: PrepareSpec) -> pa.Table:
    """Keys built, columns conformed to the commit schema, a delete flag per row.

    Runs per Arrow batch (Spark ``mapInArrow``) or on the whole batch (local engine);
    combining duplicates is a separate step (:func:`latest_per_key`) because on Spark
    it needs all rows of a key together.
    """
    from streamer.write.schema import conform

    keyed = with_keys(key_fields_typed(table, spec), spec.cfg)
    if spec.all_deletes:
        flag = pc.fill_null(pa.nulls(keyed.num_rows, pa.bool_()), True)
    else:
        mask = _deleted_mask(keyed)
        flag = (
            mask if mask is not None else pc.fill_null(pa.nulls(keyed.num_rows, pa.bool_()), False)
        )
    out = conform(keyed, spec.schema, keep=(RECORD_KEY_COL, PARTITION_PATH_COL))
    out = out.set_column(
        out.schema.get_field_index(RECORD_KEY_COL),
        RECORD_KEY_COL,
        out.column(RECORD_KEY_COL).cast(pa.string()),
    )
    return out.append_column(IS_DELETE_COL, flag)


def key_fields_typed(table: pa.Table, spec: PrepareSpec) -> pa.Table:
    """``table`` with its record key and partition fields in the commit schema's types, so
    a key is made of the value the table stores, as Hudi makes it from the Avro record,
    whichever engine carried the batch (a Spark DataFrame holds a millisecond timestamp
    as microseconds: the same row would get another key and partition on Spark)."""
    names = dict.fromkeys((*spec.cfg.record_key_fields, *spec.cfg.partition_fields))
    # a nested path, or a field the batch lacks (refused elsewhere), is left as it is
    return in_types(table, [f for f in spec.schema if f.name in names])


def in_types(table: pa.Table, fields: list[pa.Field]) -> pa.Table:
    """``table`` with each of its columns named in ``fields`` cast to that field's type (a
    :class:`SchemaError` naming the field where a value does not fit); other columns as
    they are."""
    from streamer.table.merge import column_as

    for f in fields:
        i = table.schema.get_field_index(f.name)
        if i >= 0 and not table.schema.field(i).type.equals(f.type):
            table = table.set_column(i, f.name, column_as(table, f))
    return table


def prepared_schema(spec: PrepareSpec) -> pa.Schema:
    """Schema of :func:`prepare_rows` output (Spark needs it up front)."""
    return pa.schema(
        list(spec.schema)
        + [
            pa.field(RECORD_KEY_COL, pa.string()),
            pa.field(PARTITION_PATH_COL, pa.string()),
            pa.field(IS_DELETE_COL, pa.bool_()),
        ]
    )
