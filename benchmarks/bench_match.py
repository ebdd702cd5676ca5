"""Key matching in the bloom index: which side of ``is_in`` becomes the hash set.

A lookup confirms a batch's candidate keys against a member's (base file's or block's)
key column. Hashing the member's whole column costs per member row; hashing the few
candidates and streaming the column through them costs per candidate plus a scan. Both
directions, same inputs, CPU seconds per match (median of 5). Measures, never asserts.

    .venv/bin/python -m benchmarks.bench_match [--members 1000000] [--candidates 1000,30000,300000]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from benchmarks.results import machine_line, write_section
from streamer.index.bloom_index import _present

HEADING = "## Index: matching candidates against a member's keys"


def _cpu(fn) -> float:
    runs = []
    for _ in range(5):
        t = time.process_time()
        fn()
        runs.append(time.process_time() - t)
    return statistics.median(runs)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--members", type=int, default=1_000_000)
    ap.add_argument("--candidates", default="1000,30000,300000")
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args(argv)
    load = os.getloadavg()
    rng = np.random.default_rng(0)
    members = pa.array(np.char.add("k", np.arange(args.members).astype(str)))
    lines = ["| member keys | candidates | member keys hashed (ms CPU) | candidates hashed (ms CPU) | ratio |",
             "|---:|---:|---:|---:|---:|"]
    for n in (int(c) for c in args.candidates.split(",")):
        cands = pa.array(np.char.add("k", rng.choice(2 * args.members, n, replace=False).astype(str)))
        assert _present(cands, members).equals(pc.is_in(cands, value_set=members))
        whole = _cpu(lambda c=cands: pc.is_in(c, value_set=members))
        ours = _cpu(lambda c=cands: _present(c, members))
        lines.append(f"| {args.members:,} | {n:,} | {whole * 1000:.1f} | {ours * 1000:.1f} | {whole / ours:.1f}x |")
    print("\n".join(lines))
    if not args.no_write:
        cmd = ".venv/bin/python -m benchmarks.bench_match " + " ".join(sys.argv[1:] if argv is None else argv)
        write_section(HEADING, [
            f"`{cmd.strip()}` - {machine_line()}; load average before the run "
            f"{load[0]:.2f} {load[1]:.2f} {load[2]:.2f}.", "", *lines, "",
            "The index hashes whichever side is smaller (`bloom_index._present`): after the slice "
            "summaries and member filters, the candidates are usually far fewer than a member's rows.",
        ])


if __name__ == "__main__":
    main()
