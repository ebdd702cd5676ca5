"""The one camelCase codec: our snake_case dataclass fields <-> Hudi's camelCase keys.

Hudi names every key of its commit metadata (Jackson JSON) and of its Avro plans and
metadata (``org.apache.hudi.avro.model``) in camelCase after the Java field; our
dataclasses name the same things in snake_case. :func:`encode` and :func:`decode` map one
to the other field by field, for the JSON and the Avro forms alike:

- a field's key is :func:`camel` of its name, unless the field says otherwise with
  ``metadata=hudi_key(...)``: another key where Hudi's is not the camelCase of our name
  (``timeTakenInMillis``, ``RollbackRequests``), or ``None`` where the field has no key of
  its own (several fields in one record, a tuple for a record, a value we derive): the
  class then encodes and decodes that field itself;
- nested dataclasses (alone, in lists, as map values) go through their own
  ``to_record``/``from_record`` (:class:`CamelRecord`), lists and dicts are copied;
- a missing or null key reads as the field's default, or the empty value of its type for
  a field without one.
"""

from __future__ import annotations

import dataclasses
import re
import types
import typing
from collections.abc import Mapping
from functools import cache
from typing import Any, TypeVar

T = TypeVar("T")

_KEY = "hudi_key"


def camel(name: str) -> str:
    """``total_log_blocks`` -> ``totalLogBlocks``."""
    head, *rest = name.split("_")
    return head + "".join(p[:1].upper() + p[1:] for p in rest)


@cache
def snake(key: str) -> str:
    """``totalLogBlocks`` -> ``total_log_blocks`` (cached: a commit's metadata has a few
    dozen distinct keys, decoded once per write stat of every commit a writer reads)."""
    return re.sub(r"(?<!^)(?=[A-Z])", "_", key).lower()


def hudi_key(key: str | None) -> dict[str, str | None]:
    """Field metadata for a field whose key is not the camelCase of its name: Hudi's key,
    or ``None`` when the class encodes and decodes the field itself."""
    return {_KEY: key}


def _key_of(f: dataclasses.Field[Any]) -> str | None:
    """The record key of a dataclass field (``None``: the class handles it)."""
    return f.metadata[_KEY] if _KEY in f.metadata else camel(f.name)


@cache
def _record_fields(cls: type) -> tuple[tuple[str, str], ...]:
    """``(field name, record key)`` of ``cls``'s keyed fields, in field order (cached per
    class: a commit encodes one write stat per file group, each with ~30 fields)."""
    return tuple((f.name, key) for f in dataclasses.fields(cls) if (key := _key_of(f)) is not None)


def encode(obj: Any) -> dict[str, Any]:
    """``obj``'s fields that have a key, as a camelCase record in field order."""
    cls = type(obj)
    if not dataclasses.is_dataclass(cls):
        raise TypeError(f"must be called with a dataclass instance, not {obj!r}")
    return {key: _encode_value(getattr(obj, name)) for name, key in _record_fields(cls)}


_SCALARS = (str, int, float, bool, type(None))


def _encode_value(v: Any) -> Any:
    if isinstance(v, _SCALARS):
        return v
    if dataclasses.is_dataclass(v) and not isinstance(v, type):
        return v.to_record() if hasattr(v, "to_record") else encode(v)
    if isinstance(v, (list, tuple, set, frozenset)):
        return [_encode_value(x) for x in v]
    if isinstance(v, Mapping):
        return {k: _encode_value(x) for k, x in v.items()}
    return v


def decode(cls: type[T], record: dict[str, Any], **explicit: Any) -> T:
    """A ``cls`` from a camelCase record. ``explicit``: values of the fields the class
    decodes itself (those without a key, or read differently); every other field with a
    key reads that key, a missing or null one as the field's default."""
    if not dataclasses.is_dataclass(cls):
        raise TypeError(f"must be called with a dataclass type, not {cls!r}")
    kwargs: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        key = _key_of(f)
        if f.name in explicit or key is None or not f.init:
            continue
        v = record.get(key)
        kwargs[f.name] = _default(cls, f) if v is None else _decode_value(_hints(cls)[f.name], v)
    return cls(**kwargs, **explicit)


def _decode_value(hint: Any, v: Any) -> Any:
    hint = _non_null(hint)
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if dataclasses.is_dataclass(hint):
        return _from_record(hint, v)
    if origin is list:
        item = args[0] if args else Any
        return [_from_record(item, x) for x in v] if dataclasses.is_dataclass(item) else list(v)
    if origin is dict:
        value = args[1] if len(args) > 1 else Any
        if dataclasses.is_dataclass(value):
            return {k: _from_record(value, x) for k, x in v.items()}
        return dict(v)
    return v


def _from_record(cls: Any, r: dict[str, Any]) -> Any:
    return cls.from_record(r) if hasattr(cls, "from_record") else decode(cls, r)


def _default(cls: type, f: dataclasses.Field[Any]) -> Any:
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    hint = _non_null(_hints(cls)[f.name])
    return (typing.get_origin(hint) or hint)()  # a required field: "", 0, False, [], {}


def _non_null(hint: Any) -> Any:
    """``X`` of ``X | None``."""
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        return args[0] if len(args) == 1 else Any
    return hint


@cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


class CamelRecord:
    """Mixin for a dataclass that is one Hudi record: ``to_record``/``from_record`` through
    the codec. A class with fields the codec does not map overrides both."""

    def to_record(self) -> dict[str, Any]:
        return encode(self)

    @classmethod
    def from_record(cls: type[T], r: dict[str, Any]) -> T:
        return decode(cls, r)
