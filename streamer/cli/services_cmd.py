"""``streamer compact|log-compact|clean|archive PATH``: run table services by hand or as a worker.

``--schedule`` writes a plan, ``--run`` executes pending plans; neither flag means both.
``--loop`` keeps running (an async compactor process: several may run on one table,
the plan locks make each plan execute once) until ``--duration`` or Ctrl-C.
Policies come from ``--policies FILE`` (a YAML ``policies:`` mapping, the same keys as a
pipeline's ``policies``) or a pipeline file with ``--config FILE --pipeline NAME``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import yaml

from streamer.config.policies import PoliciesConfig
from streamer.errors import ConfigError

SERVICES = ("compact", "log-compact", "clean", "archive")


def register(sub: argparse._SubParsersAction) -> None:
    helps = {
        "compact": "schedule and/or run full compaction (merge logs into new base files)",
        "log-compact": "schedule and/or run log compaction (stitch small log blocks, RFC-48)",
        "clean": "delete file slices no query needs (retain commits or file versions)",
        "archive": "move old instants from the active timeline to .hoodie/archived",
    }
    for name in SERVICES:
        p = sub.add_parser(name, help=helps[name])
        p.add_argument("path", help="table path or URI")
        p.add_argument("--schedule", action="store_true", help="only write a plan")
        p.add_argument("--run", action="store_true", help="only execute pending plans")
        p.add_argument("--force", action="store_true", help="compact: schedule even if the trigger has not fired")
        p.add_argument("--loop", action="store_true", help="keep running (async worker)")
        p.add_argument("--interval", type=float, default=1.0, help="seconds between loop rounds")
        p.add_argument("--duration", type=float, help="stop looping after this many seconds")
        p.add_argument("--policies", help="YAML file with a top-level 'policies:' mapping")
        p.add_argument("--config", help="pipelines YAML; with --pipeline, use that pipeline's policies")
        p.add_argument("--pipeline", help="pipeline name in --config")
        p.add_argument("--lock-expiry", type=float, default=30.0, help="seconds before a silent plan lock is stale")
        p.set_defaults(func=run, service=name)


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


def one_round(args: argparse.Namespace, policies: PoliciesConfig) -> dict:
    from streamer.read import Table
    from streamer.services.archive import run_archive
    from streamer.services.clean import run_clean
    from streamer.services.compaction import schedule_compaction_safely
    from streamer.services.executor import execute_pending
    from streamer.services.log_compaction import schedule_log_compaction
    from streamer.table.instant import Action

    schedule = args.schedule or not args.run
    execute = args.run or not args.schedule
    table = Table.open(args.path)
    out: dict = {"service": args.service, "scheduled": None, "executed": []}
    if args.service == "compact":
        if schedule:
            inst = schedule_compaction_safely(table, policies.compaction, force=args.force)
            out["scheduled"] = inst.timestamp if inst else None
        if execute:
            out["executed"] = [o.__dict__ for o in execute_pending(table, Action.COMPACTION,
                                                                   lock_expiry_s=args.lock_expiry,
                                                                   owner="cli")]
    elif args.service == "log-compact":
        if schedule:
            inst = schedule_log_compaction(table, policies.log_compaction)
            out["scheduled"] = inst.timestamp if inst else None
        if execute:
            out["executed"] = [o.__dict__ for o in execute_pending(table, Action.LOG_COMPACTION,
                                                                   log_policy=policies.log_compaction,
                                                                   lock_expiry_s=args.lock_expiry,
                                                                   owner="cli")]
    elif args.service == "clean":
        res = run_clean(table, policies.clean, schedule=schedule, execute=execute, lock_expiry_s=args.lock_expiry)
        out["executed"] = [res.__dict__]
    else:
        res = run_archive(table, policies.archive, lock_expiry_s=args.lock_expiry)
        out["executed"] = [{"archived": res.archived, "archive_file": res.archive_file, "bound": res.bound}]
    return out


def run(args: argparse.Namespace) -> int:
    policies = load_policies(args)
    started = time.monotonic()
    while True:
        try:
            out = one_round(args, policies)
        except Exception as e:  # an async worker keeps serving; one bad round is logged
            if not args.loop:
                raise
            print(f"round failed: {type(e).__name__}: {e}", file=sys.stderr, flush=True)
            out = {"service": args.service, "scheduled": None, "executed": [], "error": str(e)}
        if not args.loop or out["scheduled"] or out["executed"]:
            print(json.dumps(out, default=str), flush=True)
        if not args.loop:
            return 0
        if args.duration is not None and time.monotonic() - started >= args.duration:
            return 0
        try:
            time.sleep(args.interval)
        except KeyboardInterrupt:
            print("stopped", file=sys.stderr)
            return 0
