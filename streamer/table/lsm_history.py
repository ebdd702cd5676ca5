"""Hudi 1.x's LSM timeline history: where table versions 8 and 9 keep archived instants.

Version 6 archives into ``.hoodie/archived`` (Avro log files); versions 8 and 9 keep an
LSM tree under ``.hoodie/timeline/history`` instead (Hudi's ``LSMTimeline``,
``LSMTimelineWriter``, read by ``ArchivedTimelineLoaderV2`` in 1.0.2 and 1.2.0 alike):

- **Data files** ``<first>_<last>_<layer>.parquet``: one row per archived instant
  (``HoodieLSMTimelineInstant``: requested time, completion time, completed action, the
  completed file's bytes, the plan's bytes, ``version`` 1). Names carry requested times;
  the layer is one digit. An archiving run adds one layer-0 file; once ten wait, the oldest
  are merged into one file of layer 1, and so on up (Hudi's compaction of its history, done
  by its writer and ours alike: :func:`merge_candidates`).
- **Manifests** ``manifest_<N>``: JSON ``{"files": [{"fileName", "fileLen"}]}``, every
  valid file of snapshot ``N`` (N from 1).
- **``_version_``**: the latest snapshot's ``N``, bare ASCII digits. A reader trusts it;
  without it (or unparsable) the highest manifest counts; without manifests the history
  is empty.

A snapshot is committed in that order - data file, ``manifest_{N+1}``, ``_version_`` -
so a crash leaves at worst a file or a manifest that no reader looks at. Hudi reads
``metadata`` and ``plan`` as the Avro files of the active timeline they came from (never
JSON), and fails the whole load on a null completion time. Facts and the experiments
behind them: docs/table-versions.md.
"""

from __future__ import annotations

import io
import json
import posixpath
import re
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from streamer.errors import CorruptDataError, MissingFileError
from streamer.fs import FileSystem
from streamer.table.properties import METAFOLDER, TableProperties
from streamer.table.table_keys import TIMELINE_HISTORY_PATH

VERSION_FILE = "_version_"
MANIFEST_PREFIX = "manifest_"
#: Hudi's ``LSMTimeline.ARCHIVE_FILE_PATTERN`` (matched whole).
FILE_PATTERN = re.compile(r"^(\d+)_(\d+)_(\d)\.parquet$")
#: ``HoodieLSMTimelineInstant`` as Hudi's Parquet files hold it (``version`` required, 1).
SCHEMA = pa.schema([
    pa.field("instantTime", pa.string()),
    pa.field("completionTime", pa.string()),
    pa.field("action", pa.string()),
    pa.field("metadata", pa.binary()),
    pa.field("plan", pa.binary()),
    pa.field("version", pa.int32(), nullable=False),
])
RECORD_VERSION = 1
#: Manifests kept after a commit (Hudi keeps its latest 3, plus one per layer it merged).
MANIFESTS_KEPT = 3
#: Hudi's ``hoodie.timeline.compaction.batch.size`` default: a layer's oldest files are
#: merged into one file of the next layer once this many wait.
MERGE_BATCH = 10
#: A merge takes files up to about this many bytes (Hudi's 1 GB cap: no merge rewrites
#: ever larger files), and at least two.
MERGE_MAX_BYTES = 1 << 30


def history_dir(base_path: str, props: TableProperties) -> str:
    """``<base>/.hoodie/<timeline path>/<history path>`` (``timeline/history`` by default)."""
    timeline = props.timeline_path or "timeline"
    return posixpath.join(base_path.rstrip("/"), METAFOLDER, timeline, props.get(TIMELINE_HISTORY_PATH) or "history")


@dataclass(frozen=True)
class HistoryFile:
    """One data file of a snapshot, as its manifest lists it."""

    name: str
    size: int

    @property
    def first(self) -> str:
        return _parsed(self.name).group(1)

    @property
    def last(self) -> str:
        return _parsed(self.name).group(2)

    @property
    def layer(self) -> int:
        return int(_parsed(self.name).group(3))


def _parsed(name: str) -> re.Match[str]:
    m = FILE_PATTERN.match(name)
    if m is None:
        raise CorruptDataError(f"not an LSM history file name: {name!r} (Hudi reads none but <first>_<last>_<layer>"
                               ".parquet)")
    return m


