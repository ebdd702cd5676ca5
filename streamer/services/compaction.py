"""Full compaction: merge a file slice's base file and logs into a new base file.

Scheduling (Hudi's async compaction design) writes ``<instant>.compaction.requested``, a
``HoodieCompactionPlan`` naming each chosen slice's base file and log files. From then
on writers append to a *new* slice whose base instant is the plan's instant, and readers
merge old and new slices until the compaction commits. Execution writes one base file
per slice named ``<fileId>_<token>_<planInstant>.parquet`` - merged by the reader's own
slice merge, so a compacted table reads exactly as before - and completes as a
``commit`` carrying the table schema.

Writers that saw the plan append to the new slice, so the old one is frozen. Scheduling
takes the writers' lock (:func:`schedule_compaction_safely`), so no write that missed the
plan is in flight. As a safety net for writes that still reached the old slice (a plan
scheduled without that lock; a log compaction of the old slice completing), completion takes the
writers' lock, merges again every slice whose committed content changed since its merge,
and completes inside that window: no committed block of an old slice is left behind.
Normally nothing changed and the window is a listing and a few block headers long.
"""

from __future__ import annotations

import datetime as dt
import logging
import time
from collections.abc import Callable, Container
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import pyarrow as pa

from streamer import defaults, faults
from streamer.config.policies import CompactionPolicy, CompactionTrigger
from streamer.index.rfc06 import BloomParams
from streamer.integrity import Damage
from streamer.read.slice_reader import SliceReadSpec, read_file_slice
from streamer.read.table import Table
from streamer.services.common import (
    GroupId,
    ServiceError,
    abs_path,
    busy_groups,
    latest_schema,
    read_plan,
    refuse_damage,
    rel_path,
    service_token,
)
from streamer.services.slices import read_slice_blocks
from streamer.services.strategies import Candidate, order_and_bound
from streamer.table import meta_fields
from streamer.table.base_file import write_base_file
from streamer.table.fsview import FileSlice, slice_named
from streamer.table.instant import Action, Instant, parse_instant_time
from streamer.table.merge import META_COLUMNS
from streamer.table.metadata import CommitMetadata, CompactionOperation, CompactionPlan, WriteStat
from streamer.table.naming import base_file_name
from streamer.write.markers import IOType, Marker, create_marker
from streamer.write.transaction import Transaction

log = logging.getLogger(__name__)

OPERATION = "COMPACT"
FILE_NAME = meta_fields.FILE_NAME


class CompactionConflict(ServiceError):
    """A write still appends to a slice being compacted; retry the plan later."""


# ============================================================================ triggers
def _is_compaction(i: Instant) -> bool:
    return i.is_compaction


def delta_commits_since_compaction(table: Table) -> tuple[int, str | None]:
    """(completed ingestion delta commits after the latest compaction, that compaction's
    instant or, without one, the first delta commit's). Log compactions add no data and
    do not count."""
    tl = table.timeline
    last = None
    for i in tl.instants:
        if _is_compaction(i):
            last = i.timestamp
    count, first = 0, None
    for i in tl.completed():
        if i.action != Action.DELTA_COMMIT or i.pending_action == Action.LOG_COMPACTION:
            continue
        if last is None or i.timestamp > last:
            count += 1
            first = first or i.timestamp
    return count, last or first


def trigger_fires(table: Table, trigger: CompactionTrigger, now: dt.datetime | None = None) -> bool:
    count, since = delta_commits_since_compaction(table)
    if count == 0:
        return False
    checks = []
    if trigger.delta_commits is not None:
        checks.append(count >= trigger.delta_commits)
    if trigger.seconds is not None and since is not None:
        now = now or dt.datetime.now(dt.timezone.utc)
        elapsed = (now - parse_instant_time(since)).total_seconds()
        checks.append(elapsed >= trigger.seconds.total_seconds())
    if not checks:
        return False
    return all(checks) if trigger.combine == "all" else any(checks)


# ============================================================================ planning
def plan_compaction(table: Table, policy: CompactionPolicy) -> CompactionPlan | None:
    busy = busy_groups(table)
    cands = []
    for s in table.fsview.latest_file_slices():
        gid: GroupId = (s.partition_path, s.file_id)
        if gid in busy.compaction or gid in busy.clustering or not s.log_files:
            continue  # pending log compaction is fine (RFC-48 scenario 4)
        cands.append(Candidate(s))
    return _plan_of(order_and_bound(cands, policy))


