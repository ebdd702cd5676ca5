"""Issue 32, the clock campaign: a wall clock that steps back never yields an instant time
at or before the table's last instant, and no record is lost or duplicated.

An in-process writer (two handles on one table, as two processes would hold) commits a
model's batches; table services run through their normal entry points (the writer's
inline services round and the CLI: log compaction, compaction, clean, archive); a write
now and then dies before completing, so the next commit rolls it back. Meanwhile the
injected clock (:func:`streamer.table.instant.wall_clock`) steps back by seeded amounts -
milliseconds to hours, sometimes to before the table's first instant - between
operations and inside them (at the first or second instant an operation makes: a
commit's rollback then its deltacommit, a services round's log compaction then its
compaction...), and now and then the in-process floor is reset (a new process).

Every requested instant is checked as it is written: strictly after every instant on the
timeline at that moment, and after every instant written before it (all actions). At the
end the snapshot equals the model by our reader and by hudi-rs, keys and counts alike.

Some rounds interleave another writer with a service (:class:`Interleave`): writer B
commits while log compaction or clean plans, then the clock steps back and the floor is
reset - the service must still make its instant after B's (it holds the writers' lock).

Sizes: smoke (``make test``) runs 24 rounds and asserts at least 15 step-backs (seed
32032: 32, ~25 s); full (``MOR_CAMPAIGN_SIZE=full``) runs 150 rounds and asserts at least
100 (seed 32032: 198, ~2 min).
"""

from __future__ import annotations

import datetime as dt
import os
import random
import threading
import traceback
from collections import Counter
from dataclasses import dataclass, field

import pytest

import streamer.table.instant as instant_mod
import streamer.table.timeline as timeline_mod
from streamer import cli
from streamer.config.policies import (
    ArchivePolicy,
    CleanPolicy,
    CompactionPolicy,
    CompactionTrigger,
    LogCompactionPolicy,
    PoliciesConfig,
)
from streamer.services import clean as clean_mod
from streamer.services import log_compaction as lc_mod
from streamer.services.runner import run_inline_services
from streamer.table.instant import (
    Action,
    format_instant_time,
    parse_instant_time,
    parse_timeline_file,
)
from streamer.table.timeline import Timeline
from tests.support import block_tables as tg
from tests.support.campaign import assert_phases_hit, seeded, sized
from tests.support.failed_write import fail_before_complete

pytestmark = [pytest.mark.campaign]

SEED = 32_032
ROUNDS = sized(smoke=24, full=150)
MIN_STEP_BACKS = sized(smoke=15, full=100)
UTC = dt.timezone.utc

#: Step-back sizes: (name, smallest, largest); ``before_first`` goes back to before the
#: table's first instant (by up to a year).
AMOUNTS = (
    ("ms", dt.timedelta(milliseconds=1), dt.timedelta(milliseconds=999)),
    ("seconds", dt.timedelta(seconds=1), dt.timedelta(seconds=59)),
    ("minutes", dt.timedelta(minutes=1), dt.timedelta(minutes=59)),
    ("hours", dt.timedelta(hours=1), dt.timedelta(hours=12)),
    ("before_first", None, None),
)
POLICIES = PoliciesConfig(
    log_compaction=LogCompactionPolicy(mode="inline", min_blocks=2),
    compaction=CompactionPolicy(mode="inline", trigger=CompactionTrigger(delta_commits=3)),
    clean=CleanPolicy(mode="inline", retain_commits=2),
    archive=ArchivePolicy(mode="inline", min_commits=3, max_commits=4),
)
POLICIES_YAML = """policies:
  log_compaction: {min_blocks: 2}
  compaction: {trigger: {delta_commits: 2}}
  clean: {retain_commits: 2}
  archive: {min_commits: 3, max_commits: 4}
"""


