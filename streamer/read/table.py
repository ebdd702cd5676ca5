"""``Table``: open a Hudi table and query it (snapshot, read-optimized, incremental, time travel).

Planning (which slices, which instants count) happens here on the driver; reading a
slice is :func:`streamer.read.slice_reader.read_file_slice`, run in a small thread pool
locally or on Spark executors by :mod:`streamer.read.spark_source`.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import logging
import operator
import posixpath
import re
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, TypedDict

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq

from streamer import defaults
from streamer.errors import (  # noqa: F401 - QueryError re-exported
    CorruptDataError,
    MissingFileError,
    QueryError,
    SchemaError,
    StreamerError,
    UnsupportedMergeError,
    VersionsCleanedError,
)
from streamer.fs import FileSystem, resolve
from streamer.integrity import CommittedRegions, read_damage, short_files
from streamer.read.incremental import ArchivedReach, archived_reach, has_archive
from streamer.read.slice_reader import SliceReadSpec, read_file_slice
from streamer.table.archived_commits import moved_to_archive
from streamer.table.evolution import merge_type
from streamer.table.fsview import FileSlice, FileSystemView
from streamer.table.instant import Action, Instant
from streamer.table.merge import META_COLUMNS, MergeSpec, ScanStats, concat_aligned
from streamer.table.naming import parse_base_file_name, parse_log_file_name, partition_values
from streamer.table.properties import TableProperties, load_properties
from streamer.table.snapshot import TableSnapshot
from streamer.table.timeline import CommittedInstants, Timeline

if TYPE_CHECKING:
    from typing import Unpack  # Python 3.11; annotations only

    from streamer.read.lookup import Lookup

log = logging.getLogger(__name__)

QUERIES = ("snapshot", "read_optimized", "incremental")
#: Plans made again when an archiver moved an instant during one (each move needs one).
_ARCHIVE_RETRIES = 3
#: Schema metadata key carrying the corrupt-block count on every result table.
CORRUPT_BLOCKS_METADATA_KEY = b"morstreamer.corrupt_blocks"


class QueryOptions(TypedDict, total=False):
    """The options of a query, declared once: :meth:`Table.scan` and :meth:`Table.read`
    pass them on to :meth:`Table.plan`, which documents them (keyword only)."""

    as_of: str | None
    begin: str | None
    end: str | None
    columns: list[str] | None
    filter: pc.Expression | Sequence[pc.Expression] | None
    allow_corrupt: bool


#: Functions whose result is null when an input is null, so a null standing for an
#: unknown data column keeps meaning "unknown" (comparisons, and/or/not print infix).
_NULL_PROPAGATING = frozenset({
    "invert", "negate", "negate_checked", "add", "add_checked", "subtract", "subtract_checked",
    "multiply", "multiply_checked", "divide", "divide_checked", "cast", "abs", "abs_checked",
    "is_nan", "is_inf", "is_finite", "starts_with", "ends_with", "match_substring",
})


#: Functions of one column (plus options): safe whatever they do with null when that
#: column is a partition column, whose value is known.
_ONE_COLUMN = frozenset({
    "is_in", "index_in", "is_null", "is_valid", "is_nan", "is_finite", "is_inf", "starts_with",
    "ends_with", "match_substring", "match_substring_regex", "match_like", "utf8_lower", "utf8_upper",
})


def _unknown_is_null_safe(expr: pc.Expression, known: Iterable[str]) -> bool:
    """Every function the expression calls propagates nulls (see :data:`_NULL_PROPAGATING`),
    or is a one-column function of a ``known`` (partition) column."""
    text, known = str(expr), set(known)
    for m in re.finditer(r"\b([A-Za-z_][A-Za-z0-9_]*)\(", text):
        name = m.group(1)
        if name in _NULL_PROPAGATING:
            continue
        arg = re.match(r"([A-Za-z_][A-Za-z0-9_]*)[,)]", text[m.end():])
        if name in _ONE_COLUMN and arg is not None and arg.group(1) in known:
            continue
        return False
    return True


@dataclass
class ReadPlan:
    """The slices a query reads and how to read them."""

    slices: list[FileSlice]
    spec: SliceReadSpec
    schema: pa.Schema | None
    #: committed byte ranges of the slices' log files, where a planner needs them
    #: (the Spark source's executors; the local reader asks the view itself)
    committed: dict[str, list[tuple[int, int, str]]] | None = None


@dataclass
class ReadResult:
    table: pa.Table
    stats: ScanStats = field(default_factory=ScanStats)


class Table:
    """A Hudi table on any ``pyarrow.fs`` filesystem."""

    def __init__(self, fs: FileSystem, base_path: str, *, snapshot: TableSnapshot | None = None) -> None:
        self.fs = fs
        self.base_path = base_path.rstrip("/") or "/"
        if snapshot is not None:
            self._set_snapshot(snapshot)
        else:
            self.properties: TableProperties = load_properties(fs, self.base_path)

    @classmethod
    def from_snapshot(cls, snapshot: TableSnapshot) -> Table:
        """A table handle over a snapshot someone already read (e.g. the writer's
        post-commit snapshot): no storage access until something new is asked for."""
        return cls(snapshot.fs, snapshot.base_path, snapshot=snapshot)

    def _set_snapshot(self, snapshot: TableSnapshot) -> None:
        self.properties = snapshot.properties
        self.__dict__["timeline"] = snapshot.timeline
        self.__dict__["fsview"] = snapshot.fsview
        self._snapshot = snapshot

    @property
    def snapshot(self) -> TableSnapshot:
        """This handle's state as a :class:`TableSnapshot` (made once, then refreshed)."""
        snap = getattr(self, "_snapshot", None)
        if snap is None or snap.timeline is not self.timeline:
            snap = TableSnapshot(self.fs, self.base_path, self.properties, self.timeline)
            snap.__dict__["fsview"] = self.fsview
            self._snapshot = snap
        return snap

    @classmethod
    def open(cls, path_or_uri: str, *, fs: FileSystem | None = None) -> Table:
        if fs is not None:
            return cls(fs, path_or_uri)
        fs_, path = resolve(path_or_uri)
        return cls(fs_, path)

    # ------------------------------------------------------------------ state
    @cached_property
    def timeline(self) -> Timeline:
        return Timeline.load(self.fs, self.base_path, self.properties)

    @cached_property
    def fsview(self) -> FileSystemView:
        return FileSystemView(self.fs, self.base_path, self.properties, self.timeline)

    def refresh(self) -> None:
        """See new commits: one listing of ``.hoodie/`` (properties re-read only if they
        changed); file listings are redone on demand."""
        self._set_snapshot(self.snapshot.refresh())

    def merge_spec(self) -> MergeSpec:
        p = self.properties
        unsupported = p.unsupported_merge
        if unsupported:
            raise UnsupportedMergeError(
                f"{unsupported}: this project merges records by event time (one ordering field) or commit time only",
                self.base_path)
        return MergeSpec(
            record_key_fields=p.record_key_fields,
            ordering_field=p.precombine_field,
            event_time_ordering=p.merge_mode == "EVENT_TIME_ORDERING",
            populate_meta_fields=p.populate_meta_fields,
            # version 6 belongs to Hudi 0.x, whose payload orders delete blocks its own way
            payload_delete_order=p.version < 8,
        )

    def schema(self) -> pa.Schema | None:
        """Latest table schema (meta columns included when the table populates them).

        A base file's own types first (what the reader returns for its columns), then the
        columns that the last write's schema (its commit metadata, as Hudi's
        ``TableSchemaResolver`` reads it) adds: a column added by a later upsert lives in
        log blocks only until the next compaction, and a schema read from the base file
        alone would hide it from projections, filters and the Spark source. A base file's
        column evolves as the committed schema evolved it since (a wider number, a struct's
        new field, in lists and maps too): its older type cannot hold the newer values.
        Worked out once per state of the handle (a footer read on object storage is a request).
        """
        view = self.fsview
        cached = self.__dict__.get("_schema_of")
        if cached is not None and cached[0] is view:
            return cached[1]
        schema = self._latest_schema()
        self.__dict__["_schema_of"] = (view, schema)
        return schema

    def _latest_schema(self) -> pa.Schema | None:
        committed = self._committed_schema()
        for s in self.fsview.latest_merged_slices():
            if s.base_file is not None:
                with self.fs.open_input_file(s.base_file.path) as f:
                    schema = pq.read_schema(f).remove_metadata()
                if committed is not None:
                    schema = pa.schema([*[_evolved(f, committed) for f in schema],
                                        *[f for f in committed if f.name not in schema.names]])
                if not self.properties.populate_meta_fields:
                    schema = pa.schema([f for f in schema if f.name not in META_COLUMNS])
                return schema
        if committed is None:
            return None
        schema = committed
        if self.properties.populate_meta_fields:
            meta = [pa.field(c, pa.string()) for c in META_COLUMNS if c not in schema.names]
            schema = pa.schema(meta + list(schema))
        return schema

    def _committed_schema(self, as_of: str | None = None) -> pa.Schema | None:
        """The schema of the last write completed (at ``as_of``; else the table's create
        schema), as Arrow."""
        avro = None
        last = (self.timeline.as_of(as_of) if as_of else self.timeline).last_completed_write()
        if last is not None:
            avro = self.fsview.commit_metadata(last).schema
        avro = avro or self.properties.create_schema
        if not avro:
            return None
        from streamer.table.avro_schema import avro_to_arrow

        return avro_to_arrow(json.loads(avro))

    # ------------------------------------------------------------------ planning
    def _check_instant(self, ts: str | None, what: str) -> None:
        if ts is not None and not ts.isdigit():
            raise QueryError(f"{what} {ts!r} is not an instant time (yyyyMMddHHmmssSSS)")

    def _check_time_travel(self, as_of: str) -> None:
        """Refuse a time travel whose answer is gone or not yet decided, as Hudi does.

        Apache Hudi (``TimelineUtils.validateTimestampAsOf``) refuses an instant at or
        after the first pending write (its files may still change) and one before the
        latest clean's ``earliestCommitToRetain`` (the file versions it needs were
        cleaned): answering anyway would return a silently incomplete table. An instant
        before the first commit is refused too (naming that commit): its empty answer
        would be indistinguishable from an empty table. The CLI, the library and
        ``format("morhudi")`` all go through here.
        """
        from streamer.table.metadata import CleanMetadata

        tl = self.timeline
        pending = [i for i in tl.pending() if i.action in ("commit", "deltacommit")]
        if pending and as_of >= pending[0].timestamp:
            raise QueryError(
                f"time travel to {as_of}: must be earlier than the first pending write "
                f"{pending[0].timestamp} of {self.base_path}"
            )
        cleans = [i for i in tl.completed() if i.action == "clean"]
        writes = tl.completed_writes()
        if cleans:
            meta = CleanMetadata.from_bytes(tl.read_details(cleans[-1]), tl.path_of(cleans[-1]))
            retain = meta.earliest_commit_to_retain
            if retain and as_of < retain:
                raise VersionsCleanedError(
                    f"time travel to {as_of}: clean {cleans[-1].timestamp} removed the file versions "
                    f"before {retain} of {self.base_path}; retain more commits for time travel"
                )
            if not retain and writes and as_of < writes[0].timestamp:
                raise VersionsCleanedError(
                    f"time travel to {as_of}: earlier than the first retained write "
                    f"{writes[0].timestamp} of {self.base_path} (cleaned or archived)"
                )
        if writes and as_of < writes[0].timestamp:
            # an empty answer would look like an empty table: say why there is none
            if self._has_archive():
                raise QueryError(
                    f"time travel to {as_of}: before {writes[0].timestamp}, the first commit on the active "
                    f"timeline of {self.base_path}; older instants are archived and cannot be read as of")
            raise QueryError(f"time travel to {as_of}: before the first commit {writes[0].timestamp} of "
                             f"{self.base_path}: the table did not exist yet")
        self._check_kept_versions(as_of, [c for c in cleans if c.timestamp > as_of])

    def _check_kept_versions(self, as_of: str, cleans: list[Instant]) -> None:
        """Refuse a time travel to ``as_of`` if one of ``cleans`` (completed after it)
        removed a file of a slice it reads: one that began by ``as_of`` in a group with no
        slice left that began after it and by ``as_of``.

        Why: a clean that keeps file versions names no commit to retain, and the writes of
        a removed slice may be archived, so neither the clean's bound nor the files the
        active writes name can tell; only what each clean removed can (before, such a time
        travel silently lacked the groups' rows)."""
        from streamer.table.metadata import CleanMetadata

        tl = self.timeline
        for clean in cleans:
            meta = CleanMetadata.from_bytes(tl.read_details(clean), tl.path_of(clean))
            for partition, pm in meta.partition_metadata.items():
                for name in pm.success_delete_files:
                    began = _slice_began(posixpath.basename(name))
                    if began is None or began[1] > as_of:
                        continue
                    file_id, start = began
                    starts = [s.base_instant for s in self.fsview.group_slices(partition, file_id)]
                    if not any(start < b <= as_of for b in starts):
                        raise VersionsCleanedError(
                            f"time travel to {as_of}: clean {clean.timestamp} removed {name}, a file version it "
                            f"reads, of {self.base_path}; retain more file versions for time travel")

    def _check_files(self, as_of: str | None, allow_corrupt: bool) -> None:
        """The files the slices read as of ``as_of`` are all there (see
        :meth:`FileSystemView.check_committed_files`). A time travel's may have been
        cleaned (a clean that keeps file versions names no commit to retain, which
        :meth:`_check_time_travel` could compare): refused naming the clean, never read as
        a group with no slice."""
        try:
            self.fsview.check_committed_files(as_of, allow_short=allow_corrupt)
        except MissingFileError as e:
            cleans = [i.timestamp for i in self.timeline.completed() if i.action == "clean"]
            if as_of is None or not cleans or cleans[-1] <= as_of or moved_to_archive(
                    e.path, self.snapshot.refresh().timeline):
                raise  # damage, or an instant archived during the read (planned again)
            raise VersionsCleanedError(
                f"time travel to {as_of}: clean {cleans[-1]} removed file versions it reads ({e.path}) of "
                f"{self.base_path}; retain more file versions for time travel") from e

    def _has_archive(self) -> bool:
        """Instants were archived (:func:`streamer.read.incremental.has_archive`)."""
        return has_archive(self.fs, self.base_path, self.properties, self.timeline)

    def plan(
        self,
        query: str = "snapshot",
        *,
        as_of: str | None = None,
        begin: str | None = None,
        end: str | None = None,
        columns: list[str] | None = None,
        filter: pc.Expression | Sequence[pc.Expression] | None = None,
        allow_corrupt: bool = False,
    ) -> ReadPlan:
        """Which slices the query reads, and how.

        ``filter``: an Arrow expression, or a sequence of them meaning their AND. Each
        one prunes partitions on its own, so a conjunct the partition check cannot see
        through (``fare IS NOT NULL``, which Spark adds to ``fare > 50``) does not stop
        ``city = 'sf'`` from pruning.

        A snapshot's plan refuses a file that a completed write put into a slice it reads
        when the file is missing, or is a log file shorter than the bytes committed to it
        (``allow_corrupt``: the short one is read as far as it goes, with a warning); an
        incremental plan, such a file that a write of its range put into a live slice.
        """
        for attempt in range(_ARCHIVE_RETRIES + 1):
            try:
                return self._plan_once(query, as_of=as_of, begin=begin, end=end, columns=columns,
                                       filter=filter, allow_corrupt=allow_corrupt)
            except MissingFileError as e:
                # a read takes no lock: an archiver may have moved an instant after this
                # handle listed the timeline; planned again from a fresh listing, the
                # instant is read as archived. Anything else missing is damage.
                fresh = self.snapshot.refresh()
                if attempt == _ARCHIVE_RETRIES or not moved_to_archive(e.path, fresh.timeline):
                    raise
                log.info("%s: %s was archived during the read; planning again", self.base_path, e.path)
                self._set_snapshot(fresh)
        raise AssertionError("unreachable")

    def _plan_once(
        self,
        query: str,
        *,
        as_of: str | None,
        begin: str | None,
        end: str | None,
        columns: list[str] | None,
        filter: pc.Expression | Sequence[pc.Expression] | None,
        allow_corrupt: bool,
    ) -> ReadPlan:
        if query not in QUERIES:
            raise QueryError(f"unknown query {query!r}; expected one of {', '.join(QUERIES)}")
        filter, conjuncts = _conjuncts(filter)
        for ts, what in ((as_of, "as_of"), (begin, "begin"), (end, "end")):
            self._check_instant(ts, what)
        props = self.properties
        if as_of and query != "incremental":
            self._check_time_travel(as_of)
        tl = self.timeline.as_of(as_of) if as_of else self.timeline
        by_completion = False
        if query == "incremental":
            if not props.populate_meta_fields:
                raise QueryError(f"incremental queries need meta fields: {self.base_path}")
            as_of = end
            by_completion = self.timeline.layout_version >= 2
            if end:
                tl = self.timeline.completed_by(end) if by_completion else self.timeline.as_of(end)
        completed = CommittedInstants(tl.completed_timestamps(), self.timeline.first_instant)
        view = self.fsview
        if query == "read_optimized":
            slices = view.latest_base_files(as_of, by_completion=by_completion)
        else:
            slices = view.latest_merged_slices(as_of, by_completion=by_completion)
        if query == "snapshot" or (query == "read_optimized" and as_of):
            self._check_files(as_of, allow_corrupt)
        commit_times: frozenset[str] | None = None
        reach: ArchivedReach | None = None
        if query == "incremental":
            slices, commit_times, reach = self._incremental(tl, begin, end, slices, allow_corrupt)
        schema = self.schema() if filter is not None else None
        if filter is not None and props.partition_fields:
            verdicts: dict[str, bool] = {}  # one evaluation per partition, not per slice
            for s in slices:
                if s.partition_path not in verdicts:
                    verdicts[s.partition_path] = all(
                        self._partition_may_match(s.partition_path, c, schema) for c in conjuncts)
            slices = [s for s in slices if verdicts[s.partition_path]]
        filter_columns = _filter_columns(filter, schema, props.partition_fields) if filter is not None else None
        spec = SliceReadSpec(
            merge=self.merge_spec(),
            completed=completed if reach is None else self.timeline.committed(),  # a scan: every delete
            columns=tuple(columns) if columns else None,
            filter=filter,
            include_logs=query != "read_optimized",
            commit_times=commit_times,
            commit_range=reach.commit_range if reach is not None else None,
            sources_by_commit_time=reach is not None,
            partition_fields=props.partition_fields,
            hive_style=props.hive_style_partitioning,
            add_partition_columns=props.drop_partition_columns,
            url_encode=props.url_encode_partitioning,
            filter_columns=filter_columns,
            filter_fields=tuple(schema.field(c) for c in filter_columns or () if schema is not None
                                and c in schema.names),
        )
        return ReadPlan(slices, spec, schema)

    def _incremental(self, tl: Timeline, begin: str | None, end: str | None, slices: list[FileSlice],
                     allow_corrupt: bool) -> tuple[list[FileSlice], frozenset[str], ArchivedReach | None]:
        """An incremental range's slices and the commit times whose rows it keeps, with what
        it keeps of archived writes (:mod:`streamer.read.incremental`)."""
        selected = self._incremental_instants(tl, begin, end)
        commit_times = frozenset(i.timestamp for i in selected)
        # the range's files in slices read today (older ones a clean may have removed)
        self.fsview.check_committed_files(None, allow_short=allow_corrupt, instants=commit_times)
        reach = archived_reach(self.fs, self.base_path, self.properties, self.timeline, begin, end)
        if reach is None:
            # a compaction completed in the range rewrote its writes into the latest slice's
            # base file: that file is read too (its rows keep their commit times, which
            # ``commit_times`` filters), as Hudi's range view holds the compaction's files
            files_of = self._incremental_instants(tl, begin, end, compactions=True)
            metas = [self.fsview.commit_metadata(i) for i in files_of]
            gone = self.fsview.gone(metas)
            if not gone:
                return _written_in(slices, metas), commit_times, None
            # a clean removed files of the range (slices a later compaction superseded; the
            # check above refuses one missing from a live slice): read by commit time, as below
            log.info("%s: incremental (%s, %s] reads today's slices: %d file(s) it wrote were cleaned, e.g. %s",
                     self.base_path, begin, end, len(gone), gone[0])
            return self.fsview.latest_merged_slices(), commit_times, ArchivedReach()
        # archived writes name no files any more (and a clean may have removed the slices of
        # the range's end): today's latest slices, kept by commit time, as Hudi 1.x does
        # (``hoodie.datasource.read.incr.fallback.fulltablescan.enable``)
        return self.fsview.latest_merged_slices(), commit_times | reach.commit_times, reach

    def _incremental_instants(self, tl: Timeline, begin: str | None, end: str | None, *,
                              compactions: bool = False) -> list[Instant]:
        """Completed writes in ``(begin, end]``, compactions excluded unless asked for (they
        change no record, but hold the rows of the writes they compacted).

        Layout 1 compares requested instant times; layout 2 (Hudi 1.x) compares
        completion times, so a commit that finished after ``end`` waits for the next
        window instead of being missed or read twice.
        """
        out = []
        for inst in tl.completed_writes():
            if inst.pending_action == Action.COMPACTION and not compactions:
                continue
            t = (inst.completion_time or inst.timestamp) if tl.layout_version >= 2 else inst.timestamp
            if (begin is None or t > begin) and (end is None or t <= end):
                out.append(inst)
        return out

    def _partition_may_match(self, partition: str, expr: pc.Expression, schema: pa.Schema | None) -> bool:
        """``False`` only when the filter is false for every row the partition can hold.

        The partition's values are known; every data column is *unknown*, modelled as null.
        Under Kleene logic ``city = 'sf' AND fare > 50`` is ``false`` for ``city=nyc``
        (pruned) and ``null`` for ``city=sf`` (kept), so filters that mix partition and
        data columns still prune. Functions for which null does not mean "unknown"
        (``is_null``, ``is_in``, ``coalesce``...) are not trusted: such a filter is
        evaluated on the partition columns alone, and a data column in it keeps the partition.
        """
        props = self.properties
        values = partition_values(partition, props.partition_fields, props.hive_style_partitioning,
                                  props.url_encode_partitioning)
        # a formatted value (a timestamp key generator's "2024/01/15") says nothing about
        # the stored column; a dropped partition column is read back from the path itself
        formatted = _formatted_fields(props)
        values = {k: v for k, v in values.items() if k not in formatted}
        if not values:
            return True
        cols = {}
        for name, value in values.items():
            arr = pa.array([value], pa.string())
            if schema is not None and name in schema.names:
                try:
                    arr = arr.cast(schema.field(name).type)
                except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
                    return True
            cols[name] = arr
        unknown_is_null = schema is not None and _unknown_is_null_safe(expr, values)
        if unknown_is_null and schema is not None:
            cols.update({f.name: pa.nulls(1, f.type) for f in schema if f.name not in cols})
        try:
            verdict = ds.dataset(pa.table(cols)).to_table(columns={"v": expr}).column(0)[0].as_py()
        except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError, KeyError, TypeError):
            return True
        # null = "depends on data columns" only when they stood in as null; else a filter drops it
        return verdict is not False if unknown_is_null else verdict is True

    # ------------------------------------------------------------------ reading
    def scan(
        self,
        query: str = "snapshot",
        *,
        max_workers: int = defaults.LOCAL_THREADS,
        **options: Unpack[QueryOptions],
    ) -> ReadResult:
        """Like :meth:`read`, also returning what was skipped (corrupt blocks, rollbacks).

        A corrupt block inside bytes a completed instant wrote means rows are missing:
        the read raises :class:`CorruptDataError` naming the file, offset and instant,
        unless ``allow_corrupt`` (then it returns the rest and reports the block). A torn
        block past every committed append (a crashed writer's) is skipped either way.
        """
        plan = self.plan(query, **options)
        allow_corrupt = options.get("allow_corrupt", False)
        if allow_corrupt and plan.spec.include_logs:
            for d in short_files(self.fs, plan.slices, CommittedRegions.of(self.fsview, self.timeline)):
                log.warning("%s: reading past damage: %s", self.base_path, d)
        stats = ScanStats()
        tables: list[pa.Table] = []

        def one(s: FileSlice) -> tuple[pa.Table | None, ScanStats]:
            return read_file_slice(self.fs, s, plan.spec)

        if len(plan.slices) > 1 and max_workers > 1:
            with ThreadPoolExecutor(max_workers=max_workers) as pool:
                results = list(pool.map(one, plan.slices))
        else:
            results = [one(s) for s in plan.slices]
        for t, st in results:
            stats.add(st)
            if t is not None:
                tables.append(t)
        table = concat_aligned(tables)
        as_of = options.get("as_of") if query != "incremental" else None
        table = self._empty(options.get("columns")) if table is None else self._in_table_types(
            table, options.get("columns"), as_of)
        if stats.corrupt_blocks:
            damage = read_damage(self.fsview, self.timeline, None, stats.corrupt_blocks)
            if damage and not allow_corrupt:
                more = f" (and {len(damage) - 1} more)" if len(damage) > 1 else ""
                raise CorruptDataError(
                    f"{damage[0]}{more}: the rows of that block would be missing from this read; "
                    "read the rest with allow_corrupt=True (CLI: --allow-corrupt), or see `streamer check`")
            log.warning("%s: %d corrupt log block(s) skipped", self.base_path, stats.corrupt_block_count)
        meta = dict(table.schema.metadata or {})
        meta[CORRUPT_BLOCKS_METADATA_KEY] = str(stats.corrupt_block_count).encode()
        table = table.replace_schema_metadata(meta)
        return ReadResult(table, stats)

    def lookup(self, keys: pa.Array | list, *, partitions: pa.Array | list | None = None,
               columns: list[str] | None = None) -> Lookup:
        """The snapshot rows of record ``keys``, reading only the file groups the bloom
        index names (:mod:`streamer.read.lookup`); with how many it read."""
        from streamer.read.lookup import lookup

        return lookup(self, keys, partitions=partitions, columns=columns)

    def read(self, query: str = "snapshot", **options: Unpack[QueryOptions]) -> pa.Table:
        """Query the table; :meth:`scan` returns the read's statistics with the rows (see it
        for ``allow_corrupt``)."""
        return self.scan(query, **options).table

    def _in_table_types(self, table: pa.Table, columns: list[str] | None, as_of: str | None) -> pa.Table:
        """``table`` in the table's types, whichever slices the read took its rows from (one
        written before a column widened holds the narrower type), and with every column
        the query returns (nulls where no slice read holds it: a column added later).

        Those are the asked-for ``columns`` the table has, else every column of the table's
        schema (as of ``as_of`` for a time travel), as Hudi's readers return the latest
        schema whichever files a filter left: a read of partitions written before a column
        was added has the column too, so a query's columns do not depend on its filter."""
        schema = self.schema()
        if schema is None:
            return table
        fields = [schema.field(f.name) if f.name in schema.names else f for f in table.schema]
        have = {f.name: f for f in fields}
        if columns:
            fields = [have.get(c) or schema.field(c) for c in columns if c in have or c in schema.names]
        else:
            known = self._names_as_of(as_of) if as_of else frozenset(schema.names)
            fields += [f for f in schema if f.name not in have and f.name in known]
        target = pa.schema(fields)
        if target.equals(table.schema.remove_metadata()):
            return table
        aligned = concat_aligned([table], target)
        assert aligned is not None  # one table in, one out
        return aligned

    def _names_as_of(self, as_of: str) -> frozenset[str]:
        """The columns of the last write completed at ``as_of`` (its commit's schema), and
        the meta columns: what a time travel to then returns."""
        schema = self._committed_schema(as_of)
        if schema is None:
            return frozenset()
        meta = META_COLUMNS if self.properties.populate_meta_fields else ()
        return frozenset([*meta, *schema.names])

    def _empty(self, columns: list[str] | None) -> pa.Table:
        schema = self.schema() or pa.schema([])
        if columns:
            schema = pa.schema([schema.field(c) for c in columns if c in schema.names])
        return schema.empty_table()


