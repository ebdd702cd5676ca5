"""``${VAR}`` / ``${VAR:-default}`` interpolation over a parsed YAML tree.

Interpolation happens on the parsed tree (not the raw text) so a value can never
inject YAML structure, and every failure names the YAML path it occurred at.
``$${`` escapes a literal ``${``. Keys are never interpolated.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

_PATTERN = re.compile(r"\$\$\{|\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-(.*?))?\}")
_BAD_REFERENCE = re.compile(r"(?<!\$)\$\{(?![A-Za-z_][A-Za-z0-9_]*(?::-.*?)?\})")


@dataclass(frozen=True)
class InterpolationProblem:
    path: tuple[str | int, ...]
    message: str


def interpolate_string(value: str, env: Mapping[str, str]) -> tuple[str, list[str]]:
    """Substitute references in one string; returns the result and error messages."""
    errors: list[str] = []
    if _BAD_REFERENCE.search(value):
        errors.append("malformed ${...} reference: use ${NAME} or ${NAME:-default}")

    def replace(m: re.Match[str]) -> str:
        if m.group(0) == "$${":
            return "${"
        name, default = m.group(1), m.group(2)
        if name in env:
            return env[name]
        if default is not None:
            return default
        errors.append(f"environment variable {name} is not set (and no ${{{name}:-default}} given)")
        return m.group(0)

    return _PATTERN.sub(replace, value), errors


def interpolate(
    data: Any, env: Mapping[str, str], path: tuple[str | int, ...] = ()
) -> tuple[Any, list[InterpolationProblem]]:
    """Return a copy of ``data`` with every string value interpolated, plus all problems."""
    problems: list[InterpolationProblem] = []
    if isinstance(data, str):
        out, errors = interpolate_string(data, env)
        problems.extend(InterpolationProblem(path, e) for e in errors)
        return out, problems
    if isinstance(data, dict):
        result = {}
        for key, value in data.items():
            result[key], sub = interpolate(value, env, (*path, key))
            problems.extend(sub)
        return result, problems
    if isinstance(data, list):
        items = []
        for i, value in enumerate(data):
            item, sub = interpolate(value, env, (*path, i))
            items.append(item)
            problems.extend(sub)
        return items, problems
    return data, problems
