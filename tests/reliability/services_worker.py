"""Subprocess body for the services crash tests: run pending plans, maybe killed by the fault hook.

``python -m tests.reliability.services_worker <table> <logcompaction|compaction>`` with
``MOR_STREAMER_KILL_AT_STEP=N``: the run SIGKILLs itself at its N-th I/O step, leaving
an inflight plan, markers, maybe published files, and a plan lock owned by a dead pid.
"""

from __future__ import annotations

import json
import sys

from streamer.config.policies import LogCompactionPolicy
from streamer.read import Table
from streamer.services.executor import execute_pending


def main() -> None:
    path, action = sys.argv[1:3]
    out = execute_pending(Table.open(path), action, log_policy=LogCompactionPolicy(min_blocks=3))
    print(json.dumps([o.__dict__ for o in out]))


if __name__ == "__main__":
    main()
