"""Hudi's file names: base files, log files, write tokens and partition paths.

Every engine finds a table's data by parsing names alone, so these rules are part of
the format: ``<fileId>_<writeToken>_<instant>.parquet`` for base files and
``.<fileId>_<baseInstant>.log.<version>_<writeToken>`` for log files. A name that
does not parse (Spark's ``part-0000...parquet``, ``_SUCCESS``, ``.DS_Store``) is not
Hudi's and is ignored by readers.
"""

from __future__ import annotations

import posixpath
import re
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from streamer.fs import FileSystem
from streamer.table.properties import format_java_properties, parse_java_properties

PARTITION_METAFILE = ".hoodie_partition_metadata"
DEFAULT_PARTITION = "__HIVE_DEFAULT_PARTITION__"
BASE_FILE_EXTENSIONS = (".parquet", ".orc", ".hfile")

_BASE_RE = re.compile(r"^(?P<fid>[^_]+)_(?P<tok>[^_]+)_(?P<ts>\d+)(?P<ext>\.[a-z]+)$")
_LOG_RE = re.compile(
    r"^\.(?P<fid>.+)_(?P<base>[^_.]*)\.(?P<kind>log|archive)\.(?P<ver>\d+)"
    r"(?:_(?P<tok>\d+-\d+-\d+))?(?P<cdc>\.cdc)?$"
)
_TOKEN_RE = re.compile(r"^\d+-\d+-\d+$")


# --------------------------------------------------------------------------- write tokens
def write_token(task_partition_id: int = 0, stage_id: int = 0, task_attempt_id: int = 0) -> str:
    """``<taskPartitionId>-<stageId>-<taskAttemptId>``: makes retried tasks' files distinct."""
    return f"{task_partition_id}-{stage_id}-{task_attempt_id}"


def new_file_id(index: int = 0) -> str:
    """A new file group id: a UUID plus ``-<index>`` as Hudi's writers produce."""
    return f"{uuid.uuid4()}-{index}"


# --------------------------------------------------------------------------- base files
@dataclass(frozen=True)
class BaseFileName:
    file_id: str
    write_token: str
    instant_time: str
    extension: str = ".parquet"

    @property
    def name(self) -> str:
        return f"{self.file_id}_{self.write_token}_{self.instant_time}{self.extension}"


def base_file_name(file_id: str, write_token_: str, instant_time: str, ext: str = ".parquet") -> str:
    return BaseFileName(file_id, write_token_, instant_time, ext).name


def parse_base_file_name(name: str) -> BaseFileName | None:
    m = _BASE_RE.match(name)
    if not m or m.group("ext") not in BASE_FILE_EXTENSIONS:
        return None
    return BaseFileName(m.group("fid"), m.group("tok"), m.group("ts"), m.group("ext"))


# --------------------------------------------------------------------------- log files
@dataclass(frozen=True)
class LogFileName:
    file_id: str
    base_instant: str
    version: int
    write_token: str | None = None
    kind: str = "log"
    cdc: bool = False

    @property
    def name(self) -> str:
        tok = f"_{self.write_token}" if self.write_token else ""
        return f".{self.file_id}_{self.base_instant}.{self.kind}.{self.version}{tok}{'.cdc' if self.cdc else ''}"

    @property
    def sort_key(self) -> tuple[str, int, str]:
        """Hudi's order within a file group: base instant, version, then write token."""
        return (self.base_instant, self.version, self.write_token or "")


def log_file_name(file_id: str, base_instant: str, version: int, write_token_: str) -> str:
    return LogFileName(file_id, base_instant, version, write_token_).name


def parse_log_file_name(name: str) -> LogFileName | None:
    m = _LOG_RE.match(name)
    if not m:
        return None
    return LogFileName(
        m.group("fid"),
        m.group("base"),
        int(m.group("ver")),
        m.group("tok"),
        m.group("kind"),
        bool(m.group("cdc")),
    )


