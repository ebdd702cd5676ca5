"""``streamer validate FILE_OR_DIR``: check pipeline YAML without running anything.

Prints every problem (``file:line: yaml.path: reason``) and exits 1, or one summary
line per pipeline and exits 0. Nothing printed can contain a secret.

Beyond shape: SQL (``sql`` queries, ``filter`` conditions, ``derive`` expressions,
``cast`` types, a files source's ``schema``) goes through Spark's own parser when PySpark
and Java are there - parse only, so no table or view needs to exist; a bare JVM starts
for it only when the file has SQL, unless ``--no-spark``. Without Spark the SQL check is
skipped with a note. A files source whose local folder does not exist is a *warning*:
printed, but the exit code stays 0 (it may be created later; before a run,
``streamer.config.preflight.require_source_folders`` makes it an error).
"""

from __future__ import annotations

import argparse
import json
import sys

from streamer.cli.arguments import documented_parser


def register(sub: argparse._SubParsersAction) -> None:
    p = documented_parser(sub, "validate", help="check pipeline YAML files (all problems at once)", doc=__doc__)
    p.add_argument("path", metavar="FILE_OR_DIR", help="a pipeline YAML file, or a folder of them")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.add_argument("--no-spark", dest="no_spark", action="store_true",
                   help="do not start a JVM to parse SQL with Spark (shape checks only)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from streamer.config import check_pipelines
    from streamer.spark import SparkSqlSyntax, spark_unavailable

    skipped = "--no-spark" if args.no_spark else spark_unavailable()
    parser = None if skipped else SparkSqlSyntax()
    try:
        pipelines, problems = check_pipelines(args.path, sql=parser, folders=True)
    finally:
        if parser is not None:
            parser.close()
    skipped = skipped or (parser.unavailable if parser is not None else None)
    errors = [p for p in problems if p.is_error]
    if args.json:
        report = {
            "valid": not errors,
            "sql_parsed_by_spark": skipped is None,
            "problems": [{"file": p.file, "line": p.line, "path": p.path, "message": p.message,
                          "severity": p.severity} for p in problems],
            "pipelines": [{"name": p.name, "summary": p.summary()} for p in pipelines],
        }
        print(json.dumps(report, indent=2))
        return 1 if errors else 0
    for p in problems:
        print(p, file=sys.stderr)
    if skipped and not args.no_spark:
        print(f"note: SQL was not parsed with Spark ({skipped}); only its shape was checked", file=sys.stderr)
    if errors:
        warned = len(problems) - len(errors)
        print(f"{len(errors)} problem(s) found" + (f", {warned} warning(s)" if warned else ""), file=sys.stderr)
        return 1
    for pipeline in pipelines:
        print(f"ok  {pipeline.summary()}")
    return 0
