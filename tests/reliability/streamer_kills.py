"""Shared parts of the ``kill -9`` campaigns over ``streamer run`` with files sources.

* :class:`Run`: one ``streamer run FILE --standby`` process, from spawn to SIGKILL, with
  the phase it died in (from its own I/O step trace, ``MOR_STREAMER_TRACE_STEPS``, and
  whether it held the pipeline lease);
* :func:`campaign`: spawn runs per a seeded plan of kill kinds, keep hot standbys
  queued behind the active process, kill each one once, bounded in count and time;
* :func:`assert_rows_committed_once`: the exactly-once audit of a files source (every
  row carries the commit time of the one commit whose position first covers its file);
* :func:`read_hudi_rs`: every row as hudi-rs reads it.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

from sources.position import FileListPosition
from streamer.write.faults import ENV_KILL_AT, ENV_TRACE

STREAMER = str(Path(sys.executable).with_name("streamer"))
FAST_JVM = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"


def java_options() -> str:
    """Driver JVM options for the processes: quick start, the project's quiet log4j config."""
    log4j = resources.files("streamer.resources").joinpath("log4j2.properties")
    return f"{FAST_JVM} -Dlog4j2.configurationFile=file:{log4j}"


def phase_of(trace: list[str]) -> str:
    """What a process was doing when it died, from its I/O step trace (newest step last)."""
    if not trace:
        return "before any write"
    last = trace[-1]
    if last == "completed" or last.endswith(" completed") or last.startswith("archive removed"):
        return "between writes (reading / transforming / waiting)"
    if last.startswith("rollback"):
        return "rollback of a dead writer's commit"
    for action in ("logcompaction", "compaction", "clean", "archive"):
        if last.startswith(action):
            return f"service: {action}"
    # a write step (markers, log or base files, partition metadata, before complete): a
    # data/error commit, unless a service's execution is the newest thing that started
    for label in reversed(trace):
        if label == "requested":
            return "commit"
        for action in ("logcompaction", "compaction"):
            if label == f"{action} inflight":
                return f"service: {action}"
            if label == f"{action} completed":
                return "commit"
    return "commit"


@dataclass
class Run:
    """One ``streamer run`` process; ``kind``: startup | outside | inside (see :func:`campaign`)."""

    index: int
    kind: str
    label: str
    delay_s: float
    kill_at: int | None
    proc: subprocess.Popen
    trace_path: Path
    lease_path: Path
    inside_patience_s: float
    started: float = field(default_factory=time.monotonic)
    lines: list[str] = field(default_factory=list)
    first_batch: float | None = None
    phase: str | None = None
    killed_after_s: float | None = None

    def __post_init__(self) -> None:
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line.rstrip())
            if "] batch " in line and self.first_batch is None:
                self.first_batch = time.monotonic()

    def trace(self) -> list[str]:
        with contextlib.suppress(FileNotFoundError):
            return [ln.split("\t", 1)[1] for ln in self.trace_path.read_text().splitlines() if "\t" in ln]
        return []

    @property
    def commits(self) -> int:
        return sum("| deltacommit" in line for line in self.lines)

    def holds_lease(self) -> bool:
        with contextlib.suppress(OSError, ValueError, KeyError, TypeError):
            return json.loads(self.lease_path.read_text())["pid"] == self.proc.pid
        return False

    def due(self) -> bool:
        now = time.monotonic()
        if self.kind == "startup":
            return now >= self.started + self.delay_s
        if self.first_batch is None:
            return False
        if self.kind == "outside":
            return now >= self.first_batch + self.delay_s
        return now >= self.first_batch + self.inside_patience_s  # its step never came

    def kill(self) -> None:
        """SIGKILL the whole process group (python and its Spark JVM); note the phase."""
        if self.proc.poll() is None:
            active = self.holds_lease()
            trace = self.trace()
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            if active:
                phase = phase_of(trace)
            elif any("standby: waiting" in x for x in self.lines):
                phase = "standby (waiting for the lease)"
            else:
                phase = "startup (interpreter / JVM / session)"
            how = "inside step not reached, outside" if self.kind == "inside" else "outside"
            self.phase = f"{how}: {phase}"
        else:  # the fault hook killed it at its step
            self.phase = f"inside at step {self.kill_at}: {phase_of(self.trace())}"
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)  # its JVM, if still around
        self.proc.wait(timeout=30)
        self.killed_after_s = round(time.monotonic() - self.started, 1)

    @property
    def where(self) -> str:
        """The phase without how it was killed."""
        return (self.phase or "?").split(": ", 1)[-1]

    def tail(self) -> str:
        return "\n".join(self.lines[-25:])


