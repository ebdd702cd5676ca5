"""Issue 32, disk: ENOSPC in a compaction and a log compaction; nothing lost, the next run finishes.

A seeded campaign over both table services, in this process (no process start per
fault): between faults a writer keeps committing, so every fault hits a fresh plan. For
each fault the service's run is first traced on a copy of the table
(:func:`streamer.faults.record`) to learn its I/O steps; a phase is drawn from the
seed (in turn, so every claimed phase is hit at both sizes), then one of the run's steps in
that phase, where :func:`streamer.faults.fail_at` makes the real run's write fail
with ``ENOSPC`` once. Then:

* the command exits 2 with ONE ``error:`` line naming the service, the instant, the
  storage error and the file of the step where it has one - no traceback;
* no temp or staging file is left, no base file of the stopped compaction either;
* the plan is consistent: a compaction's stays requested (its partial files rolled back),
  a log compaction's is requested when nothing was written, else rolled back (gone) -
  never left inflight;
* our reader and hudi-rs both read the model (keys unique, counts equal);
* the same command without the fault completes the service (the compaction's plan, or a
  log compaction planned again) and leaves no pending instant of that kind; both readers
  read the model again.

Each fault runs through the CLI (``compact``/``log-compact``) or, for some, through the
inline services a pipeline runs after a write (:func:`run_inline_services`: its error is
the one line the CLI would print). What a step stands for (the write it precedes, or the
next write after one that completed) is in :mod:`streamer.faults`. A service's last
step (``... completed``) follows its last write, so it stands for none and is never drawn.
Smoke size: one fault per claimed phase by the CLI and one per service inline, 10 faults;
full size (``MOR_CAMPAIGN_SIZE=full``): three of each, 30 faults.

A second test keeps the disk full after the fault, so the undo's own writes fail too: the
run is left inflight beside a pending rollback, and the next runs must finish both (the
rollback first) without losing a record - also to a writer's commit after them.
"""

from __future__ import annotations

import random
import re
import shutil
import time
from collections import Counter
from pathlib import Path

import pytest

from streamer import faults
from streamer.cli import main as cli
from streamer.config.policies import (
    ArchivePolicy,
    CleanPolicy,
    CompactionPolicy,
    CompactionTrigger,
    LogCompactionPolicy,
    PoliciesConfig,
)
from streamer.errors import StreamerError
from streamer.read import Table
from streamer.services.log_compaction import plan_log_compaction
from streamer.services.runner import run_inline_services
from streamer.table.instant import Action
from tests.support import block_tables as tg
from tests.support.campaign import assert_phases_hit, seeded, sized

pytestmark = pytest.mark.campaign

SEED = 20_261_127
#: The phases (service: kind) the campaign claims, by the step label prefixes that land in
#: them. "file write": the step just before a base or log file is written (after its
#: marker); "file written": after one, standing for the next write failing; "start": after
#: the inflight instant; "plan completion": just before the completed instant.
PREFIXES: dict[str, dict[str, str]] = {
    Action.COMPACTION: {
        "compaction inflight": "start",
        "compaction marker": "file write",
        "compaction wrote": "file written",
        "compaction before complete": "plan completion",
    },
    Action.LOG_COMPACTION: {
        "logcompaction inflight": "start",
        "markers": "file write",
        "before log file": "file write",
        "after log file": "file written",
        "logcompaction before complete": "plan completion",
    },
}
PHASES = tuple(f"{action}: {kind}" for action, kinds in PREFIXES.items() for kind in dict.fromkeys(kinds.values()))
#: Faults per claimed phase, run by the CLI.
PER_PHASE = sized(smoke=1, full=3)
#: Faults per service in the inline services run after a write (a phase drawn from the seed).
INLINE_PER_SERVICE = sized(smoke=1, full=3)
COMMAND = {Action.COMPACTION: "compact", Action.LOG_COMPACTION: "log-compact"}
POLICIES = "policies:\n  log_compaction:\n    min_blocks: 3\n"
#: Bounds: commits written while waiting for a log compaction to qualify.
MAX_EXTRA_COMMITS = 8


