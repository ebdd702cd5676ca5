"""Load and validate pipeline YAML files, reporting every problem with file, line and path.

A file holds ``pipelines: [...]``; a folder means every ``*.yaml``/``*.yml`` in it
(multi-table). The steps are: parse YAML keeping each node's line, interpolate
``${ENV}`` values, validate with pydantic, then check what only makes sense across
pipelines or needs the filesystem (unique names and target paths, schema files exist).
Nothing is logged or returned that could contain a secret: messages are built from
the validation error *type*; the offending input is echoed only for enum-like fields
(``mode: sometimes``), never under a secret-looking key.
"""

from __future__ import annotations

import difflib
import logging
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, get_args

import yaml
from pydantic import BaseModel, ValidationError

from streamer.config import pipeline as _pipeline
from streamer.config import policies as _policies
from streamer.config import sources as _sources
from streamer.config import target as _target
from streamer.config import transforms as _transforms
from streamer.config.base import is_secret_key
from streamer.config.env import interpolate
from streamer.config.pipeline import PipelineConfig, PipelinesFile
from streamer.config.preflight import SqlSyntax
from streamer.config.preflight import findings as preflight_findings
from streamer.config.problems import ConfigProblem, ConfigValidationError

log = logging.getLogger(__name__)

Loc = tuple[str | int, ...]
YAML_SUFFIXES = (".yaml", ".yml")


# -- public API -------------------------------------------------------------------------


def load_pipelines(path: str | os.PathLike[str], env: Mapping[str, str] | None = None) -> list[PipelineConfig]:
    """All pipelines of a YAML file or a folder of them; raises
    :class:`~streamer.config.problems.ConfigValidationError` listing every problem."""
    pipelines, problems = _load(Path(path), os.environ if env is None else env)
    if any(p.is_error for p in problems):
        raise ConfigValidationError(problems)
    log.info("loaded %d pipeline(s) from %s", len(pipelines), path)
    return pipelines


def validate_file(path: str | os.PathLike[str], env: Mapping[str, str] | None = None) -> list[ConfigProblem]:
    """Every problem in a YAML file or folder (empty list = valid)."""
    return _load(Path(path), os.environ if env is None else env)[1]


def check_pipelines(
    path: str | os.PathLike[str],
    env: Mapping[str, str] | None = None,
    *,
    sql: SqlSyntax | None = None,
    folders: bool = False,
) -> tuple[list[PipelineConfig], list[ConfigProblem]]:
    """Pipelines and problems in one pass (pipelines empty if there is any error).

    ``sql``: also parse every SQL text with this parser (Spark's, see
    :func:`streamer.spark.sql_syntax`); ``folders``: also warn about files-source folders
    that do not exist. Both run only on files that are otherwise valid."""
    return _load(Path(path), os.environ if env is None else env, Preflight(sql, folders))


def parse_pipelines(
    text: str,
    file: str = "<string>",
    env: Mapping[str, str] | None = None,
    base_dir: str | os.PathLike[str] | None = None,
) -> tuple[list[PipelineConfig], list[ConfigProblem]]:
    """Parse YAML text; relative schema files resolve against ``base_dir`` (default: cwd)."""
    env = os.environ if env is None else env
    pipelines, problems = _parse_one(text, file, env, Path(base_dir or "."))
    problems += _cross_pipeline_problems([(file, i, p) for i, p in enumerate(pipelines)])
    return (pipelines if not problems else []), sorted(problems, key=_problem_order)


# -- files and folders ------------------------------------------------------------------


@dataclass(frozen=True)
class Preflight:
    """Which checks beyond shape to run (see :mod:`streamer.config.preflight`)."""

    sql: SqlSyntax | None = None
    folders: bool = False


