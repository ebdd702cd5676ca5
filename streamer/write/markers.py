"""Direct write markers: a record, made *before* each data file, of what an instant creates.

Hudi writes ``.hoodie/.temp/<instant>/<partition>/<file>.marker.<IOType>`` before it
creates or appends to a data file. If the writer dies, its successor lists the markers
to learn exactly which files the failed instant touched — no full-table listing and no
guessing — and rolls them back: ``CREATE`` files are deleted, ``APPEND`` file groups get
a rollback command block. Markers are deleted once the instant completes.

As in Hudi 0.14, an ``APPEND`` marker is named after the file group's *base file*
(``<fileId>_<token>_<baseInstant>.parquet``) since the log file actually written may
roll over; the log files themselves also get ``CREATE`` markers here because we start
a new log version per commit, which lets rollback remove a torn one.
"""

from __future__ import annotations

import posixpath
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

    def data_path(self, base_path: str) -> str:
        return posixpath.join(base_path, self.partition, self.file_name) if self.partition else (
            posixpath.join(base_path, self.file_name)
        )


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
    root = markers_dir(base_path, instant)
    out: list[Marker] = []
    for st in fs.walk_files(root):
        rel = posixpath.relpath(st.path, root)
        partition, name = posixpath.split(rel)
        if MARKER_SUFFIX not in name:
            continue
        file_name, _, io = name.rpartition(MARKER_SUFFIX)
        try:
            out.append(Marker(partition, file_name, IOType(io)))
        except ValueError:
            continue
    return sorted(out, key=lambda m: (m.partition, m.file_name, m.io_type.value))


def delete_markers(fs: FileSystem, base_path: str, instant: str) -> None:
    fs.delete_dir(markers_dir(base_path, instant))
