"""Mutation check of the interop tests: do they notice a writer or a reader that loses a row?

    .venv/bin/python -m tests.mutation_check [--worktree] [--keep] [--only MUTANT] [--groups G,...]

For each mutant the sources (``streamer/ sources/ transforms/ tests/``, ``pyproject.toml``,
``pom.xml``, ``configs/``) of the commit ``HEAD`` (``git archive``; with ``--worktree``: the
working tree as it is, edits in progress included) are copied into a temporary folder,
the copy is patched, and each test group runs there with ``cwd`` and ``PYTHONPATH`` set to the
copy (the virtualenv's editable install of the checkout comes after ``PYTHONPATH``; a
check outside pytest asserts that ``streamer`` and ``tests`` import from the copy and
that the imported module carries the mutation). ``.venv-hudi`` and ``.jvm`` are
symlinked into the copy (``tests.support.hudi`` finds them in the checkout it is in) and
``../shared`` (the Hudi fixtures) next to it. Nothing in the checkout changes.

Mutants:
  writer-drops-row  ``HudiWriter._write`` drops the last row of every Arrow batch;
  reader-drops-row  ``Table.read`` drops the last row of every answer.

Groups: the Hudi JVM tier's table-kind and key-generator tests (Hudi 0.15, 1.0, hudi-rs
and ours against the model), the hudi-rs conformance tests and the writer unit tests.
Every group must fail under every mutant; the exit status is 1 if any group survives
(or does not run), else 0. Each pytest run is bounded by ``--timeout-s``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
COPIED = ("streamer", "sources", "transforms", "tests", "configs", "pyproject.toml", "pom.xml")
LINKED = (".venv-hudi", ".jvm")
MARK = "# MUTATION-CHECK MUTANT"


@dataclass(frozen=True)
class Mutant:
    name: str
    file: str
    anchor: str
    replacement: str
    module: str


MUTANTS = (
    Mutant(
        "writer-drops-row",
        "streamer/write/writer.py",
        "        started = time.monotonic()\n",
        "        started = time.monotonic()\n"
        f"        if isinstance(data, pa.Table) and data.num_rows > 1:  {MARK}\n"
        "            data = data.slice(0, data.num_rows - 1)\n",
        "streamer.write.writer",
    ),
    Mutant(
        "reader-drops-row",
        "streamer/read/table.py",
        "        return self.scan(query, as_of=as_of, begin=begin, end=end, columns=columns, filter=filter,\n"
        "                         allow_corrupt=allow_corrupt).table\n",
        "        t = self.scan(query, as_of=as_of, begin=begin, end=end, columns=columns, filter=filter,\n"
        "                      allow_corrupt=allow_corrupt).table\n"
        f"        return t.slice(0, t.num_rows - 1) if t.num_rows else t  {MARK}\n",
        "streamer.read.table",
    ),
)

#: name -> pytest arguments (paths and a -k selection where a group is large).
GROUPS: dict[str, list[str]] = {
    "hudi-jvm-tier": ["tests/hudi_jvm/test_our_tables_in_hudi.py", "-k", "not spark_engine"],
    "hudi-rs-conformance": ["tests/conformance/test_writer_hudi_rs.py",
                            "tests/conformance/test_merge_rules_hudi_rs.py"],
    "writer-unit": ["tests/unit/write"],
}


@dataclass
class Outcome:
    mutant: str
    group: str
    exit_code: int
    tests: int
    failed: int
    seconds: float
    note: str = ""

    @property
    def caught(self) -> bool:
        return self.exit_code == 1 and self.failed > 0


def _export_head(copy: Path) -> None:
    """The committed sources of ``HEAD`` (a consistent state while others edit the tree)."""
    import io
    import tarfile

    listed = subprocess.run(["git", "ls-tree", "--name-only", "HEAD"], cwd=REPO, capture_output=True,
                            text=True, check=True).stdout.split()
    names = [n for n in COPIED if n in listed]
    tar = subprocess.run(["git", "archive", "--format=tar", "HEAD", "--", *names], cwd=REPO,
                         capture_output=True, check=True, timeout=300).stdout
    with tarfile.open(fileobj=io.BytesIO(tar)) as tf:
        tf.extractall(copy, filter="data")


def make_copy(root: Path, mutant: Mutant, worktree: bool = False) -> Path:
    copy = root / "main"
    copy.mkdir(parents=True)
    if worktree:
        ignore = shutil.ignore_patterns("__pycache__", "*.pyc", ".pytest_cache")
        for name in COPIED:
            src = REPO / name
            if src.is_dir():
                shutil.copytree(src, copy / name, ignore=ignore, symlinks=True)
            elif src.exists():
                shutil.copy2(src, copy / name)
    else:
        _export_head(copy)
    for name in LINKED:
        if (REPO / name).exists():
            (copy / name).symlink_to(REPO / name)
    shared = REPO.parent / "shared"
    if shared.exists():
        (root / "shared").symlink_to(shared)
    target = copy / mutant.file
    text = target.read_text()
    if text.count(mutant.anchor) != 1:
        raise SystemExit(f"{mutant.name}: the anchor is not exactly once in {mutant.file}; "
                         "update tests/mutation_check.py to the current source")
    target.write_text(text.replace(mutant.anchor, mutant.replacement))
    return copy


def env_for(copy: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(copy)
    env["MOR_REQUIRE_HUDI"] = "1"  # a missing Hudi tier fails the group instead of skipping
    env.pop("PYTEST_ADDOPTS", None)
    return env


def verify_imports(copy: Path, mutant: Mutant) -> None:
    """Outside pytest: the copy's packages are the ones imported, with the mutation in."""
    probe = (
        "import importlib, inspect, streamer, tests\n"
        f"m = importlib.import_module({mutant.module!r})\n"
        "print(streamer.__file__); print(tests.__file__); print(m.__file__)\n"
        f"print({MARK!r} in inspect.getsource(m))\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], cwd=copy, env=env_for(copy),
                         capture_output=True, text=True, timeout=120, check=True).stdout.split("\n")
    for path in out[:3]:
        if not Path(path).resolve().is_relative_to(copy.resolve()):
            raise SystemExit(f"{mutant.name}: {path} is imported from outside the copy {copy}")
    if out[3] != "True":
        raise SystemExit(f"{mutant.name}: the imported {mutant.module} does not carry the mutation")


