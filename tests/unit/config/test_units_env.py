from __future__ import annotations

from datetime import timedelta

import pytest

from streamer.config.env import interpolate
from streamer.config.units import format_duration, parse_duration, parse_size


@pytest.mark.parametrize(
    ("text", "expected"),
    [(0, 0), (512, 512), ("512", 512), ("16MiB", 16 * 2**20), ("1GB", 10**9), ("1 gib", 2**30), ("1.5KiB", 1536)],
)
def test_sizes(text, expected):
    assert parse_size(text) == expected


@pytest.mark.parametrize("bad", ["12XB", "-1", -5, True, "MiB", "1e3"])
def test_bad_sizes(bad):
    with pytest.raises(ValueError):
        parse_size(bad)


@pytest.mark.parametrize(
    ("text", "seconds"), [(600, 600), ("600", 600), ("5s", 5), ("500ms", 0.5), ("1m", 60), ("2h", 7200), (1.5, 1.5)]
)
def test_durations(text, seconds):
    assert parse_duration(text) == timedelta(seconds=seconds)


def test_duration_formatting_round_trips():
    for text in ("5s", "500ms", "1m", "2h", "1d", "1500ms"):
        assert format_duration(parse_duration(text)) == text


@pytest.mark.parametrize("bad", ["5 parsecs", "-1s", "soon", False])
def test_bad_durations(bad):
    with pytest.raises(ValueError):
        parse_duration(bad)


def test_interpolation_defaults_escapes_and_paths():
    data = {
        "a": "${HOST}:${PORT:-9092}",
        "b": ["x", {"c": "${MISSING}", "d": "$${NOT_A_VAR}"}],
        "e": 5,
        "${KEY}": "keys are not interpolated",
    }
    out, problems = interpolate(data, {"HOST": "h"})
    assert out["a"] == "h:9092"
    assert out["b"][1]["d"] == "${NOT_A_VAR}"
    assert out["e"] == 5 and "${KEY}" in out
    assert [(p.path, "MISSING" in p.message) for p in problems] == [(("b", 1, "c"), True)]


def test_empty_default_and_malformed_reference():
    out, problems = interpolate({"a": "${X:-}", "b": "${not valid"}, {})
    assert out["a"] == ""
    assert len(problems) == 1 and problems[0].path == ("b",) and "malformed" in problems[0].message
