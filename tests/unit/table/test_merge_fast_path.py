"""Merging a slice whose base is key-ordered: only the base rows a log block names are
sorted, the rest are interleaved back. Must equal the full sort exactly (rows, order,
schema) in every situation: event/commit time, deletes with and without ordering
values, ``_hoodie_is_deleted``, schema evolution, unsorted or duplicate-key bases."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from streamer.table import merge
from streamer.table.merge import MergeSpec, merge_records

EVENT = MergeSpec(ordering_field="ts", event_time_ordering=True)
COMMIT = MergeSpec(ordering_field="ts", event_time_ordering=False)
NO_META = MergeSpec(record_key_fields=("id",), ordering_field="ts", populate_meta_fields=False)


def _rows(rng, ids, ts_hi, spec, extra_col=False, deleted_frac=0.0):
    keys = [f"k{i:04d}" for i in ids]
    d = {
        "ts": pa.array(rng.integers(0, ts_hi, len(ids)), pa.int64()),
        "v": pa.array([f"v{rng.integers(1_000_000)}" for _ in ids]),
        "_hoodie_is_deleted": pa.array(rng.random(len(ids)) < deleted_frac),
    }
    key_col = "_hoodie_record_key" if spec.populate_meta_fields else "id"
    d = {key_col: keys, **d}
    if extra_col:
        d["extra"] = pa.array(rng.integers(0, 9, len(ids)), pa.int32())
    return pa.table(d)


def _scenario(seed, spec, base_kind):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 400))
    ids = np.sort(rng.choice(5000, n, replace=False))
    if base_kind == "unsorted":
        ids = rng.permutation(ids)
    elif base_kind == "duplicates":
        ids = np.sort(np.concatenate([ids, ids[: max(1, n // 10)]]))
    base = _rows(rng, ids, 10, spec)
    blocks = []
    for b in range(int(rng.integers(1, 5))):
        kind = rng.choice(["data", "data", "delete", "empty"])
        m = int(rng.integers(1, max(2, n // 3)))
        pick = rng.choice(np.concatenate([ids, rng.integers(5000, 6000, 20)]), m)
        if kind == "data":
            blocks.append(("data", _rows(rng, pick, 12, spec, extra_col=(b == 2), deleted_frac=0.1)))
        elif kind == "delete":
            d = {"_hoodie_record_key": [f"k{i:04d}" for i in pick]}
            which = rng.integers(0, 3)
            if which == 1:
                d["ordering_value"] = pa.array(rng.integers(0, 12, m), pa.int64())
            elif which == 2:
                d["ordering_value"] = pa.nulls(m)
            blocks.append(("delete", pa.table(d)))
        else:
            blocks.append(("data", _rows(rng, [], 1, spec)))
    return base, blocks


def _full_sort(base, blocks, spec, monkeypatch):
    with monkeypatch.context() as m:
        m.setattr(merge, "_touched_rows", lambda *a: None)
        return merge_records(base, blocks, spec)


@pytest.mark.parametrize("spec", [EVENT, COMMIT, NO_META], ids=["event", "commit", "no-meta"])
@pytest.mark.parametrize("base_kind", ["sorted", "unsorted", "duplicates"])
def test_fast_merge_equals_full_sort(spec, base_kind, monkeypatch):
    calls = []
    real = merge._touched_rows

    def spy(*a):
        out = real(*a)
        calls.append(out is not None)
        return out

    monkeypatch.setattr(merge, "_touched_rows", spy)
    for seed in range(40):
        base, blocks = _scenario(seed, spec, base_kind)
        got = merge_records(base, blocks, spec)
        want = _full_sort(base, blocks, spec, monkeypatch)
        assert got.schema.equals(want.schema), seed
        assert got.to_pylist() == want.to_pylist(), seed
    if base_kind == "sorted":
        assert any(calls), "the shortcut was never taken"
    else:
        assert not any(calls), "an unsorted or duplicate-key base must take the full sort"


def test_untouched_rows_keep_base_values_and_order():
    base = pa.table({"_hoodie_record_key": ["a", "b", "c", "d", "e"], "ts": [1] * 5, "v": list("ABCDE")})
    log = pa.table({"_hoodie_record_key": ["c", "bb", "f"], "ts": [2] * 3, "v": ["C2", "BB", "F"]})
    dels = pa.table({"_hoodie_record_key": ["e"]})
    out = merge_records(base, [("data", log), ("delete", dels)], EVENT)
    assert out.column("_hoodie_record_key").to_pylist() == ["a", "b", "bb", "c", "d", "f"]
    assert out.column("v").to_pylist() == ["A", "B", "BB", "C2", "D", "F"]


@pytest.mark.parametrize("base_kind", ["sorted", "unsorted"])
def test_kept_columns_are_the_full_merge_projected(base_kind, monkeypatch):
    """``columns`` leaves the key and ordering value out of the final gather only."""
    for seed in range(20):
        base, blocks = _scenario(seed, EVENT, base_kind)
        want = _full_sort(base, blocks, EVENT, monkeypatch).select(["v"])
        got = merge_records(base, blocks, EVENT, columns=["v"])
        assert got.column_names == ["v"], seed
        assert got.to_pylist() == want.to_pylist(), seed


def test_deletes_without_a_join_plan():
    """A delete beats the winner it names when later in write order; under event time a
    real ordering value must also not be lower; a delete of an unknown key is ignored."""
    base = pa.table({"_hoodie_record_key": ["a", "b", "c"], "ts": [5, 5, 5], "v": list("ABC")})
    log = pa.table({"_hoodie_record_key": ["b"], "ts": [9], "v": ["B2"]})
    dels = pa.table({"_hoodie_record_key": ["a", "b", "zz"], "ordering_value": pa.array([7, 6, 1], pa.int64())})
    out = merge_records(base, [("data", log), ("delete", dels)], EVENT)
    assert out.column("v").to_pylist() == ["B2", "C"]  # b's 9 beats the delete's 6
    out = merge_records(base, [("data", log), ("delete", dels)], COMMIT)
    assert out.column("v").to_pylist() == ["C"]
