"""Write markers: a record, made *before* each data file, of what an instant creates.

Hudi writes ``.hoodie/.temp/<instant>/<partition>/<file>.marker.<IOType>`` before it
creates or appends to a data file. If the writer dies, its successor lists the markers
to learn exactly which files the failed instant touched — no full-table listing and no
guessing — and rolls them back: ``CREATE`` files are deleted, ``APPEND`` file groups get
a rollback command block. Markers are deleted once the instant completes.

At table version 6 a log file is marked ``APPEND``, named after the log file itself, as
Hudi 0.14+ marks one (its rollback refuses any other marker on a log file); from version 8
a commit's log files are its own new files, marked ``CREATE`` (see
:func:`streamer.write.log_file.write_log_file`). Each commit starts a new log file, so a
rollback can remove a torn one. We write direct
markers; a failed Hudi write may have left its timeline server's form, which is read too.
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass
from enum import Enum

from streamer.fs import FileSystem
from streamer.table.properties import METAFOLDER

TEMP_FOLDER = ".temp"
MARKER_SUFFIX = ".marker."


class IOType(str, Enum):
    CREATE = "CREATE"
    MERGE = "MERGE"
    APPEND = "APPEND"


@dataclass(frozen=True)
class Marker:
    partition: str
    file_name: str
    io_type: IOType


def markers_dir(base_path: str, instant: str) -> str:
    return posixpath.join(base_path, METAFOLDER, TEMP_FOLDER, instant)


def marker_path(base_path: str, instant: str, marker: Marker) -> str:
    name = f"{marker.file_name}{MARKER_SUFFIX}{marker.io_type.value}"
    d = markers_dir(base_path, instant)
    return posixpath.join(d, marker.partition, name) if marker.partition else posixpath.join(d, name)


def create_marker(fs: FileSystem, base_path: str, instant: str, marker: Marker) -> None:
    """Create the (empty) marker file; idempotent so a retried task can call it again."""
    fs.write_bytes(marker_path(base_path, instant, marker), b"")


def list_markers(fs: FileSystem, base_path: str, instant: str) -> list[Marker]:
    """The instant's markers in either of Hudi's forms: a file per marker (direct, ours),
    or - Hudi Spark's default on local and object storage - ``MARKERS0``, ``MARKERS1``, ...
    at the folder's top, one marker name per line, that Hudi's timeline server writes
    (``MARKERS.type`` says ``TIMELINE_SERVER_BASED``)."""
    root = markers_dir(base_path, instant)
    found: set[Marker] = set()
    for st in fs.walk_files(root):
        rel = posixpath.relpath(st.path, root)
        if _TIMELINE_SERVER_FILE.match(rel):
            names = fs.read_bytes(st.path).decode("utf-8", errors="replace").splitlines()
        else:
            names = [rel]
        found.update(m for m in map(_parse_marker, names) if m is not None)
    return sorted(found, key=lambda m: (m.partition, m.file_name, m.io_type.value))


#: A marker file of Hudi's timeline server (``MARKERS.type`` names the form, no marker).
_TIMELINE_SERVER_FILE = re.compile(r"^MARKERS\d+$")


def _parse_marker(rel: str) -> Marker | None:
    """``<partition>/<file>.marker.<IOType>`` relative to the instant's marker folder."""
    partition, name = posixpath.split(rel.strip())
    if MARKER_SUFFIX not in name:
        return None
    file_name, _, io = name.rpartition(MARKER_SUFFIX)
    try:
        return Marker(partition, file_name, IOType(io))
    except ValueError:
        return None


def delete_markers(fs: FileSystem, base_path: str, instant: str) -> None:
    fs.delete_dir(markers_dir(base_path, instant))
