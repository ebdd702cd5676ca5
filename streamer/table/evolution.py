"""How a column's type evolves: the rules shared by the writer, which decides a commit's
schema from the table's and a batch's (:mod:`streamer.write.schema`), and the reader, which
reads older files in the table's latest types (:meth:`streamer.read.table.Table.schema`).

* a type widens along Avro's promotions (int→long→float→double, float→double);
* a narrower type than the column's is read as the column's (it holds every value);
* a struct gains the fields a newer type adds, nullable;
* list elements and map values evolve as columns do;
* anything else is a :class:`~streamer.errors.SchemaError` naming the field.
"""

from __future__ import annotations

import pyarrow as pa

from streamer.errors import SchemaError

#: Avro's promotions: the writer's type (key) may be read as any of these reader types.
PROMOTIONS: dict[pa.DataType, tuple[pa.DataType, ...]] = {
    pa.int8(): (pa.int16(), pa.int32(), pa.int64(), pa.float32(), pa.float64()),
    pa.int16(): (pa.int32(), pa.int64(), pa.float32(), pa.float64()),
    pa.int32(): (pa.int64(), pa.float32(), pa.float64()),
    pa.int64(): (pa.float32(), pa.float64()),
    pa.float32(): (pa.float64(),),
    pa.string(): (pa.large_string(),),
    pa.binary(): (pa.large_binary(),),
}


def is_promotion(old: pa.DataType, new: pa.DataType) -> bool:
    """Whether values written as ``old`` may be read as ``new`` (Avro's promotions)."""
    return new in PROMOTIONS.get(old, ())


def nullable(f: pa.Field) -> pa.Field:
    """``f`` and its struct fields, nullable (a column older rows lack reads null)."""
    t = f.type
    if pa.types.is_struct(t):
        t = pa.struct([nullable(c) for c in t])
    return pa.field(f.name, t, nullable=True)


def merge_type(path: str, old: pa.DataType, new: pa.DataType) -> pa.DataType:
    """The type a column of type ``old`` takes when values of type ``new`` come (the
    module doc's rules); :class:`SchemaError` naming ``path`` when none may."""
    if old.equals(new):
        return old
    if pa.types.is_struct(old) and pa.types.is_struct(new):
        return _merge_struct(path, old, new)
    if pa.types.is_dictionary(new):
        return merge_type(path, old, new.value_type)
    if pa.types.is_large_string(new) and pa.types.is_string(old):
        return old
    if is_promotion(old, new):
        return new
    if is_promotion(new, old):
        return old  # a batch's values are cast up to the table's type (streamer.write.schema)
    if (pa.types.is_list(old) or pa.types.is_large_list(old)) and (
        pa.types.is_list(new) or pa.types.is_large_list(new)
    ):
        # elements evolve as columns do: a widened number or a struct's new field is kept,
        # not cast away to the table's older element type
        element = merge_type(f"{path}.element", old.value_type, new.value_type)
        if element.equals(old.value_type):
            return old
        field = pa.field(old.value_field.name, element, nullable=True)
        return pa.large_list(field) if pa.types.is_large_list(old) else pa.list_(field)
    if pa.types.is_map(old) and pa.types.is_map(new):
        merge_type(f"{path}.key", old.key_type, new.key_type)
        item = merge_type(f"{path}.value", old.item_type, new.item_type)
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
            fields.append(pa.field(f.name, merge_type(f"{path}.{f.name}", f.type, new_by_name[f.name].type)))
        else:
            fields.append(f)
    old_names = {f.name for f in old}
    fields.extend(nullable(f) for f in new if f.name not in old_names)
    return pa.struct(fields)
