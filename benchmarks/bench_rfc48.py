"""Log compaction in the case RFC-48 was written for (issue 13, acceptance 5): large base
files, small frequent commits.

A table of ``--parts`` partitions, each ONE file group of ``--base-rows`` rows (one bulk
insert; the data shape of :mod:`benchmarks.bench_write`), is built once and copied for
each policy. Then the same seeded stream: ``--commits`` upserts of ``--rows`` updates of
random existing keys (spread over every file group, so every commit appends a small log
block to every slice), services inline after every commit. Policies, all at the same
read-cost bound ``--bound`` B (the most log units a slice holds before a service acts):

* ``compaction-only``: full compaction every B delta commits, no log compaction;
* ``log+rare-full``: log compaction with ``min_blocks`` B (a slice's run of B small units
  is stitched into one block; with the default ``small_block_bytes`` a stitched block is
  still small, so it joins the next run), full compaction every ``--full-every`` delta
  commits;
* ``none``: no services (the unbounded reference).

Reported per policy, over the stream only (the initial load is in none of the figures):
bytes written (writer, services) per byte ingested (Arrow size of the stream's batches);
after every commit + services, the log units a snapshot merges and the log files and
blocks it opens (headers; mean and max over the stream); every ``--read-every`` commits a
snapshot read with our reader (wall, CPU; mean over those reads); at the end, snapshot
reads with ours and hudi-rs (median of 3); ingest and services wall and CPU seconds.
Measures, never asserts.

    .venv/bin/python -m benchmarks.bench_rfc48 [--parts 2] [--base-rows 1000000] [--commits 50]
        [--rows 2000] [--bound 10] [--full-every 40] [--read-every 5] [--no-write]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

from benchmarks.bench_write import CITIES
from benchmarks.results import machine_line, write_section
from streamer.config.policies import PoliciesConfig
from streamer.read import Table
from streamer.services.runner import run_services
from streamer.services.slices import effective_units, read_slice_blocks
from streamer.write import HudiWriter, TableConfig, WriteOptions

HEADING = "## Services: RFC-48 case - large base files, small frequent commits"
POLICIES = ("compaction-only", "log+rare-full", "none")
#: One file group per partition however large: the bulk insert and compactions never split.
OPTS = WriteOptions(engine="local", max_file_size=8 * 1024**3, small_file_limit=0)


def rows_of(ids: np.ndarray, parts: int, ts: int, rng: np.random.Generator) -> pa.Table:
    ids = ids.astype(np.int64)
    return pa.table({
        "id": ids,
        "city": CITIES[ids % parts],
        "ts": np.full(len(ids), ts, dtype=np.int64),
        "rider": pa.array(np.char.add("rider-", (ids % 9973).astype(str))),
        "fare": rng.random(len(ids)) * 100,
        "distance": rng.random(len(ids)) * 30,
    })


def policies(name: str, bound: int, full_every: int) -> PoliciesConfig:
    off = {"clean": {"mode": "off"}, "archive": {"mode": "off"}}
    if name == "compaction-only":
        return PoliciesConfig.model_validate({"log_compaction": {"mode": "off"}, **off,
                                              "compaction": {"mode": "inline", "trigger": {"delta_commits": bound}}})
    if name == "log+rare-full":
        return PoliciesConfig.model_validate({"log_compaction": {"mode": "inline", "min_blocks": bound}, **off,
                                              "compaction": {"mode": "inline",
                                                             "trigger": {"delta_commits": full_every}}})
    return PoliciesConfig.model_validate({"log_compaction": {"mode": "off"}, "compaction": {"mode": "off"}, **off})


@dataclass
class Outcome:
    name: str
    ingested: int = 0
    writer_bytes: int = 0
    service_bytes: int = 0
    full_bytes: int = 0  # of service_bytes: full compactions
    compactions: int = 0
    log_compactions: int = 0
    units: list[int] = field(default_factory=list)  # log units merged per snapshot, after each commit
    files: list[int] = field(default_factory=list)  # files opened per snapshot (base + logs)
    blocks: list[int] = field(default_factory=list)  # log blocks whose headers a snapshot reads
    reads: list[tuple[float, float]] = field(default_factory=list)  # (wall, cpu) of sampled reads
    ingest_s: float = 0.0
    ingest_cpu: float = 0.0
    services_s: float = 0.0
    services_cpu: float = 0.0
    end_read: tuple[float, float] = (0.0, 0.0)
    end_hudi_rs: float = 0.0
    end_hudi_rs_cpu: float = 0.0
    end_units: int = 0
    rows: int = 0
    slices: int = 1


def read_cost(path: str) -> tuple[int, int, int]:
    """(log units merged, files opened, log blocks scanned) of a snapshot now (headers only)."""
    t = Table.open(path)
    completed = t.timeline.completed_timestamps()
    units = files = blocks = 0
    for s in t.fsview.latest_merged_slices():
        files += len(s.paths)
        u, stats = effective_units(read_slice_blocks(t.fs, s), completed)
        units += len(u)
        blocks += stats.log_blocks_read
    return units, files, blocks


def _timed(fn):
    c, t = time.process_time(), time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t, time.process_time() - c


def build_base(path: str, parts: int, base_rows: int, seed: int) -> float:
    w = HudiWriter.create(path, TableConfig("rfc48", ("id",), ("city",), "ts"), options=OPTS)
    rng = np.random.default_rng(seed)
    _, wall, _ = _timed(lambda: w.bulk_insert(rows_of(np.arange(parts * base_rows), parts, 1, rng)))
    groups = {(s.partition_path, s.file_id) for s in Table.open(path).fsview.latest_file_slices()}
    if len(groups) != parts:
        raise RuntimeError(f"expected one file group per partition, got {len(groups)}")
    return wall


def run_one(name: str, base: str, work: str, a: argparse.Namespace, log=print) -> Outcome:
    path = f"{work}/{name}"
    shutil.rmtree(path, ignore_errors=True)
    subprocess.run(["cp", "-r", base, path], check=True)
    start_instants = {i.timestamp for i in Table.open(path).timeline.completed_writes()}
    pol = policies(name, a.bound, a.full_every)
    w = HudiWriter.open(path, options=OPTS)
    rng = np.random.default_rng(a.seed + 1)  # the same stream for every policy
    n_keys = a.parts * a.base_rows
    o = Outcome(name)
    for j in range(1, a.commits + 1):
        batch = rows_of(rng.choice(n_keys, a.rows, replace=False), a.parts, j + 1, rng)
        o.ingested += batch.nbytes
        _, wall, cpu = _timed(lambda b=batch: w.upsert(b))
        o.ingest_s += wall
        o.ingest_cpu += cpu
        _, wall, cpu = _timed(lambda: run_services(path, pol))
        o.services_s += wall
        o.services_cpu += cpu
        units, files, blocks = read_cost(path)
        o.units.append(units)
        o.files.append(files)
        o.blocks.append(blocks)
        if a.read_every and j % a.read_every == a.read_every // 2:
            _, wall, cpu = _timed(lambda: Table.open(path).scan())
            o.reads.append((wall, cpu))
        log(f"  {name} commit {j}: units {units} files {files} blocks {blocks}"
            + (f" read {o.reads[-1][0]:.2f}s" if o.reads and j % a.read_every == a.read_every // 2 else ""))
    t = Table.open(path)
    for inst in t.timeline.completed_writes():
        if inst.timestamp in start_instants:
            continue
        b = sum(s.total_write_bytes for s in t.fsview.commit_metadata(inst).write_stats())
        if inst.pending_action in ("compaction", "logcompaction"):
            o.service_bytes += b
            if inst.pending_action == "compaction":
                o.full_bytes += b
            o.compactions += inst.pending_action == "compaction"
            o.log_compactions += inst.pending_action == "logcompaction"
        else:
            o.writer_bytes += b
    ends = []
    for _ in range(3):
        res, wall, cpu = _timed(lambda: Table.open(path).scan())
        ends.append((wall, cpu))
    o.rows = res.table.num_rows
    o.end_read = (statistics.median(x[0] for x in ends), statistics.median(x[1] for x in ends))
    o.end_units = o.units[-1]
    o.slices = len(t.fsview.latest_file_slices())
    import hudi

    hs = []
    for _ in range(3):
        _, wall, cpu = _timed(lambda: hudi.HudiTableBuilder.from_base_uri(path).build().read())
        hs.append((wall, cpu))
    o.end_hudi_rs = statistics.median(x[0] for x in hs)
    o.end_hudi_rs_cpu = statistics.median(x[1] for x in hs)
    shutil.rmtree(path, ignore_errors=True)
    return o


def uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


def per(values: list[int], o: Outcome) -> str:
    """Mean / max over the stream of a per-snapshot count, per file slice."""
    return f"{statistics.mean(values) / o.slices:.1f} / {max(values) / o.slices:.1f}"


def lines_for(outs: list[Outcome], a: argparse.Namespace, command: str, before: str, after: str,
              build_s: float) -> list[str]:
    lines = [
        f"Command: `{command}`  ",
        f"{machine_line()} Local filesystem, local engine.  ",
        f"Load before (`uptime`): `{before}`  ",
        f"Load after: `{after}`",
        "",
        f"Table: {a.parts} partitions, each one file group with a base file of {a.base_rows:,} rows (one bulk "
        f"insert, {build_s:.0f} s, copied for each policy). Stream: {a.commits} upsert commits of {a.rows:,} "
        f"updates of random existing keys (about {a.rows // a.parts:,} per file group per commit), services "
        f"inline after every commit, clean/archive off so every written byte is counted. Read-cost bound "
        f"B = {a.bound} log units per slice for both services: compaction every {a.bound} delta commits, or "
        f"log compaction at min_blocks {a.bound} (default small_block_bytes 16 MB, so a stitched block joins "
        f"the next run) with full compaction every {a.full_every} delta commits. The initial load is in no "
        "figure.",
        "",
        "| policy | bytes written / byte ingested | by the writer | by services | services run (full / log) "
        "| log units merged per slice (mean / max) | files opened per slice (mean / max) "
        "| log blocks scanned per slice (mean / max) | snapshot read, ours (s wall / CPU, mean of samples) "
        "| end: ours (s wall / CPU, median of 3) | end: hudi-rs (s wall / CPU) | ingest wall / CPU (s) | services wall / CPU (s) |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for o in outs:
        total = o.writer_bytes + o.service_bytes
        rw = statistics.mean(r[0] for r in o.reads) if o.reads else float("nan")
        rc = statistics.mean(r[1] for r in o.reads) if o.reads else float("nan")
        lines.append(
            f"| {o.name} | {total / o.ingested:.2f} | {o.writer_bytes / o.ingested:.2f} | "
            f"{o.service_bytes / o.ingested:.2f} ({o.full_bytes / o.ingested:.2f} + "
            f"{(o.service_bytes - o.full_bytes) / o.ingested:.2f}) | {o.compactions} / {o.log_compactions} | "
            f"{per(o.units, o)} | {per(o.files, o)} | {per(o.blocks, o)} | {rw:.2f} / {rc:.2f} | "
            f"{o.end_read[0]:.2f} / {o.end_read[1]:.2f} | {o.end_hudi_rs:.2f} / {o.end_hudi_rs_cpu:.2f} | {o.ingest_s:.1f} / {o.ingest_cpu:.1f} | "
            f"{o.services_s:.1f} / {o.services_cpu:.1f} |")
    lines += [
        "",
        "Per-commit read cost is counted after each commit and its services (headers only; a log unit is "
        "one commit's or one log compaction's blocks in a slice, as the reader applies them); snapshot reads "
        f"with our reader ({outs[0].rows:,} rows) were sampled after commits "
        f"{', '.join(str(j) for j in range(1, a.commits + 1) if a.read_every and j % a.read_every == a.read_every // 2)}"
        f"; the end reads after commit {a.commits}, when the slices held "
        + ", ".join(f"{o.end_units} ({o.name})" for o in outs) + " log units in all.",
    ]
    return lines


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--parts", type=int, default=2)
    ap.add_argument("--base-rows", type=int, default=1_000_000, help="rows per file group's base file")
    ap.add_argument("--commits", type=int, default=50)
    ap.add_argument("--rows", type=int, default=2000, help="updates per commit")
    ap.add_argument("--bound", type=int, default=10, help="log units per slice before a service acts")
    ap.add_argument("--full-every", type=int, default=40, help="log+rare-full: compaction every N delta commits")
    ap.add_argument("--read-every", type=int, default=5, help="sample a snapshot read every N commits (0: never)")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--policies", default=",".join(POLICIES))
    ap.add_argument("--reading", help="a text file whose lines follow the table in RESULTS.md")
    ap.add_argument("--save", help="write the run's outcomes here (JSON)")
    ap.add_argument("--render", help="rewrite the RESULTS.md section from a saved run, measuring nothing")
    ap.add_argument("--no-write", action="store_true", help="print only; leave RESULTS.md alone")
    a = ap.parse_args(argv)
    reading = []
    if a.reading:
        with open(a.reading) as f:
            reading = ["", *f.read().rstrip("\n").split("\n")]
    if a.render:
        with open(a.render) as f:
            d = json.load(f)
        outs = [Outcome(**o) for o in d["outs"]]
        lines = lines_for(outs, argparse.Namespace(**d["args"]), d["command"], d["before"], d["after"],
                          d["build_s"]) + reading
        print("\n".join(lines))
        write_section(HEADING, lines)
        return 0
    before = uptime()
    print(before, flush=True)
    work = tempfile.mkdtemp(prefix="bench_rfc48_")
    try:
        base = f"{work}/base"
        build_s = build_base(base, a.parts, a.base_rows, a.seed)
        print(f"base table built in {build_s:.0f} s", flush=True)
        outs = [run_one(n, base, work, a) for n in a.policies.split(",")]
    finally:
        shutil.rmtree(work, ignore_errors=True)
    after = uptime()
    command = " ".join([".venv/bin/python -m benchmarks.bench_rfc48", *argv])
    if a.save:
        with open(a.save, "w") as f:
            json.dump({"outs": [dataclasses.asdict(o) for o in outs], "args": vars(a), "command": command,
                       "before": before, "after": after, "build_s": build_s}, f, indent=1)
    lines = lines_for(outs, a, command, before, after, build_s) + reading
    print("\n".join(lines))
    if not a.no_write:
        write_section(HEADING, lines)
    return 0


if __name__ == "__main__":
    sys.exit(main())