def _plan_of(chosen: list[Candidate]) -> CompactionPlan | None:
    if not chosen:
        return None
    ops = []
    for c in chosen:
        s = c.fslice
        ops.append(CompactionOperation(
            file_id=s.file_id, partition_path=s.partition_path, base_instant_time=s.base_instant,
            data_file_path=s.base_file.name if s.base_file else None,
            delta_file_paths=[lf.name for lf in s.log_files],
            metrics={"TOTAL_LOG_FILES": float(len(s.log_files)),
                     "TOTAL_LOG_FILES_SIZE": float(c.log_bytes),
                     "TOTAL_IO_READ_MB": (c.base_bytes + c.log_bytes) / 2**20,
                     "TOTAL_IO_WRITE_MB": (c.base_bytes + c.log_bytes) / 2**20,
                     "TOTAL_IO_MB": c.io_bytes / 2**20},
        ))
    # As Hudi 0.15's plan generator: no extra metadata (Flink's CompactHelpers copies a plan's
    # extraMetadata into the commit metadata of whoever executes it) and no strategy (null:
    # HoodieCompactor.getCompactionExecutionStrategy then runs its default CompactionExecutionHelper).
    return CompactionPlan(operations=ops, extra_metadata={}, strategy=None)


def schedule_compaction(table: Table, policy: CompactionPolicy, *, force: bool = False,
                        tx: Transaction | None = None, lock_timeout_s: float = 30.0) -> Instant | None:
    """Write a compaction plan when the trigger fires (``force``: regardless) and fewer than
    ``max_pending`` plans are pending. ``tx``: the caller's transaction, holding the
    writers' lock; without one, a transaction of its own is opened for the plan."""
    if tx is None:
        with service_transaction(table, lock_timeout_s) as own:
            return schedule_compaction(table, policy, force=force, tx=own)
    table.refresh()
    table.merge_spec()  # a merge rule we cannot honour is refused before a plan names it
    if len(table.timeline.pending_compactions()) >= policy.max_pending:
        return None
    if not force and not trigger_fires(table, policy.trigger):
        return None
    plan = plan_compaction(table, policy)
    if plan is None:
        return None
    inst = tx.request(table.timeline, Action.COMPACTION, plan=plan.to_avro_bytes())
    log.info("%s: scheduled compaction %s over %d slice(s)", table.base_path, inst.timestamp, len(plan.operations))
    table.refresh()
    return inst


def schedule_compaction_of(table: Table, groups: set[GroupId], *, lock_timeout_s: float = 30.0) -> Instant | None:
    """A compaction plan over exactly the latest slices of ``groups`` (those not already in
    a pending compaction or clustering), scheduled holding the writers' lock; ``None`` if
    none qualifies. What ``streamer repair --drop-damaged`` compacts."""
    with service_transaction(table, lock_timeout_s) as tx:
        table.refresh()
        table.merge_spec()  # refuses a merge rule we cannot honour
        busy = busy_groups(table)
        cands = [Candidate(s) for s in table.fsview.latest_file_slices()
                 if (s.partition_path, s.file_id) in groups and not s.is_empty
                 and (s.partition_path, s.file_id) not in busy.compaction
                 and (s.partition_path, s.file_id) not in busy.clustering]
        plan = _plan_of(cands)
        if plan is None:
            return None
        inst = tx.request(table.timeline, Action.COMPACTION, plan=plan.to_avro_bytes())
        log.info("%s: scheduled compaction %s over %d slice(s)", table.base_path, inst.timestamp,
                 len(plan.operations))
    table.refresh()
    return inst


def schedule_compaction_safely(table: Table, policy: CompactionPolicy, *, force: bool = False,
                               lock_timeout_s: float = 30.0) -> Instant | None:
    """:func:`schedule_compaction` between two commits: holding the writers' lock, no write
    is in flight, so every later write sees the plan (``None`` if the lock stays busy)."""
    try:
        return schedule_compaction(table, policy, force=force, lock_timeout_s=lock_timeout_s)
    except CompactionConflict as e:
        log.info("not scheduling compaction now: %s", e)
        return None


