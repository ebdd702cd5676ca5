"""Is a table intact? Damage found before it is read, compacted, cleaned or written over.

Readers, services and the writer all ask the same questions, answered here once:

- **files present**: every file a completed instant wrote into a live slice is on
  storage (cleaning removes only superseded slices), and no log file is shorter than
  the bytes completed writes put in it (a copy cut at a block boundary reads cleanly,
  short);
- **blocks intact**: a corrupt log block (bad magic, length or header) matters only when
  it lies inside bytes a completed instant wrote. Each delta write stat records where its
  append started (``logOffset``) and the file's size after it (``fileSizeInBytes``), so
  the committed byte ranges of every log file are known; a torn block past them is what
  a writer that crashed mid-append leaves (Hudi's readers skip it, and so do we);
- **metadata parseable**: every completed instant's file decodes (JSON commit metadata,
  Avro clean/rollback metadata, compaction plans); an emptied commit file of a write whose
  blocks are still in the log lost its write stats;
- **base files readable**: the footer parses; a deep check reads every page, verifying
  page checksums where the file has them.

A compaction of a damaged slice would write a base file without the damaged records and
a clean would then delete the rest: loss made permanent and silent. So services refuse,
naming the file and the instant that wrote it, and ``streamer check`` reports it all.
"""

from __future__ import annotations

import bisect
import posixpath
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Protocol

import pyarrow as pa
import pyarrow.parquet as pq

from streamer.errors import StreamerError, first_line
from streamer.fs import FileSystem
from streamer.table.fsview import FileSlice, FileSystemView, short_file_reason
from streamer.table.instant import Action, Instant
from streamer.table.log_format import BlockType, LogBlock, read_log_file
from streamer.table.metadata import CleanMetadata, CommitMetadata, CompactionPlan, RollbackMetadata
from streamer.table.naming import parse_base_file_name, parse_log_file_name
from streamer.table.timeline import Timeline

_WRITE_ACTIONS = (Action.COMMIT, Action.DELTA_COMMIT, Action.REPLACE_COMMIT)

#: Commit metadata key (``extraMetadata``) listing the damage a compaction dropped
#: knowingly: a JSON list of ``{"path", "reason", "instant"}``. Only ``streamer repair
#: --drop-damaged`` writes it; ``streamer check`` then reports those items as dropped,
#: not as damage (they lie in slices that compaction superseded).
DROPPED_KEY = "mor_streamer.dropped_damage"


@dataclass(frozen=True)
class Damage:
    """One damaged thing: the file, what is wrong, and the instant whose data it holds."""

    path: str
    reason: str
    instant: str | None = None

    def __str__(self) -> str:
        by = f" (data committed by instant {self.instant})" if self.instant else ""
        return f"{self.path}: {self.reason}{by}"


@dataclass
class CommittedRegions:
    """Byte ranges of each log file written by completed instants (from write stats)."""

    ranges: dict[str, list[tuple[int, int, str]]] = field(default_factory=dict)

    @classmethod
    def of(cls, view: FileSystemView, timeline: Timeline) -> CommittedRegions:
        out = cls()
        for inst in timeline.completed_writes():
            for stat in view.commit_metadata(inst).write_stats():
                name = posixpath.basename(stat.path or "")
                if not stat.path or parse_log_file_name(name) is None:
                    continue
                full = posixpath.join(view.base_path, stat.path)
                end = stat.file_size_in_bytes or 0
                start = stat.log_offset if stat.log_offset is not None else max(0, end - stat.total_write_bytes)
                out.ranges.setdefault(full, []).append((start, max(end, start), inst.timestamp))
        for spans in out.ranges.values():
            spans.sort()
        return out

    def owner(self, path: str, offset: int) -> str | None:
        """The instant whose committed bytes hold ``offset``; ``None`` when none does
        (past every committed append: a torn write that never committed)."""
        spans = self.ranges.get(path)
        if not spans:
            return None
        i = bisect.bisect_right(spans, (offset, float("inf"), "")) - 1
        for start, end, inst in reversed(spans[: i + 1]):
            if start <= offset < end:
                return inst
        return None

    def knows(self, path: str) -> bool:
        return path in self.ranges