@dataclass
class SteppingClock:
    """The wall clock the instant generator reads: true time (a few ms a read) plus a
    skew that step-backs lower and an occasional correction puts back to zero."""

    rng: random.Random
    true: dt.datetime
    skew: dt.timedelta = dt.timedelta(0)
    reads: int = 0
    armed: tuple[int, str] | None = None  # (read number, amount name): a step-back inside an operation
    first_instant: str | None = None
    kinds: Counter = field(default_factory=Counter)
    where: Counter = field(default_factory=Counter)
    last_read: dt.datetime | None = None

    def __call__(self) -> dt.datetime:
        self.reads += 1
        self.true += dt.timedelta(milliseconds=self.rng.randint(1, 40))
        if self.armed is not None and self.armed[0] == self.reads:
            self.step_back(self.armed[1], "inside")
            self.armed = None
        self.last_read = self.true + self.skew
        return self.last_read

    def step_back(self, kind: str, where: str) -> None:
        now = self.true + self.skew
        if kind == "before_first":
            first = parse_instant_time(self.first_instant) if self.first_instant else now
            target = min(first, now) - dt.timedelta(days=self.rng.randint(1, 365), milliseconds=self.rng.randint(0, 86_399_999))
            amount = now - target
        else:
            _, lo, hi = next(a for a in AMOUNTS if a[0] == kind)
            amount = dt.timedelta(microseconds=self.rng.randint(lo // dt.timedelta(microseconds=1),
                                                                 hi // dt.timedelta(microseconds=1)))
        assert amount > dt.timedelta(0)
        self.skew -= amount
        self.kinds[kind] += 1
        self.where[where] += 1

    @property
    def step_backs(self) -> int:
        return sum(self.kinds.values())


@dataclass
class Ledger:
    """Every requested instant, in the order written, with the timeline's last instant
    just before it was written."""

    written: list[tuple[str, str, str]] = field(default_factory=list)  # (ts, action, last before)
    generated: list[tuple[str, str, str, bool]] = field(default_factory=list)  # (wall, after, made, floor reset)


def _stored_last(tl: Timeline) -> str:
    names = [parse_timeline_file(st.name) for st in tl.fs.list_dir(tl.folder) if not st.is_dir]
    return max((f.timestamp for f in names if f is not None), default="")


def _instrument(monkeypatch, clock: SteppingClock, ledger: Ledger) -> None:
    monkeypatch.setattr(instant_mod, "wall_clock", clock)
    monkeypatch.setattr(instant_mod, "_last_generated", "")
    real_create = Timeline.create_requested
    real_new = instant_mod.new_instant_time

    def create_requested(self, action, timestamp=None, content=b""):
        before = _stored_last(self)
        inst = real_create(self, action, timestamp, content)
        ledger.written.append((inst.timestamp, action, before))
        if clock.first_instant is None:
            clock.first_instant = inst.timestamp
        return inst

    def new_instant_time(after=None):
        reset = instant_mod._last_generated == ""
        made = real_new(after)
        ledger.generated.append((format_instant_time(clock.last_read), after or "", made, reset))
        return made

    monkeypatch.setattr(Timeline, "create_requested", create_requested)
    monkeypatch.setattr(timeline_mod, "new_instant_time", new_instant_time)


class Interleave:
    """Another writer (a second process) commits while a service plans: armed for one
    operation, the service's planning starts writer B's commit in a thread and gives it
    ``WAIT_S`` to finish, then the clock steps back and the process floor is reset before
    the service makes its instant. A service that plans and requests without the writers'
    lock sees B's instant land in between; holding it, B waits until the request is
    written."""

    WAIT_S = 1.5

    def __init__(self, monkeypatch, clock: SteppingClock, rng: random.Random) -> None:
        self.clock, self.rng = clock, rng
        self.armed: tuple | None = None  # (writer, gen, model)
        self.threads: list[threading.Thread] = []
        self.errors: list[BaseException] = []
        self.hits: Counter = Counter()
        for mod, name in ((lc_mod, "plan_log_compaction"), (clean_mod, "plan_clean")):
            monkeypatch.setattr(mod, name, self._wrap(getattr(mod, name), name))

    def _wrap(self, real, name):
        def plan(table, policy):
            out = real(table, policy)
            if self.armed is not None and out is not None:
                w, gen, model = self.armed
                self.armed = None
                t = threading.Thread(target=self._commit, args=(w, gen, model), daemon=True)
                self.threads.append(t)
                t.start()
                t.join(self.WAIT_S)
                monkeypatch_floor_reset()
                self.clock.step_back(self.rng.choice(("ms", "seconds", "minutes", "hours")), "inside")
                self.hits[name] += 1
            return out
        return plan

    def _commit(self, w, gen, model) -> None:
        try:
            tg.step(w, gen, model)
        except BaseException as e:  # reported by settle()
            self.errors.append(e)

    def settle(self) -> None:
        self.armed = None
        for t in self.threads:
            t.join(120)
            assert not t.is_alive(), "writer B never got the writers' lock"
        self.threads.clear()
        assert not self.errors, "".join(
            "".join(traceback.format_exception(e)) for e in self.errors)


def monkeypatch_floor_reset() -> None:
    instant_mod._last_generated = ""  # the test's monkeypatch of it restores the original


def _check_read(path: str, model: tg.Model, hudi_rs: bool) -> None:
    expected = model.snapshot()
    readers = [("ours", tg.read_ours)] + ([("hudi-rs", tg.read_hudi_rs)] if hudi_rs else [])
    for name, read in readers:
        got = read(path)
        keys = [(r["city"], r["id"]) for r in got]
        assert len(keys) == len(set(keys)), f"{name}: duplicated keys {[k for k, n in Counter(keys).items() if n > 1]}"
        lost = set(model.rows) - set(keys)
        extra = set(keys) - set(model.rows)
        assert not lost and not extra, f"{name}: lost {sorted(lost)[:5]} extra {sorted(extra)[:5]}"
        assert len(got) == len(expected)
        assert got == expected, f"{name}: snapshot differs from the model"


def _timeline_files(path: str) -> list:
    meta = os.path.join(path, ".hoodie")
    return [f for f in (parse_timeline_file(n) for n in os.listdir(meta)) if f is not None]


def test_clock_step_back_campaign(tmp_path, monkeypatch):
    with seeded(SEED) as seed:
        rng = random.Random(seed)
        clock = SteppingClock(random.Random(seed + 1), dt.datetime.now(UTC))
        ledger = Ledger()
        _instrument(monkeypatch, clock, ledger)
        p = str(tmp_path / "t")
        (tmp_path / "policies.yaml").write_text(POLICIES_YAML)
        w_a, gen, model = tg.build(p, 2)
        w_b = tg.open_writer(p)
        interleave = Interleave(monkeypatch, clock, rng)
        ops_done: Counter = Counter()
        restarts = 0
        pending_failed = False
        for rnd in range(ROUNDS):
            # between operations: a step-back (most rounds) and/or a restart
            if rnd < len(AMOUNTS):
                clock.step_back(AMOUNTS[rnd][0], "between")  # every size, early
            elif rng.random() < 0.8:
                clock.step_back(rng.choice(AMOUNTS)[0], "between")
            if rng.random() < 0.4:
                monkeypatch.setattr(instant_mod, "_last_generated", "")
                restarts += 1
            if rng.random() < 0.15:
                clock.skew = dt.timedelta(0)  # the clock is corrected forward again
            op = ("failed" if rnd == 1 else "services" if rnd == 2 else
                  "interleaved" if rnd in (3, 4) else
                  rng.choice(["commit_a", "commit_b", "commit_a", "services", "cli", "failed", "interleaved"]))
            if op == "failed" and pending_failed:
                op = "commit_b"
            # inside the operation: a step-back at its first or second instant
            inside = op != "interleaved" and (rnd < 3 or rng.random() < 0.5)
            if inside:
                clock.armed = (clock.reads + (2 if pending_failed or op in ("services", "cli") else 1),
                               rng.choice(AMOUNTS)[0])
            writer = w_b if op == "commit_b" else w_a
            if op in ("commit_a", "commit_b"):
                tg.step(writer, gen, model, delete=rng.random() < 0.25)
                pending_failed = False
            elif op == "failed":
                batch = gen.upserts(10, tag="lost")  # never applied to the model
                fail_before_complete(lambda b=batch: w_b.upsert(b))
                pending_failed = True
            elif op == "services":
                run_inline_services(p, POLICIES)
            elif op == "interleaved":
                for _ in range(2):  # blocks for a log compaction to stitch, slices for a clean
                    tg.step(w_a, gen, model)
                pending_failed = False
                interleave.armed = (w_b, gen, model)
                run_inline_services(p, POLICIES)
                interleave.settle()
            else:
                service = rng.choice(["log-compact", "compact", "clean", "archive"])
                args = [service, p, "--policies", str(tmp_path / "policies.yaml")]
                if service == "compact":
                    args.append("--force")
                assert cli.main(args) == 0
                op = f"cli {service}"
            ops_done[op.split()[0]] += 1
            if clock.armed is not None:
                clock.armed = None  # the operation made fewer instants: that step-back never happened
            if rnd % 5 == 4:
                _check_read(p, model, hudi_rs=False)
        tg.step(w_a, gen, model)  # a last commit: rolls back a failed write still pending
        run_inline_services(p, POLICIES)

        # -- every instant, as written: after the timeline's last, and after all before it
        stamps = [ts for ts, _, _ in ledger.written]
        for i, (ts, action, before) in enumerate(ledger.written):
            assert ts > before, f"{action} {ts} written at or before the table's last instant {before}"
            assert i == 0 or ts > stamps[i - 1], f"{action} {ts} not after {stamps[i - 1]} (written before it)"
        assert len(set(stamps)) == len(stamps)
        # -- the timeline as stored: one action per instant time, times increasing in file order
        files = _timeline_files(p)
        by_ts: dict[str, set[str]] = {}
        for f in files:
            by_ts.setdefault(f.timestamp, set()).add(
                {Action.COMMIT: "c", Action.COMPACTION: "c", Action.DELTA_COMMIT: "d",
                 Action.LOG_COMPACTION: "d"}.get(f.action, f.action))
        assert all(len(a) == 1 for a in by_ts.values()), {t: a for t, a in by_ts.items() if len(a) > 1}
        assert set(by_ts) <= set(stamps), "an instant on the timeline that the ledger never saw written"
        _check_read(p, model, hudi_rs=True)

        # -- the campaign did what it claims
        assert clock.step_backs >= MIN_STEP_BACKS, (clock.step_backs, dict(clock.kinds))
        assert_phases_hit([a[0] for a in AMOUNTS], clock.kinds.elements(), what="step-back sizes")
        assert_phases_hit(["between", "inside"], clock.where.elements(), what="step-back places")
        actions = assert_phases_hit(
            [Action.DELTA_COMMIT, Action.ROLLBACK, Action.LOG_COMPACTION, Action.COMPACTION, Action.CLEAN],
            [a for _, a, _ in ledger.written], what="instants written")
        assert_phases_hit(["commit_a", "commit_b", "failed", "services", "cli"], ops_done.elements(),
                          what="operations")
        assert restarts >= 1
        assert sum(interleave.hits.values()) >= sized(smoke=2, full=8), dict(interleave.hits)
        # the clock was at or behind the table's last instant and the process floor was gone:
        # only the timeline on storage kept these instants in order
        saved = [g for g in ledger.generated if g[0] <= g[1] and g[3]]
        assert len(saved) >= sized(smoke=3, full=10), len(saved)
        print(f"clock campaign: {clock.step_backs} step-backs {dict(clock.kinds)} {dict(clock.where)}, "
              f"{restarts} restarts, interleaved {dict(interleave.hits)}, {len(saved)} instants saved by the table's floor alone, "
              f"instants {dict(actions)}, operations {dict(ops_done)}")