def _load(path: Path, env: Mapping[str, str], checks: Preflight = Preflight()
          ) -> tuple[list[PipelineConfig], list[ConfigProblem]]:
    if path.is_dir():
        files = sorted(p for p in path.iterdir() if p.is_file() and p.suffix in YAML_SUFFIXES)
        if not files:
            return [], [ConfigProblem(str(path), None, "", "folder has no *.yaml or *.yml files")]
    elif path.is_file():
        files = [path]
    else:
        return [], [ConfigProblem(str(path), None, "", "no such file or folder")]

    found: list[tuple[str, int, PipelineConfig]] = []
    problems: list[ConfigProblem] = []
    for f in files:
        try:
            text = f.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as e:
            problems.append(ConfigProblem(str(f), None, "", f"cannot read file: {e}"))
            continue
        pipelines, file_problems = _parse_one(text, str(f), env, f.parent, checks)
        problems += file_problems
        found += [(str(f), i, p) for i, p in enumerate(pipelines)]
    problems += _cross_pipeline_problems(found)
    problems.sort(key=_problem_order)
    if any(p.is_error for p in problems):
        return [], problems
    return [p for _, _, p in found], problems


def _problem_order(p: ConfigProblem) -> tuple[str, int, str]:
    return (p.file, p.line or 0, p.path)


# -- one document -----------------------------------------------------------------------


def _parse_one(
    text: str, file: str, env: Mapping[str, str], base_dir: Path, checks: Preflight = Preflight()
) -> tuple[list[PipelineConfig], list[ConfigProblem]]:
    if len(text) > MAX_YAML_CHARS:
        return [], [ConfigProblem(file, None, "", f"file is {len(text):,} characters; a pipeline "
                                  f"file may have at most {MAX_YAML_CHARS:,}")]
    try:
        data, lines, dup_problems = _parse_yaml(text)
    except yaml.YAMLError as e:
        return [], [_yaml_problem(file, e)]
    except _TooManyNodes as e:
        return [], [ConfigProblem(file, e.line, "", str(e))]
    problems = [ConfigProblem(file, lines.get(loc), _format_path(loc), msg) for loc, msg in dup_problems]
    if data is None:
        return [], [ConfigProblem(file, None, "", "file is empty; expected 'pipelines: [...]'")]

    data, interp = interpolate(data, env)
    bad_paths = {ip.path for ip in interp}
    problems += [ConfigProblem(file, _line_of(lines, ip.path), _format_path(ip.path), ip.message) for ip in interp]

    try:
        parsed = PipelinesFile.model_validate(data)
    except ValidationError as e:
        for err in e.errors(include_url=False):
            loc, message = _describe(err, data)
            if any(loc[: len(b)] == b for b in bad_paths):
                continue  # already reported as an interpolation problem
            problems.append(ConfigProblem(file, _line_of(lines, loc), _format_path(loc), message))
        return [], problems

    pipelines = []
    for i, p in enumerate(parsed.pipelines):
        p, file_problems = _resolve_files(p, ("pipelines", i), base_dir)
        problems += [ConfigProblem(file, _line_of(lines, loc), _format_path(loc), m) for loc, m in file_problems]
        pipelines.append(p)
    if not problems and (checks.sql is not None or checks.folders):
        for f in preflight_findings([(("pipelines", i), p) for i, p in enumerate(pipelines)],
                                    checks.sql, checks.folders):
            line = _line_of(lines, f.loc)
            problems.append(ConfigProblem(file, line + f.line_offset if line else line, _format_path(f.loc),
                                          f.message, f.severity))
    return ([] if any(p.is_error for p in problems) else pipelines), problems


#: Limits that keep ``validate`` and ``run`` from being held by a hostile or broken file.
MAX_YAML_CHARS = 1_000_000
MAX_YAML_NODES = 100_000


class _TooManyNodes(Exception):
    def __init__(self, message: str, line: int) -> None:
        super().__init__(message)
        self.line = line


