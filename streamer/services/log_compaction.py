"""Log compaction (Hudi RFC-48): stitch runs of small log blocks into one block.

Scheduling writes ``<instant>.logcompaction.requested``: a ``HoodieCompactionPlan`` (the
shape Hudi's log compaction uses, with Hudi's log-compaction executor class as the
strategy) whose operations name each chosen file slice and its log files; which units
(instants) of each slice are stitched is in ``extraMetadata`` under :data:`RUNS_KEY`,
because a plan must say exactly what it replaces - blocks appended after scheduling
(RFC-48 scenario 1) are not part of it.

Planning rules (the RFC's "disadvantages" section): only *runs of consecutive small
units* qualify - a unit with a block above ``small_block_bytes`` (e.g. an earlier
stitched block) breaks a run, so big blocks are not rewritten again and again - and a
run needs at least ``min_blocks`` units. File groups in a pending log compaction or
clustering are skipped; a group whose full compaction is pending is planned on its
*new* slice only, as the RFC allows.

Execution writes, per run, a data block (split when above ``max_block_bytes``) and, if
the run deleted keys, a delete block - all carrying ``INSTANT_TIME`` = the log
compaction instant and ``COMPACTED_BLOCK_TIMES`` = the run's instants - into a new log
file version of the slice, then completes as a ``deltacommit``. Readers use the new
blocks only once that instant completed; until then (or after a rollback) the
originals count.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Container
from dataclasses import dataclass, field

from streamer.config.policies import LogCompactionPolicy
from streamer.integrity import Damage
from streamer.read.table import Table
from streamer.services import runs as run_exec
from streamer.services.common import GroupId, busy_groups, latest_schema, read_plan, refuse_damage
from streamer.services.compaction import CompactionConflict, go_on, service_transaction
from streamer.services.slices import Unit, effective_units, read_slice_blocks
from streamer.table.fsview import FileSlice, slice_named
from streamer.table.instant import Action, Instant
from streamer.table.metadata import CommitMetadata, CompactionOperation, CompactionPlan

log = logging.getLogger(__name__)

RUNS_KEY = "mor_streamer.logcompaction.runs"
OPERATION_KEY = "operationType"
OPERATION = "LOG_COMPACT"
EXECUTOR_CLASS = "org.apache.hudi.table.action.compact.LogCompactionExecutionHelper"


@dataclass(frozen=True)
class RunChoice:
    """One slice's runs to stitch: lists of unit instants in reader order."""

    partition: str
    file_id: str
    base_instant: str
    runs: tuple[tuple[str, ...], ...]
    log_files: tuple[str, ...]
    base_file: str | None
    run_bytes: int
    log_bytes: int = 0  # all log files of the slice (Hudi's TOTAL_LOG_FILES_SIZE)


def find_runs(units: list[Unit], policy: LogCompactionPolicy) -> list[list[Unit]]:
    """Maximal runs of consecutive small units holding at least ``min_blocks`` units."""
    out: list[list[Unit]] = []
    cur: list[Unit] = []
    for u in units + [None]:
        if u is not None and u.max_block_size <= policy.small_block_bytes:
            cur.append(u)
            continue
        if len(cur) >= policy.min_blocks:
            out.append(cur)
        cur = []
    return out


def choose_slice(table: Table, fslice: FileSlice, policy: LogCompactionPolicy,
                 completed: Container[str | None]) -> RunChoice | None:
    if not fslice.log_files:
        return None
    units, _ = effective_units(read_slice_blocks(table.fs, fslice), completed)
    runs = find_runs(units, policy)
    if not runs:
        return None
    return RunChoice(
        fslice.partition_path, fslice.file_id, fslice.base_instant,
        tuple(tuple(u.instant for u in r) for r in runs),
        tuple(lf.name for lf in fslice.log_files),
        fslice.base_file.name if fslice.base_file else None,
        sum(u.size for r in runs for u in r),
        sum(lf.size for lf in fslice.log_files),
    )


def plan_log_compaction(table: Table, policy: LogCompactionPolicy) -> CompactionPlan | None:
    """The plan a log compaction scheduled now would carry (``None``: nothing qualifies)."""
    busy = busy_groups(table)
    completed = table.timeline.committed()
    choices: list[RunChoice] = []
    for s in table.fsview.latest_file_slices():
        gid: GroupId = (s.partition_path, s.file_id)
        if gid in busy.log_compaction or gid in busy.clustering:
            continue
        pending = busy.compaction.get(gid)
        if pending is not None and s.base_instant != pending:
            continue  # only the new slice of a group under compaction
        choice = choose_slice(table, s, policy, completed)
        if choice is not None:
            choices.append(choice)
    if not choices:
        return None
    ops, runs = [], {}
    for c in choices:
        ops.append(CompactionOperation(
            file_id=c.file_id, partition_path=c.partition, base_instant_time=c.base_instant,
            data_file_path=c.base_file, delta_file_paths=list(c.log_files),
            # the metric names Hudi's log compaction plans carry
            metrics={"TOTAL_LOG_FILES": float(len(c.log_files)), "TOTAL_LOG_FILES_SIZE": float(c.log_bytes),
                     "TOTAL_IO_READ_MB": c.run_bytes / 2**20, "TOTAL_IO_WRITE_MB": c.run_bytes / 2**20,
                     "TOTAL_IO_MB": 2 * c.run_bytes / 2**20},
        ))
        runs[run_key(c.partition, c.file_id)] = [list(r) for r in c.runs]
    return CompactionPlan(
        operations=ops,
        # Hudi's plans carry no extraMetadata; ours must say which units each run stitches
        # (RUNS_KEY), and name the operation (OPERATION_KEY, which our planning tests rely
        # on). Hudi treats the map as opaque: a Hudi executor of this plan (HoodieCompactor
        # with LogCompactionExecutionHelper) compacts the listed log files whole - also
        # correct; Spark's RunCompactionActionExecutor ignores the map (Flink's
        # CompactHelpers.createCompactionMetadata copies it into the commit's extraMetadata).
        # strategyParams (Map<String,String>) are ours too: Hudi's HoodieCompactor reads only
        # compactorClassName from the strategy, which is Hudi's log compaction helper.
        extra_metadata={OPERATION_KEY: OPERATION, RUNS_KEY: json.dumps(runs, separators=(",", ":"))},
        strategy={"compactorClassName": EXECUTOR_CLASS, "strategyParams": {
            "min_blocks": str(policy.min_blocks), "small_block_bytes": str(policy.small_block_bytes),
            "max_block_bytes": str(policy.max_block_bytes)}, "version": 1},
        preserve_hoodie_metadata=True,
    )


