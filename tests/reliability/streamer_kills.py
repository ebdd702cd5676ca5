"""Shared parts of the ``kill -9`` campaigns over ``streamer run`` (files or Kafka sources).

* :class:`Kill`: one planned kill - its kind (``startup``, ``standby``, ``takeover``,
  ``outside``, ``inside``) and, for ``inside``, the I/O step label it dies at
  (``MOR_STREAMER_KILL_AT_LABEL``) or a seeded step number (``MOR_STREAMER_KILL_AT_STEP``);
* :class:`Run`: one ``streamer run FILE --standby`` process, from spawn to SIGKILL, with
  the phase it died in (from its own I/O step trace, ``MOR_STREAMER_TRACE_STEPS``, and
  whether it held the pipeline lease) and whether the kill went as planned;
* :func:`campaign`: spawn runs per a seeded plan, keep a hot standby queued behind the
  active process, kill each one once, bounded in count and time; :func:`steered` tops a
  campaign up with steered kills for every claimed phase it missed (bounded);
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
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

import pytest

from streamer.faults import ENV_KILL_AT, ENV_KILL_AT_LABEL, ENV_TRACE
from streamer.sources.position import FileListPosition
from tests.support.readers import hudi_rs_table

STREAMER = str(Path(sys.executable).with_name("streamer"))
FAST_JVM = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"

# The phases a kill can land in (what :attr:`Run.where` says).
STARTUP = "startup (interpreter / JVM / session)"
STANDBY = "standby (waiting for the lease)"
TAKEOVER = "takeover (took the lease over, nothing written yet)"
FIRST = "active, nothing written yet"
BETWEEN = "between writes (reading / transforming / waiting)"
COMMIT = "commit"
ROLLBACK = "rollback of a dead writer's commit"


def service(action: str) -> str:
    return f"service: {action}"


#: I/O step labels (prefixes, ``MOR_STREAMER_KILL_AT_LABEL``) that land a kill in a phase;
#: a steered kill draws one of them from the seed. ``... completed`` steps are not here:
#: a process that finished a step is between writes.
LABELS: dict[str, tuple[str, ...]] = {
    COMMIT: ("requested", "inflight", "partition metadata", "before complete"),
    ROLLBACK: ("rollback",),
    service("compaction"): ("compaction inflight", "compaction marker", "compaction wrote"),
    service("logcompaction"): ("logcompaction inflight",),
    service("clean"): ("clean requested", "clean delete"),
    service("archive"): ("archive written",),
}


def java_options() -> str:
    """Driver JVM options for the processes: quick start, the project's quiet log4j config."""
    log4j = resources.files("streamer.resources").joinpath("log4j2.properties")
    return f"{FAST_JVM} -Dlog4j2.configurationFile=file:{log4j}"


def phase_of(trace: list[str]) -> str:
    """What an active process was doing when it died, from its I/O step trace (newest last)."""
    if not trace:
        return FIRST
    last = trace[-1]
    if last == "completed" or last.endswith(" completed") or last.startswith("archive removed"):
        return BETWEEN
    if last.startswith("rollback"):
        return ROLLBACK
    for action in ("logcompaction", "compaction", "clean", "archive"):
        if last.startswith(action):
            return service(action)
    # a write step (markers, log or base files, partition metadata, before complete): a
    # data/error commit, unless a service's execution is the newest thing that started
    for label in reversed(trace):
        if label == "requested":
            return COMMIT
        for action in ("logcompaction", "compaction"):
            if label == f"{action} inflight":
                return service(action)
            if label == f"{action} completed":
                return COMMIT
    return COMMIT


@dataclass(frozen=True)
class Kill:
    """One planned kill.

    * ``startup``: a seeded delay (under the time a JVM takes to start) after spawn;
    * ``standby``: while it waits for the lease (a seeded delay after it says so);
    * ``takeover``: as soon as it holds the lease, before it wrote anything;
    * ``outside``: a seeded delay after its first commit, between two writes;
    * ``inside``: by the fault hook at ``label`` (a step label prefix), or at a seeded
      step number when ``label`` is None. A run that commits ``patience`` times without
      reaching its label is killed from outside (a miss, counted against the campaign).
    """

    kind: str
    label: str | None = None
    expect: str | None = None  # the phase the kill is meant for (steered inside kills)

    def __str__(self) -> str:
        return self.kind if self.label is None else f"{self.kind}@{self.label}"