# --------------------------------------------------------------------------- partitions
#: What Hudi's ``PartitionPathEncodeUtils`` (a copy of Hive's ``FileUtils``) escapes in a
#: partition value when ``hoodie.datasource.write.partitionpath.urlencode`` is on: ASCII
#: control characters and ``"#%'*/:=?\\{[]^`` plus DEL, each as ``%XX`` (upper-case hex).
#: Everything else, spaces and non-ASCII characters included, is kept as is.
_ESCAPED = frozenset(
    [*map(chr, range(0x20)), '"', "#", "%", "'", "*", "/", ":", "=", "?", "\\", "\x7f", "{", "[", "]", "^"]
)
#: ``%`` and the two characters Hudi's ``unescapePathName`` decodes after it: two hex digits,
#: or ``+`` and one (Java's ``Integer.parseInt(.., 16)`` takes a leading sign). Scanning left
#: to right, a ``%`` not followed by such a pair stays as it is.
_PERCENT_CODE = re.compile(r"%(\+[0-9A-Fa-f]|[0-9A-Fa-f]{2})")


def escape_path_name(value: str) -> str:
    """One partition value as Hudi's ``escapePathName`` writes it (``a/b:c`` -> ``a%2Fb%3Ac``)."""
    return "".join(f"%{ord(c):02X}" if c in _ESCAPED else c for c in value)


def unescape_path_name(value: str) -> str:
    """Inverse of :func:`escape_path_name`, exactly as Hudi's ``unescapePathName``.

    Each ``%XX`` becomes the one character with that code (not a UTF-8 byte: escaping
    only ever produced ASCII codes); a ``%`` not followed by two hex digits stays.
    """
    if "%" not in value:
        return value
    return _PERCENT_CODE.sub(lambda m: chr(int(m[1], 16)), value)


def escape_path_names(values: pa.Array | pa.ChunkedArray) -> pa.Array:
    """:func:`escape_path_name` over a string column (for the key generator).

    Partition columns have few distinct values: each is escaped once, in Python, so the
    column and the scalar rule cannot disagree.
    """
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    unique = pc.unique(values)
    escaped = pa.array(
        [None if v is None else escape_path_name(v) for v in unique.to_pylist()], pa.string()
    )
    return pc.take(escaped, pc.index_in(values, value_set=unique))


def partition_path(
    fields: Sequence[str], values: Sequence[object], hive_style: bool, url_encode: bool = False
) -> str:
    """Relative partition path for a record's partition values ('' when unpartitioned).

    Nulls and empty strings become Hive's default partition, as Hudi's key generators do.
    """
    parts = []
    for f, v in zip(fields, values, strict=True):
        s = DEFAULT_PARTITION if v is None or v == "" else str(v)
        if url_encode:
            s = escape_path_name(s)
        parts.append(f"{f}={s}" if hive_style else s)
    return "/".join(parts)


def partition_values(
    path: str, fields: Sequence[str], hive_style: bool, url_encode: bool = False
) -> dict[str, str | None]:
    """Inverse of :func:`partition_path`: column -> string value (``None`` for default).

    With ``url_encode`` (the table's ``hoodie.datasource.write.partitionpath.urlencode``)
    each value is unescaped as Hudi does; an encoded value never contains ``/`` or ``=``,
    so splitting the path first is safe.
    """
    if not path or not fields:
        return {}
    segments = path.split("/")
    out: dict[str, str | None] = {}
    if hive_style or all("=" in s for s in segments):
        for seg in segments:
            k, _, value = seg.partition("=")
            out[k] = value
    elif len(segments) == len(fields):
        out = dict(zip(fields, segments, strict=True))
    elif len(fields) == 1:
        out = {fields[0]: path}  # a slash-containing single value (e.g. date "2024/01/01")
    else:
        return {}
    for k, v in list(out.items()):
        if v is not None and url_encode:
            v = unescape_path_name(v)
        out[k] = None if v == DEFAULT_PARTITION else v
    return out


def partition_metadata_path(base_path: str, partition: str) -> str:
    return posixpath.join(base_path, partition, PARTITION_METAFILE) if partition else posixpath.join(
        base_path, PARTITION_METAFILE
    )


def write_partition_metadata(
    fs: FileSystem, base_path: str, partition: str, instant_time: str
) -> None:
    """Write ``.hoodie_partition_metadata`` (once; an existing one is kept as Hudi does)."""
    path = partition_metadata_path(base_path, partition)
    if fs.exists(path):
        return
    depth = len([p for p in partition.split("/") if p]) if partition else 0
    text = format_java_properties(
        {"commitTime": instant_time, "partitionDepth": str(depth)}, "partition metadata"
    )
    fs.write_atomic(path, text.encode("latin-1"))


def read_partition_metadata(fs: FileSystem, base_path: str, partition: str) -> Mapping[str, str]:
    return parse_java_properties(fs.read_text(partition_metadata_path(base_path, partition)))
