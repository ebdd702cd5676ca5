"""Processes of the services concurrency test: a writer and a snapshot reader.

``writer <table> <stop-file> <out.jsonl>``: commits upserts/deletes continuously, runs the
inline services after each commit (which schedule async compaction), and after every
commit appends ``{"instant", "digest"}`` of the dict model to ``out``.
``reader <table> <stop-file> <out.jsonl>``: polls snapshots, appending each one's digest.
Both stop once ``stop-file`` exists (the test creates it when enough happened), or after
``MAX_SECONDS`` (only so that a test that died leaves no process behind).
"""

from __future__ import annotations

import json
import os
import sys
import time

from streamer.config.policies import PoliciesConfig
from streamer.errors import CommitConflictError, StreamerError
from streamer.read import Table
from streamer.services.runner import run_inline_services, wait_for_capacity
from tests.support import block_tables as tg
from tests.support.block_tables import digest

POLICIES = PoliciesConfig.model_validate({
    "log_compaction": {"mode": "async", "min_blocks": 3},
    "compaction": {"mode": "async", "trigger": {"delta_commits": 6}, "max_pending": 2},
    "clean": {"mode": "off"},
    "archive": {"mode": "off"},
})
#: Not a duration of the test: a backstop so that a writer or reader outlives no test.
MAX_SECONDS = 1800.0
#: Tries of one commit while compactors hold the writers' lock (0.05 s apart).
CONFLICT_RETRIES = 6_000


def _go_on(stop: str, deadline: float) -> bool:
    return not os.path.exists(stop) and time.monotonic() < deadline


def writer(path: str, stop: str, out: str, debug: bool = False) -> None:
    w = tg.open_writer(path)
    gen, model = tg.Gen(7), tg.Model()
    model.rows = {(r["city"], r["id"]): r for r in tg.read_ours(path)}
    gen.ts = max((r["ts"] for r in model.rows.values()), default=0) + 1
    deadline = time.monotonic() + MAX_SECONDS
    i = 0
    with open(out, "a") as f:
        while _go_on(stop, deadline):
            i += 1
            delete = i % 5 == 0
            batch = gen.deletes(model, 4) if delete else gen.upserts(15)
            for _ in range(CONFLICT_RETRIES):
                try:
                    res = w.delete(batch) if delete else w.upsert(batch)
                    break
                except CommitConflictError:
                    time.sleep(0.05)  # a compactor holds the writers' lock for a moment
            else:
                raise RuntimeError(f"commit {i}: the writers' lock stayed taken over {CONFLICT_RETRIES} tries")
            model.apply(deletes=batch) if delete else model.apply(batch)
            f.write(json.dumps({"instant": res.instant, "digest": digest(model.snapshot()),
                                **({"rows": model.snapshot()} if debug else {})}) + "\n")
            f.flush()
            run_inline_services(path, POLICIES)
            wait_for_capacity(path, POLICIES.compaction, timeout_s=300)  # patience on a loaded machine
    with open(out + ".final.json", "w") as f:
        json.dump(model.snapshot(), f)


def reader(path: str, stop: str, out: str, debug: bool = False) -> None:
    deadline = time.monotonic() + MAX_SECONDS
    with open(out, "a") as f:
        while _go_on(stop, deadline):
            try:
                t = Table.open(path)
                rows = tg.canon(t.read())
            except StreamerError as e:  # a reader must never fail; record it for the test
                f.write(json.dumps({"error": str(e)}) + "\n")
                continue
            writes = [i.timestamp for i in t.timeline.completed_writes()]
            rec = {"digest": digest(rows), "n": len(rows), "last": writes[-1] if writes else None}
            if debug:
                rec["rows"] = rows
            f.write(json.dumps(rec) + "\n")
            f.flush()
            time.sleep(0.1)


if __name__ == "__main__":
    role, path, stop, out = sys.argv[1:5]
    {"writer": writer, "reader": reader}[role](path, stop, out, len(sys.argv) > 5)