def steer(phase: str, rng: random.Random) -> Kill:
    """An inside kill that lands in ``phase``: a label of that phase drawn from ``rng``."""
    return Kill("inside", rng.choice(LABELS[phase]), expect=phase)


#: Kills that need no I/O step: the phase each kind is for.
KIND_PHASE = {"startup": STARTUP, "standby": STANDBY, "takeover": TAKEOVER, "outside": BETWEEN}


@dataclass
class Run:
    """One ``streamer run`` process."""

    index: int
    kill_plan: Kill
    label: str
    delay_s: float
    kill_at: int | None
    proc: subprocess.Popen
    trace_path: Path
    lease_path: Path
    patience: int
    started: float = field(default_factory=time.monotonic)
    lines: list[str] = field(default_factory=list)
    first_commit: float | None = None
    waiting_since: float | None = None
    active_since: float | None = None
    between_since: float | None = None
    phase: str | None = None
    how: str = "outside"
    stalled: bool = False
    killed_after_s: float | None = None

    def __post_init__(self) -> None:
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line.rstrip())
            if "| deltacommit" in line and self.first_commit is None:
                self.first_commit = time.monotonic()
            if "standby: waiting" in line and self.waiting_since is None:
                self.waiting_since = time.monotonic()

    @property
    def kind(self) -> str:
        return self.kill_plan.kind

    def trace(self) -> list[str]:
        with contextlib.suppress(FileNotFoundError):
            return [ln.split("\t", 1)[1] for ln in self.trace_path.read_text().splitlines() if "\t" in ln]
        return []

    @property
    def commits(self) -> int:
        return sum("| deltacommit" in line for line in self.lines)

    @property
    def took_over(self) -> bool:
        return any("took over the lease" in x for x in self.lines)

    def holds_lease(self) -> bool:
        with contextlib.suppress(OSError, ValueError, KeyError, TypeError):
            return json.loads(self.lease_path.read_text())["pid"] == self.proc.pid
        return False

    def due(self, now: float, stall_s: float, hold: bool = False) -> bool:
        """Whether the controller kills it now (inside kills kill themselves). ``hold``: the
        standby behind it is not waiting yet, so an outside kill waits for it (else the
        standby could take the lease before its own kill, and runs leave the plan's order)."""
        if self.active_since is None and self.holds_lease():
            self.active_since = now
        if self.active_since is not None and now - self.active_since >= stall_s:
            self.stalled = True  # active all that time and its kill never came: no progress
            return True
        kind = self.kind
        if kind == "startup":
            return now >= self.started + self.delay_s
        if kind == "standby" and self.active_since is None:
            return self.waiting_since is not None and now >= self.waiting_since + self.delay_s
        if kind == "takeover" and self.active_since is not None:
            return True
        if kind == "inside":
            return self.commits >= self.patience  # its step never came
        if self.first_commit is None or now < self.first_commit + self.delay_s or hold:
            return False
        # outside (or a standby/takeover kill that missed): between two writes, if one comes
        if phase_of(self.trace()) == BETWEEN:
            return True
        self.between_since = self.between_since or now
        return now >= self.between_since + 10.0

    def kill(self) -> None:
        """SIGKILL the whole process group (python and its Spark JVM); note the phase."""
        if self.proc.poll() is None:
            active = self.holds_lease()
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=30)
            self.how = "stalled" if self.stalled else ("inside step not reached, outside"
                                                        if self.kind == "inside" else "outside")
            if active:
                self.phase = phase_of(self.trace())  # the trace is final now
                if self.phase == FIRST and self.took_over:
                    self.phase = TAKEOVER
            elif self.waiting_since is not None:
                self.phase = STANDBY
            else:
                self.phase = STARTUP
        else:  # the fault hook killed it at its step
            self.how = f"inside at {self.kill_plan.label or f'step {self.kill_at}'}"
            self.phase = phase_of(self.trace())
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)  # its JVM, if still around
            self.proc.wait(timeout=30)
        self.killed_after_s = round(time.monotonic() - self.started, 1)

    @property
    def where(self) -> str:
        return self.phase or "?"

    @property
    def as_planned(self) -> bool:
        """Whether the kill landed where its plan meant it to."""
        if self.stalled:
            return False
        plan = self.kill_plan
        if plan.kind == "inside":
            return self.how.startswith("inside at") and (plan.expect is None or self.where == plan.expect)
        if plan.kind == "outside":
            return self.commits >= 1
        return self.where == KIND_PHASE[plan.kind]

    def describe(self) -> str:
        trace = self.trace()
        return (f"run {self.index} [{self.kill_plan}] {self.label} pid {self.proc.pid}: "
                f"{'active' if self.holds_lease() else 'not active'}, {self.commits} commits, "
                f"last step {trace[-1] if trace else None!r}, phase {self.phase}")

    def tail(self) -> str:
        return "\n".join(self.lines[-25:])


