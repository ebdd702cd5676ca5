"""The file system view: which files make up the table as of an instant.

Files are grouped into *file groups* (one file id in one partition) and those into
*file slices* (one base instant: an optional base file plus the log files appended to
it). Only what completed instants wrote is visible:

- a base file is visible when the instant in its name completed;
- a log file is visible when its slice's base instant completed *or* is a pending
  compaction (async compaction: writers already append to the new slice while the
  compactor produces its base file). Per-block visibility (the block's own instant)
  is the merger's job;
- table version 8+ names a log file by its own deltacommit; it belongs to the slice
  with the newest base instant that was requested before the log's instant completed;
- file groups replaced by a completed ``replacecommit`` (insert overwrite, clustering)
  are gone.

While a compaction is pending, the *merged* slice (old base + old logs + new logs) is
what a snapshot must read; :meth:`FileSystemView.latest_merged_slices` returns it.
"""

from __future__ import annotations

import bisect
import posixpath
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from functools import cached_property

from streamer.errors import CorruptDataError, MissingFileError
from streamer.fs import FileStatus, FileSystem
from streamer.table import lsm_history
from streamer.table.instant import Action, Instant
from streamer.table.metadata import CommitMetadata, CompactionPlan
from streamer.table.metadata.avro import read_avro
from streamer.table.naming import (
    PARTITION_METAFILE,
    parse_base_file_name,
    parse_log_file_name,
)
from streamer.table.properties import METAFOLDER, TableProperties
from streamer.table.timeline import CommittedInstants, Timeline


def short_file_reason(size: int, committed: int) -> str:
    """What a log file shorter than its committed bytes is (a truncated copy: the blocks
    past its end are lost, though every block left in it reads)."""
    return f"log file is {size} bytes, shorter than the {committed} bytes completed writes put in it"


@dataclass(frozen=True, slots=True)
class BaseFile:
    path: str
    file_id: str
    instant_time: str
    write_token: str
    size: int = 0
    mtime_ns: int = 0  # from the listing; with path and size, what identifies this version

    @property
    def name(self) -> str:
        return posixpath.basename(self.path)


@dataclass(frozen=True, slots=True)
class LogFile:
    path: str
    file_id: str
    base_instant: str
    version: int
    write_token: str
    size: int = 0

    @property
    def name(self) -> str:
        return posixpath.basename(self.path)

    @property
    def sort_key(self) -> tuple[str, int, str]:
        return (self.base_instant, self.version, self.write_token)


@dataclass(frozen=True, slots=True)
class FileSlice:
    """A base file (optional) and its log files, in the order they were written."""

    partition_path: str
    file_id: str
    base_instant: str
    base_file: BaseFile | None = None
    log_files: tuple[LogFile, ...] = ()

    @property
    def is_empty(self) -> bool:
        return self.base_file is None and not self.log_files

    def without_logs(self) -> FileSlice:
        return FileSlice(self.partition_path, self.file_id, self.base_instant, self.base_file, ())

    @property
    def paths(self) -> list[str]:
        out = [self.base_file.path] if self.base_file else []
        return out + [lf.path for lf in self.log_files]


@dataclass
class FileGroup:
    partition_path: str
    file_id: str
    base_files: list[BaseFile] = field(default_factory=list)
    log_files: list[LogFile] = field(default_factory=list)


def slice_named(slices: Iterable[FileSlice], base_instant: str, *, planned_at: str) -> FileSlice | None:
    """The slice of one group a plan operation (of the plan ``planned_at``) names by its
    base instant time.

    Plans this project wrote at versions 8 and 9 before log-only slices were named as
    Hudi 1.x names them (after their first log's delta commit) carry ``""`` for such a
    slice: that is the group's first slice, when it has no base file and began before the
    plan (after it, it is a compaction's new slice: the planned one is gone).
    """
    slices = list(slices)
    for s in slices:
        if s.base_instant == base_instant:
            return s
    if base_instant == "" and slices and slices[0].base_file is None and slices[0].base_instant < planned_at:
        return slices[0]
    return None


