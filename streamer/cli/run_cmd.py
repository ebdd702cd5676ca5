"""``streamer run FILE``: run the pipelines of a YAML file or folder.

Ctrl-C once: finish the running micro-batch, commit it, stop. Ctrl-C twice: abandon
it; the next run rolls its inflight commit back, so nothing half-written is ever read.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("run", help="run pipelines from a YAML file or folder")
    p.add_argument("file", help="pipeline YAML file or folder of them")
    p.add_argument("--pipeline", action="append", help="run only this pipeline (repeatable)")
    p.add_argument("--once", action="store_true", help="one batch per pipeline, whatever the trigger says")
    p.add_argument("--timeout", type=float, default=None, help="stop continuous pipelines after N seconds")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from streamer.config import load_pipelines
    from streamer.errors import ConfigError
    from streamer.pipeline.multi import run_pipelines

    configs = load_pipelines(args.file)
    if args.pipeline:
        names = {c.name for c in configs}
        unknown = sorted(set(args.pipeline) - names)
        if unknown:
            raise ConfigError(f"{args.file}: no pipeline named {', '.join(unknown)} (have: {', '.join(sorted(names))})")
        configs = [c for c in configs if c.name in args.pipeline]
    once = args.once or all(c.trigger.mode == "once" for c in configs)
    for c in configs:
        print(f"pipeline {c.summary()}", flush=True)

    stop = threading.Event()
    previous = signal.getsignal(signal.SIGINT)

    def on_sigint(signum, frame) -> None:
        if stop.is_set():
            signal.signal(signal.SIGINT, previous)
            raise KeyboardInterrupt
        print("\nstopping after the current batch (Ctrl-C again to abandon it)...", file=sys.stderr, flush=True)
        stop.set()

    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, on_sigint)
    try:
        run_pipelines(configs, once=once, stop=stop, on_report=lambda r: print(r.line(), flush=True), timeout_s=args.timeout)
    finally:
        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGINT, previous)
    return 0
