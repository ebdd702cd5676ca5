"""Logging: one line per batch, idle polls summarised, a run summary, text or JSON lines."""

from __future__ import annotations

import io
import json
import logging

import pytest

from streamer.observe.logs import BatchLog, configure_logging
from streamer.pipeline.report import BatchReport


@pytest.fixture
def root_logging():
    """Restore the root logger's handlers and level after a test configured it."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _empty(batch_id: int) -> BatchReport:
    return BatchReport("trips", batch_id, 0, 0, 0, 0, None, None, 0.0, "{}", skipped="no new data")


def _data(batch_id: int) -> BatchReport:
    return BatchReport("trips", batch_id, 5, 4, 1, 0, "20240101000000001", None, 0.5, "{}", bytes_written=10)


def test_idle_polls_are_summarised_not_logged_each(caplog):
    clock = _Clock()
    batches = BatchLog(summary_every_s=60, clock=clock)
    with caplog.at_level(logging.INFO, logger="streamer.run"):
        batches(_data(0))
        for _ in range(30):  # 30 empty polls, 5 s apart: 150 s idle
            clock.now += 5
            batches(_empty(1))
        clock.now += 5
        batches(_data(1))
        summary = batches.summary()
    lines = [r.getMessage() for r in caplog.records]
    assert lines[0].startswith("[trips] batch 0: in 5 -> written 4, errors 1")
    assert lines[1].startswith("[trips] batch 1: no new data (waiting")
    assert lines[2:4] == ["[trips] no new data for 60 s (13 polls)", "[trips] no new data for 120 s (25 polls)"]
    assert lines[4] == "[trips] data resumed after 150 s (30 polls)"
    assert lines[5].startswith("[trips] batch 1: in 5 -> written 4")
    assert len(lines) == 7 and lines[6] == summary
    assert summary.startswith("run finished in 155.0s: 2 batch(es) (30 empty poll(s)), read 10, written 8, "
                              "errors 2, filtered 0, 2 commit(s), 20 bytes, 0 table service run(s)")


def test_each_pipeline_idles_on_its_own(caplog):
    clock = _Clock()
    batches = BatchLog(summary_every_s=60, clock=clock)
    with caplog.at_level(logging.INFO, logger="streamer.run"):
        batches(_empty(0))
        batches(BatchReport("other", 0, 0, 0, 0, 0, None, None, 0.0, "{}", skipped="no new data"))
        batches(_empty(0))
    assert [r.getMessage().split(":")[0] for r in caplog.records] == ["[trips] batch 0", "[other] batch 0"]


def test_json_format_one_object_per_line_with_pipeline_fields(root_logging):
    out = io.StringIO()
    configure_logging("INFO", "json", stream=out)
    BatchLog()(_data(3))
    logging.getLogger("streamer.somewhere").debug("hidden at INFO")
    [line] = out.getvalue().splitlines()
    event = json.loads(line)
    assert event["level"] == "INFO" and event["logger"] == "streamer.run"
    assert (event["pipeline"], event["batch"], event["instant"]) == ("trips", 3, "20240101000000001")
    assert event["message"].startswith("[trips] batch 3: in 5 -> written 4") and event["ts"].endswith("Z")


def test_level_applies_to_module_loggers(root_logging):
    out = io.StringIO()
    configure_logging("debug", "text", stream=out)
    logging.getLogger("streamer.config.loader").debug("now visible")
    assert "DEBUG streamer.config.loader: now visible" in out.getvalue()


def test_log_flags_before_or_after_the_command():
    from streamer.cli import build_parser

    parser = build_parser()
    seen = [(a.log_level, a.log_format) for a in (
        parser.parse_args(["run", "p.yaml"]),
        parser.parse_args(["--log-level", "debug", "--log-format", "json", "run", "p.yaml"]),
        parser.parse_args(["run", "p.yaml", "--log-level", "warning"]),
    )]
    assert seen == [(None, "text"), ("DEBUG", "json"), ("WARNING", "text")]  # None: the command's default


def test_default_level_is_info_for_progress_commands_and_warning_for_one_shot_ones():
    from streamer.cli import _default_level

    assert [_default_level(c) for c in ("run", "demo", "kafka-local")] == ["INFO"] * 3
    assert [_default_level(c) for c in ("compact", "log-compact", "read", "show", "check")] == ["WARNING"] * 5
