"""Small facts every table service needs: which groups are busy, the table schema, paths.

Services run against :class:`streamer.read.table.Table` (properties, timeline, file
system view, merge spec) so they see the table exactly as readers do.
"""

from __future__ import annotations

import os
import posixpath
from collections.abc import Iterable
from dataclasses import dataclass, field

from streamer.errors import ServiceError, StreamerError  # noqa: F401 - ServiceError re-exported
from streamer.integrity import CorruptRead, Damage, read_damage
from streamer.read.table import Table
from streamer.table.fsview import FileSlice, plan_file_groups
from streamer.table.instant import Action, Instant
from streamer.table.metadata import CompactionOperation, CompactionPlan, CorruptDataError, read_avro
from streamer.table.naming import parse_log_file_name, write_token

GroupId = tuple[str, str]  # (partition path, file id)


@dataclass
class BusyGroups:
    """File groups a new plan must leave alone, and why."""

    compaction: dict[GroupId, str] = field(default_factory=dict)  # -> pending compaction instant
    log_compaction: dict[GroupId, str] = field(default_factory=dict)
    clustering: set[GroupId] = field(default_factory=set)
    #: the name of every file a pending compaction or log compaction reads (its base file
    #: and logs): the cleaner keeps them whatever the plan calls their slice
    planned_files: set[str] = field(default_factory=set)


def busy_groups(table: Table) -> BusyGroups:
    tl = table.timeline
    out = BusyGroups()
    for inst in tl.pending():
        if inst.action == Action.COMPACTION:
            for op in table.fsview.compaction_plan(inst).operations:
                out.compaction[(op.partition_path, op.file_id)] = inst.timestamp
                out.planned_files |= _op_files(op)
        elif inst.action == Action.LOG_COMPACTION:
            for op in read_plan(table, inst).operations:
                out.log_compaction[(op.partition_path, op.file_id)] = inst.timestamp
                out.planned_files |= _op_files(op)
        elif inst.action in (Action.CLUSTERING, Action.REPLACE_COMMIT):
            try:
                _, rec = read_avro(tl.read_plan(inst))
            except (CorruptDataError, OSError):
                continue  # an insert-overwrite's empty requested file names no groups
            out.clustering |= set(plan_file_groups(rec))
    return out


def _op_files(op: CompactionOperation) -> set[str]:
    names = {posixpath.basename(p) for p in op.delta_file_paths}
    if op.data_file_path:
        names.add(posixpath.basename(op.data_file_path))
    return names


def read_plan(table: Table, inst: Instant) -> CompactionPlan:
    tl = table.timeline
    return CompactionPlan.from_bytes(tl.read_plan(inst), tl.path_of(inst))


def latest_schema(table: Table) -> str | None:
    """The writer schema (Avro JSON) of the newest completed write that recorded one.

    Compaction commits must carry it too: hudi-rs and Hudi take a table's schema from
    the latest commit's ``extraMetadata.schema``.
    """
    for inst in reversed(table.timeline.completed_writes()):
        schema = table.fsview.commit_metadata(inst).schema
        if schema:
            return schema
    return table.properties.create_schema


def abs_path(base_path: str, partition: str, name: str) -> str:
    return posixpath.join(base_path, partition, name) if partition else posixpath.join(base_path, name)


def rel_path(partition: str, name: str) -> str:
    return f"{partition}/{name}" if partition else name


def service_token(task: int = 0) -> str:
    """A write token unique to this process, so files of two services never collide."""
    return write_token(task, 10_000 + os.getpid() % 90_000, 1)


class DamageRefusedError(ServiceError):
    """A service refused a plan because a file of a slice it would rewrite is damaged."""


def damage_message(service: str, instant: str, damage: list[Damage], base_path: str) -> str:
    more = f" (and {len(damage) - 1} more)" if len(damage) > 1 else ""
    return (f"{service} {instant} refused: {damage[0]}{more}; its records would be lost for good - restore "
            f"the file (or drop its rows knowingly: `streamer repair {base_path} --drop-damaged`); "
            f"`streamer check {base_path}` lists all damage")


def refuse_damage(table: Table, fslice: FileSlice, instant: str, service: str,
                  corrupt: Iterable[CorruptRead] = (), *, accept: frozenset[Damage] = frozenset()) -> None:
    """Refuse to rewrite a slice that lost a committed file or holds a corrupt committed block.

    Rewriting it would produce output without those records, and a clean would then
    delete the rest: damage made permanent and silent. The error names the file and the
    instant that wrote it; the caller writes nothing for the plan.
    """
    damage = [d for d in read_damage(table.fsview, table.timeline, fslice, corrupt) if d not in accept]
    if damage:
        raise DamageRefusedError(damage_message(service, instant, damage, table.base_path))


def next_log_version(table: Table, partition: str, file_id: str, base_instant: str) -> int:
    top = 0
    for st in table.fs.list_dir(abs_path(table.base_path, partition, "")):
        lf = parse_log_file_name(st.name)
        if lf and lf.file_id == file_id and lf.base_instant == base_instant:
            top = max(top, lf.version)
    return top + 1