def run_group(copy: Path, mutant: Mutant, group: str, args: list[str], timeout_s: float) -> Outcome:
    report = copy.parent / f"{group}.xml"
    cmd = [sys.executable, "-m", "pytest", *args, "-q", "-p", "no:cacheprovider",
           f"--junitxml={report}", f"--basetemp={copy.parent / ('tmp-' + group)}"]
    started = time.monotonic()
    log = copy.parent / f"{group}.log"
    try:
        with open(log, "w") as out:
            code = subprocess.run(cmd, cwd=copy, env=env_for(copy), stdout=out, stderr=subprocess.STDOUT,
                                  timeout=timeout_s).returncode
        note = ""
    except subprocess.TimeoutExpired:
        code, note = -1, f"timed out after {timeout_s:.0f}s"
    seconds = time.monotonic() - started
    tests = failed = 0
    if report.exists():
        for case in ET.parse(report).getroot().iter("testcase"):
            tests += 1
            failed += any(child.tag in ("failure", "error") for child in case)
    if code not in (0, 1) and not note:
        note = f"pytest exit status {code} (see {log})"
    return Outcome(mutant.name, group, code, tests, failed, seconds, note)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--worktree", action="store_true",
                    help="copy the working tree as it is instead of the commit HEAD")
    ap.add_argument("--keep", action="store_true", help="keep the patched copies and their logs")
    ap.add_argument("--only", choices=[m.name for m in MUTANTS], action="append")
    ap.add_argument("--groups", help=f"comma-separated subset of {','.join(GROUPS)}")
    ap.add_argument("--timeout-s", type=float, default=1800.0, help="bound of each pytest run")
    opts = ap.parse_args(argv)
    groups = {g: GROUPS[g] for g in (opts.groups.split(",") if opts.groups else GROUPS)}
    mutants = [m for m in MUTANTS if not opts.only or m.name in opts.only]
    work = Path(tempfile.mkdtemp(prefix="mor-mutants-"))
    outcomes: list[Outcome] = []
    try:
        for mutant in mutants:
            copy = make_copy(work / mutant.name, mutant, opts.worktree)
            verify_imports(copy, mutant)
            print(f"== {mutant.name}: patched {mutant.file} in {copy}", flush=True)
            for group, args in groups.items():
                o = run_group(copy, mutant, group, args, opts.timeout_s)
                outcomes.append(o)
                verdict = "CAUGHT" if o.caught else "SURVIVED"
                print(f"   {group:<22} {verdict:<8} {o.failed}/{o.tests} tests failed, "
                      f"{o.seconds:.0f}s {o.note}", flush=True)
    finally:
        if opts.keep:
            print(f"copies and logs kept in {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    survived = [o for o in outcomes if not o.caught]
    print("\nmutant              group                  caught  failed/tests  seconds")
    for o in outcomes:
        print(f"{o.mutant:<19} {o.group:<22} {'yes' if o.caught else 'NO':<7} "
              f"{o.failed:>6}/{o.tests:<5} {o.seconds:>8.0f}  {o.note}")
    if survived:
        print(f"\n{len(survived)} group(s) survived a mutant (or did not run): the tests miss a lost row")
        return 1
    print("\nevery group caught every mutant")
    return 0


if __name__ == "__main__":
    sys.exit(main())
