"""Avro schema <-> Arrow schema, the way Hudi (via Spark's ``SchemaConverters``) spells it.

Why this matters: Hudi stores the writer schema as Avro JSON in log block headers, commit
metadata and ``hoodie.properties``; readers (Hudi, hudi-rs, Trino) resolve records against
it. A schema that differs only in record names or namespaces can break Avro resolution
in Java readers, so we reproduce Spark's naming exactly:

* the top record is ``<table>_record`` in namespace ``hoodie.<table>``;
* a nested struct in field ``f`` is a record named ``f`` in namespace ``<parent ns>.<parent name>``;
  its own children use ``<that ns>.f``; array items and map values keep the field's name;
* a decimal is ``fixed`` named ``fixed`` in namespace ``<ns>.<field>``, size = the minimal bytes
  for its precision, with ``logicalType: decimal``;
* nullable = a union with ``null``. Writer schemas (log headers, commit metadata) put ``null``
  first with ``"default": null``; ``hoodie.table.create.schema`` puts it last without default.

Arrow types chosen to match what hudi-rs returns: ``timestamp-micros`` -> ``timestamp[us, UTC]``,
``local-timestamp-*`` -> naive timestamps, ``date`` -> ``date32``, decimal -> ``decimal128``.

This is the project's only Avro <-> Arrow converter: the table format (log blocks, commit
metadata) and the Avro sources (Kafka, files) all call it, so an Avro type means the same
Arrow type everywhere. Every Avro type, as Arrow:

* ``null``, ``boolean``, ``int``, ``long``, ``float``, ``double``, ``bytes``, ``string`` ->
  ``null``, ``bool``, ``int32``, ``int64``, ``float32``, ``float64``, ``binary``, ``string``;
* ``decimal`` (on ``bytes`` or ``fixed``) -> ``decimal128(p, s)`` (``decimal256`` past 38 digits);
* ``uuid`` on ``string`` -> ``string`` (a ``uuid`` on ``fixed`` stays a ``fixed``);
* ``date`` -> ``date32``; ``time-millis`` -> ``time32[ms]``; ``time-micros`` -> ``time64[us]``;
* ``timestamp-millis``/``-micros`` -> ``timestamp[ms, UTC]``/``timestamp[us, UTC]``;
  ``local-timestamp-millis``/``-micros`` -> ``timestamp[ms]``/``timestamp[us]``;
* ``timestamp-nanos``, ``local-timestamp-nanos``, ``duration`` -> their base type (``int64``,
  ``fixed_size_binary(12)``): fastavro does not decode them, Spark reads them as the base too;
* ``enum`` -> ``string``; ``fixed(n)`` -> ``fixed_size_binary(n)`` (written back as ``fixed``, so
  a table's schema survives a rewrite);
* ``array`` -> ``list<element>``, ``map`` -> ``map<string, value>``: items and values nullable
  only when their union has ``null``; ``record`` -> ``struct``;
* ``[null, T]`` and ``[T, null]`` -> ``T``, nullable.

Other unions (two or more non-null branches) are refused with a :class:`SchemaError`, as are
recursive types. Named types may be referenced by short or full name, and fastavro's parsed
schemas (full names, ``__fastavro_*`` keys) are accepted as well as plain JSON.
Where Spark cannot carry one of these types (millisecond timestamps, times, fixed-size
binary), ``streamer.sources.avro.spark_arrow_schema`` maps it for Spark the way Spark's own Avro
reader does; that is a Spark representation, not a second Avro mapping.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable, Mapping
from typing import Any

import pyarrow as pa

from streamer.errors import SchemaError
from streamer.table import meta_fields

META_FIELDS = (
    meta_fields.COMMIT_TIME,
    meta_fields.COMMIT_SEQNO,
    meta_fields.RECORD_KEY,
    meta_fields.PARTITION_PATH,
    meta_fields.FILE_NAME,
)

_PRIMITIVES: dict[str, pa.DataType] = {
    "null": pa.null(),
    "boolean": pa.bool_(),
    "int": pa.int32(),
    "long": pa.int64(),
    "float": pa.float32(),
    "double": pa.float64(),
    "bytes": pa.binary(),
    "string": pa.string(),
}


# -- Avro -> Arrow ----------------------------------------------------------------------------
def avro_to_arrow(schema: Mapping[str, Any] | str) -> pa.Schema:
    """Arrow schema for a top-level Avro record schema (dict, JSON text or fastavro-parsed)."""
    if isinstance(schema, str):
        try:
            schema = json.loads(schema)
        except json.JSONDecodeError as e:
            raise SchemaError(f"Avro schema is not valid JSON: {e}") from e
    if not isinstance(schema, Mapping) or schema.get("type") != "record":
        raise SchemaError("top-level Avro schema must be a record")
    named: dict[str, Any] = {}
    full = _register(schema, named, "")
    ns = full.rsplit(".", 1)[0] if "." in full else ""
    active = {full}
    fields = [_avro_field(f, named, ns, active) for f in schema["fields"]]
    return pa.schema(fields)


def _avro_field(f: Mapping[str, Any], named: dict[str, Any], ns: str, active: set[str]) -> pa.Field:
    try:
        typ, nullable = _avro_type(f["type"], named, ns, active)
    except SchemaError as e:
        raise SchemaError(f"field {f.get('name')!r}: {e}") from e
    return pa.field(f["name"], typ, nullable=nullable)


def _full_name(t: Mapping[str, Any], ns: str) -> str:
    name = t.get("name", "")
    return name if "." in name else ".".join(p for p in (t.get("namespace", ns), name) if p)


def _register(t: Mapping[str, Any], named: dict[str, Any], ns: str) -> str:
    full = _full_name(t, ns)
    named[full] = t
    named.setdefault(full.rsplit(".", 1)[-1], t)
    return full


def _lookup(name: str, named: dict[str, Any], ns: str) -> tuple[str, Any]:
    """A named type referenced as ``name`` from namespace ``ns`` (Avro: enclosing namespace first)."""
    candidates = [name] if "." in name else [f"{ns}.{name}" if ns else name, name]
    for c in candidates:
        if c in named:
            return c, named[c]
    raise SchemaError(f"unknown Avro type name {name!r}")


def _avro_type(t: Any, named: dict[str, Any], ns: str, active: set[str]) -> tuple[pa.DataType, bool]:
    """(arrow type, nullable) for an Avro type; ``active`` = records being converted (recursion)."""
    if isinstance(t, list):  # union
        branches = [b for b in t if b != "null"]
        nullable = len(branches) != len(t)
        if len(branches) != 1:
            raise SchemaError(f"unsupported Avro union {json.dumps(t)} (only [T, null])")
        typ, _ = _avro_type(branches[0], named, ns, active)
        return typ, nullable
    if isinstance(t, str):
        if t in _PRIMITIVES:
            return _PRIMITIVES[t], t == "null"
        full, ref = _lookup(t, named, ns)
        if full in active:
            raise SchemaError(f"recursive Avro type {full!r} has no Arrow equivalent")
        ref_ns = full.rsplit(".", 1)[0] if "." in full else ""
        return _avro_type(ref, named, ref_ns, active)
    if not isinstance(t, Mapping):
        raise SchemaError(f"unsupported Avro type {t!r}")
    kind = t.get("type")
    logical = t.get("logicalType")
    if isinstance(kind, Mapping | list):  # {"type": {...}}: a wrapped schema
        return _avro_type(kind, named, ns, active)
    if logical == "decimal" and kind in ("fixed", "bytes"):
        if kind == "fixed":
            _register(t, named, ns)
        if "precision" not in t:
            raise SchemaError(f"Avro decimal without a precision: {json.dumps(t)}")
        p, s = int(t["precision"]), int(t.get("scale", 0))
        return (pa.decimal128(p, s) if p <= 38 else pa.decimal256(p, s)), False
    if logical == "date" and kind == "int":
        return pa.date32(), False
    if logical in ("timestamp-micros", "timestamp-millis") and kind == "long":
        return pa.timestamp("us" if logical.endswith("micros") else "ms", tz="UTC"), False
    if logical in ("local-timestamp-micros", "local-timestamp-millis") and kind == "long":
        return pa.timestamp("us" if logical.endswith("micros") else "ms"), False
    if logical == "time-micros" and kind == "long":
        return pa.time64("us"), False
    if logical == "time-millis" and kind == "int":
        return pa.time32("ms"), False
    if logical == "uuid" and kind == "string":
        return pa.string(), False
    if kind in _PRIMITIVES:
        return _PRIMITIVES[kind], kind == "null"
    if kind == "record":
        full = _register(t, named, ns)
        if full in active:
            raise SchemaError(f"recursive Avro type {full!r} has no Arrow equivalent")
        child_ns = full.rsplit(".", 1)[0] if "." in full else ""
        inner = active | {full}
        return pa.struct([_avro_field(f, named, child_ns, inner) for f in t["fields"]]), False
    if kind == "array":
        item, item_null = _avro_type(t["items"], named, ns, active)
        return pa.list_(pa.field("element", item, nullable=item_null)), False
    if kind == "map":
        val, val_null = _avro_type(t["values"], named, ns, active)
        return pa.map_(pa.field("key", pa.string(), nullable=False), pa.field("value", val, nullable=val_null)), False
    if kind == "enum":
        _register(t, named, ns)
        return pa.string(), False
    if kind == "fixed":
        _register(t, named, ns)
        return pa.binary(int(t["size"])), False
    if isinstance(kind, str) and kind not in ("record", "array", "map", "enum", "fixed"):
        return _avro_type(kind, named, ns, active)  # {"type": "SomeNamedType"}
    raise SchemaError(f"unsupported Avro type {json.dumps(t, default=str)}")


# -- Arrow -> Avro ----------------------------------------------------------------------------
def arrow_to_avro(
    schema: pa.Schema,
    record_name: str,
    namespace: str,
    *,
    null_first: bool = True,
) -> dict[str, Any]:
    """Avro record schema for an Arrow schema, named as Spark/Hudi name it.

    ``null_first=True`` gives the writer-schema style (``["null", T]``, ``"default": null``,
    meta fields with ``"doc": ""``) used in log block headers and commit metadata;
    ``False`` gives the ``hoodie.table.create.schema`` style (``[T, "null"]``).
    """
    return {
        "type": "record",
        "name": record_name,
        "namespace": namespace,
        "fields": [_arrow_field(f, namespace, record_name, null_first, top=True) for f in schema],
    }


def _arrow_field(f: pa.Field, ns: str, rec: str, null_first: bool, top: bool = False) -> dict[str, Any]:
    child_ns = f"{ns}.{rec}" if ns else rec
    avro = _arrow_type(f.type, f.name, child_ns, null_first)
    out: dict[str, Any] = {"name": f.name}
    if f.nullable:
        out["type"] = ["null", avro] if null_first else [avro, "null"]
        if top and null_first and f.name in META_FIELDS:
            out["doc"] = ""
        if null_first:
            out["default"] = None
    else:
        out["type"] = avro
    return out


def _nullable(avro: Any, nullable: bool, null_first: bool) -> Any:
    if not nullable:
        return avro
    return ["null", avro] if null_first else [avro, "null"]


def primitive_name(t: pa.DataType) -> str | None:
    """The Avro primitive of a boolean, integer, floating point or string Arrow type
    (``None`` for any other): Parquet's physical types, which the catalogs' type names
    follow too (an integer wider than 32 bits signed is a ``long``)."""
    if pa.types.is_boolean(t):
        return "boolean"
    if pa.types.is_integer(t):
        return "int" if t.bit_width <= 32 and not pa.types.is_uint32(t) else "long"
    if pa.types.is_float16(t) or pa.types.is_float32(t):
        return "float"
    if pa.types.is_float64(t):
        return "double"
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t):
        return "string"
    return None


def _arrow_type(t: pa.DataType, name: str, ns: str, null_first: bool) -> Any:
    """Avro type for Arrow type ``t`` of field ``name`` whose record namespace is ``ns``."""
    primitive = primitive_name(t)
    if primitive is not None:
        return primitive
    if pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_binary_view(t):
        return "bytes"
    if pa.types.is_fixed_size_binary(t) and not pa.types.is_decimal(t):
        return {"type": "fixed", "name": "fixed", "namespace": f"{ns}.{name}", "size": t.byte_width}
    if pa.types.is_decimal(t):
        return {
            "type": "fixed",
            "name": "fixed",
            "namespace": f"{ns}.{name}",
            "size": min_bytes_for_precision(t.precision),
            "logicalType": "decimal",
            "precision": t.precision,
            "scale": t.scale,
        }
    if pa.types.is_date(t):
        return {"type": "int", "logicalType": "date"}
    if pa.types.is_timestamp(t):
        unit = "millis" if t.unit in ("s", "ms") else "micros"
        prefix = "timestamp" if t.tz is not None else "local-timestamp"
        return {"type": "long", "logicalType": f"{prefix}-{unit}"}
    if pa.types.is_time(t):
        if t.unit in ("s", "ms"):
            return {"type": "int", "logicalType": "time-millis"}
        return {"type": "long", "logicalType": "time-micros"}
    if pa.types.is_struct(t):
        return {
            "type": "record",
            "name": name,
            "namespace": ns,
            "fields": [_arrow_field(t.field(i), ns, name, null_first) for i in range(t.num_fields)],
        }
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        vf = t.value_field
        return {"type": "array", "items": _nullable(_arrow_type(vf.type, name, ns, null_first), vf.nullable, null_first)}
    if pa.types.is_map(t):
        if not (pa.types.is_string(t.key_type) or pa.types.is_large_string(t.key_type)):
            raise SchemaError(f"field {name!r}: Avro maps need string keys, got {t.key_type}")
        it = t.item_field
        return {"type": "map", "values": _nullable(_arrow_type(it.type, name, ns, null_first), it.nullable, null_first)}
    if pa.types.is_dictionary(t):
        return _arrow_type(t.value_type, name, ns, null_first)
    raise SchemaError(f"field {name!r}: Arrow type {t} has no Avro equivalent")


def min_bytes_for_precision(precision: int) -> int:
    """Smallest two's-complement byte count holding ``10**precision - 1`` (Spark's rule)."""
    n = 1
    while 2 ** (8 * n - 1) < 10**precision:
        n += 1
    return n


# -- records ----------------------------------------------------------------------------------
def as_record(value: object, where: str) -> dict[str, Any]:
    """A value fastavro decoded with a record schema. fastavro types a decoded value as any
    Avro value; a record's is a dict, and anything else is refused naming ``where``."""
    if not isinstance(value, dict):
        raise SchemaError(f"{where}: expected an Avro record, decoded a {type(value).__name__}")
    return value


