"""``streamer.spark``: a Ctrl-C during the JVM start-up stops before any work.

Real signals, sent to this process while a start-up callable runs (no JVM needed: what
matters is what happens around the start-up, not inside it).
"""

from __future__ import annotations

import signal
import threading

import pytest

from streamer.spark import StartInterrupted, start_noticing_interrupts


class StopAfterBatch:
    """The shape of ``streamer run``'s first-Ctrl-C handler: it only sets a flag."""

    def __init__(self) -> None:
        self.stop = threading.Event()

    def __call__(self, signum, frame) -> None:
        self.stop.set()


@pytest.fixture
def graceful():
    handler = StopAfterBatch()
    old_int, old_term = signal.signal(signal.SIGINT, handler), signal.signal(signal.SIGTERM, handler)
    yield handler
    signal.signal(signal.SIGINT, old_int)
    signal.signal(signal.SIGTERM, old_term)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_during_start_up_stops_after_it_and_still_reaches_the_run_handler(graceful, sig):
    finished = []

    def start() -> str:
        signal.raise_signal(sig)
        finished.append(True)  # the start-up itself is not torn down half-way
        return "session"

    with pytest.raises(StartInterrupted, match=f"while Spark was starting \\({sig.name}\\)"):
        start_noticing_interrupts(start)
    assert finished == [True]
    assert graceful.stop.is_set()
    assert signal.getsignal(signal.SIGINT) is graceful and signal.getsignal(signal.SIGTERM) is graceful


def test_no_signal_returns_the_session_and_restores_the_handlers(graceful):
    assert start_noticing_interrupts(lambda: "session") == "session"
    assert not graceful.stop.is_set()
    assert signal.getsignal(signal.SIGINT) is graceful


def test_with_pythons_default_handler_ctrl_c_interrupts_at_once():
    # Python's default, as in a plain script: set here, since the worker process's earlier
    # tests may have started a SparkContext on this thread, whose handler stays installed
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        _default_handler_case()
    finally:
        signal.signal(signal.SIGINT, previous)


def _default_handler_case() -> None:
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    reached = []

    def start() -> None:
        signal.raise_signal(signal.SIGINT)
        reached.append(True)

    with pytest.raises(KeyboardInterrupt):
        start_noticing_interrupts(start)
    assert reached == []
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_off_the_main_thread_start_just_runs():
    out = []
    t = threading.Thread(target=lambda: out.append(start_noticing_interrupts(lambda: "session")))
    t.start()
    t.join(30)
    assert out == ["session"]


@pytest.mark.integration
@pytest.mark.slow
def test_ctrl_c_while_streamer_run_starts_spark_runs_no_batch(tmp_path):
    """End to end: SIGINT shortly after a ``trigger: once`` `streamer run` announced its
    pipeline (the JVM takes seconds to start, so it lands in the start-up - or before it,
    which must not run a batch either): no commit, exit 130 or 0. A continuous run paused
    inside the start-up is tests/integration/pipeline/test_signals.py's ``start-up``."""
    trigger = "{mode: once}"
    import os
    import subprocess
    import sys

    from tests.conftest import REPO

    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "a.json").write_text('{"id": 1, "ts": 1}\n')
    table = tmp_path / "lake" / "t"
    config = tmp_path / "p.yaml"
    config.write_text("pipelines:\n  - name: trips\n"
                      f"    source: {{type: files, path: {tmp_path / 'in'}, format: json}}\n"
                      f"    target: {{path: {table}, record_key: id, ordering_field: ts}}\n"
                      f"    trigger: {trigger}\n")
    proc = subprocess.Popen([sys.executable, "-m", "streamer", "run", str(config)], cwd=REPO,
                            env=dict(os.environ, PYTHONPATH=str(REPO)), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    try:
        seen = []
        for _ in range(50):  # bounded: the announcement comes within the first lines
            line = proc.stdout.readline()
            seen.append(line)
            if "pipeline trips" in line or not line:
                break
        assert any("pipeline trips" in line for line in seen), seen
        threading.Event().wait(0.5)
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode in (0, 130), out
    assert "batch 0:" not in out
    hoodie = table / ".hoodie"
    assert not hoodie.exists() or not [f for f in os.listdir(hoodie) if f.endswith(".deltacommit")]


def test_an_ignored_sigint_stays_ignored():
    old = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        def start() -> str:
            signal.raise_signal(signal.SIGINT)
            return "session"

        assert start_noticing_interrupts(start) == "session"
        assert signal.getsignal(signal.SIGINT) == signal.SIG_IGN
    finally:
        signal.signal(signal.SIGINT, old)
