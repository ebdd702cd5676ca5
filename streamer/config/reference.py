"""The options reference (``docs/options.md``), generated from the config models.

Why generated: option names, types and defaults live only in the pydantic models
(``streamer.config``), and each key's meaning in the ``#:`` comment above it. A
hand-written reference would drift from them; this one is rebuilt with
``python -m streamer.config.reference > docs/options.md`` and a test fails when the
file in the repository is not what the models produce.
"""

from __future__ import annotations

import ast
import inspect
import json
import re
import sys
import textwrap
import types
import typing
from dataclasses import dataclass
from datetime import timedelta
from functools import cache

from pydantic import BaseModel, BeforeValidator, SecretStr
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from streamer.config.pipeline import PipelinesFile
from streamer.config.units import format_duration, format_size, parse_duration, parse_size


@dataclass(frozen=True)
class Option:
    """One YAML key of one section."""

    key: str
    type: str
    default: str
    description: str


@dataclass(frozen=True)
class Section:
    """The keys of one model, at its YAML path (``pipelines[].policies.clean``)."""

    path: str
    summary: str
    options: tuple[Option, ...]


def _validators(metadata: typing.Iterable[object]) -> set[object]:
    return {m.func for m in metadata if isinstance(m, BeforeValidator)}


@cache
def _key_comments(model: type[BaseModel]) -> dict[str, str]:
    """``#:`` comment lines above each annotated attribute of ``model``'s class body."""
    try:
        lines, _ = inspect.getsourcelines(model)
    except (OSError, TypeError):
        return {}
    tree = ast.parse(textwrap.dedent("".join(lines)))
    out: dict[str, str] = {}
    for stmt in tree.body[0].body:  # type: ignore[attr-defined]
        if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
            above: list[str] = []
            i = stmt.lineno - 2  # 0-based index of the line above
            while i >= 0 and lines[i].strip().startswith("#:"):
                above.insert(0, lines[i].strip()[2:].strip())
                i -= 1
            if above:
                out[stmt.target.id] = " ".join(above)
    return out


def _type_name(tp: object) -> str:
    """A YAML-minded spelling of a type: ``size``, ``duration``, ``"a" | "b"``, ``list of string``."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is typing.Annotated:
        funcs = _validators(args[1:])
        if parse_size in funcs:
            return "size"
        if parse_duration in funcs:
            return "duration"
        return _type_name(args[0])
    if origin is typing.Literal:
        return " \\| ".join(f'`"{a}"`' if isinstance(a, str) else f"`{a}`" for a in args)
    if origin in (typing.Union, types.UnionType):
        return " \\| ".join(_type_name(a) for a in args)
    if origin is list:
        return f"list of {_type_name(args[0])}"
    if origin is dict:
        return f"map {_type_name(args[0])} → {_type_name(args[1])}"
    if tp is type(None):
        return "null"
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        return "section"
    names: dict[object, str] = {str: "string", int: "integer", float: "number", bool: "boolean",
                                 SecretStr: "secret string"}
    return names.get(tp, getattr(tp, "__name__", str(tp)))


def _default(field: FieldInfo, type_name: str) -> str:
    if field.default is PydanticUndefined and field.default_factory is None:
        return "**required**"
    value = field.get_default(call_default_factory=True)  # the default, or what its factory makes
    if isinstance(value, BaseModel):
        return "(section defaults)"
    if value is None:
        return "`null`"
    if type_name.startswith("duration"):
        return f"`{format_duration(value if isinstance(value, timedelta) else parse_duration(value))}`"
    if type_name.startswith("size") and isinstance(value, int):
        return f"`{format_size(value)}`"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, list | dict):
        return f"`{json.dumps(value)}`"
    return f"`{value}`"


def _models_in(tp: object) -> list[type[BaseModel]]:
    """The config models a field's type holds (a union's variants, a list's items)."""
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        return [tp]
    return [m for a in typing.get_args(tp) for m in _models_in(a)]


def _first_paragraph(model: type[BaseModel]) -> str:
    doc = inspect.cleandoc(model.__dict__.get("__doc__") or "")  # its own, not StrictModel's
    return _markdown(" ".join(doc.split("\n\n")[0].split()))


def _markdown(text: str) -> str:
    """reST literals and roles in docstrings/comments as Markdown code."""
    return re.sub(r":\w+:`", "`", text.replace("``", "`"))


def _discriminator(model: type[BaseModel]) -> str | None:
    field = model.model_fields.get("type")
    if field is None or typing.get_origin(field.annotation) is not typing.Literal:
        return None
    return typing.get_args(field.annotation)[0]


def sections(root: type[BaseModel] = PipelinesFile) -> list[Section]:
    """Every section under ``root``, depth first, in the models' field order."""
    out: list[Section] = []

    def visit(model: type[BaseModel], path: str) -> None:
        comments = _key_comments(model)
        options = []
        children: list[tuple[type[BaseModel], str]] = []
        for name, field in model.model_fields.items():
            key = field.alias or name
            funcs = _validators(field.metadata)  # a top-level Annotated is unpacked into metadata
            tp = ("size" if parse_size in funcs else "duration" if parse_duration in funcs
                  else _type_name(field.annotation))
            description = field.description or comments.get(name, "")
            nested = _models_in(field.annotation)
            list_like = typing.get_origin(field.annotation) is list
            child_path = f"{path}.{key}{'[]' if list_like else ''}".lstrip(".")
            if nested:
                tp = ("list of " if list_like else "") + "section"
                if len(nested) > 1:
                    tp += " (by `type`)"
                if type(None) in typing.get_args(field.annotation):
                    tp += " \\| null"
                description = (description + " " if description else "") + f"See `{child_path}`."
                children.extend((m, child_path) for m in nested)
            options.append(Option(key, tp, _default(field, tp), _markdown(description)))
        tag = _discriminator(model)
        heading = f"{path} (type: {tag})" if tag and path else path or "(top level)"
        out.append(Section(heading, _first_paragraph(model), tuple(options)))
        for child, child_path in children:
            visit(child, child_path)

    visit(root, "")
    return out


def _cell(text: str) -> str:
    return text.replace("|", "\\|") if "\\|" not in text else text


def render(root: type[BaseModel] = PipelinesFile) -> str:
    """``docs/options.md``: one table per section."""
    lines = [
        "# Pipeline options",
        "",
        "<!-- Generated by `python -m streamer.config.reference > docs/options.md`; do not edit. -->",
        "",
        "Every key a pipeline YAML file accepts, generated from the config models in",
        "`streamer/config/`. Sizes accept bytes or a unit (`16MiB`, `1GB`: SI and binary units mean",
        "what they say); durations accept seconds or a unit (`500ms`, `5s`, `1m`, `2h`, `1d`). Values",
        "may use `${ENV}` and `${ENV:-default}`. `streamer validate FILE` checks a file against all of this.",
        "",
    ]
    for s in sections(root):
        lines += [f"## `{s.path}`", ""]
        if s.summary:
            lines += [s.summary, ""]
        lines += ["| key | type | default | description |", "| --- | --- | --- | --- |"]
        for o in s.options:
            lines.append(f"| `{o.key}` | {_cell(o.type)} | {_cell(o.default)} | {_cell(o.description)} |")
        lines.append("")
    return "\n".join(lines)


if __name__ == "__main__":  # pragma: no cover
    sys.stdout.write(render())
