"""``python -m benchmarks [write] [read] [services] [streamer]``: run benchmarks in turn.

Each writes its own section of ``benchmarks/RESULTS.md`` with its exact command; with no
name, all of them run (``make bench``; about half an hour on 2 cores). For options, run a
module alone, e.g. ``python -m benchmarks.bench_write --help``.
"""

from __future__ import annotations

import importlib
import sys

BENCHMARKS = ("write", "read", "services", "streamer")


def main(argv: list[str] | None = None) -> int:
    names = list(argv if argv is not None else sys.argv[1:]) or list(BENCHMARKS)
    unknown = [n for n in names if n not in BENCHMARKS]
    if unknown:
        print(f"unknown benchmark(s) {unknown}; choose from {', '.join(BENCHMARKS)}", file=sys.stderr)
        return 2
    for name in names:
        print(f"== benchmarks.bench_{name}", flush=True)
        rc = importlib.import_module(f"benchmarks.bench_{name}").main([])
        if rc:
            return int(rc)
    return 0


if __name__ == "__main__":
    sys.exit(main())
