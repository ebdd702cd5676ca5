"""The fault hook: an injected I/O error fails exactly the step it names, once."""

from __future__ import annotations

import errno
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from streamer import faults

FAULTS_PY = Path(faults.__file__)


@pytest.fixture(autouse=True)
def _disarmed():
    faults.reset()
    yield
    faults.reset()


def steps(*labels: str) -> None:
    for label in labels:
        faults.step(label)


def test_unarmed_steps_only_count():
    steps("a", "b", "c")
    assert faults.steps_taken() == 3
    assert faults.injected() == []


def test_the_nth_step_from_now_fails_once_with_enospc_naming_its_label():
    steps("before")
    faults.fail_at(2)
    faults.step("one")
    with pytest.raises(OSError) as e:
        faults.step("two")
    assert e.value.errno == errno.ENOSPC
    assert e.value.strerror == faults.INJECTED == "No space left on device (injected)"
    assert e.value.filename == "two"
    steps("two", "three")  # once: the next run goes through
    assert faults.injected() == ["two"]


def test_a_label_prefix_fails_its_first_or_nth_step():
    faults.fail_at(label="compaction marker")
    steps("compaction inflight")
    with pytest.raises(OSError, match="injected"):
        faults.step("compaction marker f1.parquet")
    faults.fail_at(2, label="markers")
    steps("markers a.log", "before log file a.log")
    with pytest.raises(OSError) as e:
        faults.step("markers b.log")
    assert e.value.filename == "markers b.log"
    assert faults.injected() == ["compaction marker f1.parquet", "markers b.log"]


def test_another_errno():
    faults.fail_at(1, err=errno.EDQUOT)
    with pytest.raises(OSError) as e:
        faults.step("x")
    assert e.value.errno == errno.EDQUOT and "(injected)" in e.value.strerror


def test_a_disk_that_stays_full_fails_every_step_from_the_first_on():
    faults.fail_at(label="b", times=3)
    faults.step("a")
    failed = []
    for label in ("b", "a", "c", "d"):
        try:
            faults.step(label)
        except OSError as e:
            failed.append(e.filename)
    assert failed == ["b", "a", "c"] == faults.injected()
    faults.step("e")  # three errors injected: the disk has room again


def test_reset_disarms_an_unfired_fault_and_stops_recording():
    labels: list[str] = []
    faults.record(labels)
    faults.fail_at(5)
    steps("a", "b")
    faults.reset()
    steps("c", "d", "e", "f")
    assert labels == ["a", "b"]
    assert faults.injected() == []


def test_bad_arguments_are_refused():
    with pytest.raises(ValueError):
        faults.fail_at()
    with pytest.raises(ValueError):
        faults.fail_at(-1)
    with pytest.raises(ValueError):
        faults.fail_at(1, times=0)


def test_exactly_one_of_many_threads_fails():
    faults.fail_at(150)
    failed: list[str] = []

    def work(t: int) -> None:
        for i in range(100):  # bounded: 4 x 100 steps
            try:
                faults.step(f"t{t} {i}")
            except OSError as e:
                failed.append(e.filename)

    threads = [threading.Thread(target=work, args=(t,)) for t in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(timeout=60)
    assert faults.steps_taken() == 400
    assert len(failed) == 1 and faults.injected() == failed


def _run_env(env: dict[str, str]) -> subprocess.CompletedProcess:
    """The module alone (no project imports) in a fresh interpreter, armed by ``env``."""
    code = (
        "import importlib.util, sys\n"
        f"spec = importlib.util.spec_from_file_location('faults', {str(FAULTS_PY)!r})\n"
        "m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)\n"
        "for label in ('a x', 'b y', 'a z', 'b w'):\n"
        "    try:\n"
        "        m.step(label)\n"
        "    except OSError as e:\n"
        "        print(e.errno, e.filename)\n"
    )
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)


def test_the_environment_arms_a_step_a_label_an_errno_and_a_full_disk():
    out = _run_env({"MOR_STREAMER_FAIL_AT_STEP": "2"})
    assert out.stdout.split("\n")[:-1] == [f"{errno.ENOSPC} b y"], out.stderr
    out = _run_env({"MOR_STREAMER_FAIL_AT_LABEL": "a", "MOR_STREAMER_FAIL_AT_STEP": "2",
                    "MOR_STREAMER_FAIL_ERRNO": "EDQUOT"})
    assert out.stdout.split("\n")[:-1] == [f"{errno.EDQUOT} a z"], out.stderr
    out = _run_env({"MOR_STREAMER_FAIL_AT_STEP": "3", "MOR_STREAMER_FAIL_TIMES": "5"})
    assert out.stdout.split("\n")[:-1] == [f"{errno.ENOSPC} a z", f"{errno.ENOSPC} b w"], out.stderr
    out = _run_env({"MOR_STREAMER_FAIL_AT_STEP": "1", "MOR_STREAMER_FAIL_ERRNO": "ENOPE"})
    assert out.returncode != 0 and "MOR_STREAMER_FAIL_ERRNO" in out.stderr


def test_pause_at_holds_the_first_matching_step_until_its_file_goes(tmp_path):
    pause = tmp_path / "pause"
    faults.pause_at("requested", pause)
    try:
        done = threading.Event()
        worker = threading.Thread(target=lambda: (steps("markers x", "requested", "requested"), done.set()))
        worker.start()
        for _ in range(200):  # bounded: 10 s
            if pause.exists():
                break
            done.wait(0.05)
        assert pause.read_text() == "requested"
        assert not done.is_set(), "the step went on while its pause file was there"
        pause.unlink()
        worker.join(10)
        assert done.is_set() and not pause.exists()  # the second "requested" did not pause again
    finally:
        faults.pause_at(None)


def test_pause_at_needs_a_file_and_none_disarms(tmp_path):
    with pytest.raises(ValueError, match="pause file"):
        faults.pause_at("requested")
    faults.pause_at("requested", tmp_path / "pause")
    faults.pause_at(None)
    steps("requested")  # returns at once
    assert not (tmp_path / "pause").exists()
