"""A table whose oldest writes were archived, with a record of which write last wrote
each key: the independent answer to incremental ranges reaching past the active timeline
(tests/unit/read/test_incremental_archived.py, tests/hudi_jvm/test_lsm_history.py)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from streamer.config.policies import ArchivePolicy, CleanPolicy, CompactionPolicy
from streamer.read import Table
from streamer.services.archive import run_archive
from streamer.services.clean import run_clean
from streamer.services.compaction import schedule_compaction
from streamer.services.executor import execute
from streamer.table import lsm_history as h
from streamer.write import HudiWriter
from tests.support import block_tables as tg

Key = tuple[str, int]
#: key -> (row, the write that last wrote it)
State = dict[Key, tuple[dict, str]]


#: The index of the write after which every file group is compacted (before the clean).
COMPACTED_AFTER = 5


@dataclass(frozen=True)
class ArchivedWrites:
    path: str
    writes: list[str]
    #: each write's rows by key, and whether it deleted them
    batches: list[tuple[bool, dict[Key, dict]]]
    #: the keys after write :data:`COMPACTED_AFTER`: what the compaction's base files hold
    compacted: State
    archived: list[str]
    #: each write's completion time (its requested time at layout 1)
    done: dict[str, str]

    def expected(self, after: int | None, upto: int) -> list[dict]:
        """What a range of the writes after index ``after`` up to ``upto`` reads when it
        holds archived writes, as Hudi 1.0.2 and 1.2.0 answer it: today's slices, each
        source's rows of the range's writes (the compaction's base rows, then each later
        write's records) merged, every delete applied. A range of active writes ending at
        the last one reads the same."""
        wanted = set(self.writes[(after + 1 if after is not None else 0):upto + 1])
        rows = {k: row for k, (row, by) in self.compacted.items() if by in wanted}
        for write, (deletes, batch) in zip(self.writes[COMPACTED_AFTER + 1:], self.batches[COMPACTED_AFTER + 1:],
                                           strict=True):
            for k, row in batch.items():
                if deletes:
                    rows.pop(k, None)
                elif write in wanted:
                    rows[k] = row
        return sorted(rows.values(), key=lambda r: (r["city"], r["id"]))

    def base_files_only(self, after: int | None, upto: int) -> list[dict]:
        """The same range as Hudi 0.15.0's and 1.0.2's scan answers it: the rows of the
        range's writes in the base files alone (no log merged: its updates, inserts and
        deletes unseen)."""
        wanted = set(self.writes[(after + 1 if after is not None else 0):upto + 1])
        return sorted((row for row, by in self.compacted.values() if by in wanted), key=lambda r: (r["city"], r["id"]))

    def bounds(self, after: int | None, upto: int) -> tuple[str | None, str]:
        """``(begin, end]`` of the writes after index ``after`` up to ``upto``. Layout 2 ranges
        by completion time: begin is the next write's requested time, at which no write
        completed (Hudi 1.0.2 takes it as inclusive, 1.2.0 as exclusive; both read alike)."""
        layout2 = self.done != {w: w for w in self.writes}
        begin = None if after is None else (self.writes[after + 1] if layout2 else self.writes[after])
        return begin, self.done[self.writes[upto]]


def _write(w, gen: tg.Gen, model: tg.Model, state: State, i: int) -> tuple[str, bool, dict[Key, dict]]:
    """Write ``i`` (every fourth one deletes), recorded in ``state``."""
    deletes = i % 4 == 3
    batch = gen.deletes(model, 4) if deletes else gen.upserts(120 if i == 0 else 12)
    instant = (w.delete(batch) if deletes else w.upsert(batch)).instant
    if deletes:
        model.apply(deletes=batch)
    else:
        model.apply(batch)
    rows = {(r["city"], r["id"]): {c: r[c] for c in tg.COLUMNS} for r in batch.to_pylist()}
    for k, row in rows.items():
        if deletes:
            state.pop(k, None)
        else:
            state[k] = (row, instant)
    return instant, deletes, rows


def archivable(path: str, version: int) -> tuple[HudiWriter, tg.Gen, tg.Model]:
    """Writes, a compaction, more writes and a clean: several instants may leave at the
    next archive (tests/unit/services/test_archive_history.py, test_archive_lock.py)."""
    with tg.at_version(version):
        w, gen, model = tg.build(path, 6, deletes_every=3)
        comp = schedule_compaction(Table.open(path), CompactionPolicy(), force=True)
        assert execute(Table.open(path), comp).status == "completed"
        for _ in range(3):
            tg.step(w, gen, model)
        run_clean(Table.open(path), CleanPolicy(retain_commits=1))
    return w, gen, model


def written_and_served(path: str, w: HudiWriter, gen: tg.Gen, model: tg.Model) -> list[str]:
    """Six more writes (a delete among them) with a compaction after the third, a clean
    keeping one commit, then an archive; returns what the archive moved (the Hudi tier's
    tests of what our services leave to Hudi: savepoints, replaced file groups)."""
    for i in range(6):
        tg.step(w, gen, model, delete=(i == 3))
        if i == 2:
            comp = schedule_compaction(Table.open(path), CompactionPolicy(), force=True)
            assert execute(Table.open(path), comp).status == "completed"
    run_clean(Table.open(path), CleanPolicy(retain_commits=1))
    return run_archive(Table.open(path), ArchivePolicy(min_commits=2, max_commits=3)).archived


def archived_writes(path: str, version: int, *, before_archive: Callable[[], None] | None = None) -> ArchivedWrites:
    """Ten writes with a compaction among them, a clean and an archive that moves at least
    four of the writes (never the last). ``before_archive`` runs just before the archive
    (a reader that listed the timeline then, say)."""
    writes: list[str] = []
    batches: list[tuple[bool, dict[Key, dict]]] = []
    state: State = {}
    with tg.at_version(version):
        w, gen, model = tg.create(path), tg.Gen(0), tg.Model()
        for i in range(10):
            instant, deletes, rows = _write(w, gen, model, state, i)
            writes.append(instant)
            batches.append((deletes, rows))
            if i == COMPACTED_AFTER:
                compacted = dict(state)
                comp = schedule_compaction(Table.open(path), CompactionPolicy(), force=True)
                assert execute(Table.open(path), comp).status == "completed"
        run_clean(Table.open(path), CleanPolicy(retain_commits=1))
    if before_archive is not None:
        before_archive()
    moved = run_archive(Table.open(path), ArchivePolicy(min_commits=2, max_commits=3)).archived
    archived = [t for t in writes if t in moved]
    assert len(archived) >= 4 and writes[-1] not in moved, moved
    return ArchivedWrites(path, writes, batches, compacted, archived, _completion_times(path, writes))


def _completion_times(path: str, writes: list[str]) -> dict[str, str]:
    """Each write's completion time, from the active timeline or the LSM history."""
    t = Table.open(path)
    if t.timeline.layout_version < 2:
        return {w: w for w in writes}
    out = {i.timestamp: i.completion_time for i in t.timeline.completed_writes()}
    rows = h.read_instants(t.fs, h.read_snapshot(t.fs, h.history_dir(path, t.properties)))
    out.update(zip(rows.column("instantTime").to_pylist(), rows.column("completionTime").to_pylist(), strict=True))
    return {w: out[w] for w in writes}
