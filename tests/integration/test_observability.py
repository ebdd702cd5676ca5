"""Issue 15, acceptance 1: ``streamer run`` observed - metrics, progress events, logs.

Real runs of a files pipeline (local engine, the session's Spark) through the CLI:

* a continuous run with ``metrics.port``: a scraper thread reads ``/metrics`` over HTTP
  while it runs, then stops it with SIGINT (as Ctrl-C would); the last scrape must match
  the run's JSON progress events (one per batch) for every series;
* a ``--once`` run with ``--log-format json --progress-json``: progress events on
  standard output, JSON log lines (batch line, end-of-run summary) on standard error;
* a run pushing to a real Prometheus push gateway (built by ``make pushgateway``).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import threading
import time
import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families

from streamer.cli import main
from tests.unit.observe.pushgateway import get, running_pushgateway

pytestmark = pytest.mark.integration

GOOD, FILTERED, BAD = 3, 1, 1  # per input file


def _inputs(folder, files: int) -> None:
    folder.mkdir()
    for i in range(files):
        lines = [json.dumps({"id": f"r{i}-{k}", "v": k}) for k in range(GOOD)]
        lines.append(json.dumps({"id": f"r{i}-big", "v": 1000}))  # dropped by the filter
        lines.append(json.dumps({"v": 1}))  # no key: to the error table
        (folder / f"part-{i}.json").write_text("\n".join(lines) + "\n")


def _yaml(tmp_path, head: str, mode: str, name: str = "trips") -> str:
    path = tmp_path / "p.yaml"
    path.write_text(f"""{head}
pipelines:
  - name: {name}
    source: {{type: files, path: "{tmp_path / 'in'}", format: json, max_files_per_batch: 1}}
    transforms: [{{type: filter, condition: "v < 100"}}]
    target: {{path: "{tmp_path / 'lake' / name}", record_key: [id]}}
    trigger: {{mode: {mode}, interval: 200ms}}
    engine: local
    policies:
      compaction: {{mode: inline, trigger: {{delta_commits: 2}}}}