def _evolved(f: pa.Field, committed: pa.Schema) -> pa.Field:
    """``f`` as a base file stores it, evolved as the committed schema's field of that name
    evolved it since (a wider number, a struct's new field, in lists and maps too)."""
    i = committed.get_field_index(f.name)
    if i < 0:
        return f
    try:
        return pa.field(f.name, merge_type(f.name, f.type, committed.field(i).type), f.nullable)
    except SchemaError:  # not an evolution the writer makes: the file's own type
        return f


def _formatted_fields(props: TableProperties) -> frozenset[str]:
    """Partition columns whose value the path does not hold verbatim (see
    :attr:`TableProperties.formatted_partition_fields`)."""
    return frozenset() if props.drop_partition_columns else props.formatted_partition_fields


def _conjuncts(filter: pc.Expression | Sequence[pc.Expression] | None
               ) -> tuple[pc.Expression | None, list[pc.Expression]]:
    """``(the filter as one expression, its conjuncts)``."""
    if filter is None or isinstance(filter, pc.Expression):
        return filter, [filter] if filter is not None else []
    parts = list(filter)
    if not parts:
        return None, []
    return functools.reduce(operator.and_, parts), parts


def _filter_columns(expr: pc.Expression, schema: pa.Schema | None,
                    partition_fields: Iterable[str] = ()) -> tuple[str, ...] | None:
    """The columns ``expr`` reads, so a filtered read can still project (``None``: unknown).

    Arrow expressions do not list their fields; binding the filter to an empty table
    without a column fails exactly when the filter reads that column.
    """
    if schema is None:
        return None
    fields = list(schema) + [pa.field(n, pa.string()) for n in partition_fields if n not in schema.names]
    full = pa.schema(fields)

    def binds(s: pa.Schema) -> bool:
        try:
            s.empty_table().filter(expr)
            return True
        except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError, KeyError, TypeError):
            return False

    if not binds(full):
        return None
    text = str(expr)
    # a column the filter's text never names cannot be read by it (unless referred to by
    # position or nested path): only the named ones need the binding test
    by_name = "FieldPath" not in text and "Nested" not in text
    return tuple(f.name for i, f in enumerate(full)
                 if (not by_name or f.name in text) and not binds(full.remove(i)))