def spawn(index: int, kill: Kill, rng: random.Random, cmd: list[str], label: str, workdir: Path,
          lease_path: Path, *, max_step: int = 50, patience: int = 12) -> Run:
    """Start ``streamer <cmd> --standby`` with a step trace and, for ``inside``, its kill step."""
    traces = workdir / "traces"
    traces.mkdir(exist_ok=True)
    trace = traces / f"run{index:03d}.steps"
    env = dict(os.environ, **{ENV_TRACE: str(trace)})
    env.pop(ENV_KILL_AT, None)
    env.pop(ENV_KILL_AT_LABEL, None)
    kill_at = None
    if kill.kind == "inside":
        if kill.label is None:
            kill_at = rng.randint(2, max_step)  # the N-th I/O step of its error, data and service writes
            env[ENV_KILL_AT] = str(kill_at)
        else:
            env[ENV_KILL_AT_LABEL] = kill.label
    # startup: under the time an interpreter and a JVM take to come up; others: after their cue
    delay = rng.uniform(0.2, 1.5) if kill.kind == "startup" else rng.uniform(0.0, 2.0)
    proc = subprocess.Popen(
        [STREAMER, *cmd, "--standby"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        text=True, env=env, cwd=workdir, start_new_session=True,
    )
    return Run(index, kill, label, delay, kill_at, proc, trace, lease_path, patience)


#: What PySpark's accumulator server prints (in the block socketserver's ``handle_error``
#: opens with the line below) when a connection brings another driver's token: the JVM of a
#: run SIGKILLed a moment before (an inside kill ends the Python driver alone) still sending
#: a task's accumulator updates to the port this run's server was given since. Not an error
#: of this run; seen once in a clean-clone CI run of the CDC kill campaign.
_FOREIGN_BLOCK_START = "Exception occurred during processing of request from"
_STALE_ACCUMULATOR_TOKEN = "The value of the provided token to the AccumulatorServer is not correct"


def own_lines(lines: Sequence[str]) -> list[str]:
    """A run's output without PySpark's report of a stale accumulator connection (above)."""
    out: list[str] = []
    block: list[str] | None = None
    for line in lines:
        if line.startswith(_FOREIGN_BLOCK_START):
            block = [line]
        elif block is None:
            out.append(line)
        else:
            block.append(line)
            if line.startswith("-" * 40):
                if not any(_STALE_ACCUMULATOR_TOKEN in x for x in block):
                    out.extend(block)
                block = None
    out.extend(block or [])
    return out


def campaign(plan: Sequence[Kill], start: Callable[[int, Kill], Run], *, limit_s: float, first_index: int = 0,
             stall_s: float = 600.0, log: Callable[[str], None] | None = None) -> list[Run]:
    """Spawn one run per entry of ``plan`` in order and SIGKILL each once; returns them all.

    Two non-startup runs are alive at once: the active one and the hot standby behind it
    (spawned once the one before it holds the lease; an outside kill of the active one
    waits until the standby says it is waiting), which takes the lease over when it
    dies - so runs become active in the plan's order, and the run after a kill in a commit
    is the one that rolls it back (a plan puts a ``rollback`` kill there). One ``startup`` run at
    a time comes on top (it dies before its JVM is up, so it never takes the lease).
    Every run must die by SIGKILL: one that exits by itself, or prints a traceback, fails
    the campaign. A run active for ``stall_s`` without its kill coming (no progress to
    its kill point) is killed and marked stalled, a miss. ``limit_s`` guards against a
    hang only: past it the campaign fails saying what every live run was doing.
    """
    runs: list[Run] = []
    alive: list[Run] = []
    t0 = time.monotonic()
    try:
        while len(runs) < len(plan) or alive:
            now = time.monotonic()
            if now - t0 > limit_s:
                pytest.fail(f"kill campaign still running after {limit_s:.0f} s (a hang guard); live runs:\n"
                            + "\n".join(f"  {r.describe()}\n    " + r.tail().replace("\n", "\n    ") for r in alive)
                            + f"\ndone: {[(r.index, str(r.kill_plan), r.phase) for r in runs if r not in alive]}")
            while len(runs) < len(plan):
                kill = plan[len(runs)]
                same = [r for r in alive if (r.kind == "startup") == (kill.kind == "startup")]
                if len(same) >= (1 if kill.kind == "startup" else 2):
                    break
                if kill.kind != "startup" and same and same[0].active_since is None:
                    break  # the standby is spawned once the run before it is active: order is the plan's
                runs.append(start(first_index + len(runs), kill))
                alive.append(runs[-1])
            hold = any(r.kind != "startup" and r.active_since is None and r.waiting_since is None for r in alive)
            for run in list(alive):
                if run.proc.poll() is None and not run.due(now, stall_s, hold):
                    continue
                run.kill()
                alive.remove(run)
                if log is not None:
                    first = None if run.first_commit is None else round(run.first_commit - run.started, 1)
                    log(f"[{time.monotonic() - t0:6.1f}s] run {run.index:2d} {run.label} {str(run.kill_plan):28s} "
                        f"alive {run.killed_after_s}s (first commit at {first}s, {run.commits} commits): "
                        f"{run.how}: {run.phase}{'' if run.as_planned else '  [missed]'}")
                assert run.proc.returncode == -signal.SIGKILL, (
                    f"run {run.index} exited by itself ({run.proc.returncode}):\n{run.tail()}"
                )
                assert not any("Traceback" in x or x.startswith("error:") or " error: " in x
                               for x in own_lines(run.lines)), run.tail()
            time.sleep(0.05)
    finally:
        for run in alive:
            run.kill()
    return runs


def steered(runs: list[Run], claimed: Sequence[str], start: Callable[[int, Kill], Run], rng: random.Random, *,
            limit_s: float, rounds: int = 2, log: Callable[[str], None] | None = None) -> list[Run]:
    """Top a campaign up until every claimed phase was hit: for each one missing, a steered
    kill (a rollback kill comes after a kill in a commit, so there is one to roll back);
    at most ``rounds`` rounds. Returns all runs; the caller asserts the phases."""
    for _ in range(rounds):
        hit = {r.where for r in runs}
        missing = [p for p in claimed if p not in hit]
        if not missing:
            break
        plan: list[Kill] = []
        for phase in missing:
            if phase == ROLLBACK:
                plan += [Kill("outside"), Kill("inside", "before complete", expect=COMMIT), steer(ROLLBACK, rng)]
            elif phase in LABELS:
                plan.append(steer(phase, rng))
            elif phase in (TAKEOVER, STANDBY):  # behind a holder killed from outside (it waits for them)
                plan += [Kill("outside"), Kill("takeover" if phase == TAKEOVER else "standby")]
            else:
                plan.append(Kill(next(k for k, p in KIND_PHASE.items() if p == phase)))
        if log is not None:
            log(f"topping up for {missing}: {[str(k) for k in plan]}")
        runs = runs + campaign(plan, start, limit_s=limit_s, first_index=len(runs), log=log)
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
    table = hudi_rs_table(path)
    return table.to_pylist() if table is not None else []