def corrupt_block_damage(regions: CommittedRegions, path: str, offset: int | None, reason: str) -> Damage | None:
    """The damage a corrupt block is, or ``None`` for a torn tail no instant committed.

    A log file no active instant names (its writes archived) cannot be told apart:
    it counts as damage, never as something safe to skip.
    """
    if offset is not None and regions.knows(path):
        inst = regions.owner(path, offset)
        if inst is None:
            return None
        return Damage(path, f"corrupt log block at offset {offset}", inst)
    return Damage(path, f"corrupt log block at offset {offset}" if offset is not None else reason)


class CorruptRead(Protocol):
    """A corrupt block a read skipped (:class:`streamer.table.merge.CorruptBlock`): its log
    file, and ``offset`` and ``reason`` where it has them."""

    @property
    def path(self) -> str: ...


def read_damage(view: FileSystemView, timeline: Timeline, fslice: FileSlice | None,
                corrupt: Iterable[CorruptRead], regions: CommittedRegions | None = None) -> list[Damage]:
    """The damage behind what one read of ``fslice`` met: files missing from it, and the
    corrupt blocks it skipped (objects with ``path``, ``offset``, ``reason``) that lie in
    committed bytes."""
    out = missing_files(view, timeline, [fslice]) if fslice is not None else []
    for cb in corrupt:
        if regions is None:
            regions = CommittedRegions.of(view, timeline)
        d = corrupt_block_damage(regions, cb.path, getattr(cb, "offset", None), getattr(cb, "reason", ""))
        if d is not None:
            out.append(d)
    if fslice is not None and fslice.log_files:
        regions = regions or CommittedRegions.of(view, timeline)
        named = {d.path for d in out}  # a torn last block explains its file's short length
        out += [d for d in short_files(view.fs, [fslice], regions) if d.path not in named]
    return out


# --------------------------------------------------------------------------- slices
def missing_files(view: FileSystemView, timeline: Timeline, slices: Iterable[FileSlice]) -> list[Damage]:
    """Files completed instants wrote into these slices that are not on storage.

    ``timeline`` is the view's own; the files written per group are gathered once per view
    (a compaction asks for every slice of its plan)."""
    out: list[Damage] = []
    for s in slices:
        present = {posixpath.basename(p) for p in s.paths}
        for path, instant in view.written_by_group.get((s.partition_path, s.file_id), ()):
            name = posixpath.basename(path)
            if name in present:
                continue
            if view.written_slice_key(s.partition_path, s.file_id, name) == s.base_instant:
                out.append(Damage(posixpath.join(view.base_path, path), "file is missing", instant))
    return out


def short_files(fs: FileSystem, slices: Iterable[FileSlice], regions: CommittedRegions) -> list[Damage]:
    """Log files shorter than the bytes completed writes put in them: cut at a block
    boundary, every block left reads, yet the committed blocks past the end are lost."""
    out: list[Damage] = []
    for s in slices:
        for lf in s.log_files:
            spans = regions.ranges.get(lf.path)
            if not spans:
                continue
            end, inst = max((e, i) for _, e, i in spans)
            if lf.size >= end:
                continue
            try:  # the listing's size may be older than the file
                size = fs.status(lf.path).size
            except (StreamerError, FileNotFoundError):
                continue  # gone: missing_files names it
            if size < end:
                out.append(Damage(lf.path, short_file_reason(size, end), inst))
    return out


def slice_damage(fs: FileSystem, view: FileSystemView, timeline: Timeline, fslice: FileSlice,
                 regions: CommittedRegions | None = None, *, deep: bool = False) -> list[Damage]:
    """Everything wrong with one slice: missing files, log files cut short, committed
    corrupt blocks, an unreadable base file (``deep``: every page and every block's
    records decoded)."""
    out = missing_files(view, timeline, [fslice])
    if fslice.base_file is not None:
        d = base_file_damage(fs, fslice.base_file.path, deep=deep)
        if d is not None:
            out.append(d)
    if deep and fslice.base_file is not None and not out:
        out.extend(_footer_index_damage(fslice.base_file.path, _base_kv_and_keys(fs, fslice.base_file.path)))
    for lf in fslice.log_files:
        try:
            blocks = read_log_file(fs, lf.path, lazy=True)
        except FileNotFoundError:
            out.append(Damage(lf.path, "file is missing"))
            continue
        for blk in blocks:
            if blk.block_type == BlockType.CORRUPT or blk.corrupt_reason:
                if regions is None:
                    regions = CommittedRegions.of(view, timeline)
                d = corrupt_block_damage(regions, lf.path, blk.offset, blk.corrupt_reason or "corrupt block")
                if d is not None:
                    out.append(d)
            elif deep:
                d = _block_content_damage(blk)
                if d is not None:
                    out.append(d)
                elif blk.block_type == BlockType.PARQUET_DATA:
                    kv = blk.parquet_metadata() or {}
                    out.extend(_footer_index_damage(f"{blk.log_path} block at offset {blk.offset}",
                                                    (kv, blk.record_keys()), blk.instant_time))
    if fslice.log_files:
        regions = regions or CommittedRegions.of(view, timeline)
        named = {d.path for d in out}  # a torn last block explains its file's short length
        out += [d for d in short_files(fs, [fslice], regions) if d.path not in named]
    if deep and not out and fslice.log_files:
        out.extend(_slice_index_damage(fs, timeline, fslice))
    return out


