"""The ``streamer`` command line.

Each sub-command lives in its own module under ``streamer.cli`` and exposes
``register(subparsers)``; this keeps the CLI from growing into one god module and
lets each layer (read, services, pipelines) own its commands.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from streamer import __version__
from streamer.errors import StreamerError

# Modules providing sub-commands, in --help order. A module that is not there yet is skipped.
_COMMAND_MODULES = (
    "streamer.cli.run_cmd",
    "streamer.cli.validate_cmd",
    "streamer.cli.read_cmd",
    "streamer.cli.show_cmd",
    "streamer.cli.sync_cmd",
    "streamer.cli.timeline_cmd",
    "streamer.cli.services_cmd",
    "streamer.cli.check_cmd",
    "streamer.cli.repair_cmd",
    "streamer.cli.handover_cmd",
    "streamer.cli.upgrade_cmd",
    "streamer.cli.demo_cmd",
    "streamer.cli.kafka_cmd",
    "streamer.cli.setup_cmd",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="streamer",
        description="mor-streamer: ingest Kafka topics and files into Apache Hudi "
        "Merge-On-Read tables (indexed logs, log compaction, compaction).",
    )
    parser.add_argument("--version", action="version", version=f"mor-streamer {__version__}")
    _log_flags(parser, default_level=None, default_format="text")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in _COMMAND_MODULES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as e:
            if e.name == name:
                continue
            raise
        module.register(sub)
    for command in sub.choices.values():  # also after the command: `streamer run x.yaml --log-level DEBUG`
        _log_flags(command, default_level=argparse.SUPPRESS, default_format=argparse.SUPPRESS)
    return parser


def _log_flags(parser: argparse.ArgumentParser, default_level: str | None, default_format: str) -> None:
    """``--log-level``/``--log-format``; on sub-commands their default is SUPPRESS, so the
    value given before the command stands unless the flag is repeated after it."""
    parser.add_argument("--log-level", default=default_level, type=str.upper,
                        choices=("DEBUG", "INFO", "WARNING", "ERROR"),
                        help="log level of all modules (default: INFO for run, demo, kafka-local and setup-jvm; WARNING "
                        "for the one-shot commands, whose results go to standard output); logs go to "
                        "standard error")
    parser.add_argument("--log-format", default=default_format, choices=("text", "json"),
                        help="text lines, or one JSON object per line (ts, level, logger, message, pipeline, "
                        "batch) for log shippers")


#: Commands that run for a while and report progress through the log.
_PROGRESS_COMMANDS = frozenset({"run", "demo", "kafka-local", "setup-jvm"})


def _default_level(command: str | None) -> str:
    """INFO where the log is the progress report; WARNING for one-shot commands, which
    print their result on standard output - a refusal stays one line, not a replay of
    what the command scheduled before it refused."""
    return "INFO" if command in _PROGRESS_COMMANDS else "WARNING"


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 0
    from streamer.observe.logs import configure_logging

    configure_logging(args.log_level or _default_level(args.command), args.log_format)
    try:
        return int(args.func(args) or 0)
    except StreamerError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # `streamer show t | head`: the reader left, not an error
        sys.stderr.close()
        return 0
    except OSError as e:  # storage failed under us (full disk, permissions): one line, not a traceback
        where = f": {e.filename}" if getattr(e, "filename", None) else ""
        print(f"error: {str(e).strip().splitlines()[-1] if str(e).strip() else type(e).__name__}{where}",
              file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
