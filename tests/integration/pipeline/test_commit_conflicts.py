"""A commit that meets another writer of the table is tried again (``target.conflict_retries``)
instead of ending the run; another run of the same pipeline is not waited out.

No clock decides an outcome: the other writer lets go of the table when the pipeline logs
its first conflict."""

from __future__ import annotations

import json
import logging
import threading
from pathlib import Path

import pytest

from streamer.config import parse_pipelines
from streamer.errors import CommitConflictError, PositionConflictError
from streamer.fs import FileSystem
from streamer.pipeline.multi import PipelinesFailedError, run_pipelines
from streamer.pipeline.runner import PipelineRunner
from streamer.read import Table
from streamer.write.lock import WriterLock
from tests.support.readers import hudi_rs_table

pytestmark = pytest.mark.integration

YAML = """
pipelines:
  - name: shared
    source: {{type: files, path: "{src}", format: json}}
    target: {{path: "{t}", record_key: [id], lock_timeout: 1s, conflict_retries: {retries}}}
    trigger: {{mode: once}}
    engine: local
"""


def _write_file(folder: Path, name: str, first: int) -> None:
    (folder / name).write_text("".join(json.dumps({"id": f"r{i}", "v": i}) + "\n" for i in range(first, first + 5)))


def _pipeline(tmp_path: Path, retries: int):
    src, table = tmp_path / "in", str(tmp_path / "t")
    src.mkdir(exist_ok=True)
    (config,), problems = parse_pipelines(YAML.format(src=src, t=table, retries=retries))
    assert not problems
    return src, table, config


def _second_batch_under_another_writer(tmp_path: Path, spark, retries: int):
    """A table of one batch, a second batch to read, and another writer holding the table's lock."""
    src, table, config = _pipeline(tmp_path, retries)
    _write_file(src, "a.json", 0)
    run_pipelines([config], once=False, spark=spark)
    _write_file(src, "b.json", 5)
    return table, config, WriterLock(FileSystem(), table, purpose="another writer").acquire()


def _ids(table: str) -> list[str]:
    """The table's ids as our reader reads them, checked equal to hudi-rs's read (the
    caller checks them against the files the pipeline read)."""
    ours = sorted(Table.open(table).read().column("id").to_pylist())
    theirs = hudi_rs_table(table)
    assert sorted(theirs.column("id").to_pylist() if theirs is not None else []) == ours, "hudi-rs"
    return ours


class _OnConflict(logging.Handler):
    """Calls ``then`` at the pipeline's first commit-conflict warning."""

    def __init__(self, then) -> None:
        super().__init__(logging.WARNING)
        self.then, self.seen = then, 0

    def emit(self, record: logging.LogRecord) -> None:
        if "commit conflict" in record.getMessage():
            self.seen += 1
            if self.seen == 1:
                self.then()


def test_a_commit_waits_out_another_writer_of_the_table(tmp_path, spark):
    table, config, other = _second_batch_under_another_writer(tmp_path, spark, retries=3)
    handler = _OnConflict(other.release)
    logging.getLogger("streamer.pipeline.runner").addHandler(handler)
    try:
        [report] = run_pipelines([config], once=False, spark=spark)[0].reports
    finally:
        logging.getLogger("streamer.pipeline.runner").removeHandler(handler)
        other.release()
    assert handler.seen == 1  # one try conflicted, the next committed
    assert report.instant is not None and report.written == 5
    assert _ids(table) == sorted(f"r{i}" for i in range(10))


def test_a_run_fails_after_its_retries_and_the_next_run_writes_the_batch(tmp_path, spark):
    table, config, other = _second_batch_under_another_writer(tmp_path, spark, retries=1)
    try:
        with pytest.raises(PipelinesFailedError, match="another writer") as failed:
            run_pipelines([config], once=False, spark=spark)
        assert isinstance(failed.value.failures["shared"], CommitConflictError)
    finally:
        other.release()
    assert _ids(table) == sorted(f"r{i}" for i in range(5))  # nothing of the batch committed
    run_pipelines([config], once=False, spark=spark)
    assert _ids(table) == sorted(f"r{i}" for i in range(10))


def test_another_run_of_the_same_pipeline_is_not_waited_out(tmp_path, spark, caplog):
    src, table, config = _pipeline(tmp_path, retries=3)
    _write_file(src, "a.json", 0)
    run_pipelines([config], once=False, spark=spark)
    _write_file(src, "b.json", 5)
    first, second = PipelineRunner(config, spark=spark), PipelineRunner(config, spark=spark)
    assert first.position == second.position  # both read the table's position...
    first.run_once()  # ...and the first commits past it
    with caplog.at_level(logging.WARNING), pytest.raises(PositionConflictError, match="running twice"):
        second.run_once()
    assert not [r for r in caplog.records if "commit conflict" in r.getMessage()]
    assert _ids(table) == sorted(f"r{i}" for i in range(10))


def test_a_stop_ends_the_wait_to_try_again(tmp_path, spark):
    """A graceful stop (Ctrl-C) during the wait between tries ends the run at once, with
    nothing of the batch committed, instead of sitting out every retry."""
    table, config, other = _second_batch_under_another_writer(tmp_path, spark, retries=5)
    stop = threading.Event()
    handler = _OnConflict(stop.set)
    logging.getLogger("streamer.pipeline.runner").addHandler(handler)
    try:
        with pytest.raises(PipelinesFailedError, match="stopped while waiting to try again"):
            run_pipelines([config], once=False, spark=spark, stop=stop)
    finally:
        logging.getLogger("streamer.pipeline.runner").removeHandler(handler)
        other.release()
    assert handler.seen == 1  # no second try
    assert _ids(table) == sorted(f"r{i}" for i in range(5))
    run_pipelines([config], once=False, spark=spark)
    assert _ids(table) == sorted(f"r{i}" for i in range(10))
