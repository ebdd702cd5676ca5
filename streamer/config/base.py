"""The base every config model shares, and how secrets are typed.

``extra="forbid"`` makes a typo an error that names the key instead of a silently
ignored option. Secrets are :class:`pydantic.SecretStr`: their ``repr``/``str`` and
JSON dumps show ``**********``; only :meth:`~pydantic.SecretStr.get_secret_value`
reveals them, at the one place that hands them to a client.
"""

from __future__ import annotations

import re
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, SecretStr

#: Keys whose values are secrets wherever they appear (free-form option maps included).
SECRET_KEY_PATTERN = re.compile(r"password|secret|token|credential|jaas|private[._-]?key", re.I)


def is_secret_key(key: str) -> bool:
    return bool(SECRET_KEY_PATTERN.search(key))


class StrictModel(BaseModel):
    """Immutable, typo-proof config model."""

    model_config = ConfigDict(extra="forbid", frozen=True, validate_default=True)


def _option_map(value: Any) -> Any:
    """Stringify a free-form option map (YAML gives ints/bools) and wrap secret-looking values."""
    if not isinstance(value, dict):
        return value
    out: dict[str, Any] = {}
    for k, v in value.items():
        if isinstance(v, bool):
            v = str(v).lower()
        elif isinstance(v, int | float):
            v = str(v)
        if isinstance(v, str) and is_secret_key(str(k)):
            v = SecretStr(v)
        out[str(k)] = v
    return out


#: A free-form ``{key: value}`` map of engine options; values under secret-looking keys
#: (``*password*``, ``*secret*``, ...) become :class:`SecretStr`.
OptionMap = Annotated[dict[str, str | SecretStr], BeforeValidator(_option_map)]


def reveal(options: dict[str, str | SecretStr]) -> dict[str, str]:
    """Plain strings for a client library; never log the result."""
    return {k: v.get_secret_value() if isinstance(v, SecretStr) else v for k, v in options.items()}
