"""The bucket index's hash is Java's: String.hashCode over UTF-16, List.hashCode, Hudi's
key parsing and file ids. Expected values come from a slow pure-Python reference written
from the Java definitions (independent of the vectorised code) and from known Java values;
``tests/hudi_jvm/test_bucket_index.py`` asks Hudi's own BucketIdentifier too."""

from __future__ import annotations

import random

import numpy as np
import pyarrow as pa
import pytest

from streamer.errors import ConfigError, CorruptDataError
from streamer.index.bucket import (
    _parse_fields,
    bucket_file_id,
    bucket_ids,
    bucket_layout,
    bucket_of_file_id,
    hash_key_hashes,
    java_string_hashes,
)


def java_hash(s: str | None) -> int:
    """``String.hashCode``: s[0]*31^(n-1) + ... over UTF-16 code units, as a Java int bit pattern."""
    if s is None:
        return 0
    b = s.encode("utf-16-be", "surrogatepass")
    h = 0
    for i in range(0, len(b), 2):
        h = (31 * h + int.from_bytes(b[i : i + 2], "big")) & 0xFFFFFFFF
    return h


def java_list_hash(items: list[str | None]) -> int:
    h = 1
    for e in items:
        h = (31 * h + java_hash(e)) & 0xFFFFFFFF
    return h


def reference_bucket(key: str, fields: list[str], n: int) -> int:
    """Hudi 1.0.2 for keys whose values hold no ',' or ':' (a plain split is its parse)."""
    if "," not in key or ":" not in key:
        items: list[str | None] = [key]
    else:
        items = []
        for piece in key.split(","):
            name, value = piece.split(":", 1)
            if name in fields:
                items.append(None if value == "__null__" else "" if value == "__empty__" else value)
        items = items or [key]
    return (java_list_hash(items) & 0x7FFFFFFF) % n


def test_known_java_string_hashes():
    # values Java prints for "x".hashCode() (the last two: U+00E9, and U+1F600 = D83D DE00)
    known = {"": 0, "a": 97, "hello": 99162322, "Aa": 2112, "BB": 2112, "é": 233,
             "\U0001F600": (0xD83D * 31 + 0xDE00)}
    got = java_string_hashes(pa.array(list(known)))
    assert [int(x) for x in got] == list(known.values())
    # a long string wraps around: "polygenelubricants".hashCode() == Integer.MIN_VALUE
    assert int(java_string_hashes(pa.array(["polygenelubricants"]))[0]) == 0x80000000


def _random_keys(rng: random.Random, n: int) -> list[str]:
    alphabets = ["abcxyz0123456789-_", "éüßçñ", "日本語中文", "\U0001F600\U0001F680\U00010348", "аб"]
    out = []
    for _ in range(n):
        length = rng.randrange(0, 40)
        out.append("".join(rng.choice(rng.choice(alphabets)) for _ in range(length)))
    return out


def test_string_hashes_match_the_reference_for_ascii_bmp_and_surrogate_pairs():
    keys = _random_keys(random.Random(7), 3000)
    got = java_string_hashes(pa.array(keys))
    assert [int(x) for x in got] == [java_hash(k) for k in keys]


def test_sliced_chunked_and_null_inputs():
    keys = ["k1", None, "é😀", "", "key-000042"]
    arr = pa.array(["pad"] + keys)
    got = java_string_hashes(arr.slice(1))
    assert [int(x) for x in got] == [java_hash(k) for k in keys]
    chunked = pa.chunked_array([pa.array(keys[:2]), pa.array(keys[2:])])
    assert [int(x) for x in java_string_hashes(chunked)] == [java_hash(k) for k in keys]
    big = pa.array(keys, pa.large_string())
    assert [int(x) for x in java_string_hashes(big)] == [java_hash(k) for k in keys]
    assert len(java_string_hashes(pa.array([], pa.string()))) == 0


@pytest.mark.parametrize("n", [1, 4, 7, 256])
def test_simple_keys_bucket_like_hudi(n):
    keys = _random_keys(random.Random(n), 2000) + [f"id-{i}" for i in range(500)]
    got = bucket_ids(pa.array(keys), n, ["id"])
    assert got.dtype == np.int32
    assert got.tolist() == [reference_bucket(k, ["id"], n) for k in keys]