""")
    return str(path)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def _value(samples, name: str, **labels: str) -> float | None:
    key = (name, tuple(sorted({"pipeline": "trips", "table": "trips", **labels}.items())))
    return samples.get(key)


#: Every series of docs/operations.md (lag has no samples for a files source: no partitions).
SERIES = (
    "streamer_batches", "streamer_records_read", "streamer_records_written", "streamer_records_errored",
    "streamer_records_filtered", "streamer_bytes_written", "streamer_files_written",
    "streamer_batch_duration_seconds", "streamer_commit_latency_seconds", "streamer_freshness_seconds",
    "streamer_last_commit_timestamp_seconds", "streamer_source_lag_records", "streamer_table_service_runs",
    "streamer_table_service_duration_seconds", "streamer_table_pending_compactions",
    "streamer_table_pending_log_compactions", "streamer_table_file_groups", "streamer_table_log_files",
    "streamer_table_log_blocks", "streamer_table_log_files_per_slice", "streamer_table_log_blocks_per_slice",
    "streamer_pipeline_failures",
)


def test_continuous_run_serves_metrics_that_match_its_batches(tmp_path, spark, capsys):
    files = 3
    _inputs(tmp_path / "in", files)
    port = _free_port()
    progress = tmp_path / "progress.jsonl"
    yaml = _yaml(tmp_path, f'metrics: {{port: {port}, host: 127.0.0.1}}\nprogress: {{path: "{progress}"}}',
                 "continuous")
    scraped: list[str] = []

    def scrape() -> None:
        """Scrape until every record was read and an idle poll followed; then Ctrl-C."""
        deadline = time.monotonic() + 120
        for _ in range(600):  # bounded: 600 tries or 120 s
            if time.monotonic() > deadline:
                break
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
                    text = r.read().decode()
            except OSError:
                time.sleep(0.2)
                continue
            samples = _samples(text)
            if (_value(samples, "streamer_records_read_total") == files * (GOOD + FILTERED + BAD)
                    and _value(samples, "streamer_batches_total", status="skipped")):
                scraped.append(text)
                break
            time.sleep(0.2)
        os.kill(os.getpid(), signal.SIGINT)  # graceful stop, as Ctrl-C: handled by `streamer run`

    scraper = threading.Thread(target=scrape, daemon=True)
    scraper.start()
    assert main(["run", yaml, "--timeout", "180"]) == 0
    scraper.join(10)
    assert scraped, "the endpoint never showed every record read"
    samples = _samples(scraped[0])
    names = {f.name for f in text_string_to_metric_families(scraped[0])}
    assert set(SERIES) <= names, set(SERIES) - names

    events = [json.loads(x) for x in progress.read_text().splitlines()]
    committed = [e for e in events if e["status"] == "committed"]
    assert len(committed) == files  # one file per batch
    assert [e["batchId"] for e in committed] == list(range(files))
    v = lambda name, **labels: _value(samples, name, **labels)  # noqa: E731
    assert v("streamer_batches_total", status="committed") == len(committed)
    for metric, key in (("read", "numInputRows"), ("written", "numOutputRows"), ("errored", "numErrorRows"),
                        ("filtered", "numFilteredRows")):
        assert v(f"streamer_records_{metric}_total") == sum(e[key] for e in committed), metric
    assert v("streamer_records_written_total") == files * GOOD
    assert v("streamer_records_errored_total") == files * BAD
    assert v("streamer_records_filtered_total") == files * FILTERED
    assert v("streamer_bytes_written_total") == sum(e["bytesWritten"] for e in committed) > 0
    assert v("streamer_files_written_total") == sum(e["filesWritten"] for e in committed)
    assert v("streamer_commit_latency_seconds_count") == len(committed)
    assert v("streamer_batch_duration_seconds_count", phase="commit") == len(committed)
    commit_ms = sum(e["durationMs"]["commit"] for e in committed)
    assert abs(v("streamer_batch_duration_seconds_sum", phase="commit") * 1000 - commit_ms) <= len(committed)
    last = committed[-1]
    assert abs(v("streamer_freshness_seconds") * 1000 - last["freshnessMs"]) <= 1
    layout = last["tableLayout"]
    assert v("streamer_table_file_groups") == layout["fileGroups"] >= 1
    assert v("streamer_table_log_files") == layout["logFiles"]
    assert v("streamer_table_log_blocks") == layout["logBlocks"]
    assert v("streamer_table_pending_compactions") == layout["pendingCompactions"]
    services = [s for e in committed for s in e["services"]]
    assert any(s["action"] == "compaction" and s["outcome"] == "completed" for s in services)
    for s in {(s["action"], s["outcome"]) for s in services}:
        runs = sum(1 for x in services if (x["action"], x["outcome"]) == s)
        assert v("streamer_table_service_runs_total", action=s[0], outcome=s[1]) == runs
    assert v("streamer_pipeline_failures_total") == 0

    err = capsys.readouterr().err
    assert "metrics: serving http://127.0.0.1:" in err
    assert "[trips] table service: compaction" in err and "completed" in err
    assert "[trips] batch 0: in 5 -> written 3, errors 1, filtered 1 | deltacommit" in err
    assert err.count(": no new data (waiting;") == 1  # idle polls are not logged one by one
    assert "run finished in" in err and f"{len(committed)} batch(es)" in err


def test_once_with_json_logs_and_progress_on_stdout(tmp_path, spark, capsys):
    _inputs(tmp_path / "in", 1)
    yaml = _yaml(tmp_path, "", "once")
    assert main(["--log-format", "json", "run", yaml, "--once", "--progress-json"]) == 0
    out, err = capsys.readouterr()
    [event] = [json.loads(line) for line in out.splitlines()]
    assert (event["pipeline"], event["batchId"], event["status"]) == ("trips", 0, "committed")
    assert (event["numInputRows"], event["numOutputRows"], event["numErrorRows"]) == (5, 3, 1)
    assert set(event["durationMs"]) == {"read", "prepare", "write_errors", "commit", "services", "total"}
    logs = [json.loads(line) for line in err.splitlines() if line.strip()]  # every line is one JSON object
    assert all({"ts", "level", "logger", "message"} <= set(x) for x in logs)
    [batch] = [x for x in logs if x.get("batch") == 0]
    assert batch["pipeline"] == "trips" and batch["level"] == "INFO"
    assert batch["message"].startswith("[trips] batch 0: in 5 -> written 3, errors 1, filtered 1")
    assert logs[-1]["message"].startswith("run finished in ")


def test_metrics_are_pushed_to_a_real_push_gateway(tmp_path, spark):
    _inputs(tmp_path / "in", 2)
    with running_pushgateway() as url:
        yaml = _yaml(tmp_path, f'metrics: {{push_gateway: {{url: "{url}", job: obs-test}}}}', "once", name="pushed")
        assert main(["run", yaml, "--once"]) == 0
        text = get(f"{url}/metrics")
    samples = _samples(text)
    labels = (("instance", ""), ("job", "obs-test"), ("pipeline", "pushed"), ("table", "pushed"))
    assert samples[("streamer_records_read_total", labels)] == GOOD + FILTERED + BAD  # --once: one file
    assert samples[("streamer_records_written_total", labels)] == GOOD
    assert samples[("streamer_batches_total", (*labels[:3], ("status", "committed"), labels[3]))] == 1
