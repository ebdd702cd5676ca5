"""``streamer validate FILE_OR_DIR``: check pipeline YAML without running anything.

Prints every problem (``file:line: yaml.path: reason``) and exits 1, or one summary
line per pipeline and exits 0. Nothing printed can contain a secret.
"""

from __future__ import annotations

import argparse
import json
import sys


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("validate", help="check pipeline YAML files (all problems at once)")
    p.add_argument("path", metavar="FILE_OR_DIR", help="a pipeline YAML file, or a folder of them")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from streamer.config import check_pipelines

    pipelines, problems = check_pipelines(args.path)
    if args.json:
        report = {
            "valid": not problems,
            "problems": [{"file": p.file, "line": p.line, "path": p.path, "message": p.message} for p in problems],
            "pipelines": [{"name": p.name, "summary": p.summary()} for p in pipelines],
        }
        print(json.dumps(report, indent=2))
        return 1 if problems else 0
    if problems:
        for p in problems:
            print(p, file=sys.stderr)
        print(f"{len(problems)} problem(s) found", file=sys.stderr)
        return 1
    for p in pipelines:
        print(f"ok  {p.summary()}")
    return 0