@dataclass(frozen=True)
class _AsOf:
    """Visibility facts for one point in time, computed once per query."""

    completed: frozenset[str]
    #: what counts as committed: ``completed``, or older than the active timeline (archived)
    committed: CommittedInstants
    completion: dict[str, str]
    pending_compactions: dict[tuple[str, str], str]  # (partition, file id) -> compaction instant
    replaced: frozenset[tuple[str, str]]


class FileSystemView:
    """Lists a table's files once and answers slice queries for any instant."""

    def __init__(self, fs: FileSystem, base_path: str, props: TableProperties, timeline: Timeline) -> None:
        self.fs = fs
        self.base_path = base_path.rstrip("/")
        self.props = props
        self.timeline = timeline
        self._commit_cache: dict[str, CommitMetadata] = {}
        self._plan_cache: dict[str, CompactionPlan] = {}

    # ------------------------------------------------------------------ listing
    @cached_property
    def _groups(self) -> dict[tuple[str, str], FileGroup]:
        groups: dict[tuple[str, str], FileGroup] = {}
        meta_prefix = posixpath.join(self.base_path, METAFOLDER) + "/"
        base_prefix = self.base_path + "/"
        partitions: set[str] = set()
        for st in self._data_files():
            if st.path.startswith(meta_prefix):
                continue
            parent = posixpath.dirname(st.path)
            # listed under the base path: its folder relative to it is a slice (relpath
            # normalises and stats nothing more, at several times the cost per file)
            rel_dir = (parent[len(base_prefix):] if parent.startswith(base_prefix)
                       else posixpath.relpath(parent, self.base_path))
            rel_dir = "" if rel_dir == "." else rel_dir
            if any(seg.startswith(".") for seg in rel_dir.split("/") if seg):
                continue
            name = st.name
            if name == PARTITION_METAFILE:
                partitions.add(rel_dir)
                continue
            if (b := parse_base_file_name(name)) is not None:
                g = groups.setdefault((rel_dir, b.file_id), FileGroup(rel_dir, b.file_id))
                g.base_files.append(BaseFile(st.path, b.file_id, b.instant_time, b.write_token, st.size,
                                             st.mtime_ns or 0))
            elif (lf := parse_log_file_name(name)) is not None and lf.kind == "log" and not lf.cdc:
                g = groups.setdefault((rel_dir, lf.file_id), FileGroup(rel_dir, lf.file_id))
                g.log_files.append(
                    LogFile(st.path, lf.file_id, lf.base_instant, lf.version, lf.write_token or "", st.size)
                )
        self._partitions = sorted(partitions | {p for p, _ in groups})
        return groups

    @cached_property
    def _archived_completion(self) -> dict[str, str]:
        """Layout 2: requested -> completion time of each archived delta commit that wrote
        a log file still on storage, from the LSM history (an instant it lacks counts as
        completed at its requested time: older than the active timeline, it completed).

        Why: a log joins the slice its delta commit's completion time falls in, and Hudi's
        archiver moves delta commits whose logs live slices still read (ours never does);
        without their completion times those logs would drop out of every read."""
        first = self.timeline.first_instant
        wanted = {lf.base_instant for g in self._groups.values() for lf in g.log_files
                  if first is not None and lf.base_instant < first}
        if not wanted:
            return {}
        snap = lsm_history.read_snapshot(self.fs, lsm_history.history_dir(self.base_path, self.props))
        rows = lsm_history.read_instants(self.fs, snap, since=min(wanted), columns=("instantTime", "completionTime"))
        found = dict(zip(rows.column("instantTime").to_pylist(), rows.column("completionTime").to_pylist(),
                         strict=True))
        return {t: found.get(t) or t for t in wanted}

    @staticmethod
    def _committed(v: _AsOf, instant: str) -> bool:
        """``instant`` wrote committed files as of ``v`` (:class:`CommittedInstants`: Hudi's
        archiver moves commits whose base files live slices still read)."""
        return instant in v.committed

    def _completion(self, v: _AsOf, instant: str) -> str | None:
        """When the delta commit ``instant`` completed, as of ``v`` (layout 2); None: not
        completed (pending, failed or unknown)."""
        done = v.completion.get(instant)
        return done if done is not None else self._archived_completion.get(instant)

    def _data_files(self) -> Iterator[FileStatus]:
        """Every file outside ``.hoodie/`` and other hidden top-level folders, without
        walking them: the timeline, archive and metadata table can be large."""
        for st in self.fs.list_dir(self.base_path):
            if st.is_dir:
                if not st.name.startswith("."):
                    yield from self.fs.walk_files(st.path)
            else:
                yield st

    def gone(self, metas: Iterable[CommitMetadata]) -> list[str]:
        """The files the commits of ``metas`` wrote that storage no longer holds (a clean
        removes superseded slices), as paths relative to the base path."""
        listed = {f.path for g in self._groups.values() for f in g.base_files}
        listed.update(f.path for g in self._groups.values() for f in g.log_files)
        return [stat.path for meta in metas for stat in meta.write_stats()
                if stat.path and posixpath.join(self.base_path, stat.path) not in listed]

    def partitions(self) -> list[str]:
        """Relative partition paths ('' for a non-partitioned table)."""
        _ = self._groups
        return list(self._partitions)

    def file_groups(self, partition: str | None = None) -> list[FileGroup]:
        return [g for (p, _), g in sorted(self._groups.items()) if partition is None or p == partition]

    # ------------------------------------------------------------------ metadata (cached)
    def commit_metadata(self, instant: Instant) -> CommitMetadata:
        cm = self._commit_cache.get(instant.timestamp)
        if cm is None:
            path = self.timeline.path_of(instant)
            cm = CommitMetadata.from_bytes(self.timeline.read_details(instant), path)
            self._commit_cache[instant.timestamp] = cm
        return cm

    def compaction_plan(self, instant: Instant) -> CompactionPlan:
        plan = self._plan_cache.get(instant.timestamp)
        if plan is None:
            plan = CompactionPlan.from_bytes(self.timeline.read_plan(instant), self.timeline.path_of(instant))
            self._plan_cache[instant.timestamp] = plan
        return plan

    @cached_property
    def written_by_group(self) -> dict[tuple[str, str], list[tuple[str, str]]]:
        """(partition, file id) -> ``(relative path, instant)`` of every file the completed
        writes of this view's timeline wrote into that group (their write stats), once."""
        out: dict[tuple[str, str], list[tuple[str, str]]] = {}
        for inst in self.timeline.completed_writes():
            for stat in self.commit_metadata(inst).write_stats():
                if stat.path and stat.file_id:
                    out.setdefault((stat.partition_path or "", stat.file_id), []).append((stat.path, inst.timestamp))
        return out

    # ------------------------------------------------------------------ visibility
    def _timeline(self, as_of: str | None, by_completion: bool = False) -> Timeline:
        if not as_of:
            return self.timeline
        return self.timeline.completed_by(as_of) if by_completion else self.timeline.as_of(as_of)

    def _as_of(self, as_of: str | None, by_completion: bool = False) -> _AsOf:
        tl = self._timeline(as_of, by_completion)
        completed = tl.completed()
        pending: dict[tuple[str, str], str] = {}
        for inst in tl.pending_compactions():
            for op in self.compaction_plan(inst).operations:
                pending[(op.partition_path, op.file_id)] = inst.timestamp
        replaced: set[tuple[str, str]] = set()
        for inst in completed:
            if inst.action == Action.REPLACE_COMMIT:
                replaced |= self.commit_metadata(inst).replaced_file_ids()
        done = frozenset(i.timestamp for i in completed)
        return _AsOf(
            done,
            CommittedInstants(done, self.timeline.first_instant),
            {i.timestamp: (i.completion_time or i.timestamp) for i in completed},
            pending,
            frozenset(replaced),
        )

    def _slices(self, g: FileGroup, v: _AsOf) -> list[FileSlice]:
        """Visible slices of one group, oldest first."""
        pending = v.pending_compactions.get((g.partition_path, g.file_id))
        bases = {b.instant_time: b for b in g.base_files if self._committed(v, b.instant_time)}
        slice_keys = set(bases)
        if pending:
            slice_keys.add(pending)
        logs: dict[str, list[LogFile]] = {}
        if self.timeline.layout_version >= 2:
            for lf, key in self._layout2_log_keys(g, v, slice_keys).items():
                logs.setdefault(key, []).append(lf)
        else:
            for lf in g.log_files:
                if self._committed(v, lf.base_instant) or lf.base_instant == pending:
                    logs.setdefault(lf.base_instant, []).append(lf)
        out = []
        for key in sorted(slice_keys | set(logs)):
            lfs = tuple(sorted(logs.get(key, []), key=lambda f: f.sort_key))
            out.append(FileSlice(g.partition_path, g.file_id, key, bases.get(key), lfs))
        return out

    def _layout2_log_keys(self, g: FileGroup, v: _AsOf, slice_keys: set[str]) -> dict[LogFile, str]:
        """Layout 2: each completed log of ``g`` -> the slice it belongs to, as Hudi 1.x's
        ``HoodieFileGroup`` attributes it: the newest slice key (committed base file, pending
        compaction) at or before the completion time of the delta commit that wrote the log.
        Logs completed before every such key form a log-only slice named by the first of
        them's delta commit (Hudi names it so, and compaction plans, the cleaner and Hudi's
        compactor match slices by that name). Logs not completed belong to no slice here;
        Hudi files them under its newest slice, or - a group with no slice yet - opens one
        named by the pending log itself, filtered out of reads until that write completes
        or is rolled back (so until then Hudi's head name may differ from ours; the eager
        rollback before every commit of ours removes such logs)."""
        keys = sorted(slice_keys)
        out: dict[LogFile, str] = {}
        head: str | None = None
        for lf in sorted(g.log_files, key=lambda f: f.sort_key):
            done = self._completion(v, lf.base_instant)
            if done is None:
                continue
            i = bisect.bisect_right(keys, done)
            if i:
                out[lf] = keys[i - 1]
            else:
                head = head or lf.base_instant
                out[lf] = head
        return out

    def _visible_groups(self, v: _AsOf) -> Iterable[FileGroup]:
        for key, g in sorted(self._groups.items()):
            if key not in v.replaced:
                yield g

    # ------------------------------------------------------------------ slice queries
    def latest_file_slices(self, as_of: str | None = None) -> list[FileSlice]:
        """The newest visible slice of every live file group (pending-compaction slices as is)."""
        v = self._as_of(as_of)
        out = []
        for g in self._visible_groups(v):
            slices = self._slices(g, v)
            if slices:
                out.append(slices[-1])
        return out

    def latest_merged_slices(self, as_of: str | None = None, *, by_completion: bool = False) -> list[FileSlice]:
        """What a snapshot reads: the latest slice, merged with its predecessor while the
        compaction that starts it is still pending (old base + old logs + new logs).

        ``as_of`` keeps instants requested at or before it; with ``by_completion`` only
        those that had also completed by then (see :meth:`Timeline.completed_by`)."""
        v = self._as_of(as_of, by_completion)
        out = []
        for g in self._visible_groups(v):
            served = self._served_slices(g, v)
            if not served:
                continue
            latest = served[-1]
            if len(served) > 1:
                prev = served[0]
                latest = FileSlice(
                    g.partition_path,
                    g.file_id,
                    prev.base_instant,
                    prev.base_file,
                    prev.log_files + latest.log_files,
                )
            if not latest.is_empty:
                out.append(latest)
        return out

    def latest_base_files(self, as_of: str | None = None, *, by_completion: bool = False) -> list[FileSlice]:
        """Read-optimized view: each live group's newest completed base file (no logs)."""
        out = []
        for s in self.latest_merged_slices(as_of, by_completion=by_completion):
            if s.base_file is not None:
                out.append(s.without_logs())
        return out

    def all_slices(self, as_of: str | None = None) -> dict[tuple[str, str], list[FileSlice]]:
        """Every visible slice of every live group (for cleaning and compaction planning)."""
        v = self._as_of(as_of)
        return {(g.partition_path, g.file_id): self._slices(g, v) for g in self._visible_groups(v)}

    def group_slices(self, partition: str, file_id: str) -> list[FileSlice]:
        """The slices of one file group, replaced or not: a compaction planned before a
        replacecommit replaced its group still runs, as Hudi's compactor runs it (its base
        file stays hidden with the group, and the cleaner deletes both)."""
        g = self._groups.get((partition, file_id))
        return self._slices(g, self._as_of(None)) if g is not None else []

    def replaced_file_groups(self, as_of: str | None = None) -> frozenset[tuple[str, str]]:
        return self._as_of(as_of).replaced

    def pending_compaction_file_groups(self) -> dict[tuple[str, str], str]:
        """(partition, file id) -> instant of the pending compaction that names it."""
        return dict(self._as_of(None).pending_compactions)

    def pending_clustering_file_groups(self) -> dict[tuple[str, str], str]:
        """(partition, file id) -> instant of the pending clustering (Hudi's: nothing here
        schedules one) whose plan names it: the clustering rewrites each such group from
        what its plan read, so a write into it now would be lost (Hudi refuses them)."""
        out: dict[tuple[str, str], str] = {}
        for inst in self.timeline.pending():
            if not self.timeline.is_clustering(inst):
                continue
            try:
                _, plan = read_avro(self.timeline.read_plan(inst), self.timeline.path_of(inst))
            except (CorruptDataError, MissingFileError):
                continue
            for key in plan_file_groups(plan):
                out.setdefault(key, inst.timestamp)
        return out

    # ------------------------------------------------------------------ integrity
    def written_slice_key(self, partition: str, file_id: str, name: str) -> str | None:
        """The base instant of the slice a file written into this group belongs to
        (``None``: not a data file, or a log whose write has not completed). Layout 1
        names it in the file name; in layout 2 a log belongs to the newest slice started
        before its write completed, as :meth:`_slices` attributes it."""
        return self._written_slice_key((partition, file_id), name, None)

    def _written_slice_key(self, key: tuple[str, str], name: str, v: _AsOf | None) -> str | None:
        b = parse_base_file_name(name)
        if b is not None:
            return b.instant_time
        lf = parse_log_file_name(name)
        if lf is None:
            return None
        if self.timeline.layout_version < 2:
            return lf.base_instant
        v = v if v is not None else self._as_of(None)
        done = self._completion(v, lf.base_instant)
        if done is None:
            return None
        g = self._groups.get(key)
        keys = {bf.instant_time for bf in g.base_files if self._committed(v, bf.instant_time)} if g else set()
        pending = v.pending_compactions.get(key)
        if pending:
            keys.add(pending)
        newest = max((k for k in keys if k <= done), default=None)
        if newest is not None:
            return newest
        # a log-only head: named by its first completed log on storage (a lost first
        # log's successor names it now), as :meth:`_layout2_log_keys` names it
        first = min(keys) if keys else None
        heads = [f.base_instant for f in (g.log_files if g else ())
                 if (d := self._completion(v, f.base_instant)) is not None and (first is None or d < first)]
        return min(heads, default=lf.base_instant)

    def served_base_instants(self, as_of: str | None = None) -> dict[tuple[str, str], str]:
        """(partition, file id) -> the base instant of the oldest slice a snapshot reads
        (see :meth:`_served_floor`); older slices are superseded."""
        return self._served_floor(self._as_of(as_of))

    def _served_floor(self, v: _AsOf) -> dict[tuple[str, str], str]:
        """(partition, file id) -> the oldest base instant a snapshot of the group reads.

        The latest slice's, except while the compaction that opens it is pending: then a
        snapshot reads the previous slice too (its base and logs merged with the new
        logs, see :meth:`latest_merged_slices`), and a file lost from that slice is as
        missing from the read as one lost from the latest slice."""
        out: dict[tuple[str, str], str] = {}
        for g in self._visible_groups(v):
            served = self._served_slices(g, v)
            if served:
                out[(g.partition_path, g.file_id)] = served[0].base_instant
        return out

    def _served_slices(self, g: FileGroup, v: _AsOf) -> list[FileSlice]:
        """The slices of a group a snapshot reads, oldest first: the latest alone, or the
        previous one and the latest while the compaction that opens the latest is pending
        (the new slice has no base yet). Empty for a group without slices."""
        slices = self._slices(g, v)
        if not slices:
            return []
        latest = slices[-1]
        pending = v.pending_compactions.get((g.partition_path, g.file_id))
        if latest.base_instant == pending and latest.base_file is None and len(slices) > 1:
            return slices[-2:]
        return [latest]

    def check_committed_files(self, as_of: str | None = None, *, allow_short: bool = False,
                              instants: frozenset[str] | None = None) -> None:
        """Raise :class:`MissingFileError` for a file a completed instant wrote into a
        live slice that is not on storage (cleaning only removes superseded slices), and
        :class:`CorruptDataError` for a log file shorter than the bytes completed writes
        put in it (truncated at a block boundary, no block reads as corrupt) unless
        ``allow_short`` (a read past corrupt data, which reports what it skipped).
        ``instants``: only the files these instants wrote (an incremental read's range).

        Live: every slice a snapshot reads, the old slice of a pending compaction
        included (a plan that failed or was refused must not turn a loud refusal into a
        short read)."""
        v = self._as_of(as_of)
        present: dict[str, BaseFile | LogFile] = {}
        for g in self._groups.values():
            present.update((f.path, f) for f in g.base_files)
            present.update((f.path, f) for f in g.log_files)
        latest = self._served_floor(v)
        tl = self.timeline.as_of(as_of) if as_of else self.timeline
        for inst in tl.completed_writes():
            if instants is not None and inst.timestamp not in instants:
                continue
            for stat in self.commit_metadata(inst).write_stats():
                if not stat.path or not stat.file_id:
                    continue
                partition = stat.partition_path if stat.partition_path is not None else ""
                key = (partition, stat.file_id)
                if key in v.replaced:
                    continue
                full = posixpath.join(self.base_path, stat.path)
                listed = present.get(full)
                if listed is not None and (allow_short or not isinstance(listed, LogFile)
                                           or listed.size >= stat.file_size_in_bytes):
                    continue
                slice_instant = self._written_slice_key(key, posixpath.basename(stat.path), v)
                newest = latest.get(key)
                if newest is None or (slice_instant is not None and slice_instant >= newest):
                    if listed is None:
                        raise MissingFileError(f"file written by completed instant {inst.timestamp} is missing", full)
                    try:  # the listing's size may be older than the file: ask again
                        size = self.fs.status(full).size
                    except (MissingFileError, FileNotFoundError) as e:
                        raise MissingFileError(f"file written by completed instant {inst.timestamp} is missing",
                                               full) from e
                    if size < stat.file_size_in_bytes:
                        raise CorruptDataError(f"{short_file_reason(size, stat.file_size_in_bytes)} "
                                               f"(data committed by instant {inst.timestamp})", full)


def plan_file_groups(node: object, partition: str = "") -> Iterator[tuple[str, str]]:
    """(partition, fileId) pairs anywhere in a decoded Avro plan (clustering plans nest them)."""
    if isinstance(node, dict):
        part = node.get("partitionPath") or partition
        fid = node.get("fileId")
        if isinstance(fid, str) and fid:
            yield (part or "", fid)
        for v in node.values():
            yield from plan_file_groups(v, part or "")
    elif isinstance(node, list):
        for v in node:
            yield from plan_file_groups(v, partition)
