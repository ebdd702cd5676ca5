"""Generator determinism and rules; position round trips; file selection logic (no Spark)."""

from __future__ import annotations

import pyarrow.compute as pc
import pytest
from pydantic import ValidationError

from streamer.config.sources import GeneratorSourceConfig
from streamer.errors import SourceError
from streamer.fs import FileStatus
from streamer.sources.files import select_new_files
from streamer.sources.generator import GeneratorSource, generate_arrow
from streamer.sources.position import (
    FileListPosition,
    GeneratorPosition,
    KafkaOffsets,
    position_from_json,
    position_to_json,
)


def gen(**kw) -> GeneratorSourceConfig:
    return GeneratorSourceConfig(type="generator", **kw)


def test_same_seed_and_batch_give_identical_records():
    c = gen(records_per_batch=500, update_ratio=0.3, delete_ratio=0.1)
    assert generate_arrow(c, 3).equals(generate_arrow(c, 3))
    assert not generate_arrow(c, 3).equals(generate_arrow(c, 4))
    assert not generate_arrow(c, 3).equals(generate_arrow(gen(seed=7, records_per_batch=500, update_ratio=0.3, delete_ratio=0.1), 3))


def test_batch_mix_follows_the_ratios_and_earlier_keys():
    c = gen(records_per_batch=1000, num_keys=100_000, update_ratio=0.3, delete_ratio=0.1)
    first = generate_arrow(c, 0)
    assert first.num_rows == 1000 and not pc.any(first["_hoodie_is_deleted"]).as_py()
    seen = set(first["uuid"].to_pylist())
    for b in range(1, 4):
        t = generate_arrow(c, b)
        keys = t["uuid"].to_pylist()
        assert len(keys) == len(set(keys)) == 1000  # a key at most once per batch
        old = [k for k in keys if k in seen]
        deletes = t.filter(t["_hoodie_is_deleted"])
        assert len(old) == 400 and deletes.num_rows == 100
        assert set(deletes["uuid"].to_pylist()) <= seen  # deletes hit keys that exist
        seen |= set(keys)


def test_partition_of_a_key_never_changes_and_ts_grows():
    c = gen(records_per_batch=200, num_keys=1000, update_ratio=0.5, partitions=["a", "b", "c"])
    city: dict[str, str] = {}
    last_max = -1
    for b in range(6):
        t = generate_arrow(c, b)
        for k, v in zip(t["uuid"].to_pylist(), t["city"].to_pylist(), strict=True):
            assert city.setdefault(k, v) == v
        assert pc.min(t["ts"]).as_py() > last_max
        last_max = pc.max(t["ts"]).as_py()


def test_key_space_exhaustion_turns_inserts_into_updates():
    c = gen(records_per_batch=100, num_keys=150, update_ratio=0.0)
    keys = {k for b in range(5) for k in generate_arrow(c, b)["uuid"].to_pylist()}
    assert len(keys) == 150


def test_generator_positions_and_exhaustion():
    src = GeneratorSource(gen(records_per_batch=10, num_batches=2))
    t0, p1 = src.read_arrow(None)
    t1, p2 = src.read_arrow(p1)
    t2, p3 = src.read_arrow(p2)
    assert (p1, p2, p3) == (GeneratorPosition(batch_index=1), GeneratorPosition(batch_index=2), p2)
    assert (t0.num_rows, t1.num_rows, t2.num_rows) == (10, 10, 0)
    with pytest.raises(SourceError, match="cannot resume from a 'kafka' position"):
        src.read_arrow(KafkaOffsets(topic="t"))


@pytest.mark.parametrize(
    "position",
    [
        KafkaOffsets(topic="trips", partitions={0: 5, 3: 17}),
        FileListPosition(watermark_ns=123, files=("a", "b")),
        GeneratorPosition(batch_index=9),
    ],
)
def test_positions_round_trip_as_json(position):
    text = position_to_json(position)
    assert position_from_json(text) == position


def test_position_json_rejects_junk():
    with pytest.raises(ValidationError):
        position_from_json('{"kind": "kafka", "topic": "t", "partitions": {"0": "x"}}')


def test_kafka_offsets_spark_json():
    assert KafkaOffsets(topic="t", partitions={1: 7, 0: 3}).spark_json() == '{"t": {"0": 3, "1": 7}}'


def fs(path: str, mtime: int) -> FileStatus:
    return FileStatus(path, 1, False, mtime)


def test_file_selection_is_incremental_oldest_first_and_bounded():
    listing = [fs("c", 30), fs("a", 10), fs("b", 20), fs("b2", 20)]
    taken, pos = select_new_files(listing, FileListPosition(), max_files=2)
    assert [f.path for f in taken] == ["a", "b"]
    assert pos == FileListPosition(watermark_ns=20, files=("b",))
    taken, pos = select_new_files(listing, pos, max_files=2)  # same mtime as the cut is not lost
    assert [f.path for f in taken] == ["b2", "c"]
    assert pos == FileListPosition(watermark_ns=30, files=("c",))
    assert select_new_files(listing, pos, max_files=2) == ([], pos)


def test_late_files_inside_the_grace_window_are_picked_up():
    pos = FileListPosition(watermark_ns=100, files=("x",))
    listing = [fs("x", 100), fs("late", 95), fs("too_late", 50)]
    taken, after = select_new_files(listing, pos, max_files=10, grace_ns=10)
    assert [f.path for f in taken] == ["late"]
    assert after == FileListPosition(watermark_ns=100, files=("late", "x"))
    taken, _ = select_new_files(listing, pos, max_files=10, grace_ns=0)
    assert taken == []
