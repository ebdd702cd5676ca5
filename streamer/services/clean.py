"""Clean: delete file slices no query still needs (Hudi's cleaner, two retention rules).

* ``retain_commits: N`` (Hudi ``KEEP_LATEST_COMMITS``): a query as of any of the last N
  completed writes must still work, so per file group keep the slice such a query reads
  (the newest one based at or before the earliest retained commit) and everything newer.
* ``retain_file_versions: N`` (``KEEP_LATEST_FILE_VERSIONS``): keep each group's N newest slices.

Never deleted: a group's latest slice, any slice a pending compaction or log compaction
reads (a compaction's old slice is merged with the new one by readers until it commits),
and the slice a savepoint's time reads (Hudi's savepoints, which a restore goes back
to). The file groups a replacecommit replaced are deleted once it is older than the
retained commits. The plan (``HoodieCleanerPlan``) is written first, so a crashed clean is
finished from it; deleting a file twice is harmless.
"""

from __future__ import annotations

import logging
import posixpath
import time
from dataclasses import dataclass

from streamer import faults
from streamer.config.policies import CleanPolicy
from streamer.integrity import CommittedRegions, base_file_damage, slice_damage
from streamer.read.table import Table
from streamer.services.common import ServiceError, busy_groups
from streamer.services.compaction import CompactionConflict, service_transaction
from streamer.table.fsview import FileSlice
from streamer.table.instant import Action, Instant, State
from streamer.table.metadata import CleanerPlan, CleanMetadata, CleanPartitionMetadata
from streamer.table.metadata_table import has_metadata_table
from streamer.write.lock import PlanLock
from streamer.write.transaction import Transaction

log = logging.getLogger(__name__)

POLICY_NAMES = {"commits": "KEEP_LATEST_COMMITS", "file_versions": "KEEP_LATEST_FILE_VERSIONS"}


@dataclass(frozen=True)
class CleanOutcome:
    instant: str | None
    files_deleted: int
    earliest_commit_to_retain: str | None


#: the pending instants the retained commits may not pass (Hudi's commits-and-compaction timeline)
_HELD_BY = frozenset({Action.COMMIT, Action.DELTA_COMMIT, Action.REPLACE_COMMIT, Action.CLUSTERING,
                      Action.COMPACTION, Action.LOG_COMPACTION})


def earliest_commit_to_retain(table: Table, retain: int) -> Instant | None:
    """The ``retain``-th newest completed write, but never after the earliest pending
    write or table service (Hudi's ``CleanerUtils.getEarliestCommitToRetain``): a write or
    plan still pending was made against the slices of its time, and when it completes a
    query as of it must still find them. Then the newest completed write before it (None:
    nothing to clean)."""
    writes = table.timeline.completed_writes()
    if len(writes) <= retain:
        return None
    nth = writes[-retain]
    pending = next((i for i in table.timeline.pending() if i.action in _HELD_BY), None)
    if pending is None or nth.timestamp <= pending.timestamp:
        return nth
    before = [w for w in writes if w.timestamp < pending.timestamp]
    return before[-1] if before else None


def _deletable(slices: list[FileSlice], rule: str, n: int, earliest: str | None, keep_from: str | None,
               savepoints: tuple[str, ...] = ()) -> list[FileSlice]:
    if len(slices) <= 1:
        return []
    # the slice a savepoint's time reads stays, so restoring to the savepoint still can (Hudi's rule)
    saved = {id(served[-1]) for t in savepoints if (served := [s for s in slices if s.base_instant <= t])}
    older = slices[:-1]
    if rule == "file_versions":
        doomed = slices[:-n] if len(slices) > n else []
    else:
        if earliest is None:
            return []
        # every slice from the earliest commit to retain on, and the last one before it:
        # a query planned before that commit may still read it (Hudi's CleanPlanner keeps
        # it for that reason, the window of a query's run)
        before = [i for i, s in enumerate(slices) if s.base_instant < earliest]
        doomed = slices[: before[-1]] if before else []
    if keep_from is not None:
        doomed = [s for s in doomed if s.base_instant < keep_from]
    return [s for s in doomed if s in older and id(s) not in saved]