# ============================================================================ execution
def service_transaction(table: Table, timeout_s: float, expiry_s: float = 60.0) -> Transaction:
    """A table service's step between two commits, holding the writers' lock (waited for
    up to ``timeout_s``; still busy, :class:`CompactionConflict`).

    The writers' own lock, so a writer and a service never both hold it; services commit
    too, so a metadata table they do not update goes on entry (see
    :class:`~streamer.write.transaction.Transaction`).
    """
    return Transaction(table.fs, table.base_path, timeout_s=timeout_s, expiry_s=expiry_s,
                       purpose="table service", busy=CompactionConflict, drop_metadata=True)


def old_slice(table: Table, op: CompactionOperation, planned_at: str) -> FileSlice:
    """The slice the operation of the plan ``planned_at`` compacts, as it is now (its logs
    may have grown since planning)."""
    s = slice_named(table.fsview.group_slices(op.partition_path, op.file_id), op.base_instant_time,
                    planned_at=planned_at)
    if s is not None:
        return s
    raise ServiceError(f"slice {op.partition_path}/{op.file_id}@{op.base_instant_time} of the plan is gone")


def _order_columns(rows: pa.Table) -> pa.Table:
    meta = [c for c in META_COLUMNS if c in rows.column_names]
    return rows.select(meta + [c for c in rows.column_names if c not in META_COLUMNS])


def go_on() -> None:
    """The check of a run that keeps no heartbeat: it always goes on."""


def compact_slice(table: Table, instant: str, fslice: FileSlice, spec: SliceReadSpec, task: int,
                  accept_damage: frozenset[Damage] = frozenset(), check: Callable[[], None] = go_on) -> WriteStat:
    """Merge one slice (reader's merge) and write its new base file (refused when a file
    of the slice is damaged, unless that damage is in ``accept_damage``). ``check`` runs
    first and raises to stop the run: once its heartbeat lapsed, Apache Hudi may be rolling
    it back or running the plan, and every file it wrote after that would be left over."""
    check()
    started = time.monotonic()
    rows, stats = read_file_slice(table.fs, fslice, spec)
    refuse_damage(table, fslice, instant, "compaction", stats.corrupt_blocks, accept=accept_damage)
    scanned = time.monotonic()
    if rows is None:
        schema = table.schema() or pa.schema([pa.field(c, pa.string()) for c in META_COLUMNS])
        rows = schema.empty_table()
    token = service_token(task)
    name = base_file_name(fslice.file_id, token, instant, table.properties.base_file_extension)
    if FILE_NAME in rows.column_names:
        idx = rows.column_names.index(FILE_NAME)
        rows = rows.set_column(idx, FILE_NAME, pa.array([name] * rows.num_rows, pa.string()))
    rows = _order_columns(rows)
    create_marker(table.fs, table.base_path, instant, Marker(fslice.partition_path, name, IOType.CREATE))
    faults.step(f"compaction marker {name}")
    path = abs_path(table.base_path, fslice.partition_path, name)
    # sized to the file: a base file never grows, so its filter needs no headroom
    written = write_base_file(table.fs, path, rows, bloom=BloomParams().sized_for(rows.num_rows))
    faults.step(f"compaction wrote {name}")
    # Hudi's RuntimeStats of a compaction write: merge (scan) and create times, in ms
    runtime = {"totalScanTime": int((scanned - started) * 1000), "totalUpsertTime": 0,
               "totalCreateTime": int((time.monotonic() - scanned) * 1000)}
    log_bytes = sum(lf.size for lf in fslice.log_files)
    return WriteStat(
        file_id=fslice.file_id, path=rel_path(fslice.partition_path, name),
        # the commit of the base file merged into (Hudi's merge handle); "null" for a
        # log-only slice, as Hudi's create handle writes it
        prev_commit=fslice.base_instant if fslice.base_file else "null",
        num_writes=written.num_rows, num_update_writes=0, partition_path=fslice.partition_path,
        total_write_bytes=written.size_bytes, file_size_in_bytes=written.size_bytes,
        total_log_files_compacted=len(fslice.log_files), total_log_size_compacted=log_bytes,
        total_log_blocks=stats.log_blocks_read, total_corrupt_log_block=stats.corrupt_block_count,
        total_rollback_blocks=stats.rolled_back_blocks, runtime_stats=runtime,
    )


