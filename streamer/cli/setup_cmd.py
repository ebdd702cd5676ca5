"""``streamer setup-jvm``: resolve the JVM jars with Maven into the user cache.

Why a command: an installed wheel has no ``make jars`` and no checkout beside it. The
poms that ``make jars`` uses ship in the package (``streamer/resources/maven``); this
copies them to a scratch folder and runs the same Maven build there, with ``jvm.out``
pointed at the cache :mod:`streamer.jvm` looks in (or ``--dir``).
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from streamer.errors import EnvironmentSetupError

#: Maven module → the folder under the jar directory it fills.
MODULES = {"spark-kafka": "spark", "kafka-broker": "kafka", "apicurio": "apicurio", "hudi": "hudi-*",
           "hive-metastore": "hive-metastore"}
DEFAULT_MODULES = ("spark-kafka", "kafka-broker")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "setup-jvm",
        help="resolve the JVM jars (Spark's Kafka connector, a local Kafka broker) with Maven",
        description="Resolve the JVM jars with Maven (Java 17+ and mvn on the PATH) from the poms "
        "shipped in the package, into the user cache that `streamer` looks in (or --dir; then "
        "set MOR_STREAMER_JVM_DIR to it).",
    )
    p.add_argument("--dir", help="where the jars go (default: the user cache, see `streamer.jvm`)")
    p.add_argument(
        "--modules",
        default=",".join(DEFAULT_MODULES),
        help=f"comma-separated Maven modules, of {', '.join(MODULES)} (default: %(default)s; "
        "apicurio and hudi are only for the tests)",
    )
    p.add_argument("--offline", action="store_true", help="Maven offline (-o): only the local repository")
    p.set_defaults(func=run)


@dataclass(frozen=True)
class ResolvedJars:
    """One classpath folder and how many jars it holds after the build."""

    folder: Path
    jars: int


def maven_project() -> Path:
    """The shipped poms (parent and one per module), as a folder."""
    return Path(str(resources.files("streamer.resources").joinpath("maven")))


def resolve(target: Path, modules: list[str], offline: bool = False) -> list[ResolvedJars]:
    """Run ``mvn package`` for ``modules`` with their jars going under ``target``."""
    unknown = [m for m in modules if m not in MODULES]
    if unknown or not modules:
        raise EnvironmentSetupError(f"unknown module(s) {unknown}; choose from {', '.join(MODULES)}")
    mvn = shutil.which("mvn")
    if mvn is None:
        raise EnvironmentSetupError("Maven (mvn) is needed on the PATH to resolve the JVM jars (and Java 17+)")
    target.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="mor-streamer-maven-") as scratch:
        project = Path(scratch) / "project"
        shutil.copytree(maven_project(), project)
        cmd = [mvn, "-q", "-B", *(["-o"] if offline else []), "package",
               "-pl", ",".join(f"jvm/{m}" for m in modules), f"-Djvm.out={target.resolve()}"]
        done = subprocess.run(cmd, cwd=project, capture_output=True, text=True)
    if done.returncode != 0:
        tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-15:])
        raise EnvironmentSetupError(f"Maven failed ({' '.join(cmd[1:])}):\n{tail}")
    out = []
    for m in modules:
        for folder in sorted(target.glob(MODULES[m])):
            out.append(ResolvedJars(folder, sum(1 for _ in folder.rglob("*.jar"))))
    return out


def run(args: argparse.Namespace) -> int:
    from streamer.jvm import ENV_VAR, cache_dir, search_dirs

    target = Path(args.dir) if args.dir else cache_dir()
    modules = [m.strip() for m in args.modules.split(",") if m.strip()]
    print(f"resolving {', '.join(modules)} with Maven into {target} ...", flush=True)
    for r in resolve(target, modules, offline=args.offline):
        print(f"  {r.folder}: {r.jars} jar(s)")
    if target.resolve() not in [d.resolve() for d in search_dirs()]:
        print(f"note: streamer does not look in {target} now; set {ENV_VAR}={target}")
    return 0