def _slice_index_damage(fs: FileSystem, timeline: Timeline, fslice: FileSlice) -> list[Damage]:
    """The slice summary the index reads first (the newest Parquet block's key range of
    the slice's log blocks - and, in blocks of the older formats, their cumulative filter;
    RFC-06) must admit every key the slice holds."""
    from streamer.index.slice_members import is_committed_fn, slice_members, slice_summary

    members = slice_members(fs, fslice, is_committed_fn(timeline.completed_timestamps(), timeline.first_instant))
    try:
        index = slice_summary(members, None)
        summary, source = index.lookup, index.source
    except StreamerError as e:  # the filter's bytes do not parse
        newest = members[-1] if members else None
        where = newest.path if newest is not None else fslice.file_id
        return [Damage(where, f"the slice's key index does not decode ({first_line(e)})")]
    if summary is None or source is None or source.kind == "base":
        return []  # a base file alone answers with its own footer, checked above
    live = [m.keys(None).cast(pa.string()) for m in members if m.kind != "delete"]
    keys = pa.concat_arrays([k.combine_chunks() if isinstance(k, pa.ChunkedArray) else k for k in live])
    missing = int(len(keys) - summary.candidates(keys).sum()) if len(keys) else 0
    if missing:
        return [Damage(f"{source.path} block at offset {source.block.offset if source.block else 0}",
                       f"the slice's key index in this block's footer misses {missing} of the slice's "
                       f"{len(keys)} keys: lookups would miss them", source.instant)]
    return []


def _base_kv_and_keys(fs: FileSystem, path: str) -> tuple[dict[bytes, bytes], pa.Array]:
    with fs.open_input_file(path) as f:
        pf = pq.ParquetFile(f, page_checksum_verification=True)
        kv = dict(pf.metadata.metadata or {})
        keys = pf.read(columns=["_hoodie_record_key"]).column(0).combine_chunks()
    return kv, keys


def _footer_index_damage(where: str, kv_and_keys: tuple[dict[bytes, bytes], pa.Array],
                         instant: str | None = None) -> list[Damage]:
    """The file's own index (Hudi's bloom filter and key range in the footer) must admit
    every key the file holds. Page checksums do not cover the footer: a flipped bit in a
    bloom filter would make the index miss a key, and its update land in a second file
    group."""
    from streamer.index.rfc06 import KeySummary  # the index layer builds on this one

    kv, keys = kv_and_keys
    if len(keys) == 0:
        return []
    try:
        own = KeySummary.from_kv(kv, slice_level=False)
    except (StreamerError, ValueError) as e:
        return [Damage(where, f"bloom filter in the footer does not decode ({first_line(e)})", instant)]
    if own is None:
        return []
    keys = keys.cast(pa.string())
    missing = int(len(keys) - own.candidates(keys).sum())
    if missing:
        return [Damage(where, f"the footer's key index (bloom filter / key range) misses {missing} of its "
                              f"{len(keys)} keys: lookups would miss them", instant)]
    return []


def _block_content_damage(blk: LogBlock) -> Damage | None:
    try:
        if blk.block_type == BlockType.DELETE:
            blk.deletes()
        elif blk.block_type in (BlockType.PARQUET_DATA, BlockType.AVRO_DATA):
            blk.records()
    except (StreamerError, OSError, ValueError, pa.ArrowException) as e:
        return Damage(blk.log_path, f"log block at offset {blk.offset} does not decode ({first_line(e)})",
                      blk.instant_time)
    return None


