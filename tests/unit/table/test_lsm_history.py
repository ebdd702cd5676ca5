"""Hudi 1.x's LSM timeline history, read and written (streamer/table/lsm_history.py).

The layout facts are Hudi's (``LSMTimeline``, ``LSMTimelineWriter``, 1.0.2 and 1.2.0);
the Hudi tier (tests/hudi_jvm/test_lsm_history.py) proves Hudi reads what we write."""

from __future__ import annotations

import json
import os

import pyarrow.parquet as pq
import pytest

from streamer.errors import CorruptDataError
from streamer.fs import resolve
from streamer.table import lsm_history as h


def _row(t: str, action: str = "deltacommit", plan: bytes | None = None) -> h.ArchivedInstant:
    return h.ArchivedInstant(t, str(int(t) + 5), action, b"Obj\x01" + t.encode(), plan)


def _publish(folder: str, rows: list[h.ArchivedInstant], version: int, listed: list[h.HistoryFile]) -> h.HistoryFile:
    name, data = h.data_file(rows)
    with open(os.path.join(folder, name), "wb") as f:
        f.write(data)
    entry = h.HistoryFile(name, len(data))
    with open(os.path.join(folder, f"manifest_{version}"), "wb") as f:
        f.write(h.manifest_bytes([*listed, entry]))
    with open(os.path.join(folder, "_version_"), "w") as f:
        f.write(str(version))
    return entry


def test_a_data_file_is_named_by_its_first_and_last_requested_time_and_holds_hudis_schema(tmp_path):
    name, data = h.data_file([_row("20261202000000300", "clean", plan=b"Obj\x01plan"), _row("20261202000000100")])
    assert name == "20261202000000100_20261202000000300_0.parquet"
    assert h.FILE_PATTERN.match(name)
    path = tmp_path / name
    path.write_bytes(data)
    t = pq.read_table(path)
    assert t.schema.names == ["instantTime", "completionTime", "action", "metadata", "plan", "version"]
    assert not t.schema.field("version").nullable and t.column("version").to_pylist() == [1, 1]
    assert t.column("instantTime").to_pylist() == ["20261202000000100", "20261202000000300"]  # ascending
    assert t.column("plan").to_pylist() == [None, b"Obj\x01plan"]
    assert all(c is not None for c in t.column("completionTime").to_pylist())  # Hudi fails the load on a null


def test_manifests_are_hudis_json_and_the_snapshot_is_the_one_version_names(tmp_path):
    fs, folder = resolve(str(tmp_path))
    assert h.read_snapshot(fs, folder).version == -1 and h.read_snapshot(fs, folder).files == ()
    first = _publish(folder, [_row("20261202000000100"), _row("20261202000000200")], 1, [])
    second = _publish(folder, [_row("20261202000000300")], 2, [first])
    doc = json.loads((tmp_path / "manifest_2").read_bytes())
    assert doc == {"files": [{"fileName": first.name, "fileLen": first.size},
                             {"fileName": second.name, "fileLen": second.size}]}
    snap = h.read_snapshot(fs, folder)
    assert (snap.version, snap.files, snap.last_instant) == (2, (first, second), "20261202000000300")
    got = h.read_instants(fs, snap)
    assert got.column("instantTime").to_pylist() == ["20261202000000100", "20261202000000200", "20261202000000300"]
    assert h.read_instants(fs, snap, since="20261202000000200").num_rows == 2
    # a reader trusts _version_, even behind the newest manifest (Hudi's rule) ...
    (tmp_path / "_version_").write_text("1")
    assert h.read_snapshot(fs, folder).files == (first,)
    # ... and without it (or unparsable: Hudi parses bare digits only) takes the highest
    (tmp_path / "_version_").write_text("2\n")
    assert h.read_snapshot(fs, folder).version == 2
    os.remove(tmp_path / "_version_")
    assert h.read_snapshot(fs, folder).version == 2


def test_an_instant_two_files_hold_is_read_once(tmp_path):
    """A crash after publishing and before the active files went: the next run finishes the
    move, but a history written so by another writer still reads each instant once."""
    fs, folder = resolve(str(tmp_path))
    first = _publish(folder, [_row("20261202000000100"), _row("20261202000000200")], 1, [])
    _publish(folder, [_row("20261202000000200"), _row("20261202000000300")], 2, [first])
    got = h.read_instants(fs, h.read_snapshot(fs, folder))
    assert got.column("instantTime").to_pylist() == ["20261202000000100", "20261202000000200", "20261202000000300"]


@pytest.mark.parametrize("damage", ["manifest_missing", "manifest_garbage", "file_missing", "bad_name",
                                    "manifest_name"])
def test_a_damaged_history_is_an_error_naming_the_file(tmp_path, damage):
    fs, folder = resolve(str(tmp_path))
    entry = _publish(folder, [_row("20261202000000100")], 1, [])
    if damage == "manifest_missing":
        os.remove(tmp_path / "manifest_1")
    elif damage == "manifest_garbage":
        (tmp_path / "manifest_1").write_text("{not json")
    elif damage == "file_missing":
        os.remove(tmp_path / entry.name)
    elif damage == "bad_name":
        (tmp_path / "manifest_1").write_bytes(h.manifest_bytes([h.HistoryFile("junk.parquet", 3)]))
    else:
        (tmp_path / "manifest_2.x").write_text("{}")  # Hudi's listing fails on it too
        os.remove(tmp_path / "_version_")
    with pytest.raises(CorruptDataError):
        h.read_instants(fs, h.read_snapshot(fs, folder))


def _snap(*names_sizes: tuple[str, int]) -> h.Snapshot:
    return h.Snapshot("/h", 1, tuple(h.HistoryFile(n, s) for n, s in names_sizes))


def test_merge_candidates_follow_hudis_rules():
    l0 = [(f"{t}0_{t}9_0.parquet", 100) for t in ("3", "1", "2")]
    # fewer than the batch wait: nothing; as many: the oldest first, at most the batch
    assert h.merge_candidates(_snap(*l0), 0, batch=4) == []
    picked = h.merge_candidates(_snap(*l0, ("00_99_1.parquet", 5)), 0, batch=2)
    assert [f.name for f in picked] == ["10_19_0.parquet", "20_29_0.parquet"]
    assert h.merged_name(picked) == "10_29_1.parquet"
    # past the byte cap: stop there (two files at least); a file alone over it is passed over
    big = [("10_19_0.parquet", 900), ("20_29_0.parquet", 200), ("30_39_0.parquet", 50), ("40_49_0.parquet", 50)]
    assert [f.name for f in h.merge_candidates(_snap(*big), 0, batch=4, max_bytes=1000)] == \
        ["10_19_0.parquet", "20_29_0.parquet"]
    alone = [("10_19_0.parquet", 2000), ("20_29_0.parquet", 10), ("30_39_0.parquet", 10)]
    assert [f.name for f in h.merge_candidates(_snap(*alone), 0, batch=3, max_bytes=1000)] == \
        ["20_29_0.parquet", "30_39_0.parquet"]
