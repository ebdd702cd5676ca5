"""Human units in YAML: sizes (``16MiB``, ``1GB``, ``1048576``) and durations (``5s``, ``1m``).

Sizes are pydantic's :class:`~pydantic.ByteSize`: operators copy values from Hudi docs and
dashboards in both SI (``GB`` = 10^9) and binary (``GiB`` = 2^30) spellings, and ByteSize
keeps them apart (silently treating one as the other is a 7% error on every threshold).
We only wrap it to refuse booleans (YAML's ``yes``) and to name the accepted units in the
error, which the loader reports with file, line and YAML path.
"""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Annotated

from pydantic import BeforeValidator, ByteSize, PlainSerializer, TypeAdapter, ValidationError

_BYTE_SIZE = TypeAdapter(ByteSize)

_DURATION_UNITS: dict[str, float] = {
    "ms": 0.001,
    "s": 1.0,
    "sec": 1.0,
    "m": 60.0,
    "min": 60.0,
    "h": 3600.0,
    "d": 86400.0,
}

_NUMBER_UNIT = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*$")


def parse_size(value: object) -> int:
    """Bytes from an int or a string like ``16MiB``/``1GB``/``512``; raises ``ValueError``."""
    if isinstance(value, bool):
        raise ValueError("a size must be a number of bytes or a string like '16MiB', not a boolean")
    if isinstance(value, int | float) and value < 0:
        raise ValueError("a size cannot be negative")
    try:
        return int(_BYTE_SIZE.validate_python(value))
    except ValidationError:
        raise ValueError(
            f"invalid size {value!r}: use bytes (1048576) or a unit: B, KB, MB, GB, TB, KiB, MiB, GiB, TiB"
        ) from None


def parse_duration(value: object) -> timedelta:
    """A duration from seconds (``600``) or a string like ``500ms``/``5s``/``1m``/``2h``."""
    if isinstance(value, timedelta):
        return value
    if isinstance(value, bool):
        raise ValueError("a duration must be seconds or a string like '5s', not a boolean")
    if isinstance(value, int | float):
        if value < 0:
            raise ValueError("a duration cannot be negative")
        return timedelta(seconds=value)
    if isinstance(value, str):
        m = _NUMBER_UNIT.match(value)
        if m:
            unit = m.group(2).lower() or "s"
            if unit in _DURATION_UNITS:
                return timedelta(seconds=float(m.group(1)) * _DURATION_UNITS[unit])
    raise ValueError(f"invalid duration {value!r}: use seconds (600) or a unit: ms, s, m, h, d (e.g. '5s')")


def format_duration(value: timedelta) -> str:
    """The shortest exact spelling (``5s``, ``500ms``, ``1m``), used in summaries and dumps."""
    ms = round(value.total_seconds() * 1000)
    for unit, factor in (("d", 86_400_000), ("h", 3_600_000), ("m", 60_000), ("s", 1000)):
        if ms and ms % factor == 0:
            return f"{ms // factor}{unit}"
    return f"{ms}ms"


def format_size(value: int) -> str:
    for unit, factor in (("TiB", 1024**4), ("GiB", 1024**3), ("MiB", 1024**2), ("KiB", 1024)):
        if value and value % factor == 0:
            return f"{value // factor}{unit}"
    return str(value)


#: Bytes; YAML may say ``16MiB``, ``1GB`` or ``1048576``.
Size = Annotated[int, BeforeValidator(parse_size)]

#: A :class:`~datetime.timedelta`; YAML may say ``5s``, ``500ms``, ``1m`` or ``600``.
Duration = Annotated[
    timedelta,
    BeforeValidator(parse_duration),
    PlainSerializer(format_duration, return_type=str, when_used="json"),
]