def _parse_yaml(text: str) -> tuple[Any, dict[Loc, int], list[tuple[Loc, str]]]:
    """YAML → (data, {path: line}, duplicate-key problems). Raises ``yaml.YAMLError``."""
    loader = yaml.SafeLoader(text)
    try:
        node = loader.get_single_node()
        data = loader.construct_document(node) if node is not None else None
    finally:
        loader.dispose()
    lines: dict[Loc, int] = {}
    dups: list[tuple[Loc, str]] = []
    visited = [0]

    def walk(n: yaml.Node, loc: Loc) -> None:
        # aliases make a document a graph: walked (and later validated) as a tree, a few
        # lines of nested aliases expand to billions of nodes ("billion laughs")
        visited[0] += 1
        if visited[0] > MAX_YAML_NODES:
            raise _TooManyNodes(
                f"the document expands to more than {MAX_YAML_NODES:,} values (nested aliases?); "
                "a pipeline file is refused beyond that", n.start_mark.line + 1)
        lines[loc] = n.start_mark.line + 1
        if isinstance(n, yaml.MappingNode):
            seen: set[Any] = set()
            for k, v in n.value:
                key = k.value if isinstance(k, yaml.ScalarNode) else str(k.value)
                if key in seen:
                    dups.append(((*loc, key), f"duplicate key {key!r} (the last one would win)"))
                seen.add(key)
                lines[(*loc, key)] = k.start_mark.line + 1
                walk(v, (*loc, key))
                lines[(*loc, key)] = k.start_mark.line + 1
        elif isinstance(n, yaml.SequenceNode):
            for i, v in enumerate(n.value):
                walk(v, (*loc, i))

    if node is not None:
        walk(node, ())
    return data, lines, dups


def _yaml_problem(file: str, e: yaml.YAMLError) -> ConfigProblem:
    mark = getattr(e, "problem_mark", None) or getattr(e, "context_mark", None)
    reason = " ".join(str(x) for x in (getattr(e, "context", None), getattr(e, "problem", None)) if x)
    column = f" (column {mark.column + 1})" if mark is not None else ""
    return ConfigProblem(
        file, mark.line + 1 if mark is not None else None, "", f"YAML syntax error: {reason or e}{column}"
    )


# -- pydantic errors → YAML paths and readable reasons ---------------------------------


def _describe(err: Mapping[str, Any], data: Any) -> tuple[Loc, str]:
    loc = _yaml_loc(err["loc"], data)
    kind, msg = err["type"], err["msg"]
    ctx = err.get("ctx") or {}
    if kind == "extra_forbidden":
        key = str(loc[-1]) if loc else "?"
        hint = difflib.get_close_matches(key, sorted(_KNOWN_KEYS), n=1, cutoff=0.75)
        return loc, f"unknown key {key!r}" + (f" (did you mean {hint[0]!r}?)" if hint else "")
    if kind == "missing":
        return loc, "required key is missing"
    if kind == "union_tag_not_found":
        tags = ", ".join(_union_tags(loc))
        return (*loc, "type"), "required key is missing" + (f" (one of: {tags})" if tags else "")
    if kind == "union_tag_invalid":
        return (*loc, ctx.get("discriminator", "type").strip("'")), (
            f"unknown type {ctx.get('tag')!r}; expected one of: {ctx.get('expected_tags')}"
        )
    echo = kind in ("literal_error", "enum") and isinstance(err.get("input"), str | int | float | bool | None)
    if echo and not any(isinstance(x, str) and is_secret_key(x) for x in loc):
        msg += f", got {err['input']!r}"
    for prefix in ("Value error, ", "Assertion failed, "):
        if msg.startswith(prefix):
            msg = msg[len(prefix) :]
    return loc, msg


def _union_tags(loc: Loc) -> list[str]:
    """The ``type`` values allowed at ``loc`` (for a helpful 'missing type' message)."""
    if loc and loc[-1] == "source":
        union = _sources.SourceConfig
    elif len(loc) >= 2 and loc[-2] == "transforms":
        union = _transforms.TransformConfig
    elif loc and loc[-1] == "key_generator":
        union = _target.KeyGeneratorConfig
    else:
        return []
    members = get_args(get_args(union)[0])
    return [get_args(m.model_fields["type"].annotation)[0] for m in members]


def _yaml_loc(loc: Iterable[str | int], data: Any) -> Loc:
    """Map pydantic's error location onto the user's YAML, dropping union/validator tags."""
    out: list[str | int] = []
    cur: Any = data
    missing = False
    for elem in loc:
        if missing:
            break
        if isinstance(cur, dict):
            key = _match_key(cur, elem)
            if key is not _NOT_FOUND:
                out.append(key)
                cur = cur[key]
            elif cur.get("type") == elem or not isinstance(elem, str) or not elem.isidentifier():
                continue  # discriminator tag or a validator tag like 'function-after[...]'
            elif elem in _KNOWN_KEYS:
                out.append(elem)  # a missing field
                missing = True
        elif isinstance(cur, list) and isinstance(elem, int) and 0 <= elem < len(cur):
            out.append(elem)
            cur = cur[elem]
    return tuple(out)


