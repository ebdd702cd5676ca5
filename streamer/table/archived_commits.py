"""The extra metadata of archived writes, newest first: where a position outlives the
active timeline.

A pipeline resumes from the newest write that carries its checkpoint. When other writers
(another pipeline on the same table, a library writer, HoodieStreamer) commit while it
is idle, the archiver moves its last write off the active timeline; a lookup of the
active timeline alone then finds no position and the pipeline would silently start over
at its source's configured beginning. The archive keeps each write's extra metadata, so
the lookup goes on there:

- layout 1 (table version 6): ``.hoodie/archived/.commits_.archive.<n>_<token>``, Hudi log
  files of Avro ``HoodieArchivedMetaEntry`` records, one per timeline file of an instant;
  the ``COMPLETED`` entry of a write holds its ``HoodieCommitMetadata``. Files are read
  newest first (highest ``n``) and only as far as the caller iterates.
- layout 2 (versions 8 and 9): the LSM history, whose ``metadata`` column is the
  completed file's bytes.
"""

from __future__ import annotations

import io
import posixpath
from collections.abc import Iterator
from typing import Any

import fastavro

from streamer.fs import FileSystem
from streamer.table import lsm_history
from streamer.table.instant import Action, parse_timeline_file
from streamer.table.log_content import split_avro_records
from streamer.table.log_format import BlockType, read_log_file
from streamer.table.metadata import CommitMetadata
from streamer.table.naming import parse_log_file_name
from streamer.table.properties import METAFOLDER, TableProperties
from streamer.table.timeline import Timeline


def archived_write_extras(fs: FileSystem, base_path: str, props: TableProperties,
                          layout_version: int) -> Iterator[tuple[str, dict[str, str]]]:
    """``(instant time, extra metadata)`` of every archived completed write, newest first."""
    if layout_version >= 2:
        yield from _from_history(fs, base_path, props)
    else:
        yield from _from_archive_logs(fs, posixpath.join(base_path.rstrip("/"), METAFOLDER, props.archive_folder))


def moved_to_archive(missing_path: str | None, fresh: Timeline) -> bool:
    """Whether a timeline file found missing after a listing belongs to an instant the
    archiver has moved since: the archiver removes instants from the timeline's start
    (oldest first, its archive written before), so such an instant now lies before the
    fresh listing's first instant. Anything else missing is damage, to be reported."""
    named = parse_timeline_file(posixpath.basename(missing_path or ""))
    if named is None:
        return False
    first = fresh.first_instant
    return first is None or first > named.timestamp


def _from_history(fs: FileSystem, base_path: str, props: TableProperties) -> Iterator[tuple[str, dict[str, str]]]:
    snapshot = lsm_history.read_snapshot(fs, lsm_history.history_dir(base_path, props))
    if not snapshot.files:
        return
    rows = lsm_history.read_instants(fs, snapshot, columns=("instantTime", "action", "metadata"))
    times, actions, metas = (rows.column(c).to_pylist() for c in ("instantTime", "action", "metadata"))
    where = snapshot.folder
    for ts, action, meta in sorted(zip(times, actions, metas, strict=True), key=lambda r: r[0], reverse=True):
        if action in Action.WRITE_ACTIONS and meta:
            yield ts, CommitMetadata.from_bytes(meta, f"{where} (instant {ts})").extra_metadata


def _from_archive_logs(fs: FileSystem, folder: str) -> Iterator[tuple[str, dict[str, str]]]:
    files = []
    for st in fs.list_dir(folder):
        lf = parse_log_file_name(st.name)
        if lf is not None and lf.kind == "archive":
            files.append((lf.version, st.path))
    for _, path in sorted(files, reverse=True):
        yield from sorted(_completed_writes_in(fs, path), key=lambda e: e[0], reverse=True)


def _completed_writes_in(fs: FileSystem, path: str) -> Iterator[tuple[str, dict[str, str]]]:
    for block in read_log_file(fs, path, lazy=False):
        if block.block_type != BlockType.AVRO_DATA or not block.schema:
            continue
        writer = fastavro.parse_schema(block.schema)
        for datum in split_avro_records(block.content(), path):
            rec: dict[str, Any] = fastavro.schemaless_reader(io.BytesIO(bytes(datum)), writer)  # type: ignore[assignment]
            meta = rec.get("hoodieCommitMetadata")
            if (rec.get("actionType") in Action.WRITE_ACTIONS and (rec.get("actionState") or "COMPLETED") == "COMPLETED"
                    and isinstance(meta, dict)):
                yield str(rec.get("commitTime")), dict(meta.get("extraMetadata") or {})