def run_key(partition: str, file_id: str) -> str:
    return f"{partition}|{file_id}"


def schedule_log_compaction(table: Table, policy: LogCompactionPolicy, *,
                            lock_timeout_s: float = 30.0) -> Instant | None:
    """Write ``<instant>.logcompaction.requested`` if any slice qualifies.

    Holding the writers' lock (``None`` if it stays busy for ``lock_timeout_s``), as
    compaction is scheduled: a writer makes its instant time before it plans and publishes
    it after, so an instant made meanwhile from an older listing - or from a clock that
    stepped back - could be at or before it (even the same time).
    """
    try:
        with service_transaction(table, lock_timeout_s) as tx:
            table.refresh()
            table.merge_spec()  # a merge rule we cannot honour is refused before a plan names it
            plan = plan_log_compaction(table, policy)
            if plan is None:
                return None
            inst = tx.request(table.timeline, Action.LOG_COMPACTION, plan=plan.to_avro_bytes())
    except CompactionConflict as e:
        log.info("not scheduling log compaction now: %s", e)
        return None
    log.info("%s: scheduled log compaction %s over %d file group(s)", table.base_path, inst.timestamp,
             len(plan.operations))
    table.refresh()
    return inst


# ============================================================================ execution
@dataclass
class LogCompactionResult:
    instant: str
    blocks_written: int = 0
    units_replaced: int = 0
    bytes_written: int = 0
    metadata: CommitMetadata = field(default_factory=CommitMetadata)


def execute_log_compaction(table: Table, inst: Instant, policy: LogCompactionPolicy, *,
                           accept_damage: frozenset[Damage] = frozenset(),
                           check: Callable[[], None] = go_on) -> LogCompactionResult:
    """Stitch every run of the plan; the caller holds the plan's lock and set it inflight.

    A slice with a damaged file is refused (unless the damage is in ``accept_damage``).
    ``check`` runs before each slice's stitch and raises to stop the run
    (:func:`~streamer.services.compaction.compact_slice`)."""
    plan = read_plan(table, inst)
    runs = json.loads(plan.extra_metadata.get(RUNS_KEY, "{}"))
    params = (plan.strategy or {}).get("strategyParams") or {}
    max_bytes = int(params.get("max_block_bytes") or policy.max_block_bytes)
    completed = table.timeline.committed()
    # by base instant, not "latest": a compaction scheduled meanwhile (RFC-48 scenario 4)
    # opens a newer slice, but the planned blocks are still where they were
    by_group = table.fsview.all_slices()
    result = LogCompactionResult(inst.timestamp)
    # compacted=true, as Hudi's log compaction commit (RunCompactionActionExecutor builds
    # COMPACT and LOG_COMPACT metadata alike with new HoodieCommitMetadata(true))
    meta = CommitMetadata(compacted=True, operation_type=OPERATION, extra_metadata={})
    schema = latest_schema(table)
    if schema:
        meta.extra_metadata["schema"] = schema
    for op in plan.operations:
        fslice = slice_named(by_group.get((op.partition_path, op.file_id), ()), op.base_instant_time,
                             planned_at=inst.timestamp)
        if fslice is None:
            log.warning("log compaction %s: slice %s/%s@%s is gone; skipping it", inst.timestamp,
                        op.partition_path, op.file_id, op.base_instant_time)
            continue
        units, scan = effective_units(read_slice_blocks(table.fs, fslice), completed)
        refuse_damage(table, fslice, inst.timestamp, "log compaction", scan.corrupt_blocks, accept=accept_damage)
        by_instant = {u.instant: u for u in units}
        groups: list[tuple[list[str], list[Unit]]] = []
        for planned in runs.get(run_key(op.partition_path, op.file_id), []):
            present = [by_instant[t] for t in planned if t in by_instant]
            if len(present) != len(planned):
                log.warning("log compaction %s: units %s of %s no longer effective; run skipped",
                            inst.timestamp, sorted(set(planned) - set(by_instant)), op.file_id)
                continue
            groups.append((planned, present))
        if not groups:
            continue
        check()
        stitch_started = time.monotonic()
        stat = run_exec.write_stitched(table, inst.timestamp, fslice, groups, max_bytes)
        if stat.runtime_stats is None:  # Hudi's RuntimeStats: the stitch is its "upsert"
            stat.runtime_stats = {"totalScanTime": 0, "totalCreateTime": 0,
                                  "totalUpsertTime": int((time.monotonic() - stitch_started) * 1000)}
        meta.add(stat)
        result.blocks_written += stat.total_log_blocks
        result.units_replaced += sum(len(p) for p, _ in groups)
        result.bytes_written += stat.total_write_bytes
    result.metadata = meta
    return result


__all__ = [
    "LogCompactionResult",
    "execute_log_compaction",
    "find_runs",
    "plan_log_compaction",
    "schedule_log_compaction",
]
