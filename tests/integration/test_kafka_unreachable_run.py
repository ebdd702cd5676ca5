"""``streamer run`` with no broker: one error naming the address, not a screen of client logs.

The user-facing version of tests/unit/sources/test_kafka_unreachable.py: a continuous
Kafka pipeline (the kind configs/kafka_json.yaml is) pointed at a closed loopback
port, run as a subprocess so everything the process prints is counted.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from streamer.local.kafka import free_port

pytestmark = [pytest.mark.integration]

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
#: The 3 s metadata timeout (a continuous run asks the broker before starting Spark), with room to spare.
BOUND_S = 300
#: Log lines a failed run may print besides its error (config loaded, pipeline summary, JVM notes, summary).
FEW_LINES = 10


@pytest.mark.parametrize("mode", ["continuous", "once"])
def test_run_against_a_closed_port_fails_with_one_error(tmp_path, mode):
    address = f"127.0.0.1:{free_port()}"
    config = tmp_path / "kafka.yaml"
    config.write_text(textwrap.dedent(f"""\
        pipelines:
          - name: nobroker
            source: {{type: kafka, bootstrap_servers: "{address}", topic: trips, format: json,
                      schema: "uuid STRING, ts BIGINT", metadata_timeout: 3s}}
            target: {{path: {tmp_path}/lake/nobroker, record_key: uuid, ordering_field: ts}}
            trigger: {{mode: {mode}, interval: 1s}}
            engine: local
            spark: {{master: "local[1]"}}
        """))
    out = subprocess.run(
        [sys.executable, "-m", "streamer.cli", "run", str(config), "--timeout", "60"],
        cwd=tmp_path, env={**os.environ, "PYTHONPATH": REPO}, capture_output=True, text=True, timeout=BOUND_S,
    )
    lines = (out.stdout + out.stderr).splitlines()
    assert out.returncode != 0
    errors = [line for line in lines if "unreachable" in line]
    assert len(errors) == 1, "\n".join(lines)
    assert address in errors[0] and "'trips'" in errors[0] and "within 3s" in errors[0]
    assert not [line for line in lines if "Connect to" in line and "unreachable" not in line], "\n".join(lines)
    assert len(lines) <= FEW_LINES, "\n".join(lines)
    # asked before Spark starts (a JVM start-up first took a minute with --once)
    assert not [line for line in lines if "SparkSession" in line or "WARN" in line], "\n".join(lines)
    assert not (tmp_path / "lake").exists()


def test_run_with_a_missing_source_folder_fails_before_spark(tmp_path):
    config = tmp_path / "files.yaml"
    config.write_text(textwrap.dedent(f"""\
        pipelines:
          - name: nofolder
            source: {{type: files, path: {tmp_path}/landing/missing, format: json,
                      schema: "uuid STRING, ts BIGINT"}}
            target: {{path: {tmp_path}/lake/nofolder, record_key: uuid, ordering_field: ts}}
            trigger: {{mode: continuous, interval: 1s}}
        """))
    out = subprocess.run(
        [sys.executable, "-m", "streamer.cli", "run", str(config), "--timeout", "60"],
        cwd=tmp_path, env={**os.environ, "PYTHONPATH": REPO}, capture_output=True, text=True, timeout=BOUND_S,
    )
    assert out.returncode != 0
    assert "landing/missing" in out.stderr, out.stderr
    assert not (tmp_path / "lake").exists()
