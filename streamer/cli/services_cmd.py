"""``streamer compact|log-compact|clean|archive PATH``: run table services by hand or as a worker.

Each service is its own command with its own help, because their options differ:
only ``compact`` has ``--force``; ``archive`` has no plan, so no ``--schedule``/``--run``.
For the others ``--schedule`` writes a plan, ``--run`` executes pending plans; neither
flag means both. ``--loop`` keeps running (an async compactor process: several may run
on one table, the plan locks make each plan execute once) until ``--duration`` or Ctrl-C.
Policies come from ``--policies FILE`` (a YAML ``policies:`` mapping, the same keys as a
pipeline's ``policies``) or a pipeline file with ``--config FILE --pipeline NAME``.

The output is one readable line per thing done (plan scheduled, plan executed with its
files and bytes, files cleaned, instants archived); ``--json`` prints one JSON object
per round instead, for scripts.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import signal
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import yaml

from streamer.cli.arguments import add_table_path
from streamer.config.policies import PoliciesConfig
from streamer.errors import ConfigError

if TYPE_CHECKING:
    from streamer.services.archive import ArchiveOutcome
    from streamer.services.clean import CleanOutcome
    from streamer.services.executor import ExecOptions, ExecOutcome

SERVICES = ("compact", "log-compact", "clean", "archive")

_POLICY_HELP = ("Policies come from --policies FILE (a YAML 'policies:' mapping) or from a pipeline "
                "file (--config FILE [--pipeline NAME]); without either, the defaults.")

_DOCS = {
    "compact": (
        "schedule and/or run full compaction (merge logs into new base files)",
        "Full compaction: merge each chosen file slice's base file and log files into a new base "
        "file. Scheduling writes a plan when policies.compaction.trigger fires (--force: now); "
        "running executes every pending plan. Without --schedule or --run, both.",
    ),
    "log-compact": (
        "schedule and/or run log compaction (stitch small log blocks, RFC-48)",
        "Log compaction (RFC-48): merge runs of at least policies.log_compaction.min_blocks small "
        "log blocks of a file slice into one block. Scheduling writes a plan when a slice "
        "qualifies; running executes every pending plan. Without --schedule or --run, both.",
    ),
    "clean": (
        "delete file slices no query needs (retain commits or file versions)",
        "Clean: finish pending cleans, then plan and delete the file slices no query needs any "
        "more under policies.clean (retain_commits or retain_file_versions). Without --schedule "
        "or --run, both.",
    ),
    "archive": (
        "move old instants from the active timeline to the archive (.hoodie/archived; "
        "versions 8 and 9: the LSM history .hoodie/timeline/history)",
        "Archive: once the active timeline holds more than policies.archive.max_commits commits, "
        "move the oldest completed instants to the archived timeline (.hoodie/archived at table "
        "version 6, Hudi 1.x's LSM history .hoodie/timeline/history at 8 and 9), keeping "
        "min_commits (never past a pending table service, the oldest instant a clean retains or "
        "an instant whose files a live file slice reads).",
    ),
}


def register(sub: argparse._SubParsersAction) -> None:
    for name in SERVICES:
        short, long = _DOCS[name]
        p = sub.add_parser(name, help=short, description=f"{long} {_POLICY_HELP}")
        add_table_path(p)
        if name != "archive":
            p.add_argument("--schedule", action="store_true", help="only write a plan")
            p.add_argument("--run", action="store_true", help="only execute pending plans")
        if name == "compact":
            p.add_argument("--force", action="store_true",
                           help="schedule a plan even if the compaction trigger has not fired")
        p.add_argument("--loop", action="store_true", help="keep running (async worker) until --duration or Ctrl-C")
        p.add_argument("--interval", type=float, default=1.0, help="seconds between loop rounds (default 1)")
        p.add_argument("--duration", type=float, help="stop looping after this many seconds")
        p.add_argument("--policies", help="YAML file with a top-level 'policies:' mapping")
        p.add_argument("--config", help="pipelines YAML; with --pipeline, use that pipeline's policies")
        p.add_argument("--pipeline", help="pipeline name in --config")
        p.add_argument("--lock-expiry", type=float, default=30.0,
                       help="seconds before a silent plan lock is stale (default 30)")
        p.add_argument("--json", action="store_true", help="one JSON object per round instead of text")
        p.set_defaults(func=run, service=name, schedule=False, run=False, force=False)


def load_policies(args: argparse.Namespace) -> PoliciesConfig:
    if args.config:
        from streamer.config import load_pipelines

        pipes = load_pipelines(args.config)
        chosen = [p for p in pipes if args.pipeline in (None, p.name)]
        if not chosen:
            raise ConfigError(f"no pipeline {args.pipeline!r} in {args.config}")
        return chosen[0].policies
    if args.policies:
        with open(args.policies) as f:
            doc = yaml.safe_load(f) or {}
        try:
            return PoliciesConfig.model_validate(doc.get("policies", doc))
        except ValueError as e:
            raise ConfigError(f"{args.policies}: invalid policies: {e}") from e
    return PoliciesConfig()


@dataclass(frozen=True)
class Round:
    """What one round of a service did (what both the text and the JSON output show)."""

    service: str
    scheduled: str | None = None
    #: File slices in the plan just scheduled (compactions only).
    plan_slices: int | None = None
    executed: tuple = ()  # ExecOutcome (compactions) | CleanOutcome | ArchiveOutcome
    error: str | None = None
    #: The service was asked to schedule, to execute (text output says what it did not find).
    asked: tuple[bool, bool] = field(default=(True, True))

    @property
    def did_something(self) -> bool:
        from streamer.services.archive import ArchiveOutcome
        from streamer.services.clean import CleanOutcome

        def done(o: object) -> bool:
            if isinstance(o, CleanOutcome):
                return o.instant is not None
            if isinstance(o, ArchiveOutcome):
                return bool(o.archived)
            return True

        return bool(self.scheduled or self.error or any(done(o) for o in self.executed))

    def to_json(self) -> str:
        from streamer.services.archive import ArchiveOutcome

        def one(o: object) -> object:
            if isinstance(o, ArchiveOutcome):
                return {"archived": o.archived, "archive_file": o.archive_file, "bound": o.bound,
                        "merged": o.merged}
            return dict(o.__dict__)

        out: dict[str, object] = {"service": self.service, "scheduled": self.scheduled,
                                  "executed": [one(o) for o in self.executed]}
        if self.error is not None:
            out["error"] = self.error
        return json.dumps(out, default=str)

    def lines(self) -> list[str]:
        from streamer.services.archive import ArchiveOutcome
        from streamer.services.clean import CleanOutcome

        if self.error is not None:
            return [f"{self.service}: round failed: {self.error}"]
        what = {"compact": "compaction", "log-compact": "log compaction"}.get(self.service, self.service)
        out: list[str] = []
        schedule, execute = self.asked
        if self.service in ("compact", "log-compact"):
            if self.scheduled:
                out.append(f"{what}: scheduled {self.scheduled} ({self.plan_slices} file slice(s))")
            elif schedule:
                hint = " (--force to schedule anyway)" if self.service == "compact" else ""
                out.append(f"{what}: nothing to schedule: no file slice qualifies under the policy{hint}")
            for o in self.executed:
                out.append(f"{what} {o.instant}: {_status(o)}")
            if execute and not self.executed:
                out.append(f"{what}: no pending plan to run")
            return out
        for o in self.executed:
            if isinstance(o, CleanOutcome):
                out.append(_clean_line(o))
            elif isinstance(o, ArchiveOutcome):
                out += _archive_lines(o)
        return out


def _clean_line(o: CleanOutcome) -> str:
    if o.instant is None:
        return "clean: nothing to clean (or another cleaner holds the clean lock)"
    return (f"clean {o.instant}: deleted {o.files_deleted} file(s); "
            f"file slices from {o.earliest_commit_to_retain or 'every commit'} on are kept")


def _archive_lines(o: ArchiveOutcome) -> list[str]:
    """What an archive round did: what moved (and which history files it merged), or why
    nothing did; then the bound a rule set, if any."""
    if o.archived:
        moved = f"{len(o.archived)} instant(s) ({o.archived[0]} .. {o.archived[-1]})"
        said = [f"moved {moved} to {o.archive_file}"]
        said += [f"merged the history's oldest files into {', '.join(o.merged)}"] if o.merged else []
    else:
        said = [f"not archived: {o.skipped}" if o.skipped
                else "nothing to archive (the active timeline is within policy)"]
    if o.bound:
        said.append(f"kept instants from {o.bound} on (a pending table service or the commits a clean "
                    "retains need them)")
    return [f"archive: {line}" for line in said]


def _status(o: ExecOutcome) -> str:
    if o.status == "completed":
        return f"completed: {o.files_written} file(s), {_bytes(o.bytes_written)} written"
    return {
        "busy": "busy (another worker holds its lock)",
        "done-elsewhere": "already completed by another worker",
        "rolled-back": "its failed attempt was rolled back; the next round runs it again",
        "retry": "writers' lock busy; the next round retries",
    }.get(o.status, o.status)


def _bytes(n: int) -> str:
    value = float(n)
    for unit in ("bytes", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{n} bytes" if unit == "bytes" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{n} bytes"  # pragma: no cover


def one_round(args: argparse.Namespace, policies: PoliciesConfig) -> Round:
    from streamer.read import Table
    from streamer.services.archive import run_archive
    from streamer.services.clean import run_clean
    from streamer.services.compaction import schedule_compaction_safely
    from streamer.services.executor import execute_pending
    from streamer.services.log_compaction import schedule_log_compaction
    from streamer.table.instant import Action
    from streamer.table.metadata.compaction import CompactionPlan

    schedule = args.schedule or not args.run
    execute = args.run or not args.schedule
    table = Table.open(args.path)
    asked = (schedule, execute)
    if args.service in ("compact", "log-compact"):
        inst = None
        if schedule:
            inst = (schedule_compaction_safely(table, policies.compaction, force=args.force)
                    if args.service == "compact" else schedule_log_compaction(table, policies.log_compaction))
        slices = len(CompactionPlan.from_bytes(table.timeline.read_plan(inst)).operations) if inst else None
        done: list = []
        if execute:
            action = Action.COMPACTION if args.service == "compact" else Action.LOG_COMPACTION
            options: ExecOptions = {"lock_expiry_s": args.lock_expiry, "owner": "cli"}
            if args.service == "log-compact":
                options["log_policy"] = policies.log_compaction
            done = execute_pending(table, action, **options)
        return Round(args.service, inst.timestamp if inst else None, slices, tuple(done), asked=asked)
    if args.service == "clean":
        res = run_clean(table, policies.clean, schedule=schedule, execute=execute, lock_expiry_s=args.lock_expiry)
        return Round("clean", executed=(res,), asked=asked)
    return Round("archive", executed=(run_archive(table, policies.archive, lock_expiry_s=args.lock_expiry),),
                 asked=asked)


@contextlib.contextmanager
def _ctrl_c_noted() -> Iterator[threading.Event]:
    """SIGINT raises KeyboardInterrupt as Python's default handler does (a round in
    progress is abandoned: exit 130), and first sets the event the loop checks after every
    round. Python prints and drops an exception raised inside a finalizer, so a Ctrl-C that
    lands while garbage collection runs one (a storage client's ``weakref.finalize``) was
    lost and the worker served on; with the event it stops after that round.

    Installed whatever SIGINT's disposition was (a background job of a non-interactive
    shell starts with it ignored); on the main thread only, and restored on exit."""
    noted = threading.Event()
    if threading.current_thread() is not threading.main_thread():
        yield noted
        return

    def on_sigint(signum: int, frame: object) -> None:
        noted.set()
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGINT, on_sigint)
    try:
        yield noted
    finally:  # (None: a handler set outside Python, which cannot be put back)
        signal.signal(signal.SIGINT, signal.default_int_handler if previous is None else previous)


def run(args: argparse.Namespace) -> int:
    with _ctrl_c_noted() as ctrl_c:
        return _rounds(args, load_policies(args), ctrl_c)


def _rounds(args: argparse.Namespace, policies: PoliciesConfig, ctrl_c: threading.Event) -> int:
    started = time.monotonic()
    while True:
        try:
            out = one_round(args, policies)
        except Exception as e:  # an async worker keeps serving; one bad round is reported
            if not args.loop:
                raise
            out = Round(args.service, error=f"{type(e).__name__}: {e}")
            print(out.lines()[0], file=sys.stderr, flush=True)
        if args.json and (not args.loop or out.did_something):
            print(out.to_json(), flush=True)
        elif not args.json and out.error is None and (not args.loop or out.did_something):
            for line in out.lines():
                print(line, flush=True)
        if not args.loop:
            return 0
        if args.duration is not None and time.monotonic() - started >= args.duration:
            return 0
        try:
            if ctrl_c.is_set():  # its KeyboardInterrupt was lost inside the round
                raise KeyboardInterrupt
            time.sleep(args.interval)
        except KeyboardInterrupt:
            print("stopped", file=sys.stderr)
            return 0
