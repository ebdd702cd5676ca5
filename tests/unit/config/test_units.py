"""Sizes are pydantic's ByteSize behind our error message; the spellings configs use keep working."""

from __future__ import annotations

import textwrap

import pytest

from streamer.config import parse_pipelines
from streamer.config.units import format_size, parse_size


@pytest.mark.parametrize(
    ("text", "expected"),
    [("1k", 1000), ("1g", 10**9), ("128MB", 128 * 10**6), ("4MiB", 4 * 2**20), ("10GiB", 10 * 2**30),
     (" 2 kb ", 2000), (1.0, 1), ("0", 0)],
)
def test_spellings_configs_use(text, expected):
    assert parse_size(text) == expected


@pytest.mark.parametrize("bad", [2.5, -0.5, False, "ten", ""])
def test_refused_sizes_name_the_units(bad):
    with pytest.raises(ValueError, match="GiB|negative|boolean"):
        parse_size(bad)


def test_binary_sizes_format_back():
    assert format_size(parse_size("16MiB")) == "16MiB"
    assert format_size(1000) == "1000"


def test_a_bad_size_is_reported_with_file_line_and_path():
    text = textwrap.dedent("""
        pipelines:
          - name: t
            source: {type: generator}
            target: {path: lake/t, record_key: id, ordering_field: ts}
            policies:
              log_compaction: {small_block_bytes: 4 parsecs}
    """)
    pipelines, problems = parse_pipelines(text, file="p.yaml", env={})
    assert not pipelines
    (problem,) = problems
    assert problem.path == "pipelines[0].policies.log_compaction.small_block_bytes"
    assert problem.line == 7
    assert "4 parsecs" in problem.message and "MiB" in problem.message
    assert problem.file == "p.yaml"
