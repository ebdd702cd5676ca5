"""Acceptance 2: ours -> Hudi 0.15 -> ours -> Hudi 1.0 (table version 6) -> ours.

At every step the table equals a dict model through our reader, hudi-rs, Hudi 0.15 and
Hudi 1.0, with no duplicate key, including keys our writer first inserted into log
blocks. Hudi writes with its defaults (bloom index, metadata table enabled) after
``handover_to_hudi`` (every key in a base file); Hudi 0.15 also compacts and cleans
inline, and Hudi 1.0 writes version 6 without upgrading (``hoodie.write.table.version``).
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from streamer.read import Table
from streamer.services.handover import handover_to_hudi, log_insert_groups
from streamer.table.properties import load_properties
from streamer.write import HudiWriter
from tests.hudi_jvm.compare import Expected, Query, assert_readers_match
from tests.support import block_tables as tg
from tests.support.failed_write import fail_before_complete
from tests.support.hudi_options import HUDI_WRITE, V6

pytestmark = [pytest.mark.hudi_jvm, pytest.mark.conformance]


def _check(path: str, model: tg.Model, sessions, step: str) -> None:
    """Snapshot: the model's rows (data columns: the model cannot name the instants of
    Hudi's commits); read-optimized: the base files; every reader, ours included."""
    assert_readers_match(path, sessions, Expected.of_rows(model.snapshot(), tg.COLUMNS),
                         [Query("snapshot"), Query("read_optimized")])


def _hudi_write(session, path, batch: pa.Table, model: tg.Model, *, delete=False, extra=None):
    opts = dict(HUDI_WRITE, **(extra or {}))
    if delete:
        opts["hoodie.datasource.write.operation"] = "delete"
    session.write(path, batch, opts)
    if delete:
        model.apply(deletes=batch)
    else:
        model.apply(batch)


def test_ours_hudi015_ours_hudi10_ours(tmp_path, hudi015, hudi10):
    sessions = {"0.15": hudi015, "1.0": hudi10}
    path = str(tmp_path / "t")
    w, gen, model = tg.build(path, 6, deletes_every=3)
    assert log_insert_groups(Table.open(path)), "precondition: some keys were inserted into logs"
    _check(path, model, sessions, "our writes")

    # -- Hudi 0.15 continues: update keys first inserted into logs, insert, delete, compact, clean
    handover_to_hudi(path)
    assert not log_insert_groups(Table.open(path))
    _check(path, model, sessions, "hand-over")
    bloom = {"hoodie.index.type": "BLOOM"}
    _hudi_write(hudi015, path, gen.upserts(40, tag="h15"), model, extra=bloom)
    _hudi_write(hudi015, path, gen.deletes(model, 5), model, delete=True, extra=bloom)
    _hudi_write(hudi015, path, gen.upserts(30, tag="h15c"), model, extra={**bloom,
        "hoodie.compact.inline": "true", "hoodie.compact.inline.max.delta.commits": "1",
        "hoodie.clean.automatic": "true", "hoodie.cleaner.commits.retained": "1",
    })
    _check(path, model, sessions, "Hudi 0.15 upserts, delete, compaction, clean")
    actions = {i.action for i in Table.open(path).timeline.completed()}
    assert {"commit", "clean"} <= actions, actions  # Hudi's compaction and clean completed

    # -- ours continues (inserts into logs again), then services of ours
    w = HudiWriter.open(path, options=tg.SMALL)
    for i in range(4):
        tg.step(w, gen, model, delete=(i == 2))
    _check(path, model, sessions, "our writes after Hudi 0.15")

    # -- Hudi 1.0 continues at table version 6, with its default (SIMPLE) index
    handover_to_hudi(path)
    _hudi_write(hudi10, path, gen.upserts(40, tag="h10"), model, extra=V6)
    _hudi_write(hudi10, path, gen.deletes(model, 5), model, delete=True, extra=V6)
    assert load_properties(Table.open(path).fs, path).version == 6
    _check(path, model, sessions, "Hudi 1.0 (v6) upserts and delete")

    # -- and ours once more
    w = HudiWriter.open(path, options=tg.SMALL)
    for i in range(3):
        tg.step(w, gen, model, delete=(i == 1))
    _check(path, model, sessions, "our writes after Hudi 1.0")


