"""The timeline: what happened to a table, in order, and what is still in flight.

Layout 1 (table version 6) keeps every state file flat in ``.hoodie/``; layout 2
(versions 8/9) keeps them in ``.hoodie/timeline/`` and names completed instants
``<requested>_<completed>.<action>``. We read and write both: the table's version picks
(6: layout 1; 8 and 9: layout 2). Layout 2 also changes what the files hold - commit
metadata is Avro, not JSON (:meth:`Timeline.commit_bytes`) - and gives every completed
instant a completion time, unique and later than every instant time and completion time
before it (:meth:`Timeline.complete`).

Writing follows Hudi's protocol so other engines (and a crashed writer's successor)
interpret our instants correctly: ``requested`` -> ``inflight`` -> completed, where
the completed file appears in one atomic step (:meth:`FileSystem.write_atomic`) only
after the data it describes is durable. Readers trust completed instants only.
"""

from __future__ import annotations

import dataclasses
import posixpath
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from streamer.errors import (
    CommitError,
    CorruptDataError,
    MissingFileError,
    UnsupportedTableVersionError,
)
from streamer.fs import FileStatus, FileSystem
from streamer.table.instant import (
    Action,
    Instant,
    State,
    TimelineFile,
    new_instant_time,
    parse_timeline_file,
)
from streamer.table.metadata import CHECKPOINT_KEY, CHECKPOINT_KEY_V2, CommitMetadata
from streamer.table.metadata.avro import read_avro
from streamer.table.properties import METAFOLDER, TableProperties

HEARTBEAT_FOLDER = ".heartbeat"
#: Hudi's writers refresh their heartbeat every ``hoodie.client.heartbeat.interval_in_ms``
#: (60 s) and count it expired after ``hoodie.client.heartbeat.tolerable.misses`` (2) of them
HUDI_HEARTBEAT_EXPIRY_S = 120.0


def hudi_run(instant: Instant, age: float) -> str:
    """What Apache Hudi is doing with ``instant``, whose heartbeat is ``age`` seconds old,
    in the words every message about it uses."""
    if instant.action == Action.REPLACE_COMMIT:  # version 6 clusters as a replacecommit too
        what = f"an Apache Hudi writer is writing or clustering instant {instant.timestamp} (replacecommit)"
    elif instant.action in Action.WRITE_ACTIONS:
        what = f"an Apache Hudi writer is writing instant {instant.timestamp}"
    else:
        what = f"Apache Hudi is running {instant.action} {instant.timestamp}"
    return f"{what} (its heartbeat {HEARTBEAT_FOLDER}/{instant.timestamp} was refreshed {age:.0f}s ago)"


def timeline_dir(base_path: str, props: TableProperties) -> str:
    meta = posixpath.join(base_path, METAFOLDER)
    sub = props.timeline_path
    return posixpath.join(meta, sub) if sub else meta


@dataclass(frozen=True)
class CommittedInstants:
    """Instants whose writes count: completed on the active timeline, or older than its
    first instant - archived, as a write that failed stays on the timeline (pending) until
    rolled back. Answers ``in`` as a set of instants does.

    Why not the completed set alone: Hudi's archivers move commits whose files live slices
    still read (an upsert's base files, the log blocks of delta commits after the last
    compaction), and Hudi's readers and compactors take an instant older than the active
    timeline as committed; judged by the active timeline alone those rows would drop out
    of our reads, our compactions and the writer's view of the table."""

    completed: frozenset[str]
    first_active: str | None

    def __contains__(self, instant: object) -> bool:
        if instant in self.completed:
            return True
        return isinstance(instant, str) and self.first_active is not None and instant < self.first_active


