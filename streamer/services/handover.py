"""Hand a table over to Apache Hudi's own writers, and tell when that would go wrong.

Our writer may insert new keys into log blocks (RFC-06: the blocks are indexed). Hudi's
Spark writers with the default ``BLOOM`` index - and ``SIMPLE``, ``GLOBAL_BLOOM``,
``GLOBAL_SIMPLE`` - look keys up in base-file footers only (``canIndexLogFiles()`` is
false for them, ``HoodieIndex`` in hudi-client-common), so a key that lives only in a
log block looks new to them and is written a second time: a duplicate for every reader.

The hand-over makes every key visible to those indexes: it finishes whatever is pending
(failed writes rolled back, pending log compactions and compactions run) and then fully
compacts every file slice that has log files, so every live record is in a base file.
Updates Hudi then writes into logs are harmless to both sides: our index finds the keys
in base-file footers, and Hudi's finds them there too.
"""

from __future__ import annotations

import logging
import posixpath
from dataclasses import dataclass, field

from streamer.config.policies import CompactionPolicy
from streamer.errors import StreamerError
from streamer.fs import resolve
from streamer.read import Table
from streamer.services.compaction import schedule_compaction_safely
from streamer.services.executor import ExecOutcome, execute, execute_pending
from streamer.table.instant import Action
from streamer.write.repair import repair_table_format

log = logging.getLogger(__name__)

#: Hudi index types whose writers would duplicate keys that live only in log blocks.
BASE_FILE_ONLY_INDEXES = ("BLOOM", "SIMPLE", "GLOBAL_BLOOM", "GLOBAL_SIMPLE")
_MAX_ROUNDS = 20


class HandoverError(StreamerError):
    """The table could not be brought to a state Hudi's writers can continue safely."""


@dataclass(frozen=True)
class LogInsertGroup:
    """A file group whose latest slice holds keys that no base file has."""

    partition_path: str
    file_id: str
    reason: str


@dataclass
class HandoverReport:
    repaired: list[str] = field(default_factory=list)
    rolled_back: int = 0
    finished_plans: list[str] = field(default_factory=list)
    compactions: list[str] = field(default_factory=list)
    table_version: int = 6

    def lines(self) -> list[str]:
        out = [f"repaired: {p}" for p in self.repaired]
        if self.rolled_back:
            out.append(f"rolled back {self.rolled_back} failed write(s)")
        if self.finished_plans:
            out.append(f"finished pending plans: {', '.join(self.finished_plans)}")
        if self.compactions:
            out.append(f"compacted every file slice with logs: {', '.join(self.compactions)}")
        else:
            out.append("no file slice had log files: nothing to compact")
        out.append(
            "every key is now in a base file: Hudi writers with index "
            f"{'/'.join(BASE_FILE_ONLY_INDEXES)} can continue this table without duplicates"
        )
        out.append(version_advice(self.table_version))
        return out


def version_advice(version: int) -> str:
    """Which Hudi writers keep a table of ``version`` at that version (they upgrade any
    older table they write to by default - ``hoodie.write.auto.upgrade=true`` - and an
    upgraded table is written by this project at its new version, but no longer read by
    engines that know only the old one)."""
    if version >= 9:
        return ("table version 9: Hudi 1.1+ writers continue it as is; Hudi 0.x and 1.0 "
                "cannot write it")
    keep = f"hoodie.write.table.version={version} hoodie.write.auto.upgrade=false"
    if version == 8:
        return (f"table version 8: Hudi 1.0 writers keep it; Hudi 1.1+ writers upgrade it to 9 "
                f"unless configured with {keep}")
    return (f"table version {version}: Hudi 0.x writers keep it; Hudi 1.x writers upgrade it "
            f"(to 8 or 9) unless configured with {keep}")


def log_insert_groups(table: Table) -> list[LogInsertGroup]:
    """File groups a base-file-only index cannot see all keys of (empty: safe to hand over).

    A slice without a base file holds only log records; a log file whose write stat
    counts inserts holds keys first written there. Both come from the commit metadata of
    the active timeline, so nothing but ``.hoodie/`` is read.
    """
    inserts_by_file: dict[str, int] = {}
    for inst in table.timeline.completed_writes():
        for stat in table.fsview.commit_metadata(inst).write_stats():
            if stat.path and stat.is_log:
                name = posixpath.basename(stat.path)
                inserts_by_file[name] = inserts_by_file.get(name, 0) + stat.num_inserts
    out = []
    for s in table.fsview.latest_merged_slices():
        if not s.log_files:
            continue
        if s.base_file is None:
            out.append(LogInsertGroup(s.partition_path, s.file_id, "no base file (log records only)"))
            continue
        inserted = sum(inserts_by_file.get(lf.name, 0) for lf in s.log_files)
        if inserted:
            out.append(LogInsertGroup(s.partition_path, s.file_id, f"{inserted} key(s) inserted into log blocks"))
    return out


def handover_to_hudi(path: str, *, lock_timeout_s: float = 120.0) -> HandoverReport:
    """Bring the table at ``path`` to a state Hudi's base-file indexes see completely."""
    from streamer.write import HudiWriter

    report = HandoverReport()
    fs, base = resolve(path)
    report.repaired = repair_table_format(fs, base, lock_timeout_s=lock_timeout_s)
    writer = HudiWriter.open(base, fs=fs)
    report.rolled_back = len(writer.rollback_failed_writes())
    report.table_version = writer.config.table_version
    table = Table.open(writer.base_path, fs=writer.fs)
    for action in (Action.LOG_COMPACTION, Action.COMPACTION):
        for outcome in execute_pending(table, action, writer_lock_timeout_s=lock_timeout_s):
            _require_done(outcome, path)
            report.finished_plans.append(f"{outcome.action} {outcome.instant}")
    everything = CompactionPolicy(strategy="log_file_size", io_budget_bytes=2**62)
    for _ in range(_MAX_ROUNDS):
        table.refresh()
        if not any(s.log_files for s in table.fsview.latest_merged_slices()):
            break
        inst = schedule_compaction_safely(table, everything, force=True, lock_timeout_s=lock_timeout_s)
        if inst is None:
            raise HandoverError(f"could not schedule a compaction of {path} (writers' lock busy?)")
        _require_done(execute(table, inst, writer_lock_timeout_s=lock_timeout_s), path)
        report.compactions.append(inst.timestamp)
    table.refresh()
    left = log_insert_groups(table)
    if left:
        raise HandoverError(
            f"{path}: {len(left)} file group(s) still hold keys only in logs after "
            f"{len(report.compactions)} compaction(s), e.g. {left[0]}"
        )
    log.info("%s handed over to Hudi writers: %s", path, "; ".join(report.lines()))
    return report


def _require_done(outcome: ExecOutcome, path: str) -> None:
    if outcome.status not in ("completed", "done-elsewhere"):
        raise HandoverError(
            f"{path}: {outcome.action} {outcome.instant} did not complete ({outcome.status}); "
            "stop the table's other writers and services, then run the hand-over again"
        )