def avro_records_to_arrow(records: Iterable[Mapping[str, Any]], pa_schema: pa.Schema) -> pa.Table:
    """Arrow table from records decoded by fastavro (logical types already Python objects).

    The one record conversion, for log blocks and the Avro sources alike. A missing field
    is null. Column-wise: values are gathered per top-level field and converted by Arrow in
    one call each, which is much faster than ``from_pylist`` row dicts for wide schemas.
    fastavro gives maps as dicts (Arrow wants pairs) and ``uuid`` strings as ``uuid.UUID``
    objects (Arrow wants text); both are rewritten before Arrow sees them.
    """
    rows = records if isinstance(records, list) else list(records)
    cols = []
    for f in pa_schema:
        name = f.name
        values = [r.get(name) for r in rows]
        if pa.types.is_map(f.type):
            values = [list(v.items()) if isinstance(v, Mapping) else v for v in values]
        elif has_nested_map(f.type):
            values = [maps_to_pairs(v, f.type) for v in values]
        try:
            try:
                cols.append(pa.array(values, type=f.type))
            except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError):
                if not any(_has_uuid(v) for v in values):
                    raise
                cols.append(pa.array([_uuids_to_str(v) for v in values], type=f.type))
        except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError) as e:
            raise SchemaError(f"field {name!r}: values do not match {f.type}: {e}") from e
    return pa.Table.from_arrays(cols, schema=pa_schema)