def phase_of(action: str, label: str) -> tuple[str, str] | None:
    """(phase, prefix) of a step of ``action``'s run; ``None``: a step no fault is drawn at."""
    for prefix, kind in PREFIXES[action].items():
        if label.startswith(prefix):
            return f"{action}: {kind}", prefix
    return None


def run(capsys, args: list[str]) -> tuple[int, str]:
    capsys.readouterr()
    rc = cli(args)
    return rc, capsys.readouterr().err


def leftovers(path: Path) -> list[str]:
    """Staging files a write or a lock leaves when it stops half-way."""
    return [str(f) for f in path.rglob("*") if f.is_file()
            and (f.name.startswith("_mor_tmp.") or f.name.endswith((".tmp", ".excl")))]


def check_reads(path: str, model: tg.Model, when: str) -> None:
    """Ours and hudi-rs, each against the model: equal rows, unique keys, equal counts."""
    expected = model.snapshot()
    for name, rows in (("ours", tg.read_ours(path)), ("hudi-rs", tg.read_hudi_rs(path))):
        keys = [(r["city"], r["id"]) for r in rows]
        assert len(set(keys)) == len(keys), f"{when}: {name} reads duplicated keys"
        assert len(rows) == len(expected), f"{when}: {name} reads {len(rows)} rows, the model {len(expected)}"
        assert rows == expected, f"{when}: {name} differs from the model"


def pending(path: str, action: str) -> list:
    return [i for i in Table.open(path).timeline.pending() if i.action == action]


def inline_policies(action: str) -> PoliciesConfig:
    """Inline services after a write, the pipeline's: only ``action`` on, and always due
    (a compaction after every delta commit; a log compaction from 3 small blocks)."""
    on, off = "inline", "off"
    return PoliciesConfig(
        log_compaction=LogCompactionPolicy(mode=on if action == Action.LOG_COMPACTION else off, min_blocks=3),
        compaction=CompactionPolicy(mode=on if action == Action.COMPACTION else off,
                                    trigger=CompactionTrigger(delta_commits=1)),
        clean=CleanPolicy(mode=off), archive=ArchivePolicy(mode=off))


class Service:
    """One way to run a service: the CLI (schedule, then run the plan) or the inline
    services a pipeline runs after a write (schedule and run in one round)."""

    def __init__(self, entry: str, action: str, pol: str, capsys) -> None:
        self.entry, self.action, self.pol, self.capsys = entry, action, pol, capsys

    def prepare(self, path: str, w, gen, model, rng: random.Random) -> str | None:
        """The CLI: schedule a fresh plan (its instant). Inline: make sure one is due."""
        for _ in range(MAX_EXTRA_COMMITS):
            if self.entry == "inline":
                due = (plan_log_compaction(Table.open(path), inline_policies(self.action).log_compaction)
                       if self.action == Action.LOG_COMPACTION else True)
                if due:
                    return None
            else:
                args = ["compact", path, "--force"] if self.action == Action.COMPACTION else ["log-compact", path]
                rc, err = run(self.capsys, [*args, "--schedule", "--policies", self.pol])
                assert rc == 0, err
                plans = pending(path, self.action)
                if plans:
                    assert len(plans) == 1, plans
                    return plans[0].timestamp
            tg.step(w, gen, model, delete=rng.random() < 0.2)
        raise AssertionError(f"no {self.action} plan after {MAX_EXTRA_COMMITS} more commits")

    def run(self, path: str, *, again: bool = False) -> tuple[int, str]:
        """Exit code and standard error (inline: 2 and the message of the error it raised,
        as ``error: ...``, the way the CLI would print it). ``again``: the next run after
        a fault - the CLI's log compaction schedules too (a rolled-back plan is planned
        again); a compaction runs the plan it kept."""
        if self.entry == "inline":
            try:
                rep = run_inline_services(path, inline_policies(self.action))
            except StreamerError as e:
                return 2, f"error: {e}\n"
            assert rep.completed(self.action), f"the inline round completed no {self.action}: {rep}"
            return 0, ""
        args = [COMMAND[self.action], path, "--policies", self.pol]
        return run(self.capsys, args if again and self.action == Action.LOG_COMPACTION else [*args, "--run"])

    def trace(self, path: str, scratch: Path) -> list[str]:
        """The I/O steps of the run, on a copy of the table."""
        shutil.rmtree(scratch, ignore_errors=True)
        shutil.copytree(path, scratch)
        labels: list[str] = []
        faults.reset()
        faults.record(labels)
        try:
            rc, err = self.run(str(scratch))
        finally:
            faults.record(None)
        assert rc == 0, f"the traced run failed: {err}"
        shutil.rmtree(scratch)
        runs = [lb for lb in labels if phase_of(self.action, lb) or lb == f"{self.action} completed"]
        assert runs and labels[-1] == f"{self.action} completed", labels
        return labels


