"""One upsert, this checkout against another commit's code, same table, same hour.

Issue 13's bloom target is relative ("3x cheaper in CPU seconds than today"), and the
figure it quotes (7.4 s CPU for a 100k upsert at 10M rows) was measured on another
day's machine. This runs the code of ``--tree`` (a checkout of the commit before the
work, e.g. ``git worktree add /tmp/pre13 12cee9c^``) and of this checkout alternately,
each in a fresh child process on a fresh copy (``cp -r``, not timed) of ``--table``,
with the upsert rows of ``bench_growth`` (the same rows its bloom sink upserts), and
prints the medians: wall, CPU (the child's process CPU seconds, all threads) and bytes
written (the commit's write stats). Only the code under test differs between children;
the child script uses nothing but ``benchmarks.bench_write.make_batch`` and
``HudiWriter.open(...).upsert(...)``, which both trees have. Measures, never asserts.

    .venv/bin/python -m benchmarks.bench_before --tree /tmp/pre13 \\
        --table /tmp/growth/bloom/at-10000000 --size 10000000 [--repeat 3]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

#: The child: imports resolve in the tree under test (its ``PYTHONPATH`` and cwd).
CHILD = """
import io, os, sys, time
import numpy as np
import pyarrow.parquet as pq
from benchmarks.bench_write import make_batch
size, n, seed, ts = (int(x) for x in sys.argv[2:6])
batch, _ = make_batch(np.random.default_rng([seed, size, 0]), n, size, size, ts=ts)
pq.write_table(batch, io.BytesIO(), compression="snappy")  # warm pyarrow, as bench_growth's child
from streamer.write import HudiWriter, WriteOptions
cpu, t = time.process_time(), time.perf_counter()
w = HudiWriter.open(sys.argv[1], options=WriteOptions(engine="local", parallelism=os.cpu_count() or 2))
res = w.upsert(batch)
print(time.perf_counter() - t, time.process_time() - cpu, sum(s.total_write_bytes for s in res.stats), flush=True)
os._exit(0)
"""


def one(tree: Path, table: str, size: int, n: int, seed: int, ts: int, work: Path) -> tuple[float, float, int]:
    """One upsert by ``tree``'s code into a fresh copy of ``table``: (wall, CPU, bytes)."""
    run = work / "run"
    shutil.rmtree(run, ignore_errors=True)
    subprocess.run(["cp", "-r", table, str(run)], check=True)
    env = dict(os.environ, PYTHONPATH=str(tree))
    p = subprocess.run([sys.executable, "-c", CHILD, str(run), str(size), str(n), str(seed), str(ts)],
                       capture_output=True, text=True, env=env, cwd=tree)
    if p.returncode != 0:
        raise RuntimeError(f"child of {tree} failed ({p.returncode}):\n{p.stderr[-3000:]}")
    wall, cpu, written = p.stdout.split()[-3:]
    return float(wall), float(cpu), int(written)


def main(argv: list[str] | None = None) -> int:
    from benchmarks.bench_growth import UPSERT_TS, uptime

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tree", required=True, help="a checkout of the code to compare with")
    ap.add_argument("--table", required=True, help="a grown table (bench_growth --work .../bloom/at-N)")
    ap.add_argument("--size", type=int, required=True, help="the table's row count (the upsert's key space)")
    ap.add_argument("--upsert", type=int, default=100_000)
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args(argv)
    here = Path(__file__).resolve().parents[1]
    trees = {"before": Path(args.tree).resolve(), "this checkout": here}
    print(uptime(), flush=True)
    out: dict[str, list[tuple[float, float, int]]] = {k: [] for k in trees}
    with tempfile.TemporaryDirectory(prefix="bench_before_") as tmp:
        for i in range(args.repeat):
            order = list(trees.items()) if i % 2 == 0 else list(trees.items())[::-1]
            for name, tree in order:
                r = one(tree, args.table, args.size, args.upsert, args.seed, UPSERT_TS, Path(tmp))
                out[name].append(r)
                print(f"  {name:14s} rep {i}: wall {r[0]:.2f} s  cpu {r[1]:.2f} s  bytes {r[2] / 1e6:.2f} MB",
                      flush=True)
    print(uptime(), flush=True)
    med = {k: (statistics.median(x[0] for x in v), statistics.median(x[1] for x in v), v[0][2])
           for k, v in out.items()}
    print("| code | wall (s) | CPU (s) | bytes written (MB) |\n|---|---:|---:|---:|")
    for k, (w, c, b) in med.items():
        print(f"| {k} | {w:.2f} | {c:.2f} | {b / 1e6:.2f} |")
    b, t = med["before"], med["this checkout"]
    print(f"\nthis checkout is {b[1] / t[1]:.1f}x cheaper in CPU, {b[0] / t[0]:.1f}x in wall, "
          f"and writes {b[2] / t[2]:.1f}x fewer bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
