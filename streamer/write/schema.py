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

import re
from dataclasses import dataclass

import pyarrow as pa

from streamer.errors import SchemaError
from streamer.table import meta_fields
from streamer.table.avro_schema import arrow_to_avro, avro_to_arrow
from streamer.table.evolution import merge_type, nullable
from streamer.table.merge import column_as

META_COLUMNS = meta_fields.META_COLUMNS
#: An Avro name (the Avro specification's ``[A-Za-z_][A-Za-z0-9_]*``).
_AVRO_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")

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
    return pa.schema([nullable(f) for f in avro_to_arrow(avro)])


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
        _refuse_new_names(pa.schema([]), list(incoming))
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
        merged = merge_type(f.name, f.type, new.type)
        evolved |= not merged.equals(f.type)
        fields.append(pa.field(f.name, merged, nullable=True))
    known = set(table_schema.names)
    added = [f for f in incoming if f.name not in known]
    _refuse_new_names(pa.schema(fields), added)
    fields += [nullable(f) for f in added]
    return SchemaDecision(pa.schema(fields), evolved or bool(added))


def _refuse_new_names(schema: pa.Schema, added: list[pa.Field]) -> None:
    """Refuse the names of columns ``added`` to ``schema`` that no Hudi reader could read
    (an invalid Avro name, a case twin). Names a table already has are left alone:
    refusing them would lock it."""
    for f in added:
        _refuse_unnamable(f, f.name)
    _refuse_case_twins(schema, added)


def _refuse_unnamable(f: pa.Field, where: str) -> None:
    """Refuse a field (or one nested in it) whose name is not an Avro name (``my col``,
    ``user.id``): the table's schema is Avro in every commit, and Apache Hudi's and
    hudi-rs's Avro parsers refuse such a name, so neither could read the table."""
    if not _AVRO_NAME.fullmatch(f.name):
        raise SchemaError(f"field {where!r}: not an Avro name (letters, digits and _, not starting with a digit), "
                          "so Hudi's readers could not read the table - rename it (a transform's select; for "
                          "Debezium, the connector's field.name.adjustment.mode=avro)")
    t = f.type
    if pa.types.is_struct(t):
        for i in range(t.num_fields):
            _refuse_unnamable(t.field(i), f"{where}.{t.field(i).name}")
    elif pa.types.is_list(t) or pa.types.is_large_list(t):
        _refuse_unnamable(pa.field(_ITEM, t.value_type), where)
    elif pa.types.is_map(t):
        _refuse_unnamable(pa.field(_ITEM, t.item_type), where)


#: The stand-in name of a list's or map's values (not a name Avro stores).
_ITEM = "item"


def _refuse_case_twins(schema: pa.Schema, added: list[pa.Field]) -> None:
    """Refuse a column ``added`` to ``schema`` whose name differs only in case from another
    (``v`` and ``V``): Spark and Hive resolve names case-insensitively, so they would read
    one ambiguous column, and hudi-rs and our reader would disagree on which holds a row's
    value. Twins a table already has are left alone: refusing them would lock it."""
    seen = {name.lower(): name for name in schema.names}
    for name in (f.name for f in added):
        twin = seen.setdefault(name.lower(), name)
        if twin != name:
            raise SchemaError(f"field {name!r}: its name and {twin!r} differ only in case, and Spark and Hive "
                              "read names case-insensitively - rename one of them")


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