def _base_file_keys(path: str) -> set[tuple[str, int]]:
    t = Table.open(path)
    keys: set[tuple[str, int]] = set()
    for s in t.fsview.latest_file_slices():
        if s.base_file is not None:
            with t.fs.open_input_file(s.base_file.path) as f:
                rows = pq.read_table(f, columns=["city", "id"]).to_pylist()
            keys |= {(r["city"], r["id"]) for r in rows}
    return keys


@pytest.mark.parametrize("index", ["BLOOM", "SIMPLE"])
def test_without_handover_a_hudi_writer_duplicates_log_keys(tmp_path, hudi015, index):
    """Why the hand-over exists, shown on Hudi itself: keys our writer inserted into log
    blocks are invisible to Hudi's base-file indexes, so Hudi writes them again. ``streamer
    show`` and ``streamer handover --check`` flag exactly those file groups beforehand."""
    path = str(tmp_path / "t")
    w, gen, model = tg.build(path, 4, deletes_every=0)
    log_only = sorted(set(model.rows) - _base_file_keys(path))
    assert log_only, "precondition: some keys live only in log blocks"
    flagged = {g.file_id for g in log_insert_groups(Table.open(path))}
    t = Table.open(path)
    holders = {s.file_id for s in t.fsview.latest_file_slices() if s.log_files
               and s.partition_path in {k[0] for k in log_only}}
    assert flagged and flagged <= holders
    again = pa.Table.from_pylist(
        [dict(model.rows[k], ts=10_000 + i, value=f"again{i}") for i, k in enumerate(log_only[:5])],
        schema=tg.SCHEMA)
    hudi015.write(path, again, dict(HUDI_WRITE, **{"hoodie.metadata.enable": "false",
                                                   "hoodie.index.type": index}))
    snap = hudi015.read(path)
    keys = list(zip(snap.column("city").to_pylist(), snap.column("id").to_pylist(), strict=True))
    assert {k for k in keys if keys.count(k) > 1} == set(log_only[:5])


def test_hudi_rolls_back_a_write_of_ours_that_died(tmp_path, hudi015, hudi10):
    """Our writer dies after writing its files (log files and their markers present, the
    instant inflight) and Hudi 0.15's own writer continues the table: it rolls the failed
    write back by its markers - possible only because a log file's marker is
    ``<log>.marker.APPEND`` (Hudi's MarkerBasedRollbackStrategy refuses any other).

    Read back by ours, hudi-rs and Hudi 1.0: the model. Hudi 0.15's *reader* is left out,
    for a Hudi 0.15 bug this scenario shows on Hudi's own blocks: its rollback block
    carries the rollback's instant (``BaseRollbackHelper.generateHeader``: the timeline's
    last instant), later than the deltacommit Hudi writes right after it in the same file
    group, and ``AbstractHoodieLogRecordReader`` stops at the first block later than the
    query's latest commit - so Hudi 0.15 misses Hudi's own update. ``streamer handover``
    (which rolls failed writes back first) avoids it; ``test_ours_hudi015...`` covers that.
    """
    path = str(tmp_path / "t")
    w, gen, model = tg.build(path, 4, deletes_every=3)
    handover_to_hudi(path)
    # updates go to log files: APPEND markers
    fail_before_complete(lambda: w.upsert(gen.upserts(25, tag="lost")))
    assert Table.open(path).timeline.pending(), "precondition: a failed write is pending"
    _hudi_write(hudi015, path, gen.upserts(20, tag="h15"), model, extra={"hoodie.index.type": "BLOOM"})
    t = Table.open(path)
    assert not [i for i in t.timeline.pending() if i.action == "deltacommit"]
    assert any(i.action == "rollback" for i in t.timeline.completed())
    _check(path, model, {"1.0": hudi10}, "Hudi 0.15 after rolling back our failed write")
