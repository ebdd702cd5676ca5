"""An incremental read refuses a lost file its range wrote into a live slice.

It reads only the files the range's commits wrote; one of them gone from a slice a
read still serves means rows missing from the answer. Ranges that did not write it
read as before.
"""

from __future__ import annotations

import pytest

from streamer.errors import MissingFileError
from streamer.read import Table
from tests.support import block_tables as tg


def test_incremental_refuses_a_lost_file_of_its_range(tmp_path):
    root = tmp_path / "t"
    w, gen, model = tg.build(str(root), 3, deletes_every=0)
    t = Table.open(str(root))
    writes = [i.timestamp for i in t.timeline.completed_writes()]
    victim_inst = writes[2]
    stat = next(s for s in t.fsview.commit_metadata(t.timeline.get(victim_inst)).write_stats()
                if ".log." in (s.path or ""))
    victim = root / stat.path
    original = victim.read_bytes()
    victim.unlink()

    with pytest.raises(MissingFileError, match=victim.name):
        Table.open(str(root)).read("incremental", begin=writes[1], end=victim_inst)
    later = Table.open(str(root)).read("incremental", begin=victim_inst)  # not its range
    assert set(later.column("_hoodie_commit_time").to_pylist()) <= set(writes[3:])
    assert len(later) > 0

    victim.write_bytes(original)
    rows = Table.open(str(root)).read("incremental", begin=writes[1], end=victim_inst)
    assert victim_inst in set(rows.column("_hoodie_commit_time").to_pylist())
