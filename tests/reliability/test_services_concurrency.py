"""A writer, an async log compactor, TWO async compactors and a reader, on one table at once.

All are separate processes on one table - on a local folder, or on S3 (a real
S3-compatible server, s3proxy: the writer lock and the plan locks are conditional PUTs
and every completed instant is one PUT). They run until enough happened, counted, not
timed (smoke size in ``make test``, full in ``make test-campaigns``): ``COMPACTIONS``
compactions and log compactions completed, ``COMMITS`` commits, ``READS`` snapshots read.
Every snapshot the reader sees must equal the model at some committed instant, every plan
must complete exactly once (one base file per slice per compaction), and the final table
must equal the model through our reader and hudi-rs.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from streamer.fs import resolve
from streamer.read import Table
from streamer.table.instant import Action
from streamer.table.naming import parse_base_file_name
from tests.support import block_tables as tg
from tests.support.block_tables import digest
from tests.support.campaign import sized

pytestmark = [pytest.mark.slow, pytest.mark.campaign]
REPO = Path(__file__).resolve().parents[2]
#: What must have happened before the writer stops (each of compactions and log compactions).
COMPACTIONS = sized(smoke=2, full=4)
COMMITS = sized(smoke=12, full=50)
READS = sized(smoke=30, full=100)
#: Hang guard only: past it the test fails naming the counts and what each process said.
LIMIT_S = sized(smoke=1200.0, full=2400.0)
#: pytest-timeout, the last resort past the hang guards (a campaign and its top-up rounds).
pytestmark.append(pytest.mark.timeout(3 * LIMIT_S))


def _jsonl(path: Path) -> list[dict]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _lines(path: Path) -> int:
    return path.read_bytes().count(b"\n") if path.exists() else 0


def _done_services(p: str) -> tuple[int, int]:
    completed = Table.open(p).timeline.completed()
    return (sum(1 for i in completed if i.pending_action == Action.COMPACTION),
            sum(1 for i in completed if i.pending_action == Action.LOG_COMPACTION))


#: The storages: both at full size; at smoke size S3 (its commits are objects under a
#: conditional-put lock, the harder case; the local folder's writers and services meet in
#: the smoke runs of the poison and shared-table campaigns).
STORAGES = sized(smoke=["s3"], full=["local", "s3"])


@pytest.mark.parametrize("storage", [pytest.param(s, marks=[pytest.mark.s3] if s == "s3" else []) for s in STORAGES])
def test_writer_compactors_and_reader_together(storage, tmp_path, request):
    if storage == "s3":
        request.getfixturevalue("local_s3")  # the AWS variables point here and in the children
        p = f"s3://lake-bucket/services-{uuid.uuid4().hex[:8]}"
    else:
        p = str(tmp_path / "t")
    tg.build(p, 2, seed=1)
    initial = digest(tg.read_ours(p))
    policies = tmp_path / "policies.yaml"
    policies.write_text("policies: {log_compaction: {mode: async, min_blocks: 3}, compaction: {mode: async}}\n")
    stop = tmp_path / "stop"
    py = sys.executable
    env = dict(os.environ, PYTHONPATH=str(REPO))  # with the fixture's AWS variables on S3
    cli = [py, "-c", "import sys; from streamer.cli import main; sys.exit(main(sys.argv[1:]))"]
    loop = ["--json", "--loop", "--policies", str(policies)]
    procs = {
        "writer": [py, "-m", "tests.reliability.services_concurrency", "writer", p, str(stop),
                   str(tmp_path / "writer.jsonl")],
        "reader": [py, "-m", "tests.reliability.services_concurrency", "reader", p, str(stop),
                   str(tmp_path / "reader.jsonl")],
        "log-compactor": cli + ["log-compact", p, *loop, "--interval", "0.3"],
        "compactor-1": cli + ["compact", p, "--run", *loop, "--interval", "0.2"],
        "compactor-2": cli + ["compact", p, "--run", *loop, "--interval", "0.2"],
    }
    files = contextlib.ExitStack()  # the processes' outputs, closed in the finally below

    def output(name: str):
        return files.enter_context(open(tmp_path / name, "w"))  # noqa: SIM115 - closed by ``files``

    running = {n: subprocess.Popen(c, cwd=REPO, env=env, text=True, stdout=output(f"{n}.out"),
                                   stderr=output(f"{n}.err"))
               for n, c in procs.items()}

    def counts() -> dict[str, int]:
        comps, lcs = _done_services(p)
        return {"commits": _lines(tmp_path / "writer.jsonl"), "reads": _lines(tmp_path / "reader.jsonl"),
                "compactions": comps, "log compactions": lcs}

    def report(why: str) -> str:
        tails = "\n".join(f"--- {n} ({'exited ' + str(pr.returncode) if pr.poll() is not None else 'running'}):\n"
                          + (tmp_path / f"{n}.err").read_text()[-1500:] for n, pr in running.items())
        return f"{why}; counts {now}, wanted {wanted}\n{tails}"

    wanted = {"commits": COMMITS, "reads": READS, "compactions": COMPACTIONS, "log compactions": COMPACTIONS}
    now: dict[str, int] = {}
    try:
        deadline = time.monotonic() + LIMIT_S
        for _ in range(int(LIMIT_S)):  # polled once a second
            now = counts()
            if all(now[k] >= v for k, v in wanted.items()):
                break
            exited = [n for n, pr in running.items() if pr.poll() is not None]
            if exited:
                pytest.fail(report(f"{exited} exited before the counts were reached"))
            if time.monotonic() > deadline:
                pytest.fail(report(f"hang guard: counts not reached after {LIMIT_S:.0f} s"))
            time.sleep(1.0)
        else:
            pytest.fail(report("counts not reached"))
        stop.touch()  # the writer and the reader finish their round and exit
        for n in ("writer", "reader"):
            try:
                running[n].wait(timeout=300)  # a hang guard: one round is a commit or a read
            except subprocess.TimeoutExpired:
                pytest.fail(report(f"the {n} did not stop within 300 s of the stop file"))
            assert running[n].returncode == 0, report(f"the {n} failed")
        for n in ("log-compactor", "compactor-1", "compactor-2"):
            running[n].send_signal(signal.SIGINT)  # Ctrl-C: between rounds "stopped", mid-round "interrupted"
        for n in ("log-compactor", "compactor-1", "compactor-2"):
            try:
                running[n].wait(timeout=300)
            except subprocess.TimeoutExpired:
                pytest.fail(report(f"the {n} did not stop within 300 s of Ctrl-C"))
            assert running[n].returncode in (0, 130), report(f"the {n} failed")
    finally:
        for proc in running.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait(timeout=30)
        files.close()
    print("counts when stopped:", now)

    # after the writer stopped: drain what is still pending, then check the end state
    subprocess.run(cli + ["compact", p, "--run"], cwd=REPO, env=env, check=True, capture_output=True)
    subprocess.run(cli + ["log-compact", p, "--run"], cwd=REPO, env=env, check=True, capture_output=True)
    commits = _jsonl(tmp_path / "writer.jsonl")
    assert len(commits) >= COMMITS
    allowed = {initial} | {c["digest"] for c in commits}
    seen = _jsonl(tmp_path / "reader.jsonl")
    assert not [s for s in seen if "error" in s], [s for s in seen if "error" in s][:3]
    assert len(seen) >= READS
    bad = [s for s in seen if s["digest"] not in allowed]
    assert not bad, f"{len(bad)} snapshot(s) matched no committed state"

    # every plan executed exactly once
    completed_runs: dict[str, int] = {}
    for n in ("compactor-1", "compactor-2", "log-compactor"):
        for line in (tmp_path / f"{n}.out").read_text().splitlines():
            for o in json.loads(line).get("executed", []):
                if o.get("status") == "completed":
                    completed_runs[o["instant"]] = completed_runs.get(o["instant"], 0) + 1
    assert completed_runs and max(completed_runs.values()) == 1, completed_runs
    t = Table.open(p)
    comps = [i for i in t.timeline.completed() if i.pending_action == Action.COMPACTION]
    lcs = [i for i in t.timeline.completed() if i.pending_action == Action.LOG_COMPACTION]
    assert len(comps) >= COMPACTIONS and len(lcs) >= COMPACTIONS, (len(comps), len(lcs))
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
    # a completed commit or delta commit is never an empty file (hudi-rs parses each one's
    # JSON): this names the file if one ever is
    empty = [(st.path, st.size) for st in fs.walk_files(f"{base}/.hoodie")
             if st.size == 0 and st.path.endswith((".commit", ".deltacommit", ".replacecommit"))]
    listing = [(st.path.rsplit("/", 1)[-1], st.size) for st in fs.walk_files(f"{base}/.hoodie")
               if "/.hoodie/" in st.path and st.path.count("/") == f"{base}/.hoodie/x".count("/")]
    assert not empty, f"empty completed instants: {empty}; timeline files: {listing}"
    try:
        rs = tg.read_hudi_rs(p)
    except Exception as first:  # noqa: BLE001 - asked once more, then reported with the listing
        # Once, in a loaded clean-clone run, hudi-rs reported a timeline file of this S3 table
        # empty ("EOF while parsing"); three runs after it passed. The check above fails if a
        # file really is empty; past it, a second read tells a passing glitch of the
        # reader's S3 client from a table it cannot read (the failure quotes the listing)
        print(f"hudi-rs read failed once ({first}); reading again")
        time.sleep(1.0)
        try:
            rs = tg.read_hudi_rs(p)
        except Exception as e:
            raise AssertionError(f"hudi-rs cannot read the table ({e}); timeline files: {listing}") from e
    assert digest(rs) == final
    if storage == "s3":
        fs.delete_dir(base)
