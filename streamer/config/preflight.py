"""Checks of a well-formed pipeline against the world: its SQL parses, its folders exist.

Pydantic checks shape only; ``SELEC *`` is a fine string and ``landing/payments`` a fine
path. ``streamer validate`` runs these checks too, so a typo is reported with file, line
and YAML path before anything runs: SQL through Spark's own parser (parse only - no
table or view needs to exist), a missing source folder as a *warning* (it may be
created later; ``validate`` still exits 0). Before a run, a missing folder is an error
(:func:`require_source_folders`): the run would otherwise report "no new data" forever.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol

from streamer.config.pipeline import PipelineConfig
from streamer.config.transforms import (
    INPUT_PLACEHOLDER,
    CastTransformConfig,
    DeriveTransformConfig,
    FilterTransformConfig,
    PythonTransformConfig,
    SqlTransformConfig,
)
from streamer.errors import ConfigError

Loc = tuple[str | int, ...]

#: What ``{input}`` becomes for parsing (any identifier: nothing is resolved).
PARSE_VIEW_NAME = "batch_input"


class SqlSyntax(Protocol):
    """A SQL parser; each method returns the parse error, or None when the text parses."""

    def query(self, sql: str) -> str | None: ...

    def expression(self, text: str) -> str | None: ...

    def data_type(self, text: str) -> str | None: ...

    def table_schema(self, ddl: str) -> str | None: ...


@dataclass(frozen=True)
class Finding:
    """One thing wrong, at a YAML location inside the pipeline file."""

    loc: Loc
    message: str
    severity: str = "error"  # "error" | "warning"
    #: Lines below the YAML key where the fault is (a multi-line ``query: |`` block).
    line_offset: int = 0


def sql_findings(p: PipelineConfig, loc: Loc, parser: SqlSyntax) -> list[Finding]:
    """Every SQL text of a pipeline that Spark's parser refuses (query, condition, expression, type)."""
    out: list[Finding] = []
    for i, t in enumerate(p.transforms):
        at = (*loc, "transforms", i)
        if isinstance(t, SqlTransformConfig):
            err = parser.query(t.query.replace(INPUT_PLACEHOLDER, PARSE_VIEW_NAME))
            if err:
                out.append(Finding((*at, "query"), f"Spark SQL does not parse: {err}",
                                   line_offset=_sql_line(err) if "\n" in t.query.strip() else 0))
        elif isinstance(t, FilterTransformConfig):
            err = parser.expression(t.condition)
            out += [Finding((*at, "condition"), f"Spark SQL does not parse: {err}")] if err else []
        elif isinstance(t, DeriveTransformConfig):
            for column, expr in t.columns.items():
                err = parser.expression(expr)
                out += [Finding((*at, "columns", column), f"Spark SQL does not parse: {err}")] if err else []
        elif isinstance(t, CastTransformConfig):
            for column, type_name in t.columns.items():
                err = parser.data_type(type_name)
                out += [Finding((*at, "columns", column), f"not a Spark SQL type: {err}")] if err else []
    ddl = getattr(p.source, "schema_ddl", None)
    if ddl:
        err = parser.table_schema(ddl)
        out += [Finding((*loc, "source", "schema"), f"not a Spark DDL schema: {err}")] if err else []
    return out


def callable_findings(p: PipelineConfig, loc: Loc) -> list[Finding]:
    """Every ``python`` step whose function or class cannot be imported (its module runs:
    the same import the pipeline makes at its first batch)."""
    out: list[Finding] = []
    for i, t in enumerate(p.transforms):
        if isinstance(t, PythonTransformConfig):
            try:
                t.resolve()
            except Exception as e:  # noqa: BLE001 - the user's module may raise anything on import
                out.append(Finding((*loc, "transforms", i, "callable"), f"{type(e).__name__}: {e}"))
    return out


def _sql_line(error: str) -> int:
    """Spark's ``(line N, pos M)``: the line of a block-scalar query, counted from its key."""
    import re

    m = re.search(r"\(line (\d+), pos \d+\)", error)
    return int(m.group(1)) if m else 0


def folder_findings(p: PipelineConfig, loc: Loc) -> list[Finding]:
    """A files source whose local folder does not exist (or is a file): a warning.

    Remote folders (``s3://``...) are not checked: that needs credentials and network."""
    problem = _folder_problem(p)
    if problem is None:
        return []
    return [Finding((*loc, "source", "path"), f"{problem}; until it exists the pipeline finds no files "
                    "to read", "warning")]


def require_source_folders(configs: Sequence[PipelineConfig]) -> None:
    """Raise :class:`ConfigError` naming every files source whose local folder is missing.

    Called before a run: a run would poll an absent folder and say "no new data" forever."""
    missing = [f"pipeline {p.name}: source.path: {problem}" for p in configs
               if (problem := _folder_problem(p)) is not None]
    if missing:
        raise ConfigError("source folder(s) missing - create them or fix source.path:\n"
                          + "\n".join(f"  {m}" for m in missing))


def _folder_problem(p: PipelineConfig) -> str | None:
    from streamer.fs import resolve

    if p.source.type != "files":
        return None
    path = p.source.path
    if "://" in path and not path.lower().startswith("file:"):
        return None
    fs, local = resolve(path)
    if not fs.exists(local):
        shown = path if path == local else f"{path} ({local})"
        return f"folder {shown} does not exist"
    if not fs.is_dir(local):
        return f"{path} is a file, not a folder"
    return None


def findings(pipelines: Iterable[tuple[Loc, PipelineConfig]], parser: SqlSyntax | None,
             folders: bool) -> list[Finding]:
    out: list[Finding] = []
    for loc, p in pipelines:
        if parser is not None:
            out += sql_findings(p, loc, parser)
        out += callable_findings(p, loc)
        if folders:
            out += folder_findings(p, loc)
    return out
