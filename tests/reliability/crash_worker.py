"""Subprocess body for the crash tests: one write, killed by the fault hook.

Run as ``python -m tests.reliability.crash_worker <table> <op> <batch.parquet>`` with
``MOR_STREAMER_KILL_AT_STEP=N`` set: the writer SIGKILLs itself at its N-th I/O step.
"""

from __future__ import annotations

import sys

import pyarrow.parquet as pq

from streamer.write import HudiWriter


def main() -> None:
    path, op, batch_file = sys.argv[1:4]
    batch = pq.read_table(batch_file)
    w = HudiWriter.open(path)
    getattr(w, op)(batch)


if __name__ == "__main__":
    main()
