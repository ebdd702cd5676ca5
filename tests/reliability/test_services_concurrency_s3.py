"""The services concurrency test with the table on S3 (a real S3-compatible server).

As ``test_services_concurrency.py``: a writer, an async log compactor, TWO async
compactors and a snapshot reader, all separate processes on one table - here at
``s3://lake-bucket/...``, so the writer lock and the plan locks are conditional PUTs and
every completed instant is one PUT. Every snapshot the reader sees equals the model at
some committed instant, every plan completes exactly once, and the final table equals the
model through our reader and hudi-rs (reading S3). Shorter than the local run (the same
checks, fewer commits) to keep the suite's time modest.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from streamer.fs import resolve
from streamer.read import Table
from streamer.table.instant import Action
from streamer.table.naming import parse_base_file_name
from tests.support import block_tables as tg
from tests.support.block_tables import digest

pytestmark = [pytest.mark.slow, pytest.mark.s3]
REPO = Path(__file__).resolve().parents[2]
SECONDS = 45


def _jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def test_writer_compactors_and_reader_together_on_s3(local_s3, tmp_path):
    p = f"s3://lake-bucket/services-{uuid.uuid4().hex[:8]}"
    tg.build(p, 2, seed=1)
    initial = digest(tg.read_ours(p))
    policies = tmp_path / "policies.yaml"
    policies.write_text("policies: {log_compaction: {mode: async, min_blocks: 3}, compaction: {mode: async}}\n")
    py = sys.executable
    env = dict(os.environ, PYTHONPATH=str(REPO))  # with the fixture's AWS variables
    cli = [py, "-c", "import sys; from streamer.cli import main; sys.exit(main(sys.argv[1:]))"]
    procs = {
        "writer": [py, "-m", "tests.reliability.services_concurrency", "writer", p, str(SECONDS),
                   str(tmp_path / "writer.jsonl")],
        "reader": [py, "-m", "tests.reliability.services_concurrency", "reader", p, str(SECONDS + 3),
                   str(tmp_path / "reader.jsonl")],
        "log-compactor": cli + ["log-compact", p, "--json", "--loop", "--interval", "0.3", "--duration", str(SECONDS + 5),
                                "--policies", str(policies)],
        "compactor-1": cli + ["compact", p, "--json", "--run", "--loop", "--interval", "0.2", "--duration",
                              str(SECONDS + 8), "--policies", str(policies)],
        "compactor-2": cli + ["compact", p, "--json", "--run", "--loop", "--interval", "0.2", "--duration",
                              str(SECONDS + 8), "--policies", str(policies)],
    }
    running = {n: subprocess.Popen(c, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
               for n, c in procs.items()}
    outputs = {}
    try:
        for n, proc in running.items():
            out, err = proc.communicate(timeout=SECONDS + 180)
            outputs[n] = out
            assert proc.returncode == 0, f"{n} failed:\n{err[-3000:]}"
    finally:
        for proc in running.values():
            if proc.poll() is None:
                proc.kill()

    subprocess.run(cli + ["compact", p, "--run"], cwd=REPO, env=env, check=True, capture_output=True)
    subprocess.run(cli + ["log-compact", p, "--run"], cwd=REPO, env=env, check=True, capture_output=True)
    commits = _jsonl(tmp_path / "writer.jsonl")
    assert len(commits) > 10
    allowed = {initial} | {c["digest"] for c in commits}
    seen = _jsonl(tmp_path / "reader.jsonl")
    assert not [s for s in seen if "error" in s], [s for s in seen if "error" in s][:3]
    assert len(seen) > 20
    bad = [s for s in seen if s["digest"] not in allowed]
    assert not bad, f"{len(bad)} snapshot(s) matched no committed state"

    completed_runs: dict[str, int] = {}
    for n in ("compactor-1", "compactor-2", "log-compactor"):
        for line in outputs[n].splitlines():
            for o in json.loads(line).get("executed", []):
                if o.get("status") == "completed":
                    completed_runs[o["instant"]] = completed_runs.get(o["instant"], 0) + 1
    assert completed_runs and max(completed_runs.values()) == 1, completed_runs
    t = Table.open(p)
    comps = [i for i in t.timeline.completed() if i.pending_action == Action.COMPACTION]
    lcs = [i for i in t.timeline.completed() if i.pending_action == Action.LOG_COMPACTION]
    assert comps and lcs, (len(comps), len(lcs))
    per_slice: dict[tuple[str, str], int] = {}
    done = {i.timestamp for i in comps}
    fs, base = resolve(p)
    for st in fs.walk_files(base):
        b = parse_base_file_name(os.path.basename(st.path))
        if b is not None and b.instant_time in done:
            per_slice[(b.file_id, b.instant_time)] = per_slice.get((b.file_id, b.instant_time), 0) + 1
    assert per_slice and set(per_slice.values()) == {1}
    assert not [i for i in t.timeline.pending() if i.action in (Action.COMPACTION, Action.LOG_COMPACTION)]

    final = commits[-1]["digest"]
    assert digest(tg.read_ours(p)) == final
    assert digest(tg.read_hudi_rs(p)) == final
    fs.delete_dir(base)
