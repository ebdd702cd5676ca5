"""A lost log file of a timeline-layout-2 table (Hudi 1.x, table version 8) is refused.

In layout 2 a log file's name carries its own write's instant, not its slice's base
instant: the slice is the newest one started before that write completed. The
missing-file check used to attribute no slice to such a log, so a table Apache Hudi wrote
read short without it (and ``check`` said intact). Judged by the fixture's expected rows
(Hudi's own answer), never by our reader alone.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from streamer.errors import MissingFileError
from tests.support.fixture_tables import canonical_lines, expected_lines, table_path

NAME = "quickstart_trips_table__mor__avro__v8_trips_8i3u1d"


@pytest.fixture
def table_copy(hudi_fixtures_dir, tmp_path) -> Path:
    dst = tmp_path / "t"
    shutil.copytree(table_path(hudi_fixtures_dir, NAME), dst)
    return dst


def test_a_served_log_lost_from_a_layout2_table_is_refused(table_copy):
    from streamer.integrity import check_table
    from streamer.read import Table

    t = Table.open(str(table_copy))
    assert t.timeline.layout_version >= 2
    served = [lf for s in t.fsview.latest_merged_slices() for lf in s.log_files]
    assert served, "the fixture's latest slices hold log files"
    victim = Path(served[0].path)
    original = victim.read_bytes()
    victim.unlink()

    with pytest.raises(MissingFileError, match=victim.name):
        Table.open(str(table_copy)).read()
    t = Table.open(str(table_copy))
    report = check_table(t.fs, t.fsview, t.timeline, deep=False)
    assert [d.path for d in report.damage] == [str(victim)]

    victim.write_bytes(original)
    got = canonical_lines(Table.open(str(table_copy)).read().to_pylist())
    assert got == expected_lines(NAME, "snapshot")