@dataclass(frozen=True)
class Snapshot:
    """The history's latest snapshot: its version (-1: no history) and files."""

    folder: str
    version: int
    files: tuple[HistoryFile, ...]

    @property
    def last_instant(self) -> str | None:
        """The newest requested time archived (from the names: no file is read)."""
        return max((f.last for f in self.files), default=None)


def manifest_versions(fs: FileSystem, folder: str) -> list[int]:
    """The versions of the manifests in ``folder``, ascending (what Hudi's listing takes:
    ``manifest_`` names not ending ``.tmp``)."""
    out = []
    for st in _listing(fs, folder):
        name = st.name
        if name.startswith(MANIFEST_PREFIX) and not name.endswith(".tmp"):
            suffix = name[len(MANIFEST_PREFIX):]
            if not suffix.isdigit():
                raise CorruptDataError("a manifest name Hudi cannot parse (its listing fails on it)",
                                       posixpath.join(folder, name))
            out.append(int(suffix))
    return sorted(out)


def _listing(fs: FileSystem, folder: str) -> list:
    try:
        return [st for st in fs.list_dir(folder) if not st.is_dir]
    except (FileNotFoundError, MissingFileError):
        return []


def latest_version(fs: FileSystem, folder: str) -> int:
    """The snapshot a Hudi reader loads: ``_version_`` when it parses, else the highest
    manifest, else -1 (no history)."""
    try:
        text = fs.read_bytes(posixpath.join(folder, VERSION_FILE)).decode("ascii")
    except (FileNotFoundError, MissingFileError, UnicodeDecodeError):
        text = ""
    if text.isdigit():
        return int(text)
    versions = manifest_versions(fs, folder)
    return versions[-1] if versions else -1


def read_snapshot(fs: FileSystem, folder: str) -> Snapshot:
    """The latest snapshot of the history in ``folder`` (empty when there is none)."""
    version = latest_version(fs, folder)
    if version < 0:
        return Snapshot(folder, -1, ())
    return Snapshot(folder, version, _manifest_files(fs, folder, version))


def _manifest_files(fs: FileSystem, folder: str, version: int) -> tuple[HistoryFile, ...]:
    path = posixpath.join(folder, f"{MANIFEST_PREFIX}{version}")
    try:
        raw = fs.read_bytes(path)
        doc = json.loads(raw) if raw.strip() else {}
        files = tuple(HistoryFile(str(e["fileName"]), int(e["fileLen"])) for e in doc.get("files", []))
    except (FileNotFoundError, MissingFileError):
        raise CorruptDataError("the LSM history's version names a manifest that is missing", path) from None
    except (ValueError, KeyError, TypeError) as e:
        raise CorruptDataError(f"unreadable LSM history manifest ({e})", path) from e
    for f in files:
        _parsed(f.name)
    return files


def manifest_bytes(files: tuple[HistoryFile, ...] | list[HistoryFile]) -> bytes:
    """A manifest's JSON, laid out as Hudi's Jackson pretty printer writes it."""
    body = {"files": [{"fileName": f.name, "fileLen": f.size} for f in files]}
    return json.dumps(body, indent=2, separators=(",", " : ")).encode()


@dataclass(frozen=True)
class ArchivedInstant:
    """One row of the history: an instant as it left the active timeline."""

    requested: str
    completed: str
    action: str  # the completed action (commit for a compaction, deltacommit for a log compaction)
    metadata: bytes | None  # the completed file's bytes (None: it was empty)
    plan: bytes | None  # clean, compaction, log compaction and replace plans (see archive service)


def data_file(instants: list[ArchivedInstant]) -> tuple[str, bytes]:
    """A layer-0 data file of ``instants`` (ascending requested time): name and bytes."""
    if not instants:
        raise ValueError("an LSM history file holds at least one instant")
    rows = sorted(instants, key=lambda i: i.requested)
    table = pa.table({
        "instantTime": [i.requested for i in rows],
        "completionTime": [i.completed for i in rows],
        "action": [i.action for i in rows],
        "metadata": pa.array([i.metadata for i in rows], pa.binary()),
        "plan": pa.array([i.plan for i in rows], pa.binary()),
        "version": pa.array([RECORD_VERSION] * len(rows), pa.int32()),
    }, schema=SCHEMA)
    sink = io.BytesIO()
    pq.write_table(table, sink, compression="snappy", store_schema=False)
    return f"{rows[0].requested}_{rows[-1].requested}_0.parquet", sink.getvalue()


