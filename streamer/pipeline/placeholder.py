"""Debezium's unavailable-value placeholder, in the form it takes in a column of each type.

Debezium's Postgres connector sends an unchanged TOASTed value as a placeholder of the
column's own type (``UnchangedToastedPlaceholder``, read in the 3.6.1 connector's bytecode):

* text, ``json``, ``xml``: the placeholder's text; ``bytea``: its bytes, which a converter
  without schemas renders as base64 (hexadecimal under ``binary.handling.mode: hex``);
* ``text[]``, ``varchar[]``, ``json[]``...: a one-element array of the text; ``bytea[]``: of
  the bytes (base64 text without schemas); ``uuid[]``: of ``UUID.nameUUIDFromBytes(bytes)``;
* ``int[]`` and ``bigint[]``: the bytes themselves, as numbers (Java's signed bytes);
* ``hstore``: the map ``{text: text}``, or its JSON text under the default
  ``hstore.handling.mode: json``.

A ``date[]`` column's placeholder is the int array too, which the connector then fails to
convert: the event carries null, and nothing here can tell that null from a real one.
"""

from __future__ import annotations

import base64
import hashlib
import json
import uuid
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

#: Debezium's default ``unavailable.value.placeholder``.
PLACEHOLDER = "__debezium_unavailable_value"


def _texty(t: pa.DataType) -> bool:
    return bool(pa.types.is_string(t) or pa.types.is_large_string(t))


def _bytesy(t: pa.DataType) -> bool:
    return bool(pa.types.is_binary(t) or pa.types.is_large_binary(t))


def _listy(t: pa.DataType) -> bool:
    return bool(pa.types.is_list(t) or pa.types.is_large_list(t))


@dataclass(frozen=True)
class Placeholder:
    """The value Debezium sends for an unchanged TOASTed value, as text and as bytes.

    Its connector setting ``unavailable.value.placeholder`` may change it: a ``hex:``
    prefix gives the bytes in hexadecimal, else they are the text's UTF-8 bytes; text
    columns carry those bytes as a string (Debezium's ``new String(bytes)``)."""

    text: str
    data: bytes

    @classmethod
    def of(cls, setting: str = PLACEHOLDER) -> Placeholder:
        """The placeholder of the connector setting ``setting`` (raises ``ValueError`` for
        bad hexadecimal or an empty value)."""
        if setting.startswith("hex:"):
            data = bytes.fromhex(setting[4:])
            text = data.decode("utf-8", errors="replace")
        else:
            text, data = setting, setting.encode()
        if not data:
            raise ValueError("the unavailable-value placeholder must not be empty")
        return cls(text, data)

    def forms(self, t: pa.DataType) -> list[Any]:
        """The placeholder's forms in a column of Arrow type ``t``, as Python values (see
        the module doc); none for a type Debezium never fills with it."""
        encoded = [base64.b64encode(self.data).decode(), self.data.hex()]
        if _texty(t):
            return [self.text, json.dumps({self.text: self.text}, separators=(",", ":"), ensure_ascii=False),
                    *encoded]
        if _bytesy(t):
            return [self.data]
        if pa.types.is_map(t):
            return [[(self.text, self.text)]] if _texty(t.key_type) and _texty(t.item_type) else []
        if not _listy(t):
            return []
        element = t.value_type
        if _texty(element):
            named = str(uuid.UUID(bytes=hashlib.md5(self.data).digest(), version=3))  # Java's nameUUIDFromBytes
            return [[self.text], [named], *([e] for e in encoded)]
        if _bytesy(element):
            return [[self.data]]
        if pa.types.is_signed_integer(element):
            return [[b - 256 if b > 127 else b for b in self.data]]
        return []

    def matches(self, values: pa.Array | pa.ChunkedArray) -> np.ndarray:
        """Whether each of ``values`` is the placeholder, in any of its forms (nulls are not)."""
        if isinstance(values, pa.ChunkedArray):
            values = values.combine_chunks()
        out = np.zeros(len(values), dtype=bool)
        for form in self.forms(values.type):
            out |= _equal(values, form)
        return out


def _equal(values: pa.Array, form: Any) -> np.ndarray:
    """Whether each of ``values`` equals ``form``: a scalar's value, a list's elements or a
    map's entries (``(key, item)`` pairs), compared column-wise."""
    t = values.type
    if not (_listy(t) or pa.types.is_map(t)):
        return pc.fill_null(pc.equal(values, pa.scalar(form, t)), False).to_numpy(zero_copy_only=False)
    offsets = values.offsets.to_numpy(zero_copy_only=False)
    valid = values.is_valid().to_numpy(zero_copy_only=False)
    at = np.nonzero(valid & (np.diff(offsets) == len(form)))[0]
    children = [values.keys, values.items] if pa.types.is_map(t) else [values.values]
    for j, element in enumerate(form):
        parts = element if pa.types.is_map(t) else (element,)
        for child, part in zip(children, parts, strict=True):
            if not len(at):
                break
            got = child.take(pa.array(offsets[at] + j))
            at = at[pc.fill_null(pc.equal(got, pa.scalar(part, child.type)), False).to_numpy(zero_copy_only=False)]
    out = np.zeros(len(values), dtype=bool)
    out[at] = True
    return out
