"""``streamer run FILE``: run the pipelines of a YAML file or folder.

A pipeline that fails does not stop the others (see ``pipeline.multi``): its failure
is printed at once as one line naming it, and the exit code is 1 when any failed.

Ctrl-C (or SIGTERM, as sent by container runtimes) once: finish the running
micro-batch, commit it, stop. Ctrl-C twice: abandon it; the next run rolls its
inflight commit back, so nothing half-written is ever read.
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
    p.add_argument(
        "--standby",
        action="store_true",
        help="if a pipeline is already running elsewhere, wait (session up, read path warmed) and take over "
        "when it stops, instead of failing",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from streamer.config import load_pipelines
    from streamer.errors import ConfigError
    from streamer.pipeline.multi import PipelinesFailedError, failure_line, run_pipelines

    configs = load_pipelines(args.file)
    if args.pipeline:
        names = {c.name for c in configs}
        unknown = sorted(set(args.pipeline) - names)
        if unknown:
            raise ConfigError(f"{args.file}: no pipeline named {', '.join(unknown)} (have: {', '.join(sorted(names))})")
        configs = [c for c in configs if c.name in args.pipeline]
    for c in configs:
        print(f"pipeline {c.summary()}", flush=True)

    stop = threading.Event()
    with _graceful_stop(stop):
        try:
            run_pipelines(
                configs,
                once=args.once,
                stop=stop,
                on_report=lambda r: print(r.line(), flush=True),
                timeout_s=args.timeout,
                standby=args.standby,
                on_failure=lambda name, e: print(f"error: {failure_line(name, e)}", file=sys.stderr, flush=True),
            )
        except PipelinesFailedError as e:
            ok = len(configs) - len(e.failures)
            print(f"{len(e.failures)} of {len(configs)} pipeline(s) failed ({', '.join(e.failures)}); "
                  f"{ok} ran", file=sys.stderr, flush=True)
            return 1
    return 0


class _graceful_stop:  # noqa: N801 - used as a context manager like a function
    """SIGINT/SIGTERM set ``stop``; a second SIGINT raises KeyboardInterrupt (abandon)."""

    def __init__(self, stop: threading.Event) -> None:
        self.stop = stop
        self.previous: dict[int, object] = {}

    def _on_signal(self, signum: int, frame: object) -> None:
        if self.stop.is_set() and signum == signal.SIGINT:
            raise KeyboardInterrupt
        print("\nstopping after the current batch (Ctrl-C again to abandon it)...", file=sys.stderr, flush=True)
        self.stop.set()

    def __enter__(self) -> _graceful_stop:
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                self.previous[sig] = signal.getsignal(sig)
                signal.signal(sig, self._on_signal)
        return self

    def __exit__(self, *exc: object) -> None:
        for sig, handler in self.previous.items():
            signal.signal(sig, handler)  # type: ignore[arg-type]

