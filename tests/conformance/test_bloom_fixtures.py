"""Every DYNAMIC_V0 filter Hudi wrote into a fixture base file: we read it, and we rebuild it
byte for byte from the file's own record keys."""

from __future__ import annotations

import pyarrow.parquet as pq
import pytest

from streamer.table.bloom import BloomFilter

pytestmark = pytest.mark.conformance

BLOOM_KEY = b"org.apache.hudi.bloomfilter"


def _base_files(root):
    return sorted(
        p for p in root.rglob("*.parquet") if ".hoodie" not in p.parts and p.name[0] not in "._"
    )


def test_every_fixture_filter_contains_its_keys_and_reserializes_exactly(hudi_fixtures_dir) -> None:
    checked = 0
    for path in _base_files(hudi_fixtures_dir):
        md = pq.ParquetFile(path).metadata.metadata or {}
        if BLOOM_KEY not in md:
            continue
        type_code = md[b"hoodie_bloom_filter_type_code"].decode()
        assert type_code == "DYNAMIC_V0", path
        footer = md[BLOOM_KEY].decode()
        keys = pq.read_table(path, columns=["_hoodie_record_key"]).column(0)
        bf = BloomFilter.from_footer(footer, type_code)
        assert bf.might_contain_many(keys).all(), path
        assert all(bf.might_contain(k) for k in keys.to_pylist()), path
        rebuilt = BloomFilter.new_dynamic()  # Hudi defaults: 60000 entries, 1e-9, 100000 max
        rebuilt.add_many(keys)
        assert rebuilt.serialize() == footer, path
        checked += 1
    assert checked >= 40  # all fixtures' base files with meta fields
