"""Our archive on a table whose Hudi writer keeps the metadata table, read back by Hudi
through that metadata table.

Hudi's archiver moves no instant past the metadata table's last compaction, and ours
stops there too (``archive_bound``; unit-tested on made-up metadata timelines in
tests/unit/services/test_archive_rules.py). Here Hudi itself writes the table, at
version 6 (Hudi 1.0) and 9 (Hudi 1.2), compacting its metadata table every third delta
commit, until that rule is the one that stops our archive; our archive then runs, and the
writing release (and Hudi 0.15 at version 6) reads the table with the metadata table on.

Checked by hand when this test was written: with the rule taken out, so our archive moved
instants the metadata table had not compacted yet, Hudi 0.15, 1.0 and 1.2 still read the
same snapshot. The instants it then moved had only written files of older slices (the
archive keeps every instant a live slice needs), and Hudi 1.x's metadata readers also
accept the instants of the metadata table's own timeline. So the rule is Hudi's
archiver's caution, kept as Hudi keeps it, and this test guards the reads, not the rule.
"""

from __future__ import annotations

import pytest

from streamer.config.policies import ArchivePolicy
from streamer.read import Table
from streamer.services import archive
from streamer.services.archive import archive_bound, run_archive
from streamer.table.metadata_table import has_metadata_table
from tests.hudi_jvm.compare import Expected, Query, assert_readers_match
from tests.support import block_tables as tg
from tests.support.hudi_options import HUDI_WRITE, V6

pytestmark = [pytest.mark.hudi_jvm, pytest.mark.conformance]

MDT_ON = {"hoodie.metadata.enable": "true"}
#: Hudi compacts its data every second delta commit and its metadata table every third
#: one, and archives nothing itself in this many writes (its default keeps 20 to 30).
WRITE = {**HUDI_WRITE, **MDT_ON, "hoodie.compact.inline": "true", "hoodie.compact.inline.max.delta.commits": "2",
         "hoodie.metadata.compact.max.delta.commits": "3"}
POLICY = ArchivePolicy(min_commits=1, max_commits=2)
MAX_WRITES = 12


def _bounds(path: str, monkeypatch) -> tuple[str | None, str | None]:
    """Where our archive stops on the table, and where it would stop without the
    metadata table's rule."""
    bound = archive_bound(Table.open(path))
    with monkeypatch.context() as m:
        m.setattr(archive, "_metadata_table_bound", lambda _t: None)
        return bound, archive_bound(Table.open(path))


@pytest.mark.parametrize(("version", "release"), [(6, "1.0"), (9, "1.2")])
def test_hudi_reads_through_its_metadata_table_after_our_archive(tmp_path, hudi_sessions, version, release,
                                                                monkeypatch):
    session = hudi_sessions[release]
    path = str(tmp_path / "t")
    opts = {**WRITE, **(V6 if version == 6 else {})}
    gen, model = tg.Gen(11), tg.Model()
    bounds: tuple[str | None, str | None] = (None, None)
    for i in range(MAX_WRITES):  # until the metadata table's rule is the one that binds
        rows = gen.upserts(40 if i == 0 else 15)
        session.write(path, rows, opts, mode="overwrite" if i == 0 else "append")
        model.apply(rows)
        bounds = _bounds(path, monkeypatch)
        if i >= 3 and bounds[0] is not None and (bounds[1] is None or bounds[0] < bounds[1]):
            break
    bound, unbounded = bounds
    assert bound is not None and (unbounded is None or bound < unbounded), (
        f"precondition: in {MAX_WRITES} writes the metadata table's last compaction never came to stop the archive "
        "before any other rule", bound, unbounded)
    table = Table.open(path)
    assert table.properties.version == version and has_metadata_table(table.properties)

    archived = run_archive(Table.open(path), POLICY).archived
    assert archived and max(archived) < bound, (archived, bound)
    assert has_metadata_table(Table.open(path).properties)  # an archive commits nothing: the table keeps it
    expect = Expected.of_rows(model.snapshot(), tg.COLUMNS)
    readers = {release: session, **({"0.15": hudi_sessions["0.15"]} if version == 6 else {})}
    assert_readers_match(path, readers, expect, [Query("snapshot")], hudi_options=MDT_ON)
