"""Where the Maven-resolved JVM jars live, and a clear error when they do not.

``make jars`` (run by ``make demo`` and ``make test``) copies two separate runtime
classpaths from Maven Central into ``.jvm/``: ``spark/`` (the Kafka connector for
Spark) and ``kafka/`` (a KRaft broker for tests and the demo). They never share a
classpath. ``MOR_STREAMER_JVM_DIR`` points elsewhere if the jars live outside the repo.
"""

from __future__ import annotations

import os
from pathlib import Path

from streamer.errors import EnvironmentSetupError

_REPO_ROOT = Path(__file__).resolve().parent.parent


def jvm_dir() -> Path:
    env = os.environ.get("MOR_STREAMER_JVM_DIR")
    return Path(env) if env else _REPO_ROOT / ".jvm"


def classpath(kind: str) -> list[str]:
    """Jars of one classpath: ``"spark"`` (connector) or ``"kafka"`` (broker)."""
    folder = jvm_dir() / kind
    jars = sorted(str(p) for p in folder.glob("*.jar")) if folder.is_dir() else []
    if not jars:
        raise EnvironmentSetupError(
            f"no JVM jars for {kind!r} in {folder}; run `make jars` (Maven resolves them "
            "from pom.xml) or set MOR_STREAMER_JVM_DIR"
        )
    return jars


def java_executable() -> str:
    home = os.environ.get("JAVA_HOME")
    if home and (Path(home) / "bin" / "java").exists():
        return str(Path(home) / "bin" / "java")
    from shutil import which

    found = which("java")
    if not found:
        raise EnvironmentSetupError("no `java` on PATH and JAVA_HOME unset; Java 17+ is needed")
    return found
