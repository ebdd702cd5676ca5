"""Table.lookup: rows by record key, reading only the file groups the bloom index names."""

from __future__ import annotations

import pyarrow as pa

from streamer.read import Table
from streamer.write import HudiWriter, TableConfig


def _table(path: str) -> dict[str, dict]:
    """Four partitions of 50 keys, then updates of some and deletes of others; the model."""
    w = HudiWriter.create(path, TableConfig("t", record_key_fields=("id",), partition_fields=("city",),
                                            ordering_field="ts"))
    cities = ["ams", "nyc", "sf", "tok"]
    model: dict[str, dict] = {}
    rows = [{"id": f"k{i:03d}", "city": cities[i % 4], "ts": 1, "fare": float(i)} for i in range(200)]
    w.upsert(pa.Table.from_pylist(rows))
    model.update({r["id"]: r for r in rows})
    updates = [{**model[f"k{i:03d}"], "ts": 2, "fare": -float(i)} for i in range(0, 200, 7)]
    w.upsert(pa.Table.from_pylist(updates))
    model.update({r["id"]: r for r in updates})
    deleted = [f"k{i:03d}" for i in range(1, 200, 11)]
    w.delete(pa.Table.from_pylist([{"id": k, "city": model[k]["city"], "ts": 3, "fare": 0.0} for k in deleted]))
    for k in deleted:
        model.pop(k)
    return model


def test_lookup_returns_the_snapshot_rows_of_the_keys_from_their_file_groups_only(tmp_path):
    path = str(tmp_path / "t")
    model = _table(path)
    wanted = ["k007", "k014", "k005", "k001", "nope"]  # updated (tok), updated (sf), plain (nyc), deleted (nyc), absent
    t = Table.open(path)
    found = t.lookup(wanted, columns=["id", "city", "fare"])
    got = {r["id"]: r for r in found.rows.to_pylist()}
    assert got == {k: {c: model[k][c] for c in ("id", "city", "fare")} for k in wanted if k in model}
    assert set(got) == {"k007", "k014", "k005"}
    # the keys live in 3 of the 4 partitions' file groups: the fourth (ams) is never read
    assert found.slices_total == 4 and found.slices_read == 3


def test_lookup_with_partitions_looks_in_each_keys_own(tmp_path):
    path = str(tmp_path / "t")
    model = _table(path)
    found = Table.open(path).lookup(["k002", "k002"], partitions=["sf", "ams"], columns=["id", "city", "fare"])
    assert found.rows.to_pylist() == [{"id": "k002", "city": "sf", "fare": model["k002"]["fare"]}]
    assert found.slices_read == 1


def test_streamer_read_key_prints_the_rows_of_the_keys(tmp_path, capsys):
    import json

    from streamer.cli import main as cli

    path = str(tmp_path / "t")
    model = _table(path)
    assert cli(["read", path, "--key", "k005", "--key", "k001", "--columns", "id,fare", "--format", "jsonl"]) == 0
    out, err = capsys.readouterr()
    assert [json.loads(line) for line in out.splitlines()] == [{"id": "k005", "fare": model["k005"]["fare"]}]
    assert "1 row(s) of 2 key(s), from 1 of 4 file group(s)" in err
