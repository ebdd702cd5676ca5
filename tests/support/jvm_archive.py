"""Make the JDK class-data archive the suite's Spark JVMs start from (``make test`` set-up).

About a hundred Spark driver JVMs start in one ``make test``: the session of each worker
and every ``streamer run`` child of the kill, signal and fault campaigns. Each parses and
verifies some ten thousand classes from Spark's jars, about a third of its start-up CPU
(a local session: ~15 CPU-s without the archive, ~9.5 with it, on this 2-core machine).
A dynamic CDS archive (JDK 13+ ``-XX:ArchiveClassesAtExit``) records the classes one
training run loaded; ``streamer.spark`` then adds ``-XX:SharedArchiveFile`` to every local
session while ``$MOR_STREAMER_JVM_ARCHIVE`` names the file (``tests/conftest.py`` sets it).

The training run is a child process that starts a session the way ``streamer run`` does,
runs one small pipeline of each engine, and exits; the JVM writes the archive when it
exits, after the child, so this process waits for that JVM to end before it publishes the
file under its final name (a half-written archive is never seen by a test). An archive
the JVM cannot use (another JDK, another pyspark) only makes starts slow again: the JVM
refuses it and starts without it.

    python -m tests.support.jvm_archive .cache/spark-classes.jsa
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

#: Bound on the training run (a JVM start, two tiny pipelines, the archive dump).
TRAIN_S = 600.0
#: Bound on the wait for the JVM to write the archive and exit after the child ended.
DUMP_S = 300.0


def _train(dump: Path, pid_file: Path) -> None:
    """In the child: a session that dumps its classes at exit, two pipelines, then exit."""
    from streamer import spark as sparks
    from streamer.cli import main

    os.environ.pop(sparks.JVM_ARCHIVE_ENV, None)
    spark = sparks.get_spark(app_name="mor-streamer-jvm-archive", conf={
        "spark.driver.extraJavaOptions": f"-XX:ArchiveClassesAtExit={dump} -Xlog:cds=off -Xlog:cds+dynamic=off",
    })
    pid_file.write_text(str(spark._jvm.java.lang.ProcessHandle.current().pid()))
    work = Path(tempfile.mkdtemp(prefix="mor-jvm-archive-"))
    (work / "in").mkdir()
    (work / "in" / "001.json").write_text("".join(json.dumps({"id": f"k{i}", "v": i}) + "\n" for i in range(20)))
    for engine in ("local", "spark"):
        yaml = work / f"{engine}.yaml"
        yaml.write_text(f"""
pipelines:
  - name: train_{engine}
    source: {{type: files, path: "{work / 'in'}", format: json, schema: "id STRING, v BIGINT"}}
    target: {{path: "{work / 'lake' / engine}", record_key: [id]}}
    trigger: {{mode: available_now}}
    engine: {engine}
""")
        if main(["run", str(yaml)]) != 0:
            raise SystemExit(f"the training pipeline ({engine}) failed")
    spark.stop()


def _gone(pid: int) -> bool:
    """Exited (or a zombie nobody reaps: the child that started it has ended)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1].startswith("Z")
    except OSError:
        return True


def build(target: Path) -> Path:
    """Make ``target`` unless it exists; returns it. Raises if the training run fails."""
    if target.is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    dump = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    pid_file = target.with_name(f".{target.name}.{os.getpid()}.pid")
    try:
        subprocess.run([sys.executable, "-m", "tests.support.jvm_archive", "--train", str(dump), str(pid_file)],
                       check=True, timeout=TRAIN_S)
        jvm = int(pid_file.read_text())
        deadline = time.monotonic() + DUMP_S
        for _ in range(int(DUMP_S / 0.2) + 1):  # bounded in count and time
            if _gone(jvm) or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        if not _gone(jvm):
            raise SystemExit(f"the training JVM (pid {jvm}) did not exit within {DUMP_S:.0f}s")
        if not dump.is_file() or dump.stat().st_size == 0:
            raise SystemExit(f"the training JVM wrote no class-data archive at {dump}")
        dump.replace(target)
    finally:
        dump.unlink(missing_ok=True)
        pid_file.unlink(missing_ok=True)
    return target


if __name__ == "__main__":
    if sys.argv[1:2] == ["--train"]:
        _train(Path(sys.argv[2]), Path(sys.argv[3]))
    else:
        print(build(Path(sys.argv[1]).resolve()))
