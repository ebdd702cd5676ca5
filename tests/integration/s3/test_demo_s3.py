"""``storage.s3`` end to end: the documented demo config against the local S3 server, with
no AWS variable set (the YAML alone routes every location there), and the CLI run with a
recognisable secret whose every output is searched for it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path

import pytest

from streamer.cli import main
from streamer.fs import resolve
from streamer.read import Table
from tests.support.fixture_tables import REPO

pytestmark = [pytest.mark.s3, pytest.mark.integration]

CONFIG = REPO / "configs" / "demo_s3.yaml"
AWS_VARS = ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY",
            "AWS_SESSION_TOKEN", "AWS_REGION", "AWS_DEFAULT_REGION", "AWS_PROFILE")


def test_the_documented_s3_demo_runs_against_the_local_server(spark, local_s3, monkeypatch, tmp_path, capsys):
    lake = f"s3://lake-bucket/demo-{uuid.uuid4().hex[:8]}"
    for name in AWS_VARS:  # only the YAML may lead there
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("S3_ENDPOINT", local_s3.endpoint)
    monkeypatch.setenv("DEMO_S3_LAKE", lake)
    monkeypatch.chdir(tmp_path)
    for _ in range(2):
        assert main(["run", "--once", str(CONFIG)]) == 0
    out = capsys.readouterr()
    assert "demo_trips_s3" in out.err + out.out
    fs, base = resolve(f"{lake}/demo_s3", local_s3.settings())
    table = Table.open(base, fs=fs)
    assert len(table.timeline.completed_writes()) == 2
    assert table.read().num_rows > 5000  # two batches of 5000 with updates and deletes
    assert fs.exists(f"{base}/.hoodie/hoodie.properties")
    assert list(tmp_path.iterdir()) == []  # nothing went to a local folder
    fs.delete_dir(base)


# -- secrets -------------------------------------------------------------------------------

CANARY = "Canary-Secret-S3-5ec7e7"
WRONG = "Wrong-Canary-Secret-9d1b"

PIPELINE = textwrap.dedent("""
storage:
  s3: {{endpoint: "{endpoint}", region: us-east-1, access_key_id: canary-identity,
       secret_access_key: "${{CANARY_SECRET}}", {extra}}}
pipelines:
  - name: canary
    source: {{type: generator, seed: 1, records_per_batch: 200, num_batches: 2, num_keys: 300}}
    target: {{path: "{lake}/canary", record_key: uuid}}
    engine: local
""")


@pytest.fixture(scope="module")
def canary_s3():
    """A local S3 server accepting only the canary secret."""
    from streamer.local.s3 import LocalS3

    with LocalS3(access_key="canary-identity", secret_key=CANARY, heap="256m") as server:
        yield server


def _cli(args: list[str], env_secret: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in AWS_VARS}
    env.update(CANARY_SECRET=env_secret, PYTHONPATH=str(REPO))
    return subprocess.run([sys.executable, "-m", "streamer.cli", *args], capture_output=True, text=True,
                          env=env, cwd=cwd, timeout=300)


def _leaks(*texts: str) -> list[str]:
    return [t[max(0, t.find(s) - 200):t.find(s) + 50] for t in texts for s in (CANARY, WRONG) if s in t]


def test_a_secret_given_in_yaml_is_never_printed(canary_s3, tmp_path):
    lake = f"s3://lake-bucket/canary-{uuid.uuid4().hex[:8]}"
    good = tmp_path / "good.yaml"
    good.write_text(PIPELINE.format(endpoint=canary_s3.endpoint, lake=lake, extra="path_style: true"))
    outputs: list[str] = []

    for args in (["validate", "--no-spark", str(good)], ["validate", "--no-spark", "--json", str(good)]):
        r = _cli(args, CANARY, tmp_path)
        assert r.returncode == 0, r.stderr
        outputs += [r.stdout, r.stderr]
    assert "s3=" + canary_s3.endpoint in outputs[0]

    run = ["--log-level", "DEBUG", "run", "--once", "--progress-json", str(good)]
    r = _cli(run, CANARY, tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    outputs += [r.stdout, r.stderr]
    events = [json.loads(line) for line in r.stdout.splitlines() if line.startswith("{")]
    assert [e["numInputRows"] for e in events] == [200]  # the progress events are among the outputs

    # the same run with a wrong secret: refused by the store, the error printed without it
    r = _cli(run, WRONG, tmp_path)
    assert r.returncode != 0
    outputs += [r.stdout, r.stderr]
    assert "canary" in r.stderr and "SignatureDoesNotMatch" in r.stderr + r.stdout, r.stderr[-3000:]

    # an invalid block: the problem names the settings, not their values
    bad = tmp_path / "bad.yaml"
    bad.write_text(PIPELINE.format(endpoint=canary_s3.endpoint, lake=lake, extra='profile: p, session_token: "x"'))
    for args in (["validate", "--no-spark", str(bad)], ["validate", "--no-spark", "--json", str(bad)],
                 ["run", "--once", str(bad)]):
        r = _cli(args, CANARY, tmp_path)
        assert r.returncode != 0
        outputs += [r.stdout, r.stderr]
    assert "either profile or access_key_id" in outputs[-1] + outputs[-2]

    # nor is it stored: every object the run wrote (commits carry the run's metadata)
    fs, base = resolve(f"{lake}/canary", canary_s3.settings())
    stored = [fs.read_bytes(f.path).decode("latin-1") for f in fs.walk_files(base.rsplit("/", 1)[0])]
    assert len(stored) > 3  # the table, and the lease folder and error table if written
    assert _leaks(*outputs, *stored) == []