def plan_clean(table: Table, policy: CleanPolicy) -> CleanerPlan | None:
    rule, n = policy.rule
    earliest = earliest_commit_to_retain(table, n) if rule == "commits" else None
    if rule == "commits" and earliest is None:
        return None
    busy = busy_groups(table)
    # the old slice of a pending compaction is still read: keep it and all newer
    keep_from: dict[tuple[str, str], str] = {}
    for inst_ts in set(busy.compaction.values()):
        inst = table.timeline.get(inst_ts)
        if inst is None:
            continue
        for op in table.fsview.compaction_plan(inst).operations:
            keep_from[(op.partition_path, op.file_id)] = op.base_instant_time
    savepoints = tuple(i.timestamp for i in table.timeline.savepoints)
    files: dict[str, list[str]] = {}
    regions = None
    for gid, slices in table.fsview.all_slices().items():
        doomed = _deletable(slices, rule, n, earliest.timestamp if earliest else None, keep_from.get(gid), savepoints)
        # a file a pending (log) compaction reads stays, whatever its plan calls the slice
        doomed = [s for s in doomed if not busy.planned_files.intersection(map(posixpath.basename, s.paths))]
        if not doomed:
            continue
        # the slices kept must hold every record the doomed ones did: a damaged newest
        # slice (a lost or torn file, an unreadable base file) keeps its predecessors
        regions = regions or CommittedRegions.of(table.fsview, table.timeline)
        damage = slice_damage(table.fs, table.fsview, table.timeline, slices[-1], regions)
        # the base file that supersedes the doomed slices becomes their records' only copy:
        # read it through once (every page, checksums verified) before they go
        newest_doomed = max(s.base_instant for s in doomed)
        heir = next((s for s in slices if s.base_instant > newest_doomed and s.base_file is not None), None)
        if not damage and heir is not None and heir.base_file is not None:
            d = base_file_damage(table.fs, heir.base_file.path, deep=True)
            damage = [d] if d is not None else []
        if damage:
            raise ServiceError(
                f"clean refused: {damage[0]}; the older slices of {gid[1]} may be the only copy of "
                f"its records - restore the file first; `streamer check {table.base_path}` lists all damage")
        for s in doomed:
            files.setdefault(s.partition_path, []).extend(s.paths)
    planned = set(busy.compaction) | set(busy.log_compaction) | busy.clustering
    for partition, paths in _replaced_files(table, earliest.timestamp if earliest else None, savepoints,
                                            planned).items():
        files.setdefault(partition, []).extend(paths)
    if not files:
        return None
    eitr = (earliest.timestamp, earliest.action, "COMPLETED") if earliest else None
    last = table.timeline.last_completed_write()
    return CleanerPlan(policy=POLICY_NAMES[rule], files_per_partition=files, earliest_instant_to_retain=eitr,
                       last_completed_commit_timestamp=last.timestamp if last else "")


def _replaced_files(table: Table, earliest: str | None, savepoints: tuple[str, ...],
                    planned: set[tuple[str, str]]) -> dict[str, list[str]]:
    """The files of file groups a completed replacecommit replaced (clustering, insert
    overwrite), by partition, as Hudi's cleaner takes them: those replaced before the
    earliest retained commit (every one under ``retain_file_versions``, ``earliest`` None),
    unless a savepoint before the replacement still reads them or a pending plan names the
    group (``planned``). No reader reads them after that, and until they are gone the
    archive keeps the replacecommit that hides them."""
    groups = {(g.partition_path, g.file_id): g for g in table.fsview.file_groups()}
    out: dict[str, list[str]] = {}
    for inst in table.timeline.completed():
        if inst.action != Action.REPLACE_COMMIT or (earliest is not None and inst.timestamp >= earliest):
            continue
        if any(t < inst.timestamp for t in savepoints):
            continue  # a savepoint before the replacement reads the groups it replaced
        for key in sorted(table.fsview.commit_metadata(inst).replaced_file_ids()):
            g = groups.pop(key, None)
            if g is not None and key not in planned:
                out.setdefault(g.partition_path, []).extend(
                    [b.path for b in g.base_files] + [lf.path for lf in g.log_files])
    return out


