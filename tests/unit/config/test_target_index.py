"""``target.index``: bloom by default, Hudi's bucket index on request - validated with the
YAML line, mapped to the writer's table identity, and a different index refused."""

from __future__ import annotations

import textwrap

import pyarrow as pa
import pytest

from streamer.config import parse_pipelines
from streamer.config.pipeline import EngineConfig
from streamer.errors import ConfigError
from streamer.pipeline.sink import TableSink, table_config
from streamer.table.identity import IndexConfig, IndexType


def _parse(target: str):
    text = textwrap.dedent(f"""
    pipelines:
      - name: t
        source: {{type: generator}}
        target: {target}
    """)
    return parse_pipelines(text, file="p.yaml")


def test_bloom_is_the_default_and_bucket_maps_to_the_writer():
    (p,), problems = _parse("{path: lake/t, record_key: id, partition_by: city}")
    assert not problems and p.target.index.type == "bloom"
    assert table_config(p.target).index == IndexConfig()
    (p,), problems = _parse("{path: lake/t, record_key: id, partition_by: city, "
                            "index: {type: bucket, num_buckets: 16}}")
    assert not problems
    assert table_config(p.target).index == IndexConfig(IndexType.BUCKET, 16, ("id",))
    (p,), problems = _parse("{path: lake/t, record_key: [a, b], index: {type: bucket, "
                            "num_buckets: 4, hash_field: b}}")
    assert not problems and table_config(p.target).index == IndexConfig(IndexType.BUCKET, 4, ("b",))


@pytest.mark.parametrize("index, message", [
    ("bucket", "target.index: required key is missing"),
    ("{type: bucket}", "target.index.num_buckets: required key is missing"),
    ("{type: bucket, num_buckets: 0}", "greater than or equal to 1"),
    ("{type: bucket, num_buckets: '8'}", "valid integer"),
    ("{type: bucket, num_buckets: true}", "valid integer"),
    ("{type: bucket, num_buckets: 4, hash_field: city}", "must be record_key fields"),
    ("{type: hash}", "'bloom', 'global_bloom', 'bucket'"),
    ("{type: bloom, update_partition_path: false}", "update_partition_path"),
    ("{type: bloom, num_buckets: 4}", "num_buckets"),
])
def test_bad_index_settings_name_the_line(index, message):
    _, problems = _parse(f"{{path: lake/t, record_key: id, partition_by: city, index: {index}}}")
    assert problems, index
    assert problems[0].line == 5 and problems[0].path.startswith("pipelines[0].target"), problems[0]
    assert message in str(problems[0]), str(problems[0])


def test_a_table_keeps_its_bucket_count(tmp_path):
    def sink(index: str) -> TableSink:
        (p,), problems = _parse(f"{{path: {tmp_path / 't'}, record_key: id, partition_by: city, "
                                f"index: {index}}}")
        assert not problems
        return TableSink(p.target, EngineConfig(mode="local"))

    rows = pa.table({"id": [1, 2], "city": ["sf", "nyc"]})
    first = sink("{type: bucket, num_buckets: 4}")
    first.writer(rows.schema).upsert(rows)
    assert sink("{type: bucket, num_buckets: 4}").writer().config.index.num_buckets == 4
    with pytest.raises(ConfigError, match=r"bucket \(8 buckets.*created with bucket \(4 buckets"):
        sink("{type: bucket, num_buckets: 8}").writer()
    with pytest.raises(ConfigError, match="target.index is bloom .*created with bucket"):
        sink("bloom").writer()
