"""Where the Maven-resolved JVM jars live, and a clear error when they do not.

The jars are not in the wheel (Spark's Kafka connector and a KRaft broker are large and
resolved from Maven Central). Each kind has its own folder: ``spark/`` (the connector,
added to every SparkSession), ``kafka/`` (the local broker), and for the tests
``apicurio/`` and ``hudi-*/``. They never share a classpath. A folder holding them is
looked for, in order:

1. ``$MOR_STREAMER_JVM_DIR``, if set (and then only there: an explicit choice is not
   silently overridden);
2. ``.jvm/`` of a source checkout, filled by ``make jars`` (``make demo``/``make test``);
3. the user cache, ``${XDG_CACHE_HOME:-~/.cache}/mor-streamer/jvm``, filled by
   ``streamer setup-jvm`` from the poms shipped in the package.
"""

from __future__ import annotations

import os
from pathlib import Path

from streamer.errors import EnvironmentSetupError

ENV_VAR = "MOR_STREAMER_JVM_DIR"

_REPO_ROOT = Path(__file__).resolve().parent.parent


def cache_dir() -> Path:
    """The per-user folder ``streamer setup-jvm`` fills."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "mor-streamer" / "jvm"


def checkout_dir() -> Path | None:
    """``.jvm/`` of the source checkout this package runs from, if it runs from one."""
    return _REPO_ROOT / ".jvm" if (_REPO_ROOT / "pom.xml").is_file() else None


def search_dirs() -> list[Path]:
    """The folders looked in, in order (only the variable's when it is set)."""
    env = os.environ.get(ENV_VAR)
    if env:
        return [Path(env)]
    return [d for d in (checkout_dir(), cache_dir()) if d is not None]


def _has(folder: Path, kind: str) -> bool:
    sub = folder / kind
    return sub.is_dir() and any(sub.iterdir())


def jvm_dir(kind: str | None = None) -> Path:
    """The first folder in :func:`search_dirs` that holds ``kind`` (default: the first one)."""
    dirs = search_dirs()
    if kind is not None:
        for d in dirs:
            if _has(d, kind):
                return d
    return dirs[0]


def classpath(kind: str) -> list[str]:
    """Jars of one classpath: ``"spark"`` (connector) or ``"kafka"`` (broker)."""
    folder = jvm_dir(kind) / kind
    jars = sorted(str(p) for p in folder.glob("*.jar")) if folder.is_dir() else []
    if not jars:
        raise EnvironmentSetupError(missing_message(kind))
    return jars


def missing_message(kind: str) -> str:
    env = os.environ.get(ENV_VAR)
    if env:
        return (f"no JVM jars for {kind!r} in {Path(env) / kind} ({ENV_VAR}={env}); point {ENV_VAR} "
                "at a folder holding them, or unset it and run `streamer setup-jvm`")
    looked = ", ".join(str(d / kind) for d in search_dirs())
    checkout = " (in a source checkout, `make jars` does the same into .jvm/)" if checkout_dir() else ""
    return (
        f"no JVM jars for {kind!r} (looked in {looked}); run `streamer setup-jvm` to resolve "
        f"them with Maven into {cache_dir()}{checkout}, or set {ENV_VAR} to a folder holding "
        f"{kind}/*.jar"
    )


def java_executable() -> str:
    home = os.environ.get("JAVA_HOME")
    if home and (Path(home) / "bin" / "java").exists():
        return str(Path(home) / "bin" / "java")
    from shutil import which

    found = which("java")
    if not found:
        raise EnvironmentSetupError("no `java` on PATH and JAVA_HOME unset; Java 17+ is needed")
    return found
