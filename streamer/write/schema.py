"""Schema evolution rules, checked before a single byte of a commit is written.

A table's schema is the ``schema`` in its latest commit's metadata. An incoming batch
may *evolve* it only in ways every reader of older files can follow:

* a new column is accepted when nullable (old files simply lack it → null);
* a type may widen along Avro's promotions (int→long→float→double, float→double);
* a batch of a narrower type than the table's (an ``int`` in a ``long`` column) is cast up
  to the table's type, which holds every value of it (Hudi's
  ``AvroSchemaEvolutionUtils.reconcileSchemaRequirements``): a topic whose producers moved
  to a wider schema still carries records of the older one;
* a column the batch lacks is filled with nulls if the table allows nulls there,
  except record key, partition and ordering fields, which must always be present.

Anything else — changing a type, dropping a key field — is refused with
a :class:`SchemaError` naming the field, because a half-written commit with an
unreadable schema would be far harder to undo than a refused batch.
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa

from streamer.errors import SchemaError
from streamer.table import meta_fields
from streamer.table.avro_schema import arrow_to_avro, avro_to_arrow, is_promotion
from streamer.table.merge import column_as

META_COLUMNS = meta_fields.META_COLUMNS

@dataclass(frozen=True)
class SchemaDecision:
    """The schema to write this commit with, and how to make the batch fit it."""

    schema: pa.Schema  # data columns only (no meta columns), all nullable
    evolved: bool


def data_schema(schema: pa.Schema) -> pa.Schema:
    """Drop Hudi meta columns, map types to what Avro can store, make fields nullable.

    The Avro round trip (int8→int, large_string→string, ns→us timestamps...) is what
    every Hudi reader will see, so rules are judged — and data cast — in those terms:
    an ``int8`` column is not a "narrowing" of an ``int`` column.
    """
    fields = [f for f in schema if f.name not in META_COLUMNS]
    if not fields:
        return pa.schema([])
    avro = arrow_to_avro(pa.schema(fields), "record", "ns")
    return pa.schema([_nullable(f) for f in avro_to_arrow(avro)])


def _nullable(f: pa.Field) -> pa.Field:
    t = f.type
    if pa.types.is_struct(t):
        t = pa.struct([_nullable(c) for c in t])
    return pa.field(f.name, t, nullable=True)


def _merge_type(path: str, old: pa.DataType, new: pa.DataType) -> pa.DataType:
    if old.equals(new):
        return old
    if pa.types.is_struct(old) and pa.types.is_struct(new):
        return _merge_struct(path, old, new)
    if pa.types.is_dictionary(new):
        return _merge_type(path, old, new.value_type)
    if pa.types.is_large_string(new) and pa.types.is_string(old):
        return old
    if is_promotion(old, new):
        return new
    if is_promotion(new, old):
        return old  # the batch's values are cast up to the table's type (module doc)
    if (pa.types.is_list(old) or pa.types.is_large_list(old)) and (
        pa.types.is_list(new) or pa.types.is_large_list(new)
    ):
        # elements evolve as columns do: a widened number or a struct's new field is kept,
        # not cast away to the table's older element type
        element = _merge_type(f"{path}.element", old.value_type, new.value_type)
        if element.equals(old.value_type):
            return old
        field = pa.field(old.value_field.name, element, nullable=True)
        return pa.large_list(field) if pa.types.is_large_list(old) else pa.list_(field)
    if pa.types.is_map(old) and pa.types.is_map(new):
        _merge_type(f"{path}.key", old.key_type, new.key_type)
        item = _merge_type(f"{path}.value", old.item_type, new.item_type)
        if item.equals(old.item_type):
            return old
        return pa.map_(old.key_field, pa.field(old.item_field.name, item, nullable=True))
    if pa.types.is_timestamp(old) and pa.types.is_timestamp(new) and old.unit == new.unit:
        return old
    raise SchemaError(f"field {path!r}: type change from {old} to {new} is not allowed")


def _merge_struct(path: str, old: pa.StructType, new: pa.StructType) -> pa.StructType:
    new_by_name = {f.name: f for f in new}
    fields = []
    for f in old:
        if f.name in new_by_name:
            fields.append(pa.field(f.name, _merge_type(f"{path}.{f.name}", f.type, new_by_name[f.name].type)))
        else:
            fields.append(f)
    old_names = {f.name for f in old}
    fields.extend(_nullable(f) for f in new if f.name not in old_names)
    return pa.struct(fields)


def reconcile(
    table_schema: pa.Schema | None,
    incoming: pa.Schema,
    required_fields: tuple[str, ...],
) -> SchemaDecision:
    """Decide the commit's schema or raise :class:`SchemaError` naming the culprit field."""
    incoming = data_schema(incoming)
    for name in required_fields:
        if incoming.get_field_index(name) < 0:
            raise SchemaError(
                f"field {name!r} (record key/partition/ordering field) is missing from the batch"
            )
    if table_schema is None:
        return SchemaDecision(incoming, evolved=False)
    table_schema = data_schema(table_schema)
    by_name = {f.name: f for f in incoming}
    fields: list[pa.Field] = []
    evolved = False
    for f in table_schema:
        new = by_name.get(f.name)
        if new is None:
            fields.append(f)  # missing → filled with nulls by conform()
            continue
        merged = _merge_type(f.name, f.type, new.type)
        evolved |= not merged.equals(f.type)
        fields.append(pa.field(f.name, merged, nullable=True))
    known = set(table_schema.names)
    for f in incoming:
        if f.name not in known:
            fields.append(_nullable(f))
            evolved = True
    return SchemaDecision(pa.schema(fields), evolved)


def conform(batch: pa.Table, schema: pa.Schema, keep: tuple[str, ...] = ()) -> pa.Table:
    """Reorder/cast ``batch`` to ``schema`` (missing columns become nulls).

    Columns named in ``keep`` (our key columns) are carried along after the data.
    """
    cols = [column_as(batch, f) for f in schema]
    names = list(schema.names)
    for k in keep:
        if k in batch.column_names and k not in names:
            cols.append(batch.column(k))
            names.append(k)
    return pa.Table.from_arrays(cols, names=names)
