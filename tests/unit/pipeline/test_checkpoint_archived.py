"""A pipeline's position outlives the active timeline (streamer/pipeline/checkpoint.py,
streamer/table/archived_commits.py).

Pipeline ``a`` commits once and goes idle; pipeline ``b`` writes the same table on, and
clean and archive move ``a``'s write off the active timeline. Before, ``a``'s next start
found no position and silently started over at its source's configured beginning (all
of a topic again, or - with ``latest`` - nothing of what arrived meanwhile). The expected
positions are the ones each commit was given, not anything read back by our code."""

from __future__ import annotations

import os

import pytest

from streamer.config.policies import ArchivePolicy, CleanPolicy, CompactionPolicy
from streamer.errors import MissingFileError
from streamer.pipeline.checkpoint import (
    BATCH_ID_KEY,
    PIPELINE_KEY,
    checkpoint_history,
    checkpoint_metadata,
    stored_checkpoint,
)
from streamer.read import Table
from streamer.services.archive import run_archive
from streamer.services.clean import run_clean
from streamer.services.compaction import schedule_compaction
from streamer.services.executor import execute
from streamer.sources.position import KafkaOffsets
from streamer.table.snapshot import TableSnapshot
from tests.support import block_tables as tg


def _commit(w, gen, pipeline: str, offset: int, batch: int) -> str:
    pos = KafkaOffsets(topic=f"topic-{pipeline}", partitions={0: offset, 1: offset + 1})
    extra = {PIPELINE_KEY: pipeline, BATCH_ID_KEY: str(batch), **checkpoint_metadata(pos)}
    return w.upsert(gen.upserts(5), extra_metadata=extra).instant


def _a_archivable(path: str, version: int) -> tuple[str, str]:
    """``a`` commits at offsets 42/43 (batch 7) then idles while ``b`` writes on; a
    clean leaves ``a``'s write archivable. Returns (``a``'s instant, ``b``'s last)."""
    with tg.at_version(version):
        w, gen, _ = tg.build(path, 1)
        a = _commit(w, gen, "a", 42, 7)
        for i in range(10):
            _commit(w, gen, "b", i, i)
        comp = schedule_compaction(Table.open(path), CompactionPolicy(), force=True)
        assert execute(Table.open(path), comp).status == "completed"
        for i in range(4):
            b = _commit(w, gen, "b", 100 + i, 10 + i)
        run_clean(Table.open(path), CleanPolicy(retain_commits=1))
    return a, b


def _archive(path: str, a: str) -> None:
    out = run_archive(Table.open(path), ArchivePolicy(min_commits=2, max_commits=3))
    assert a in out.archived, "the archive did not move pipeline a's write"
    assert a not in {i.timestamp for i in Table.open(path).timeline.instants}


def _a_archived(path: str, version: int) -> tuple[str, str]:
    a, b = _a_archivable(path, version)
    _archive(path, a)
    return a, b


@pytest.mark.parametrize("version", [6, 8, 9])
def test_an_idle_pipeline_resumes_from_its_archived_write(tmp_path, version):
    path = str(tmp_path / "t")
    a, b = _a_archived(path, version)
    fs = Table.open(path).fs
    found = stored_checkpoint(fs, path, pipeline="a", topic="topic-a")
    assert found.instant == a and found.batch_id == 7
    assert found.position == KafkaOffsets(topic="topic-a", partitions={0: 42, 1: 43})
    busy = stored_checkpoint(fs, path, pipeline="b", topic="topic-b")  # the active timeline's, unchanged
    assert busy.instant == b and busy.position == KafkaOffsets(topic="topic-b", partitions={0: 103, 1: 104})
    # the audit trail stays the active timeline's: a's archived write is not in it
    assert a not in [c.instant for c in checkpoint_history(fs, path, pipeline="a")]


@pytest.mark.parametrize("version", [6, 9])
def test_a_pipeline_that_never_wrote_still_starts_without_a_position(tmp_path, version):
    path = str(tmp_path / "t")
    _a_archived(path, version)
    found = stored_checkpoint(Table.open(path).fs, path, pipeline="c")
    assert found.position is None and found.instant is None


@pytest.mark.parametrize("version", [6, 9])
def test_an_archive_between_the_lookups_listing_and_its_reads_loses_no_position(tmp_path, monkeypatch, version):
    """The lookup runs without the writers' lock: an archiver may move instants after it
    listed the timeline. The first metadata read runs the archive in between."""
    path = str(tmp_path / "t")
    a, _ = _a_archivable(path, version)
    real = TableSnapshot.commit_metadata
    archived: list[bool] = []

    def read(self, instant):
        if not archived:
            archived.append(True)
            _archive(path, a)
        return real(self, instant)

    monkeypatch.setattr(TableSnapshot, "commit_metadata", read)
    found = stored_checkpoint(Table.open(path).fs, path, pipeline="a")
    assert archived and found.instant == a
    assert found.position == KafkaOffsets(topic="topic-a", partitions={0: 42, 1: 43})


def test_a_commit_file_gone_without_an_archive_is_reported(tmp_path, monkeypatch):
    """Only an instant that left the timeline from its start was archived: a completed
    file that vanished after the listing from the middle of the timeline is damage."""
    path = str(tmp_path / "t")
    a, b = _a_archivable(path, 6)
    t = Table.open(path)
    victim = next(i for i in t.timeline.completed_writes() if a < i.timestamp < b)
    real = TableSnapshot.commit_metadata

    def read(self, instant):
        if instant.timestamp == victim.timestamp:
            os.remove(t.timeline.path_of(victim))
        return real(self, instant)

    monkeypatch.setattr(TableSnapshot, "commit_metadata", read)
    with pytest.raises(MissingFileError, match=victim.timestamp):
        stored_checkpoint(t.fs, path, pipeline="a")