def read_instants(fs: FileSystem, snapshot: Snapshot, *, since: str | None = None,
                  columns: tuple[str, ...] = ("instantTime", "completionTime", "action")) -> pa.Table:
    """The archived instants of ``snapshot`` (those requested at or after ``since``), one row
    each, ascending; an instant two files hold (an interrupted move archived it twice) once."""
    tables = []
    for f in snapshot.files:
        if since is not None and f.last < since:
            continue
        path = posixpath.join(snapshot.folder, f.name)
        try:
            with fs.open_input_file(path) as src:
                tables.append(pq.read_table(src, columns=list(columns)))
        except (FileNotFoundError, MissingFileError):
            raise CorruptDataError("a file the LSM history's manifest lists is missing", path) from None
        except (pa.ArrowInvalid, OSError) as e:
            raise CorruptDataError(f"unreadable LSM history file ({e})", path) from e
    if not tables:
        return pa.table({c: pa.array([], SCHEMA.field(c).type) for c in columns})
    out = pa.concat_tables(tables).sort_by("instantTime")
    if since is not None:
        out = out.filter(pc.greater_equal(out.column("instantTime"), since))
    times = out.column("instantTime").to_pylist()
    keep = [i for i, t in enumerate(times) if i == 0 or t != times[i - 1]]
    return out if len(keep) == len(times) else out.take(pa.array(keep))


# -- merging layers (Hudi's ``LSMTimelineWriter.compactAndClean``) ---------------------
def merge_candidates(snapshot: Snapshot, layer: int, batch: int = MERGE_BATCH,
                     max_bytes: int = MERGE_MAX_BYTES) -> list[HistoryFile]:
    """The files of ``layer`` to merge into one of the next layer, oldest first, or none.

    As Hudi picks them: only once ``batch`` files wait in the layer; then the oldest (by
    first instant), at most ``batch``, stopping past ``max_bytes`` (a file alone over it is
    passed over); fewer than two is no merge. Why merge at all: every archive run adds a
    file and rewrites the manifest listing every file, so an unmerged history of a
    long-running pipeline grows a file a run and a manifest without bound.
    """
    files = sorted((f for f in snapshot.files if f.layer == layer), key=lambda f: (f.first, f.name))
    if len(files) < batch:
        return []
    picked: list[HistoryFile] = []
    total = 0
    for f in files:
        picked.append(f)
        total += f.size
        if len(picked) >= batch:
            break
        if total > max_bytes:
            if len(picked) >= 2:
                break
            picked, total = [], 0
    return picked if len(picked) >= 2 else []


def merged_name(files: list[HistoryFile]) -> str:
    """``<first of all>_<last of all>_<layer + 1>.parquet``."""
    return f"{min(f.first for f in files)}_{max(f.last for f in files)}_{files[0].layer + 1}.parquet"


def merged_file(fs: FileSystem, folder: str, files: list[HistoryFile]) -> bytes:
    """The rows of ``files``, every column as stored, as one file (ascending requested
    time; an instant two files hold, once)."""
    snap = Snapshot(folder, 0, tuple(files))
    table = read_instants(fs, snap, columns=tuple(SCHEMA.names))
    sink = io.BytesIO()
    pq.write_table(table.cast(SCHEMA), sink, compression="snappy", store_schema=False)
    return sink.getvalue()


def unreferenced(fs: FileSystem, folder: str, keep: int) -> tuple[list[str], list[str]]:
    """What a clean of the history removes: the manifests but the newest ``keep``, and the
    data files none of those lists (merged away, or a stopped run's). Nothing while there
    are ``keep`` manifests or fewer (Hudi's rule)."""
    versions = manifest_versions(fs, folder)
    if len(versions) <= keep:
        return [], []
    kept = versions[-keep:]
    listed: set[str] = set()
    for v in kept:
        listed |= {f.name for f in _manifest_files(fs, folder, v)}
    manifests = [f"{MANIFEST_PREFIX}{v}" for v in versions if v not in kept]
    data = [st.name for st in _listing(fs, folder) if FILE_PATTERN.match(st.name) and st.name not in listed]
    return manifests, sorted(data)
