"""The wheel carries what an installed `streamer` needs and works away from the checkout.

Built from a copy of the sources (the build must not leave ``build/`` in the tree),
installed with ``pip install dist/*.whl`` into a fresh virtualenv (its dependencies
resolved by pip as a user's would be; pip's cache makes this a copy, not a download, on a
machine `make setup` ran on), then run through the installed ``streamer`` script from
another folder, so nothing can be found beside the repository by accident.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.slow]


#: The folders of the checkout the wheel installs, and the package each installs as:
#: ``sources/`` and ``transforms/`` are reached through the links ``streamer/sources`` and
#: ``streamer/transforms``; nothing installs as a generic top-level name.
INSTALLED_AS = {"streamer": "streamer", "sources": "streamer/sources", "transforms": "streamer/transforms"}


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("wheel")
    src = tmp / "src"
    junk = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info")
    for name in INSTALLED_AS:
        shutil.copytree(REPO / name, src / name, ignore=junk, symlinks=True)  # the links as links
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, src / name)
    pip = [sys.executable, "-m", "pip", "-q", "--disable-pip-version-check"]
    subprocess.run([*pip, "wheel", "--no-deps", "-w", str(tmp / "dist"), str(src)], check=True, timeout=600)
    (built,) = (tmp / "dist").glob("mor_streamer-*.whl")
    return built


@pytest.fixture(scope="module")
def installed(wheel) -> Path:
    tmp = wheel.parent.parent
    venv = tmp / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    # --no-compile: pip would byte-compile every module of pyspark, pandas and the rest (half
    # the install's CPU); the interpreter compiles what the tests import, as it would anyway
    subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "-q", "--disable-pip-version-check", "install",
                    "--no-compile", str(wheel)], check=True, timeout=900,
                   cwd=tmp)  # not the checkout: its mor_streamer.egg-info would pass for installed
    return venv


def test_the_wheel_holds_one_top_level_package_with_every_subpackage(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    for needed in ("streamer/py.typed", "streamer/resources/log4j2.properties", "streamer/resources/demo.yaml",
                   "streamer/resources/maven/pom.xml", "streamer/resources/maven/jvm/spark-kafka/pom.xml",
                   "streamer/resources/maven/jvm/kafka-broker/pom.xml"):
        assert needed in names, f"{needed} missing from {wheel.name}"
    top = {n.split("/")[0] for n in names if not n.split("/")[0].endswith(".dist-info")}
    assert top == {"streamer"}, f"top-level names in {wheel.name}: {sorted(top)}"
    packages = ["/".join((INSTALLED_AS[folder], *init.parent.relative_to(REPO / folder).parts, "__init__.py"))
                for folder in INSTALLED_AS for init in (REPO / folder).rglob("__init__.py")
                if not any((REPO / d).is_symlink() for d in init.relative_to(REPO).parents)]
    assert "streamer/sources/__init__.py" in packages and "streamer/transforms/__init__.py" in packages
    missing = sorted(p for p in packages if p not in names)
    assert not missing, f"packages missing from {wheel.name}: {missing}"
    with zipfile.ZipFile(wheel) as zf:  # testcontainers is a test extra: no shipped module uses it
        users = [n for n in sorted(names) if n.endswith(".py")
                 and re.search(rb"^\s*(from|import) testcontainers\b", zf.read(n), re.M)]
    assert not users, f"modules of {wheel.name} importing testcontainers: {users}"


def test_the_installed_distribution_is_streamer_alone_without_test_extras(installed, tmp_path):
    """A fresh virtualenv gets no generic top-level package (a
    user's own ``sources`` does not collide) and not testcontainers, a test-only extra."""
    code = """
import importlib.metadata as md, importlib.util as u
dist = md.distribution("mor-streamer")
print("top_level", sorted((dist.read_text("top_level.txt") or "streamer").split()))
print("record", sorted({str(f).split("/")[0] for f in dist.files if not str(f).startswith("..")
                        and ".dist-info" not in str(f).split("/")[0]}))
for name in ("testcontainers", "sources", "transforms", "streamer.sources", "streamer.transforms"):
    print("spec", name, u.find_spec(name) is not None)
"""
    done = _python(installed, code, tmp_path)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert "top_level ['streamer']" in lines
    assert "record ['streamer']" in lines
    assert "spec testcontainers False" in lines
    assert "spec sources False" in lines and "spec transforms False" in lines
    assert "spec streamer.sources True" in lines and "spec streamer.transforms True" in lines


def _script(venv: Path, args: list[str], cwd: Path, **env: str) -> subprocess.CompletedProcess:
    """The installed ``streamer`` command, as the README says to run it."""
    environ = {k: v for k, v in os.environ.items()
               if k not in ("MOR_STREAMER_JVM_DIR", "PYTHONPATH", "VIRTUAL_ENV")}
    environ.update(**env)
    return subprocess.run([str(venv / "bin" / "streamer"), *args], cwd=cwd, env=environ,
                          capture_output=True, text=True, timeout=900)


def _python(venv: Path, code: str, cwd: Path, **env: str) -> subprocess.CompletedProcess:
    environ = {k: v for k, v in os.environ.items()
               if k not in ("MOR_STREAMER_JVM_DIR", "PYTHONPATH", "VIRTUAL_ENV")}
    environ.update(**env)
    return subprocess.run([str(venv / "bin" / "python"), "-c", code], cwd=cwd, env=environ,
                          capture_output=True, text=True, timeout=900)


def test_installed_package_runs_from_anywhere_and_finds_jars_as_documented(installed, tmp_path):
    code = """
import streamer, streamer.jvm as jvm
from streamer.cli import main
from streamer.errors import StreamerError
print("file", streamer.__file__)
print("checkout", jvm.checkout_dir())
try:
    jvm.classpath("spark")
except StreamerError as e:
    print("error", e)
"""
    done = _python(installed, code, tmp_path, XDG_CACHE_HOME=str(tmp_path / "cache"))
    assert done.returncode == 0, done.stderr
    assert f"file {installed}" in done.stdout
    assert "checkout None" in done.stdout
    assert "streamer setup-jvm" in done.stdout and "MOR_STREAMER_JVM_DIR" in done.stdout

    version = subprocess.run([str(installed / "bin" / "streamer"), "--version"], cwd=tmp_path, capture_output=True,
                             text=True, timeout=300)  # the console script pip installed
    assert version.returncode == 0 and version.stdout.startswith("mor-streamer "), version.stderr

    found = _python(installed, "import streamer.jvm as j; print(len(j.classpath('spark')))", tmp_path,
                    MOR_STREAMER_JVM_DIR=str(REPO / ".jvm"))
    assert found.returncode == 0, found.stderr
    assert int(found.stdout) > 0


@pytest.mark.integration
def test_installed_setup_jvm_then_demo(installed, tmp_path):
    """The documented path: `streamer setup-jvm` (Maven offline: the local repository `make jars`
    filled), then `streamer demo`, both from the installed package."""
    cache = str(tmp_path / "cache")
    setup = _script(installed, ["setup-jvm", "--offline"], tmp_path, XDG_CACHE_HOME=cache)
    assert setup.returncode == 0, setup.stdout + setup.stderr
    assert f"{cache}/mor-streamer/jvm/spark" in setup.stdout
    demo = _script(installed, ["demo", "--batches", "2"], tmp_path, XDG_CACHE_HOME=cache)
    assert demo.returncode == 0, demo.stdout[-3000:] + demo.stderr[-3000:]
    assert "What a snapshot query returns now" in demo.stdout
    assert (tmp_path / "lake" / "demo" / ".hoodie" / "hoodie.properties").is_file()
