"""Appending to a file slice: one new log file version, for the writer and the services alike.

Every append - a commit's blocks for a file group, a log compaction's stitched blocks -
is the same protocol, so it lives here once: Hudi's marker first (``<log file>.marker.APPEND``,
as Hudi 0.14+ writes it), then the blocks written atomically as a new log file version
(we never append to an existing file), then Hudi's write stat for it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import pyarrow as pa

from streamer import faults
from streamer.fs import FileSystem
from streamer.table.log_content import ORDERING_VALUE, PARTITION_PATH, RECORD_KEY
from streamer.table.log_format import HeaderKey, encode_delete_block
from streamer.table.metadata import WriteStat
from streamer.table.naming import log_file_name
from streamer.write.markers import IOType, Marker, create_marker


@dataclass(frozen=True)
class SliceTarget:
    """Where an append goes: a file slice and the log file version it creates."""

    base_path: str
    partition: str
    file_id: str
    base_instant: str
    version: int
    token: str
    base_file: str | None = None  # the slice's base file name, if any
    log_files: tuple[str, ...] = ()  # the slice's existing log files, in order
    #: table version 8+: the instant that names the log file (the writing commit's own,
    #: not the slice's base instant: Hudi 1.x places the file in a slice by that
    #: instant's completion time); ``None`` in version 6
    name_instant: str | None = None

    @property
    def log_name(self) -> str:
        return log_file_name(self.file_id, self.name_instant or self.base_instant, self.version, self.token)

    def path_of(self, name: str) -> str:
        base = self.base_path.rstrip("/")
        return f"{base}/{self.partition}/{name}" if self.partition else f"{base}/{name}"

    def rel_path(self, name: str) -> str:
        return f"{self.partition}/{name}" if self.partition else name


def delete_block(keys: pa.Array | pa.ChunkedArray, partitions: pa.Array | pa.ChunkedArray,
                 ordering: pa.Array | pa.ChunkedArray | None, header: Mapping[HeaderKey, str]) -> bytes:
    """A delete block. Without ordering values (delete by key) Hudi's default 0 is
    written, which readers order by commit time: the delete wins."""
    cols = {RECORD_KEY: keys, PARTITION_PATH: partitions}
    if ordering is not None and not pa.types.is_null(ordering.type):
        cols[ORDERING_VALUE] = ordering
    return encode_delete_block(pa.table(cols), header)


def write_log_file(fs: FileSystem, target: SliceTarget, instant: str, blocks: Sequence[bytes]) -> WriteStat:
    """Markers, then ``blocks`` as one new log file (atomically); its write stat.

    The caller fills in the record counts it knows (inserts, updates, deletes).
    """
    name = target.log_name
    # Hudi 0.14+ marks a log file it creates or appends to with an APPEND marker named
    # after the log file (HoodieWriteHandle.AppendLogWriteCallback); its marker-based
    # rollback refuses any other marker on a log file ("Log files should have only
    # APPEND as IOTypes"), so a Hudi writer could not roll back our failed write. From
    # table version 8 it is the other way round: a commit's log files are its own new
    # files, marked CREATE, and Hudi 1.x refuses APPEND markers there.
    io = IOType.CREATE if target.name_instant else IOType.APPEND
    create_marker(fs, target.base_path, instant, Marker(target.partition, name, io))
    faults.step(f"markers {name}")
    content = b"".join(blocks)
    faults.step(f"before log file {name}")
    fs.write_atomic(target.path_of(name), content)
    faults.step(f"after log file {name}")
    return WriteStat(
        file_id=target.file_id,
        path=target.rel_path(name),
        prev_commit=target.base_instant,
        partition_path=target.partition,
        total_write_bytes=len(content),
        file_size_in_bytes=len(content),
        total_log_blocks=len(blocks),
        log_version=target.version,
        log_offset=0,
        base_file=target.base_file or "",
        log_files=[*target.log_files, name],
    )