def _seen(table: Table, fslice: FileSlice, completed: Container[str | None]) -> tuple[frozenset[str], frozenset[str]]:
    """What a merge of ``fslice`` depended on: its log files and the instants of their
    blocks that had completed (a log file is written whole, but its instant may complete
    later). Writes to other slices - the plan's new slice above all - do not count."""
    files = frozenset(lf.name for lf in fslice.log_files)
    instants = frozenset(b.instant_time for _, b in read_slice_blocks(table.fs, fslice)
                         if b.instant_time is not None and b.instant_time in completed)
    return files, instants


def _compact_all(table: Table, instant: str, slices: list[FileSlice], spec: SliceReadSpec,
                 workers: int, task_offset: int = 0,
                 accept_damage: frozenset[Damage] = frozenset(), check: Callable[[], None] = go_on) -> list[WriteStat]:
    with ThreadPoolExecutor(max_workers=max(1, min(workers, len(slices)))) as pool:
        return list(pool.map(lambda a: compact_slice(table, instant, a[1], spec, task_offset + a[0],
                                                     accept_damage, check),
                             enumerate(slices)))


@dataclass
class CompactionRun:
    """A merged-but-uncommitted compaction: what each slice's merge depended on."""

    instant: Instant
    slices: list[FileSlice]
    stats: list[WriteStat]
    seen: list[tuple[frozenset[str], frozenset[str]]]  # per slice: what its merge read
    workers: int
    lock_timeout_s: float
    accept_damage: frozenset[Damage] = frozenset()
    #: Raises to stop the run (:func:`compact_slice`).
    check: Callable[[], None] = go_on

    def finish(self, table: Table, complete: Callable[[CommitMetadata], None]) -> CommitMetadata:
        """Catch up with writes that landed in old slices during the merge, then
        ``complete`` - all while holding the writers' lock, so none can land in between."""
        ts = self.instant.timestamp
        with service_transaction(table, self.lock_timeout_s):
            table.refresh()
            now = table.timeline.committed()
            plan = read_plan(table, self.instant)
            redo, fresh = [], []
            for i, op in enumerate(plan.operations):
                cur = old_slice(table, op, ts)
                if _seen(table, cur, now) != self.seen[i]:
                    redo.append(i)
                    fresh.append(cur)
            if redo:
                spec = SliceReadSpec(merge=table.merge_spec(), completed=now)
                again = _compact_all(table, ts, fresh, spec, self.workers, task_offset=len(self.slices),
                                     accept_damage=self.accept_damage, check=self.check)
                for i, st in zip(redo, again, strict=True):
                    old = self.stats[i]
                    table.fs.delete_file(abs_path(table.base_path, old.partition_path or "",
                                                  (old.path or "").rsplit("/", 1)[-1]))
                    self.stats[i] = st
                log.info("compaction %s: merged %d slice(s) again for writes that landed meanwhile", ts, len(redo))
            meta = CommitMetadata(compacted=True, operation_type=OPERATION)
            for st in self.stats:
                meta.add(st)
            schema = latest_schema(table)
            if schema:
                meta.extra_metadata["schema"] = schema
            complete(meta)
        return meta


def execute_compaction(table: Table, inst: Instant, *, lock_timeout_s: float = 120.0,
                       workers: int = defaults.LOCAL_THREADS,
                       accept_damage: frozenset[Damage] = frozenset(),
                       check: Callable[[], None] = go_on) -> CompactionRun:
    """Write every slice's new base file without blocking writers; the caller holds the
    plan lock, set the plan inflight, and completes through :meth:`CompactionRun.finish`.
    ``check`` runs before each slice and raises to stop the run (:func:`compact_slice`)."""
    plan = read_plan(table, inst)
    table.refresh()
    completed = table.timeline.committed()
    spec = SliceReadSpec(merge=table.merge_spec(), completed=completed)
    slices = [old_slice(table, op, inst.timestamp) for op in plan.operations]
    seen = [_seen(table, s, completed) for s in slices]
    stats = _compact_all(table, inst.timestamp, slices, spec, workers, accept_damage=accept_damage, check=check)
    return CompactionRun(inst, slices, stats, seen, workers, lock_timeout_s, accept_damage, check)
