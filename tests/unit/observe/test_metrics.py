"""Metrics of batch reports: counted per pipeline and table, served over HTTP, pushed.

The endpoint and the push gateway are real servers on loopback ports (the gateway is
Prometheus' own, built by ``make pushgateway``); reports are built by hand, so these
tests need no Spark. tests/integration/test_observability.py runs real pipelines.
"""

from __future__ import annotations

import pytest

from streamer.errors import ConfigError
from streamer.observe.metrics import PipelineMetrics, Pusher, serve
from streamer.pipeline.report import BatchReport, PhaseTimes, ServiceRun
from streamer.sources.base import PartitionLag
from streamer.table.layout import TableLayout
from tests.unit.observe.pushgateway import get, running_pushgateway

LAYOUT = TableLayout(file_groups=3, log_files=4, log_blocks=6, max_log_files_per_slice=2,
                     max_log_blocks_per_slice=3, pending_compactions=1, pending_log_compactions=0)


def _committed(batch_id: int, read: int = 10) -> BatchReport:
    return BatchReport(
        "trips", batch_id, read, read - 3, 2, 1, f"2024010100000{batch_id}", None, 1.5, "{}",
        started_at=1_700_000_000.0, phases=PhaseTimes(0.1, 0.2, 0.3, 0.4, 0.5),
        bytes_written=1000, files_written=2, freshness_s=7.0,
        lag=(PartitionLag("events-0", 5), PartitionLag("events-1", 0)),
        services=(ServiceRun("compaction", "20240101000009", "scheduled", 0.25),
                  ServiceRun("compaction", "20240101000009", "completed", None)),
        layout=LAYOUT,
    )


def _metrics() -> PipelineMetrics:
    m = PipelineMetrics()
    m.register("trips", "trips_tbl")
    m.observe(_committed(0))
    m.observe(_committed(1, read=20))
    m.observe(BatchReport("trips", 2, 0, 0, 0, 0, None, None, 0.01, "{}", skipped="no new data"))
    return m


def test_reports_are_counted_per_pipeline_and_table():
    m = _metrics()
    v = m.registry.get_sample_value
    labels = {"pipeline": "trips", "table": "trips_tbl"}
    assert v("streamer_records_read_total", labels) == 30
    assert v("streamer_records_written_total", labels) == 24
    assert v("streamer_records_errored_total", labels) == 4
    assert v("streamer_records_filtered_total", labels) == 2
    assert v("streamer_bytes_written_total", labels) == 2000
    assert v("streamer_files_written_total", labels) == 4
    assert v("streamer_batches_total", {**labels, "status": "committed"}) == 2
    assert v("streamer_batches_total", {**labels, "status": "skipped"}) == 1
    assert v("streamer_batch_duration_seconds_count", {**labels, "phase": "commit"}) == 2
    assert v("streamer_batch_duration_seconds_sum", {**labels, "phase": "commit"}) == 0.8
    assert v("streamer_batch_duration_seconds_count", {**labels, "phase": "total"}) == 3
    assert v("streamer_commit_latency_seconds_count", labels) == 2
    assert v("streamer_freshness_seconds", labels) == 7.0
    assert v("streamer_last_commit_timestamp_seconds", labels) == 1_700_000_001.5
    assert v("streamer_source_lag_records", {**labels, "partition": "events-0"}) == 5
    assert v("streamer_table_service_runs_total", {**labels, "action": "compaction", "outcome": "completed"}) == 2
    # a step timed once per round: the execution after its scheduling adds no observation
    assert v("streamer_table_service_duration_seconds_count", {**labels, "action": "compaction"}) == 2
    assert v("streamer_table_pending_compactions", labels) == 1
    assert v("streamer_table_file_groups", labels) == 3
    assert v("streamer_table_log_files", labels) == 4
    assert v("streamer_table_log_blocks", labels) == 6
    assert v("streamer_table_log_blocks_per_slice", {**labels, "stat": "max"}) == 3
    assert v("streamer_table_log_files_per_slice", {**labels, "stat": "mean"}) == 4 / 3


def test_registered_pipelines_show_zeros_before_their_first_batch():
    m = PipelineMetrics()
    m.register("idle", "idle_tbl")
    assert m.registry.get_sample_value("streamer_records_read_total", {"pipeline": "idle", "table": "idle_tbl"}) == 0


def test_endpoint_serves_the_registry_over_http():
    m = _metrics()
    endpoint = serve(m, 0, "127.0.0.1")
    try:
        assert endpoint.port > 0
        text = get(f"http://127.0.0.1:{endpoint.port}/metrics")
    finally:
        endpoint.close()
    assert 'streamer_records_read_total{pipeline="trips",table="trips_tbl"} 30.0' in text
    assert 'streamer_source_lag_records{partition="events-0",pipeline="trips",table="trips_tbl"} 5.0' in text


def test_a_port_in_use_is_one_clear_error():
    m = PipelineMetrics()
    endpoint = serve(m, 0, "127.0.0.1")
    try:
        with pytest.raises(ConfigError, match=f"metrics: cannot serve on 127.0.0.1:{endpoint.port}: "):
            serve(m, endpoint.port, "127.0.0.1")
    finally:
        endpoint.close()


def test_pusher_pushes_to_a_real_gateway_and_survives_a_dead_one():
    m = _metrics()
    with running_pushgateway() as url:
        pusher = Pusher(m, url, "unit-job")
        assert pusher.push()
        text = get(f"{url}/metrics")
    assert 'streamer_records_read_total{instance="",job="unit-job",pipeline="trips",table="trips_tbl"} 30' in text
    # the gateway is gone: a failed push is counted and logged, never raised
    assert not pusher.push()
    assert (pusher.pushes, pusher.failures) == (1, 1)


def test_a_missing_push_gateway_fails_naming_the_set_up_step(tmp_path, monkeypatch):
    """No silent skip: without the binary (no Go at set-up), the test fails and says how to
    build it."""
    from tests.unit.observe import pushgateway

    monkeypatch.setattr(pushgateway, "BINARY", tmp_path / "pushgateway")
    with pytest.raises(pytest.fail.Exception, match=r"make pushgateway.*needs Go"), \
            pushgateway.running_pushgateway():
        pass