@dataclass
class Timeline:
    """A snapshot of the active timeline, oldest instant first; :meth:`reload` gives a fresh one.

    Its write methods (the instant transitions) are the commit protocol's and have one
    caller, :class:`streamer.write.transaction.Transaction`, which holds the lock they
    need. They update storage and this object alike, so the transaction's snapshot
    stays current after its commit without a re-listing.
    """

    fs: FileSystem
    base_path: str
    layout_version: int
    folder: str
    instants: list[Instant] = field(default_factory=list)
    _files: dict[tuple[str, State], TimelineFile] = field(default_factory=dict, repr=False)
    #: Savepoints (any state), apart from :attr:`instants`: Hudi names a savepoint by the
    #: instant time of the commit it keeps (``X.savepoint`` beside ``X.deltacommit``), so
    #: among the instants it would take that commit's place. Nothing here writes them; the
    #: archive and the cleaner keep what they protect.
    savepoints: list[Instant] = field(default_factory=list)

    # ------------------------------------------------------------------ loading
    @classmethod
    def load(cls, fs: FileSystem, base_path: str, props: TableProperties) -> Timeline:
        folder = timeline_dir(base_path, props)
        tl = cls(fs, base_path, props.timeline_layout_version, folder)
        tl._scan()
        return tl

    def reload(self) -> Timeline:
        tl = Timeline(self.fs, self.base_path, self.layout_version, self.folder)
        tl._scan()
        return tl

    @classmethod
    def from_listing(cls, fs: FileSystem, base_path: str, props: TableProperties,
                     entries: Iterable[FileStatus]) -> Timeline:
        """The timeline from a listing of its folder the caller already made (one listing
        then serves the timeline and the properties file's stamp)."""
        tl = cls(fs, base_path, props.timeline_layout_version, timeline_dir(base_path, props))
        tl._scan(entries)
        return tl

    def _scan(self, entries: Iterable[FileStatus] | None = None) -> None:
        by_ts: dict[str, dict[State, TimelineFile]] = {}
        savepoints: dict[str, dict[State, TimelineFile]] = {}
        for st in self.fs.list_dir(self.folder) if entries is None else entries:
            if st.is_dir:
                continue
            parsed = parse_timeline_file(st.name)
            if parsed is None:
                continue
            into = savepoints if parsed.action == Action.SAVEPOINT else by_ts
            into.setdefault(parsed.timestamp, {})[parsed.state] = parsed
        self.savepoints = [Instant(ts, Action.SAVEPOINT, top, states[top].completion_time)
                           for ts, states in sorted(savepoints.items())
                           for top in [max(states, key=lambda s: s.rank)]]
        instants: list[Instant] = []
        files: dict[tuple[str, State], TimelineFile] = {}
        for ts in sorted(by_ts):
            states = by_ts[ts]
            for state, tf in states.items():
                files[(ts, state)] = tf
            top = max(states, key=lambda s: s.rank)
            tf = states[top]
            pending = states.get(State.REQUESTED) or states.get(State.INFLIGHT)
            pending_action = pending.action if (top is State.COMPLETED and pending) else None
            instants.append(Instant(ts, tf.action, top, tf.completion_time, pending_action))
        self.instants = instants
        self._files = files

    # ------------------------------------------------------------------ queries
    def __iter__(self) -> Iterator[Instant]:
        return iter(self.instants)

    def __len__(self) -> int:
        return len(self.instants)

    def completed(self) -> list[Instant]:
        return [i for i in self.instants if i.is_completed]

    def pending(self) -> list[Instant]:
        return [i for i in self.instants if i.is_pending]

    def filter(
        self, actions: Iterable[str] | None = None, states: Iterable[State] | None = None
    ) -> list[Instant]:
        acts = set(actions) if actions is not None else None
        sts = set(states) if states is not None else None
        return [
            i
            for i in self.instants
            if (acts is None or i.action in acts) and (sts is None or i.state in sts)
        ]

    def completed_writes(self) -> list[Instant]:
        """Completed commit/deltacommit/replacecommit instants: the ones carrying data."""
        return [i for i in self.instants if i.is_completed and i.action in Action.WRITE_ACTIONS]

    def last_completed_write(self) -> Instant | None:
        writes = self.completed_writes()
        return writes[-1] if writes else None

    def get(self, timestamp: str) -> Instant | None:
        for i in self.instants:
            if i.timestamp == timestamp:
                return i
        return None

    def is_completed(self, timestamp: str) -> bool:
        inst = self.get(timestamp)
        return inst is not None and inst.is_completed

    def completed_timestamps(self) -> frozenset[str]:
        return frozenset(i.timestamp for i in self.instants if i.is_completed)

    @property
    def first_instant(self) -> str | None:
        """The oldest instant on this timeline, of any state (older ones were archived)."""
        return self.instants[0].timestamp if self.instants else None

    def committed(self) -> CommittedInstants:
        """The instants whose files and log blocks count (see :class:`CommittedInstants`)."""
        return CommittedInstants(self.completed_timestamps(), self.first_instant)

    def pending_compactions(self) -> list[Instant]:
        return [i for i in self.instants if i.is_pending and i.action == Action.COMPACTION]

    def pending_log_compactions(self) -> list[Instant]:
        return [i for i in self.instants if i.is_pending and i.action == Action.LOG_COMPACTION]

    def completion_time(self, timestamp: str) -> str | None:
        """Completion time of an instant (layout 2), its requested time in layout 1."""
        inst = self.get(timestamp)
        if inst is None or not inst.is_completed:
            return None
        return inst.completion_time or inst.timestamp

    def as_of(self, timestamp: str) -> Timeline:
        """The timeline restricted to instants requested at or before ``timestamp``.

        Time travel names a commit by its (requested) instant time and must include
        it, in both layouts, as Hudi and hudi-rs do; completion times only decide
        which file slice a layout-2 log file belongs to.
        """
        kept = [i for i in self.instants if i.timestamp <= timestamp]
        tl = Timeline(self.fs, self.base_path, self.layout_version, self.folder, kept)
        tl._files = self._files
        return tl

    def completed_by(self, timestamp: str) -> Timeline:
        """The timeline as a reader at wall-clock ``timestamp`` saw it: instants that
        completed later are still inflight (layout 2 knows completion times; layout 1
        falls back to requested times). Incremental reads of layout-2 tables use this."""
        kept: list[Instant] = []
        for i in self.instants:
            if i.timestamp > timestamp:
                continue
            if i.is_completed and (i.completion_time or i.timestamp) > timestamp:
                i = Instant(i.timestamp, i.pending_action or i.action, State.INFLIGHT)
            kept.append(i)
        tl = Timeline(self.fs, self.base_path, self.layout_version, self.folder, kept)
        tl._files = self._files
        return tl

    def failed_writes(self) -> list[Instant]:
        """Pending ingestion writes, oldest first: with the writers' lock held, a writer of
        ours that left one is gone (Hudi's eager policy for a single writer). An Apache
        Hudi writer takes no lock of ours: see :meth:`live_hudi_writes`. Table services
        (compaction, log compaction, clustering) are never "failed": their plans are
        re-executed, not rolled back.
        """
        return [i for i in self.pending()
                if i.action in (Action.COMMIT, Action.DELTA_COMMIT, Action.REPLACE_COMMIT)
                and not self.is_clustering(i)]

    def live_hudi_writes(self, now: float | None = None) -> list[tuple[Instant, float]]:
        """Pending writes an Apache Hudi writer is still making, with its heartbeat's age
        in seconds: Hudi's writer refreshes ``.hoodie/.heartbeat/<instant>``, an empty file
        (ours hold the time they were written), and counts it expired after
        :data:`HUDI_HEARTBEAT_EXPIRY_S`. Rolling such a write back would delete the files
        a live writer is about to commit. One status call per pending write, so none on a
        table without one. Hudi writes heartbeats only under its lazy failed-writes policy
        (multi-writer); a writer under its default eager policy leaves none to find."""
        return self._live_hudi(self.failed_writes(), now)

    def live_hudi_instants(self, now: float | None = None) -> list[tuple[Instant, float]]:
        """Pending instants of any action Apache Hudi is making, with its heartbeat's age
        (see :meth:`live_hudi_writes`): its writes, and the compactions and expiring
        clusterings its multi-writer table services run. Each of their commits updates
        Hudi's metadata table. One status call per pending instant."""
        return self._live_hudi(self.pending(), now)

    def _live_hudi(self, instants: list[Instant], now: float | None) -> list[tuple[Instant, float]]:
        now = time.time() if now is None else now
        ages = ((i, self.hudi_heartbeat_age(i, now)) for i in instants)
        return [(i, age) for i, age in ages if age is not None]

    def hudi_heartbeat_age(self, instant: Instant, now: float | None = None) -> float | None:
        """Seconds since an Apache Hudi process last refreshed ``instant``'s heartbeat, or
        None when it has none that is live (absent, ours - which holds a time - or older
        than :data:`HUDI_HEARTBEAT_EXPIRY_S`). Hudi's writers keep one under the lazy
        failed-writes policy, and its multi-writer compactions and expiring clusterings keep
        one for the plan they run (``BaseHoodieTableServiceClient``). One status call."""
        now = time.time() if now is None else now
        try:  # one call: the writer may commit and delete it in between two
            st = self.fs.status(posixpath.join(self.base_path, METAFOLDER, HEARTBEAT_FOLDER, instant.timestamp))
        except MissingFileError:
            return None
        age = now - (st.mtime_ns or 0) / 1e9
        return max(age, 0.0) if st.size == 0 and age < HUDI_HEARTBEAT_EXPIRY_S else None

    def is_clustering(self, instant: Instant) -> bool:
        """A clustering: its own action at versions 8 and 9; at version 6 a replacecommit
        whose requested file holds Hudi's ``HoodieRequestedReplaceMetadata`` with operation
        ``CLUSTER`` (an insert overwrite's holds none). A table service's plan to run,
        never a failed write to roll back (Hudi's ``ClusteringUtils.isClusteringInstant``)."""
        if instant.action == Action.CLUSTERING:
            return True
        if instant.action != Action.REPLACE_COMMIT:
            return False
        try:
            data = self.read_plan(instant)
            operation = read_avro(data, self.path_of(instant, State.REQUESTED))[1].get("operationType") if data else None
            return str(operation).upper() == "CLUSTER"
        except (MissingFileError, CorruptDataError):
            return False

    # ------------------------------------------------------------------ file access
    def path_of(self, instant: Instant, state: State | None = None) -> str:
        state = state or instant.state
        tf = self._files.get((instant.timestamp, state))
        if tf is not None:
            return posixpath.join(self.folder, tf.name)
        if state is State.COMPLETED:
            action = instant.completed_action
        else:
            action = instant.pending_action or instant.action
        probe = Instant(instant.timestamp, action, state, instant.completion_time)
        return posixpath.join(self.folder, probe.file_name(self.layout_version))

    def read_details(self, instant: Instant, state: State | None = None) -> bytes:
        """Bytes of the instant's file in ``state`` (default: its current state)."""
        path = self.path_of(instant, state)
        try:
            return self.fs.read_bytes(path)
        except MissingFileError:
            raise MissingFileError("timeline file missing", path) from None

    def read_plan(self, instant: Instant) -> bytes:
        """The requested file (compaction/clustering/rollback/clean plans live there)."""
        return self.read_details(instant, State.REQUESTED)

    # ------------------------------------------------------------------ writing
    def _require_writable(self) -> None:
        if self.layout_version not in (1, 2):
            raise UnsupportedTableVersionError(
                f"writing timeline layout {self.layout_version} is not supported", self.folder
            )

    def commit_bytes(self, meta: CommitMetadata) -> bytes:
        """``meta`` as this layout's timeline holds it: JSON in layout 1 (Hudi 0.x), Avro
        ``HoodieCommitMetadata`` in layout 2 (Hudi 1.x reads nothing else there).

        In layout 2 a HoodieStreamer checkpoint also moves to the key HoodieStreamer 1.x
        reads on table version 8+ (``streamer.checkpoint.key.v2``; the Kafka offsets
        string is the same), so it can take the topic over from us.
        """
        if self.layout_version < 2:
            return meta.to_json_bytes()
        v1 = meta.extra_metadata.get(CHECKPOINT_KEY)
        if v1 is not None:
            extra = {k: v for k, v in meta.extra_metadata.items() if k != CHECKPOINT_KEY}
            meta = dataclasses.replace(meta, extra_metadata={**extra, CHECKPOINT_KEY_V2: v1})
        return meta.to_avro_bytes()

    def _last_time(self) -> str:
        """The latest instant or completion time this timeline holds ('' when empty)."""
        times = [t for i in (*self.instants, *self.savepoints) for t in (i.timestamp, i.completion_time) if t]
        return max(times, default="")

    def new_instant_time(self, *, on_storage: bool = False) -> str:
        """A fresh instant time later than every instant on this timeline.

        ``on_storage``: later than every instant the timeline folder holds *now* too (one
        listing), for a caller whose snapshot may be older than storage. The wall clock
        cannot order instants (it steps back, and a new process has lost the in-process
        floor): only the table's last instant can.
        """
        last = self._last_time()
        if on_storage:
            last = max(last, self.reload()._last_time())
        return new_instant_time(after=last or None)

    def create_requested(
        self, action: str, timestamp: str | None = None, content: bytes = b""
    ) -> Instant:
        """Write ``<ts>.<action>.requested`` (plans go in ``content``) and return the instant.

        Without ``timestamp`` the time is made later than the timeline as stored (see
        :meth:`new_instant_time`); callers hold the writers' lock, so no instant is written
        between that listing and this file.
        """
        self._require_writable()
        ts = timestamp or self.new_instant_time(on_storage=True)
        if self.get(ts) is not None:
            raise CommitError(f"instant {ts} already exists on the timeline {self.folder}")
        inst = Instant(ts, action, State.REQUESTED)
        self._write(inst, content)
        self.instants.append(inst)
        self.instants.sort(key=lambda i: i.timestamp)
        return inst

    def transition_to_inflight(self, instant: Instant, content: bytes = b"") -> Instant:
        """``requested`` -> ``inflight``; the requested file stays, as in Hudi."""
        self._require_writable()
        if not instant.is_requested:
            raise CommitError(f"{instant} is not requested; cannot move to inflight")
        inflight = instant.with_state(State.INFLIGHT)
        self._write(inflight, content)
        self._replace(inflight)
        return inflight

    def complete(self, instant: Instant, metadata: bytes) -> Instant:
        """Publish the instant: the completed file appears atomically with ``metadata``.

        A pending compaction completes as ``commit``, a log compaction as
        ``deltacommit``, a clustering as ``replacecommit``.
        """
        self._require_writable()
        if not instant.is_inflight:
            raise CommitError(f"{instant} is not inflight; cannot complete it")
        completion = None
        if self.layout_version >= 2:  # the completed file's name is not known before: list
            stored = self.reload()
            if stored.is_completed(instant.timestamp):
                raise CommitError(f"instant {instant.timestamp} already completed in {self.folder}")
            completion = new_instant_time(after=max(self._last_time(), stored._last_time()) or None)
        done = Instant(
            instant.timestamp,
            Action.COMPLETES_AS.get(instant.action, instant.action),
            State.COMPLETED,
            completion,
            instant.action,
        )
        path = posixpath.join(self.folder, done.file_name(self.layout_version))
        if self.fs.exists(path):
            raise CommitError(f"instant already completed: {path}")
        self._write(done, metadata)
        self._replace(done)
        return done

    def delete_pending(self, instant: Instant) -> None:
        """Remove a pending instant's requested/inflight files (after its rollback)."""
        self._require_writable()
        if instant.is_completed:
            raise CommitError(f"{instant} is completed; roll it back instead of deleting it")
        for state in (State.INFLIGHT, State.REQUESTED):
            self.fs.delete_file(self.path_of(instant, state))
            self._files.pop((instant.timestamp, state), None)
        self.instants = [i for i in self.instants if i.timestamp != instant.timestamp]

    def revert_to_requested(self, instant: Instant) -> Instant:
        """``inflight`` -> ``requested``: drop the inflight file, keep the plan.

        How a failed table service (a compaction above all) is rolled back: its plan stays
        on the timeline - writers already append to the slices it opened - and any
        executor can run it again. Idempotent: a requested instant is returned as is.
        """
        self._require_writable()
        if instant.is_completed:
            raise CommitError(f"{instant} is completed; it cannot go back to requested")
        requested = Instant(instant.timestamp, instant.pending_action or instant.action, State.REQUESTED)
        if not self.fs.exists(self.path_of(requested, State.REQUESTED)):
            raise CommitError(f"{instant} has no requested plan to go back to")
        if instant.is_inflight or (instant.timestamp, State.INFLIGHT) in self._files:
            self.fs.delete_file(self.path_of(instant, State.INFLIGHT))
            self._files.pop((instant.timestamp, State.INFLIGHT), None)
        if self.get(instant.timestamp) is None:
            self.instants.append(requested)
            self.instants.sort(key=lambda i: i.timestamp)
        else:
            self._replace(requested)
        return requested

    def unpublish(self, instant: Instant) -> Instant:
        """``completed`` -> ``inflight``: the first step of rolling back a completed instant
        (Apache Hudi's ``revertToInflight``, which a rollback of a commit asked for by a
        user takes before it deletes any file). The completed file goes first, so readers
        never see a completed instant whose files are being deleted; the instant is then a
        failed write to every reader. Idempotent: a pending instant is returned as is."""
        self._require_writable()
        if not instant.is_completed:
            return instant
        self.fs.delete_file(self.path_of(instant, State.COMPLETED))
        self._files.pop((instant.timestamp, State.COMPLETED), None)
        inflight = Instant(instant.timestamp, instant.action, State.INFLIGHT)
        self._replace(inflight)
        return inflight

    def _write(self, instant: Instant, content: bytes) -> None:
        """Every timeline file appears whole or not at all: a reader that saw a torn plan
        or inflight file would stop on it as corrupt."""
        name = instant.file_name(self.layout_version)
        self.fs.write_atomic(posixpath.join(self.folder, name), content)
        self._files[(instant.timestamp, instant.state)] = TimelineFile(
            instant.timestamp, instant.action, instant.state, instant.completion_time, name
        )

    def _replace(self, new: Instant) -> None:
        self.instants = [new if i.timestamp == new.timestamp else i for i in self.instants]