def test_enospc_in_compaction_and_log_compaction_loses_nothing_and_the_next_run_finishes(tmp_path, capsys):
    root = tmp_path
    p = str(root / "t")
    pol = str(root / "policies.yaml")
    Path(pol).write_text(POLICIES)
    hit: list[str] = []
    entries: list[tuple[str, str]] = []
    log: list[str] = []
    started = time.monotonic()
    with seeded(SEED) as seed:
        rng = random.Random(seed)
        w, gen, model = tg.build(p, 4, seed=seed)
        plan = [("cli", ph) for ph in PHASES for _ in range(PER_PHASE)]
        plan += [("inline", rng.choice([ph for ph in PHASES if ph.startswith(f"{a}:")]))
                 for a in PREFIXES for _ in range(INLINE_PER_SERVICE)]
        rng.shuffle(plan)
        for n, (entry, wanted) in enumerate(plan, 1):
            action = wanted.split(":", 1)[0]
            svc = Service(entry, action, pol, capsys)
            for _ in range(rng.randint(1, 3)):  # fresh writes: every fault hits a fresh plan
                tg.step(w, gen, model, delete=rng.random() < 0.2)
            ts = svc.prepare(p, w, gen, model, rng)
            trace = svc.trace(p, root / "scratch")
            steps = [(i, phase_of(action, lb)) for i, lb in enumerate(trace)]
            at, (phase, prefix) = rng.choice([(i, pp) for i, pp in steps if pp is not None and pp[0] == wanted])
            nth = sum(1 for lb in trace[:at + 1] if lb.startswith(prefix))

            # the faulted run
            faults.reset()
            faults.fail_at(nth, label=prefix)
            try:
                rc, err = svc.run(p)
                fired = faults.injected()
            finally:
                faults.reset()
            what = f"fault {n} ({entry}, {phase}, step {at + 1} of {len(trace)}, {prefix!r} #{nth})"
            assert len(fired) == 1 and fired[0].startswith(prefix), f"{what}: the fault fired at {fired}"
            label = fired[0]
            hit.append(phase)
            entries.append((entry, action))
            assert rc == 2, f"{what}: exit {rc}; {err}"
            lines = [ln for ln in err.strip().splitlines() if ln.startswith("error:")]
            assert len(lines) == 1, f"{what}: expected one error line: {err}"
            assert "Traceback" not in err, f"{what}: {err}"
            line = lines[0]
            stopped = re.search(rf"\b{action} (\d+) stopped: No space left on device \(injected\)", line)
            assert stopped, f"{what}: the error does not name the service, its instant and the error: {line}"
            assert ts is None or stopped.group(1) == ts, f"{what}: the error names another instant than {ts}: {line}"
            ts = stopped.group(1)
            log.append(f"{what}, plan {ts}: {label}\n    {line}")
            named = label.rsplit(" ", 1)[-1]
            if "." in named:  # the step names a file: so does the error
                assert named in line, f"{what}: the error does not name {named}: {line}"
            assert not leftovers(Path(p)), f"{what}: staging files left: {leftovers(Path(p))}"
            t = Table.open(p)
            cur = t.timeline.get(ts)
            if action == Action.COMPACTION:
                assert cur is not None and cur.is_requested, f"{what}: the plan is {cur}, not requested"
                partial = [f.name for f in Path(p).rglob(f"*_{ts}.parquet")]
                assert not partial, f"{what}: base files of the stopped compaction left: {partial}"
            else:
                assert cur is None or cur.is_requested, f"{what}: the log compaction is {cur}"
            check_reads(p, model, f"{what}, stopped")

            # the next run, fault gone: the service completes
            rc, err = svc.run(p, again=True)
            assert rc == 0 and "error:" not in err, f"{what}: the next run failed: {err}"
            t = Table.open(p)
            assert not [i for i in t.timeline.pending() if i.action == action], \
                f"{what}: pending after the next run: {t.timeline.pending()}"
            done = [i for i in t.timeline.completed() if i.pending_action == action]
            if cur is not None:  # the plan kept: it is what completed
                assert t.timeline.get(ts) is not None and t.timeline.get(ts).is_completed, f"{what}: {ts} not done"
            else:  # rolled back: the groups were planned again and stitched
                assert done and done[-1].timestamp > ts, f"{what}: no {action} completed after {ts}"
            check_reads(p, model, f"{what}, next run")
        print(f"{len(hit)} faults in {time.monotonic() - started:.1f} s:", *log, sep="\n  ")
        assert len(hit) == len(plan) >= sized(smoke=len(PHASES) + 2, full=max(10, 3 * len(PHASES)))
        counts = assert_phases_hit(PHASES, hit, what="ENOSPC faults")
        by_entry = Counter(entries)
        assert all(by_entry[(e, a)] for e in ("cli", "inline") for a in PREFIXES), by_entry
        print("phases hit:", dict(counts), "by entry:", dict(by_entry))