def test_complex_keys_hash_the_hash_fields_in_key_order():
    keys = ["id:1,name:x", "id:2,name:__null__", "id:3,name:__empty__", "name:é😀,id:9",
            "a:1,b:2,c:3", "id:7", "plain,comma"]
    for fields in (["id"], ["name"], ["id", "name"], ["name", "id"], ["other"]):
        got = bucket_ids(pa.array(keys), 16, fields)
        assert got.tolist() == [reference_bucket(k, fields, 16) for k in keys], fields
    # the hash keys themselves: [value] of the one field, else the whole key
    assert int(hash_key_hashes(pa.array(["id:1,name:x"]), ["id"])[0]) == java_list_hash(["1"])
    assert int(hash_key_hashes(pa.array(["id:7"]), ["id"])[0]) == java_list_hash(["id:7"])
    assert int(hash_key_hashes(pa.array(["id:2,name:__null__"]), ["name"])[0]) == java_list_hash([None])
    # all fields when none are named (Hudi: an empty field list, or one empty name)
    assert int(hash_key_hashes(pa.array(["a:1,b:2"]), [""])[0]) == java_list_hash(["1", "2"])


def test_values_holding_separators_follow_hudis_parse():
    # Hudi 1.0.2's KeyGenUtils.extractRecordKeysByFields: a value runs to the last ','
    # before the next ':'
    assert _parse_fields("a:1,2,b:3", ["a", "b"]) == ["1,2", "3"]
    assert _parse_fields("a:x:y,b:3", ["a", "b"]) == ["x:y", "3"]
    assert _parse_fields("a:1,2,b:3", ["b"]) == ["3"]
    assert _parse_fields("a:1,b:2:3", ["b"]) == ["2:3"]
    keys = ["a:1,2,b:3", "a:x:y,b:3", "a:1,b:2"]
    got = hash_key_hashes(pa.array(keys), ["a", "b"])
    assert [int(x) for x in got] == [java_list_hash(["1,2", "3"]), java_list_hash(["x:y", "3"]),
                                    java_list_hash(["1", "2"])]


def test_bucket_count_must_be_positive():
    with pytest.raises(ConfigError, match="num_buckets"):
        bucket_ids(pa.array(["a"]), 0, [])


def test_file_ids_encode_the_bucket():
    fid = bucket_file_id(42)
    assert fid.startswith("00000042-") and fid.endswith("-0") and len(fid) == 38
    assert bucket_of_file_id(fid) == 42
    assert bucket_of_file_id("3f1c2a9e-0000-0000-0000-000000000000-0") is None
    assert bucket_file_id(7) != bucket_file_id(7)  # a fresh UUID tail each time


def test_layout_refuses_what_hudi_refuses():
    a, b = bucket_file_id(1), bucket_file_id(1)
    assert bucket_layout([("p", a), ("q", b)], 4, "t") == {("p", 1): a, ("q", 1): b}
    with pytest.raises(CorruptDataError, match=f"{a} and {b}.*bucket 1"):
        bucket_layout([("p", a), ("p", b)], 4, "t")
    with pytest.raises(ConfigError, match="belongs to no bucket"):
        bucket_layout([("p", "3f1c2a9e-1111-2222-3333-444444444444-0")], 4, "t")
    with pytest.raises(ConfigError, match="4 buckets.*00000005"):
        bucket_layout([("p", bucket_file_id(5))], 4, "t")


def test_the_separator_scan_sees_only_the_slices_bytes():
    """Complex-key parsing is skipped only when no key of the (sliced) array holds ':'."""
    from streamer.index.bucket import _may_hold

    arr = pa.array(["a:1,b:2", "plain", "other", "c:3,d:4"])
    assert _may_hold(arr, b":") and not _may_hold(arr.slice(1, 2), b":")
    assert _may_hold(arr.slice(2, 2), b":") and not _may_hold(arr.slice(0, 0), b":")
    assert not _may_hold(pa.array([None, None], pa.string()), b":")
    # a slice hashes as the same keys written fresh, complex ones parsed in both cases
    for piece in (arr.slice(1, 2), arr.slice(2, 2), arr.slice(0, 1)):
        fresh = pa.array(piece.to_pylist(), pa.string())
        assert (hash_key_hashes(piece, ["b", "d"]) == hash_key_hashes(fresh, ["b", "d"])).all()