def _has_uuid(v: Any) -> bool:
    if isinstance(v, uuid.UUID):
        return True
    if isinstance(v, Mapping):
        return any(_has_uuid(x) for x in v.values())
    if isinstance(v, list | tuple):
        return any(_has_uuid(x) for x in v)
    return False


def _uuids_to_str(v: Any) -> Any:
    if isinstance(v, uuid.UUID):
        return str(v)
    if isinstance(v, Mapping):
        return {k: _uuids_to_str(x) for k, x in v.items()}
    if isinstance(v, list | tuple):
        return type(v)(_uuids_to_str(x) for x in v)
    return v


def has_nested_map(t: pa.DataType) -> bool:
    """Whether Avro-decoded values of ``t`` need :func:`maps_to_pairs` before Arrow takes them."""
    if pa.types.is_map(t):
        return True
    if pa.types.is_struct(t):
        return any(has_nested_map(t.field(i).type) for i in range(t.num_fields))
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return has_nested_map(t.value_type)
    return False


def maps_to_pairs(v: Any, t: pa.DataType) -> Any:
    """Avro maps (dicts) as the ``[(key, value)]`` pairs Arrow builds map arrays from."""
    if v is None:
        return None
    if pa.types.is_map(t):
        items = v.items() if isinstance(v, Mapping) else v
        return [(k, maps_to_pairs(x, t.item_type)) for k, x in items]
    if pa.types.is_struct(t):
        return {
            t.field(i).name: maps_to_pairs(v.get(t.field(i).name), t.field(i).type)
            for i in range(t.num_fields)
        }
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return [maps_to_pairs(x, t.value_type) for x in v]
    return v