def spawn(index: int, kind: str, rng: random.Random, cmd: list[str], label: str, workdir: Path,
          lease_path: Path, *, max_step: int = 50, inside_patience_s: float = 10.0) -> Run:
    """Start ``streamer <cmd> --standby`` with a step trace and, for ``inside``, a kill step."""
    traces = workdir / "traces"
    traces.mkdir(exist_ok=True)
    trace = traces / f"run{index:03d}.steps"
    env = dict(os.environ, **{ENV_TRACE: str(trace)})
    env.pop(ENV_KILL_AT, None)
    kill_at = None
    if kind == "inside":
        kill_at = rng.randint(2, max_step)  # the N-th I/O step of its error, data and service writes
        env[ENV_KILL_AT] = str(kill_at)
    delay = rng.uniform(0.3, 3.5) if kind == "startup" else rng.uniform(0.0, 3.0)
    proc = subprocess.Popen(
        [STREAMER, *cmd, "--standby"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        text=True, env=env, cwd=workdir, start_new_session=True,
    )
    return Run(index, kind, label, delay, kill_at, proc, trace, lease_path, inside_patience_s)


def campaign(kinds: list[str], start: Callable[[int, str], Run], *, in_flight: int, limit_s: float,
             log: Callable[[str], None] | None = None) -> list[Run]:
    """Spawn one run per entry of ``kinds`` and SIGKILL each once; returns them all.

    ``in_flight`` outside/inside runs are alive at once (the active one and hot standbys
    behind it, which take the lease over when it dies); one ``startup`` run at a time
    comes on top. Every run must die by SIGKILL: one that exits by itself, or prints a
    traceback, fails the campaign. ``limit_s`` only guards against a hang.
    """
    runs: list[Run] = []
    alive: list[Run] = []
    t0 = time.monotonic()
    try:
        while len(runs) < len(kinds) or alive:
            assert time.monotonic() - t0 < limit_s, (
                f"kill campaign hung over {limit_s}s: {[(r.index, r.kind, r.phase) for r in runs]}"
            )
            while len(runs) < len(kinds):
                kind = kinds[len(runs)]
                same = [r for r in alive if (r.kind == "startup") == (kind == "startup")]
                if len(same) >= (1 if kind == "startup" else in_flight):
                    break
                runs.append(start(len(runs), kind))
                alive.append(runs[-1])
            for run in list(alive):
                if run.proc.poll() is None and not run.due():
                    continue
                run.kill()
                alive.remove(run)
                if log is not None:
                    first = None if run.first_batch is None else round(run.first_batch - run.started, 1)
                    log(f"[{time.monotonic() - t0:6.1f}s] run {run.index:2d} {run.label} {run.kind:7s} alive "
                        f"{run.killed_after_s}s (first batch at {first}s, {run.commits} commits): {run.phase}")
                assert run.proc.returncode == -signal.SIGKILL, (
                    f"run {run.index} exited by itself ({run.proc.returncode}):\n{run.tail()}"
                )
                assert not any("Traceback" in x or x.startswith("error:") or " error: " in x for x in run.lines), run.tail()
            time.sleep(0.05)
    finally:
        for run in alive:
            run.kill()
    return runs


# ---------------------------------------------------------------------------- audits
def covers(position: FileListPosition, path: str, mtime_ns: int) -> bool:
    """Whether a stored files position has the file behind it (taken, or older than the watermark)."""
    return path in position.files or mtime_ns < position.watermark_ns


def assert_rows_committed_once(table_path: str, pipeline: str, rows: list[dict],
                               file_of: Callable[[dict], tuple[str, int]], *, complete_history: bool) -> int:
    """Every row carries the commit time of the first commit of ``pipeline`` whose position
    covers the file the row's latest version came from. A batch written twice (a pipeline
    resuming from an older position, or from another pipeline's) would have rewritten its
    rows under a later commit. ``complete_history=False``: the oldest active commit may
    stand for archived ones; rows it covers are not audited. Returns the rows audited."""
    from streamer.fs import resolve
    from streamer.pipeline.checkpoint import checkpoint_history

    fs, base = resolve(table_path)
    history = checkpoint_history(fs, base, pipeline=pipeline)
    assert history, f"no checkpoint of {pipeline} in {table_path}"
    previous: FileListPosition | None = None
    for h in history:
        pos = h.position
        assert isinstance(pos, FileListPosition), h
        if previous is not None:
            assert pos.watermark_ns >= previous.watermark_ns, f"{pipeline}: position went back at {h.instant}"
            assert pos != previous, f"{pipeline}: commit {h.instant} repeats the previous position"
        previous = pos
    audited = 0
    for row in rows:
        path, mtime = file_of(row)
        owner = next((h for h in history if covers(h.position, path, mtime)), None)
        assert owner is not None, f"{pipeline}: no commit covers {path} (row {row['id']})"
        if not complete_history and owner is history[0]:
            continue
        assert row["_hoodie_commit_time"] == owner.instant, (
            f"{pipeline}: row {row['id']} from {path} was committed by {row['_hoodie_commit_time']}, "
            f"but the commit whose position first covers its file is {owner.instant}"
        )
        audited += 1
    return audited


def read_hudi_rs(path: str) -> list[dict]:
    import hudi
    import pyarrow as pa

    batches = hudi.HudiTableBuilder.from_base_uri(path).build().read()
    return pa.Table.from_batches(batches).to_pylist() if batches else []