@pytest.mark.parametrize(("action", "prefix"), [
    (Action.COMPACTION, "compaction marker"),
    (Action.COMPACTION, "compaction before complete"),
    (Action.LOG_COMPACTION, "after log file"),
    (Action.LOG_COMPACTION, "logcompaction before complete"),
])
def test_a_disk_still_full_for_the_undo_loses_nothing_and_the_next_runs_finish(tmp_path, capsys, action, prefix):
    """The disk stays full (every write from the fault on fails): the undo's rollback fails
    too and stays pending beside the inflight run. With room again, the next run finishes
    that rollback before the plan runs again - a new rollback instead would leave the old
    one pending, and the writer resuming it after the compaction completed (same process,
    same file names) deleted the compaction's base files: a table that no longer read. A
    log compaction's groups are stitched by the run after (the first one finishes the
    rollback; its schedule came first, while the groups were still in the dead plan)."""
    p = str(tmp_path / "t")
    pol = str(tmp_path / "policies.yaml")
    Path(pol).write_text(POLICIES)
    w, gen, model = tg.build(p, 6)
    svc = Service("cli", action, pol, capsys)
    ts = svc.prepare(p, w, gen, model, random.Random(0))
    faults.reset()
    faults.fail_at(label=prefix, times=10_000)
    try:
        rc, err = svc.run(p)
        fired = faults.injected()
    finally:
        faults.reset()  # room again
    assert rc == 2 and len(fired) >= 2 and fired[0].startswith(prefix), (rc, fired, err)
    lines = [ln for ln in err.strip().splitlines() if ln.startswith("error:")]
    assert len(lines) == 1 and "Traceback" not in err, err
    assert f"{action} {ts} stopped: No space left on device" in lines[0] and "left inflight" in lines[0], lines[0]
    assert not leftovers(Path(p)), leftovers(Path(p))
    t = Table.open(p)
    assert t.timeline.get(ts).is_inflight
    assert [i.action for i in t.timeline.pending() if i.action == Action.ROLLBACK] == [Action.ROLLBACK]
    check_reads(p, model, "the disk still full")

    for _ in range(2 if action == Action.LOG_COMPACTION else 1):
        rc, err = svc.run(p, again=True)
        assert rc == 0 and "error:" not in err, err
    t = Table.open(p)
    assert not [i for i in t.timeline.pending() if i.action in (action, Action.ROLLBACK)], t.timeline.pending()
    if action == Action.COMPACTION:
        assert t.timeline.get(ts).is_completed
    else:
        assert t.timeline.get(ts) is None
        assert [i for i in t.timeline.completed() if i.pending_action == action and i.timestamp > ts]
    check_reads(p, model, "the next runs")
    tg.step(w, gen, model)  # a writer commit: resumes any rollback still pending
    check_reads(p, model, "a write after")
