"""One consistent view of a table, shared by readers, the writer, services and checkpoints.

A :class:`TableSnapshot` holds the table's properties, its timeline, a file-system view
(listed lazily) and caches of what never changes once written: the commit metadata of
completed instants and the schema of the latest write. It is a value: :meth:`refresh`
returns a newer snapshot from **one** listing of the timeline folder and re-reads
``hoodie.properties`` only when that listing shows the file changed (size or mtime),
so a long-running pipeline reads the table's state once per micro-batch, not once per
component. The immutable caches carry over from one snapshot to the next.
"""

from __future__ import annotations

import json
import posixpath
from dataclasses import dataclass, field
from functools import cached_property

import pyarrow as pa

from streamer.fs import FileStatus, FileSystem
from streamer.table.fsview import FileSystemView
from streamer.table.instant import Instant
from streamer.table.metadata import CommitMetadata
from streamer.table.properties import (
    METAFOLDER,
    PROPERTIES_FILE,
    TableProperties,
    load_properties,
)
from streamer.table.timeline import Timeline, timeline_dir


def _stamp(entries: list[FileStatus]) -> tuple[int, int | None] | None:
    for st in entries:
        if st.name == PROPERTIES_FILE and not st.is_dir:
            return (st.size, st.mtime_ns)
    return None


@dataclass
class _Caches:
    """What completed instants never change: shared by a snapshot and its refreshes."""

    commits: dict[str, CommitMetadata] = field(default_factory=dict)
    schemas: dict[str, pa.Schema | None] = field(default_factory=dict)


class TableSnapshot:
    """Properties + timeline + file-system view of one table at one moment."""

    def __init__(self, fs: FileSystem, base_path: str, properties: TableProperties, timeline: Timeline,
                 *, properties_stamp: tuple[int, int | None] | None = None,
                 caches: _Caches | None = None) -> None:
        self.fs = fs
        self.base_path = base_path.rstrip("/") or "/"
        self.properties = properties
        self.timeline = timeline
        self._properties_stamp = properties_stamp
        self._caches = caches or _Caches()

    # ------------------------------------------------------------------ loading
    @classmethod
    def load(cls, fs: FileSystem, base_path: str) -> TableSnapshot:
        """Read the table's state: one listing of ``.hoodie/``, one properties read."""
        return cls._from(fs, base_path.rstrip("/") or "/", None, None, _Caches())

    def refresh(self) -> TableSnapshot:
        """A newer snapshot: one listing; properties re-read only if the file changed."""
        return TableSnapshot._from(self.fs, self.base_path, self.properties, self._properties_stamp,
                                   self._caches)

    @classmethod
    def _from(cls, fs: FileSystem, base_path: str, props: TableProperties | None,
              known_stamp: tuple[int, int | None] | None, caches: _Caches) -> TableSnapshot:
        meta = posixpath.join(base_path, METAFOLDER)
        entries = fs.list_dir(meta)
        stamp = _stamp(entries)
        if props is None or stamp is None or stamp != known_stamp:
            props = load_properties(fs, base_path)  # raises NotAHudiTableError if absent
        if timeline_dir(base_path, props) == meta:
            timeline = Timeline.from_listing(fs, base_path, props, entries)
        else:  # layout 2: the timeline has its own folder
            timeline = Timeline.load(fs, base_path, props)
        return cls(fs, base_path, props, timeline, properties_stamp=stamp, caches=caches)

    def after_commit(self) -> TableSnapshot:
        """The snapshot right after this process committed through :attr:`timeline`
        (whose write methods keep it current): same properties and timeline, files re-listed
        on demand. No storage access."""
        return TableSnapshot(self.fs, self.base_path, self.properties, self.timeline,
                             properties_stamp=self._properties_stamp, caches=self._caches)

    # ------------------------------------------------------------------ views
    @cached_property
    def fsview(self) -> FileSystemView:
        view = FileSystemView(self.fs, self.base_path, self.properties, self.timeline)
        view._commit_cache = self._caches.commits  # immutable per instant: shared
        return view

    def commit_metadata(self, instant: Instant) -> CommitMetadata:
        return self.fsview.commit_metadata(instant)

    def latest_schema(self) -> pa.Schema | None:
        """Data schema of the latest completed write (else the create schema), cached."""
        from streamer.table.avro_schema import avro_to_arrow

        writes = self.timeline.completed_writes()
        key = writes[-1].timestamp if writes else ""
        if key in self._caches.schemas:
            return self._caches.schemas[key]
        schema = None
        for inst in reversed(writes):
            avro = self.commit_metadata(inst).schema
            if avro:
                schema = avro_to_arrow(json.loads(avro))
                break
        if schema is None and self.properties.create_schema:
            schema = avro_to_arrow(json.loads(self.properties.create_schema))
        self._caches.schemas[key] = schema
        return schema
