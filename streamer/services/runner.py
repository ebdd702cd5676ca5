"""Policies in action: inline services after each commit, async services beside the writer.

Per service ``mode``:

* ``inline`` - :func:`run_inline_services` (called by the pipeline runner after every
  commit, in the writer process) schedules and executes it right away;
* ``async`` - :class:`AsyncServices` (a background thread, or ``streamer compact --loop``
  in another process) schedules and executes while the writer keeps committing; the
  writer also schedules async compaction after its commits, as Hudi does. Compaction is
  always scheduled holding the writers' lock (between two commits) so no write in flight
  can miss the plan; log compaction, clean and archive never change where writers append;
* ``off`` - never.

Back-pressure: once ``max_pending`` compactions are pending and the trigger fires again,
:func:`should_throttle` says the writer should wait (:func:`wait_for_capacity`) rather
than pile up delta commits the compactors cannot absorb.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field

from streamer.config.policies import CleanPolicy, CompactionPolicy, PoliciesConfig
from streamer.fs import FileSystem
from streamer.read.table import Table
from streamer.services.archive import ArchiveOutcome, instants_to_archive, run_archive
from streamer.services.clean import CleanOutcome, plan_clean, run_clean
from streamer.services.compaction import schedule_compaction_safely, trigger_fires
from streamer.services.executor import ExecOutcome, execute_pending
from streamer.services.log_compaction import plan_log_compaction, schedule_log_compaction
from streamer.table.instant import Action

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ServiceTiming:
    """Seconds one service's step took in a round (only steps that did something)."""

    action: str
    seconds: float


@dataclass
class ServicesReport:
    scheduled: list[tuple[str, str]] = field(default_factory=list)  # (action, instant)
    executed: list[ExecOutcome] = field(default_factory=list)
    clean: CleanOutcome | None = None
    archive: ArchiveOutcome | None = None
    #: Per service step that acted (for metrics and the run's log).
    timings: list[ServiceTiming] = field(default_factory=list)

    def timed(self, action: str, started: float) -> None:
        self.timings.append(ServiceTiming(action, time.monotonic() - started))

    def completed(self, action: str | None = None) -> list[str]:
        return [o.instant for o in self.executed if o.status == "completed" and (action is None or o.action == action)]


def _open(table: Table | str, fs: FileSystem | None) -> Table:
    return table if isinstance(table, Table) else Table.open(table, fs=fs)


def run_services(table: Table | str, policies: PoliciesConfig, *, modes: tuple[str, ...] = ("inline",),
                 schedule_compaction_plans: bool = True, fs: FileSystem | None = None,
                 lock_expiry_s: float = 30.0) -> ServicesReport:
    """One round of every service whose mode is in ``modes``.

    Each service first asks the table *as given* whether it has anything to do, and only
    then refreshes, locks and acts. Handed the writer's post-commit snapshot (the
    pipeline does), a round with nothing to do reads no table state at all; what another
    process changed meanwhile is seen on the next round.
    """
    t = _open(table, fs)
    rep = ServicesReport()
    lc, comp = policies.log_compaction, policies.compaction
    if lc.mode in modes:
        started, acted = time.monotonic(), False
        if plan_log_compaction(t, lc) is not None:
            inst = schedule_log_compaction(t, lc)
            if inst:
                rep.scheduled.append((Action.LOG_COMPACTION, inst.timestamp))
                acted = True
        if t.timeline.pending_log_compactions():
            rep.executed += execute_pending(t, Action.LOG_COMPACTION, log_policy=lc, lock_expiry_s=lock_expiry_s)
            acted = True
        if acted:
            rep.timed(Action.LOG_COMPACTION, started)
    if comp.mode in modes:
        started, acted = time.monotonic(), False
        if schedule_compaction_plans and _compaction_due(t, comp):
            inst = schedule_compaction_safely(t, comp)
            if inst:
                rep.scheduled.append((Action.COMPACTION, inst.timestamp))
                acted = True
        if t.timeline.pending_compactions():
            rep.executed += execute_pending(t, Action.COMPACTION, lock_expiry_s=lock_expiry_s)
            acted = True
        if acted:
            rep.timed(Action.COMPACTION, started)
    if policies.clean.mode in modes and _clean_due(t, policies.clean):
        started = time.monotonic()
        rep.clean = run_clean(t, policies.clean, lock_expiry_s=lock_expiry_s)
        rep.timed(Action.CLEAN, started)
    if policies.archive.mode in modes and instants_to_archive(t, policies.archive)[0]:
        started = time.monotonic()
        rep.archive = run_archive(t, policies.archive, lock_expiry_s=lock_expiry_s)
        rep.timed("archive", started)
    return rep


