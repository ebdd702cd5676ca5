"""Progress events: one JSON object per batch and line, Spark-like keys, to a file or stdout."""

from __future__ import annotations

import json

from streamer.observe.progress import ProgressWriter, progress_event
from streamer.pipeline.report import BatchReport, PhaseTimes, ServiceRun
from streamer.sources.base import PartitionLag

REPORT = BatchReport(
    "trips", 7, 10, 8, 1, 1, "20240101000000001", "20240101000000000", 1.25,
    '{"kind": "kafka", "topic": "t", "partitions": {"0": 42}}',
    started_at=1_700_000_000.0, start_position='{"kind": "kafka", "topic": "t", "partitions": {"0": 32}}',
    phases=PhaseTimes(0.1, 0.2, 0.3, 0.4, 0.25), bytes_written=123, files_written=1, freshness_s=2.5,
    lag=(PartitionLag("t-0", 3),), services=(ServiceRun("clean", "20240101000000002", "cleaned", 0.05, "2 files"),),
)


def test_event_has_counts_phases_positions_lag_and_services():
    e = progress_event(REPORT, "trips_tbl")
    assert (e["pipeline"], e["table"], e["batchId"], e["status"]) == ("trips", "trips_tbl", 7, "committed")
    assert (e["numInputRows"], e["numOutputRows"], e["numErrorRows"], e["numFilteredRows"]) == (10, 8, 1, 1)
    assert e["durationMs"] == {"read": 100, "prepare": 200, "write_errors": 300, "commit": 400, "services": 250,
                               "total": 1250}
    assert e["timestamp"] == "2023-11-14T22:13:20.000Z" and e["endTimestamp"] == "2023-11-14T22:13:21.250Z"
    assert e["startOffset"]["partitions"] == {"0": 32} and e["endOffset"]["partitions"] == {"0": 42}
    assert (e["instant"], e["errorInstant"], e["bytesWritten"], e["freshnessMs"]) == (
        "20240101000000001", "20240101000000000", 123, 2500)
    assert e["lag"] == [{"partition": "t-0", "records": 3}]
    assert e["services"] == [{"action": "clean", "instant": "20240101000000002", "outcome": "cleaned",
                              "durationMs": 50, "detail": "2 files", "mode": "inline"}]
    assert e["tableLayout"] is None


def test_writer_appends_one_line_per_batch(tmp_path):
    path = tmp_path / "progress.jsonl"
    path.write_text('{"earlier": "run"}\n')
    w = ProgressWriter(str(path))
    w.write(REPORT, "trips_tbl")
    w.write(BatchReport("trips", 8, 0, 0, 0, 0, None, None, 0.0, "{}", skipped="no new data"), "trips_tbl")
    w.close()
    lines = path.read_text().splitlines()
    assert len(lines) == 3
    assert [json.loads(x).get("batchId") for x in lines] == [None, 7, 8]
    assert json.loads(lines[2])["status"] == "skipped"


def test_dash_writes_to_stdout(capsys):
    w = ProgressWriter("-")
    w.write(REPORT, "trips_tbl")
    w.close()
    [line] = capsys.readouterr().out.splitlines()
    assert json.loads(line)["batchId"] == 7