_NOT_FOUND = object()


def _match_key(d: dict[Any, Any], elem: str | int) -> Any:
    if elem in d:
        return elem
    for k in d:  # YAML ints as keys, pydantic strings in loc (or the reverse)
        if str(k) == str(elem):
            return k
    return _NOT_FOUND


def _format_path(loc: Loc) -> str:
    out = ""
    for elem in loc:
        if isinstance(elem, int):
            out += f"[{elem}]"
        else:
            out += f".{elem}" if out else str(elem)
    return out


def _line_of(lines: Mapping[Loc, int], loc: Loc) -> int | None:
    for n in range(len(loc), -1, -1):
        if loc[:n] in lines:
            return lines[loc[:n]]
    return None


def _all_field_names() -> set[str]:
    names: set[str] = set()
    for module in (_pipeline, _policies, _sources, _target, _transforms):
        for obj in vars(module).values():
            if isinstance(obj, type) and issubclass(obj, BaseModel):
                for fname, field in obj.model_fields.items():
                    names.add(field.alias or fname)
    return names


_KNOWN_KEYS = _all_field_names()


# -- checks beyond one model ------------------------------------------------------------


def _identity(p: PipelineConfig) -> tuple:
    t = p.target
    return (tuple(t.record_key), tuple(t.partition_by), t.ordering_field, t.effective_key_generator,
            t.hive_style, t.url_encode_partitions)


def _cross_pipeline_problems(found: list[tuple[str, int, PipelineConfig]]) -> list[ConfigProblem]:
    """Names are unique. Several pipelines may write one table (each resumes from its own
    position), but they must agree on its identity: keys, partitioning, ordering."""
    problems: list[ConfigProblem] = []
    by_target: dict[str, tuple[str, int, PipelineConfig]] = {}
    from streamer.fs import location_key

    for file, i, p in found:
        path = location_key(p.target.path)  # file:/a, /a and a (from /) are one table
        if path not in by_target:
            by_target[path] = (file, i, p)
        elif _identity(by_target[path][2]) != _identity(p):
            f0, i0, _ = by_target[path]
            problems.append(ConfigProblem(
                file, None, f"pipelines[{i}].target",
                f"target path {path!r} is also written by pipelines[{i0}] in {f0} with other keys, "
                "partitioning or ordering; pipelines sharing a table must agree on them",
            ))
    for label, key, field in (
        ("name", lambda p: p.name, "name"),
    ):
        first: dict[Any, tuple[str, int]] = {}
        for file, i, p in found:
            value = key(p)
            if value in first:
                f0, i0 = first[value]
                problems.append(
                    ConfigProblem(
                        file, None, f"pipelines[{i}].{field}",
                        f"{label} {value!r} is already used by pipelines[{i0}] in {f0}",
                    )
                )
            else:
                first[value] = (file, i)
    return problems


def _resolve_files(p: PipelineConfig, loc: Loc, base_dir: Path) -> tuple[PipelineConfig, list[tuple[Loc, str]]]:
    """Make a Kafka Avro ``avro_schema_file`` absolute (relative to the YAML) and check it parses."""
    src = p.source
    if src.type != "kafka" or src.avro_schema_file is None:
        return p, []
    path = Path(src.avro_schema_file)
    if not path.is_absolute():
        path = (base_dir / path).resolve()
    field_loc = (*loc, "source", "avro_schema_file")
    try:
        import fastavro

        fastavro.parse_schema(_read_json(path))
    except OSError as e:
        return p, [(field_loc, f"cannot read Avro schema file {path}: {e.strerror or e}")]
    except Exception as e:  # json or Avro schema errors
        return p, [(field_loc, f"invalid Avro schema in {path}: {e}")]
    return p.model_copy(update={"source": src.model_copy(update={"avro_schema_file": str(path)})}), []


def _read_json(path: Path) -> Any:
    import json

    return json.loads(path.read_text(encoding="utf-8"))