def _slice_began(name: str) -> tuple[str, str] | None:
    """A data file's group and the instant its slice began by (a log file's own instant at
    versions 8 and 9, which its slice began by); ``None``: no data file's name."""
    if (base := parse_base_file_name(name)) is not None:
        return base.file_id, base.instant_time
    if (log := parse_log_file_name(name)) is not None:
        return log.file_id, log.base_instant
    return None


def _written_in(slices: list[FileSlice], metas: list) -> list[FileSlice]:
    """Each slice cut down to the files the given commits wrote (slices they missed dropped).

    Why: an incremental query answers "what was written in the range", as Apache Hudi's
    ``MergeOnReadIncrementalRelation`` does: its file-system view holds only the files
    named by the range's write stats, so a log record is merged with the other files of
    the range, not with a base file written before it. A late event that lost to the
    base file under event-time ordering is still part of the range's output (Hudi 0.15,
    Hudi 1.0 and hudi-rs agree on this).
    """
    written: dict[tuple[str, str], set[str]] = {}
    for meta in metas:
        for stat in meta.write_stats():
            if stat.path:
                key = (stat.partition_path or "", stat.file_id)
                written.setdefault(key, set()).add(posixpath.basename(stat.path))
    out = []
    for s in slices:
        names = written.get((s.partition_path, s.file_id))
        if not names:
            continue
        base = s.base_file if s.base_file is not None and posixpath.basename(s.base_file.path) in names else None
        logs = tuple(lf for lf in s.log_files if posixpath.basename(lf.path) in names)
        if base is not None or logs:
            out.append(dataclasses.replace(s, base_file=base, log_files=logs))
    return out