def _compaction_due(t: Table, policy: CompactionPolicy) -> bool:
    return len(t.timeline.pending_compactions()) < policy.max_pending and trigger_fires(t, policy.trigger)


def _clean_due(t: Table, policy: CleanPolicy) -> bool:
    if any(i.action == Action.CLEAN for i in t.timeline.pending()):
        return True
    return plan_clean(t, policy) is not None


def run_inline_services(table_path: Table | str, policies: PoliciesConfig, *, fs: FileSystem | None = None,
                        lock_expiry_s: float = 30.0) -> ServicesReport:
    """What the writer runs after each commit: inline services, plus scheduling of async
    compaction (see module doc)."""
    t = _open(table_path, fs)
    rep = run_services(t, policies, modes=("inline",), fs=fs, lock_expiry_s=lock_expiry_s)
    if policies.compaction.mode == "async" and _compaction_due(t, policies.compaction):
        started = time.monotonic()
        inst = schedule_compaction_safely(t, policies.compaction)
        if inst:
            rep.scheduled.append((Action.COMPACTION, inst.timestamp))
            rep.timed(Action.COMPACTION, started)
    return rep


# ============================================================================ back-pressure
def should_throttle(table: Table | str, policy: CompactionPolicy, *, fs: FileSystem | None = None) -> bool:
    """True when ``max_pending`` compactions are pending and another one is already due."""
    if policy.mode == "off":
        return False
    t = _open(table, fs)
    t.refresh()
    return _throttled(t, policy)


def _throttled(t: Table, policy: CompactionPolicy) -> bool:
    if len(t.timeline.pending_compactions()) < policy.max_pending:
        return False
    return trigger_fires(t, policy.trigger)


def wait_for_capacity(table: Table | str, policy: CompactionPolicy, *, timeout_s: float = 600.0,
                      poll_s: float = 0.5, fs: FileSystem | None = None) -> float:
    """Block while :func:`should_throttle`; returns seconds waited (gives up at ``timeout_s``).

    The table as given decides first (compaction can only have fallen further behind
    since: a snapshot with room needs no re-read); only a throttled table is polled.
    """
    if policy.mode == "off":
        return 0.0
    t = _open(table, fs)
    started = time.monotonic()
    if not _throttled(t, policy):
        return 0.0
    while should_throttle(t, policy) and time.monotonic() - started < timeout_s:
        time.sleep(poll_s)
    return time.monotonic() - started


# ============================================================================ async
class AsyncServices:
    """Run the ``async`` services in a background thread until :meth:`stop`.

    ``schedule_compaction_plans=False`` leaves compaction scheduling to the writer.
    """

    def __init__(self, table_path: str, policies: PoliciesConfig, *, interval_s: float = 1.0,
                 schedule_compaction_plans: bool = True, fs: FileSystem | None = None,
                 lock_expiry_s: float = 30.0) -> None:
        self.table_path = table_path
        self.policies = policies
        self.interval_s = interval_s
        self.schedule_compaction_plans = schedule_compaction_plans
        self.fs = fs
        self.lock_expiry_s = lock_expiry_s
        self.reports: list[ServicesReport] = []
        self.errors: list[BaseException] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def run_once(self) -> ServicesReport:
        rep = run_services(self.table_path, self.policies, modes=("async",),
                           schedule_compaction_plans=self.schedule_compaction_plans, fs=self.fs,
                           lock_expiry_s=self.lock_expiry_s)
        self.reports.append(rep)
        return rep

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                self.run_once()
            except Exception as e:  # keep serving; the error is kept for the owner to see
                log.exception("async table services round failed: %s", e)
                self.errors.append(e)
            self._stop.wait(self.interval_s)

    def start(self) -> AsyncServices:
        if self._thread is None:
            self._stop.clear()
            self._thread = threading.Thread(target=self._loop, name="mor-async-services", daemon=True)
            self._thread.start()
        return self

    def stop(self, timeout_s: float = 60.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=timeout_s)
            self._thread = None

    def __enter__(self) -> AsyncServices:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def completed(self, action: str | None = None) -> list[str]:
        return [i for r in self.reports for i in r.completed(action)]