def base_file_damage(fs: FileSystem, path: str, *, deep: bool = False) -> Damage | None:
    """``None`` if the base file's footer parses (``deep``: and every page decodes, page
    checksums verified where the writer stored them)."""
    name = parse_base_file_name(posixpath.basename(path))
    instant = name.instant_time if name else None
    try:
        with fs.open_input_file(path) as f:
            if deep:
                pq.ParquetFile(f, page_checksum_verification=True).read()
            else:
                pq.read_metadata(f)
    except FileNotFoundError:
        return Damage(path, "file is missing", instant)
    except (OSError, ValueError, pa.ArrowException) as e:
        return Damage(path, f"unreadable Parquet file ({first_line(e)})", instant)
    return None


# --------------------------------------------------------------------------- timeline
def timeline_damage(timeline: Timeline) -> list[Damage]:
    """Completed instants whose file does not decode, and pending plans that do not."""
    out: list[Damage] = []
    for inst in timeline.instants:
        if not (inst.is_completed or inst.action in (Action.COMPACTION, Action.LOG_COMPACTION)):
            continue
        path = timeline.path_of(inst)
        try:
            d = _instant_damage(timeline, inst, path)
        except FileNotFoundError:
            d = Damage(path, "instant file vanished while checking", inst.timestamp)
        if d is not None:
            out.append(d)
    return out


def _instant_damage(timeline: Timeline, inst: Instant, path: str) -> Damage | None:
    try:
        if inst.is_completed and inst.action in _WRITE_ACTIONS:
            data = timeline.read_details(inst)
            if not data.strip():
                return Damage(path, "commit file is empty: the write's metadata (its files and schema) is lost",
                              inst.timestamp)
            CommitMetadata.from_bytes(data, path)
        elif inst.is_completed and inst.action == Action.CLEAN:
            CleanMetadata.from_bytes(timeline.read_details(inst), path)
        elif inst.is_completed and inst.action == Action.ROLLBACK:
            RollbackMetadata.from_bytes(timeline.read_details(inst), path)
        elif not inst.is_completed:
            CompactionPlan.from_bytes(timeline.read_plan(inst), path)
    except StreamerError as e:
        return Damage(path, first_line(e), inst.timestamp)
    return None


# --------------------------------------------------------------------------- table
@dataclass
class CheckReport:
    """What ``streamer check`` verified and what it found."""

    damage: list[Damage] = field(default_factory=list)
    #: damage a completed compaction dropped knowingly (:data:`DROPPED_KEY`): (item, by instant)
    dropped: list[tuple[Damage, str]] = field(default_factory=list)
    instants: int = 0
    slices: int = 0
    files: int = 0

    @property
    def ok(self) -> bool:
        return not self.damage


def check_table(fs: FileSystem, view: FileSystemView, timeline: Timeline, *, deep: bool = True) -> CheckReport:
    """Verify the timeline, then every live slice (files, blocks, base files)."""
    report = CheckReport(instants=len(timeline.instants))
    report.damage.extend(timeline_damage(timeline))
    if report.damage:  # slices are judged by the commit metadata: it must parse first
        return report
    regions = CommittedRegions.of(view, timeline)
    served = view.served_base_instants()
    acknowledged = dropped_damage(view, timeline)
    for (partition, file_id), slices in view.all_slices().items():
        floor = served.get((partition, file_id))
        for s in slices:
            report.slices += 1
            report.files += len(s.paths)
            for d in slice_damage(fs, view, timeline, s, regions, deep=deep):
                by = acknowledged.get(d)
                if by is not None and floor is not None and s.base_instant < floor:
                    report.dropped.append((d, by))  # superseded by the compaction that dropped it
                else:
                    report.damage.append(d)
    return report


def dropped_damage(view: FileSystemView, timeline: Timeline) -> dict[Damage, str]:
    """Damage a completed compaction dropped knowingly -> that compaction's instant."""
    import json

    out: dict[Damage, str] = {}
    for inst in timeline.completed_writes():
        if inst.action != Action.COMMIT:
            continue  # only a compaction drops knowingly
        try:
            text = view.commit_metadata(inst).extra_metadata.get(DROPPED_KEY)
        except StreamerError:
            continue  # timeline_damage reports an undecodable commit file
        if not text:
            continue
        try:
            items = json.loads(text)
        except ValueError:
            continue
        for item in items if isinstance(items, list) else ():
            if isinstance(item, dict) and item.get("path") and item.get("reason"):
                out[Damage(item["path"], item["reason"], item.get("instant"))] = inst.timestamp
    return out