def _execute(table: Table, inst: Instant, plan: CleanerPlan) -> CleanMetadata:
    started = time.monotonic()
    parts: dict[str, CleanPartitionMetadata] = {}
    total = 0
    for partition, paths in plan.files_per_partition.items():
        pm = parts.setdefault(partition, CleanPartitionMetadata(partition, plan.policy))
        for p in paths:
            name = posixpath.basename(p)
            pm.delete_path_patterns.append(name)
            existed = table.fs.exists(p)
            table.fs.delete_file(p)
            faults.step(f"clean delete {name}")
            if existed:
                pm.success_delete_files.append(name)
                total += 1
    last = plan.last_completed_commit_timestamp
    if not last:  # a plan of ours from before plans carried it
        done = table.timeline.last_completed_write()
        last = done.timestamp if done else ""
    return CleanMetadata(
        start_clean_time=inst.timestamp,
        earliest_commit_to_retain=plan.earliest_instant_to_retain[0] if plan.earliest_instant_to_retain else "",
        policy=plan.policy, partition_metadata=parts, total_files_deleted=total,
        time_taken_ms=int((time.monotonic() - started) * 1000),
        # as Hudi's CleanActionExecutor: the plan's value, i.e. as of planning
        last_completed_commit_timestamp=last,
    )


def _finish(table: Table, inst: Instant, tx: Transaction) -> int:
    """Run a requested (or resume an inflight) clean and complete it, under the clean's lock."""
    tl = table.timeline
    raw = tl.read_plan(inst)
    plan = CleanerPlan.from_bytes(raw, tl.path_of(inst, State.REQUESTED))
    # the inflight file carries the plan too, as Hudi's CleanActionExecutor writes it: Hudi's
    # archiver (MetadataConversionUtils) decodes a clean's inflight file as HoodieCleanerPlan
    inflight = tx.start(tl, inst, raw) if inst.is_requested else inst
    meta = _execute(table, inflight, plan)
    tx.publish(tl, inflight, meta.to_avro_bytes())
    faults.step("clean completed")
    table.refresh()
    return meta.total_files_deleted


def run_clean(table: Table, policy: CleanPolicy, *, schedule: bool = True, execute: bool = True,
              lock_expiry_s: float = 30.0) -> CleanOutcome:
    """Finish pending cleans, then (optionally) plan and run a new one."""
    lock = PlanLock(table.fs, table.base_path, "clean", expiry_s=lock_expiry_s, purpose="clean")
    if not lock.try_acquire():
        return CleanOutcome(None, 0, None)
    try:
        # a clean removes files a metadata table would still list (Hudi readers trust it):
        # a service transaction drops it on entry
        if has_metadata_table(table.properties):
            try:
                with service_transaction(table, lock_expiry_s * 4):
                    pass
            except CompactionConflict as e:  # the next round cleans
                log.info("not cleaning now: %s", e)
                return CleanOutcome(None, 0, None)
        table.refresh()
        deleted, last = 0, None
        # running a clean plan needs only the clean's own lock: it deletes files no reader
        # or writer of a retained instant uses
        run_tx = Transaction(table.fs, table.base_path, lock=lock)
        if execute:
            for pending in [i for i in table.timeline.pending() if i.action == Action.CLEAN]:
                deleted += _finish(table, pending, run_tx)
                last = pending.timestamp
        if not schedule:
            return CleanOutcome(last, deleted, None)
        # planned and requested holding the writers' lock, from the timeline as stored: a
        # writer makes its instant time before it publishes it, so an instant made meanwhile
        # (from an older listing, or a clock that stepped back) could be at or before it
        try:
            with service_transaction(table, lock_expiry_s * 4) as tx:
                table.refresh()
                plan = plan_clean(table, policy)
                inst = None if plan is None else tx.request(table.timeline, Action.CLEAN,
                                                            plan=plan.to_avro_bytes())
        except CompactionConflict as e:
            log.info("not scheduling a clean now: %s", e)
            return CleanOutcome(last, deleted, None)
        if plan is None or inst is None:
            return CleanOutcome(last, deleted, None)
        faults.step("clean requested")
        if execute:
            deleted += _finish(table, inst, run_tx)
        log.info("%s: clean %s deleted %d file(s)", table.base_path, inst.timestamp, deleted)
        eitr = plan.earliest_instant_to_retain[0] if plan.earliest_instant_to_retain else None
        return CleanOutcome(inst.timestamp, deleted, eitr)
    finally:
        lock.release()
