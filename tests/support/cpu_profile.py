"""CPU seconds per test, for finding where a 2-core suite's time goes.

Enabled by ``MOR_TEST_CPU=<file prefix>``: each pytest process (each xdist worker) appends
``nodeid<TAB>wall_s<TAB>cpu_s`` per test (setup, call and teardown together) to
``<prefix>.<worker>.tsv``. The CPU is that of the pytest process and every live process
below it (a Spark JVM, a broker, a ``streamer run`` child), plus what their reaped
children used: on two shared cores, CPU seconds say what wall time cannot.
"""

from __future__ import annotations

import ctypes
import os
import time
from pathlib import Path

import pytest

ENV = "MOR_TEST_CPU"
_PR_SET_CHILD_SUBREAPER = 36
_TICK = os.sysconf("SC_CLK_TCK")


def _stats() -> dict[int, tuple[int, int]]:
    """pid -> (ppid, utime + stime + cutime + cstime in ticks) of every live process."""
    out: dict[int, tuple[int, int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            raw = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        fields = raw[raw.rindex(")") + 2:].split()
        out[int(entry)] = (int(fields[1]), sum(int(f) for f in fields[11:15]))
    return out


def tree_cpu_s(root: int) -> float:
    """CPU seconds used by ``root`` and its live descendants (and their reaped children)."""
    stats = _stats()
    children: dict[int, list[int]] = {}
    for pid, (ppid, _) in stats.items():
        children.setdefault(ppid, []).append(pid)
    total, todo = 0, [root]
    while todo:
        pid = todo.pop()
        total += stats.get(pid, (0, 0))[1]
        todo.extend(children.get(pid, ()))
    return total / _TICK


class CpuProfile:
    """A pytest plugin: one line per test to ``path``."""

    def __init__(self, path: Path) -> None:
        self.path = path

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(self, item, nextitem):  # noqa: ARG002 - the hook's signature
        wall, cpu = time.perf_counter(), tree_cpu_s(os.getpid())
        yield
        line = f"{item.nodeid}\t{time.perf_counter() - wall:.2f}\t{tree_cpu_s(os.getpid()) - cpu:.2f}\n"
        with self.path.open("a") as f:
            f.write(line)


def register(config) -> None:
    prefix = os.environ.get(ENV)
    if not prefix:
        return
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    # A subreaper: the JVM of a killed ``streamer run`` (or a server whose parent died) is
    # re-parented here instead of to init, so its CPU is still counted below this process
    # (a zombie's /proc entry keeps its final times until it is reaped).
    ctypes.CDLL(None).prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    config.pluginmanager.register(CpuProfile(Path(f"{prefix}.{worker}.tsv")), "mor-cpu-profile")
