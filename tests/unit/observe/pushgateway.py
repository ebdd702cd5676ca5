"""A real Prometheus push gateway for tests: ``make pushgateway`` builds it into .tools/bin.

Started on a free loopback port per test and killed afterwards. The binary is part of the
set-up (``make setup`` builds it; without Go that step fails): a test using it fails, naming
the step, when the binary was not built; it never skips.
"""

from __future__ import annotations

import contextlib
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

BINARY = Path(__file__).resolve().parents[3] / ".tools" / "bin" / "pushgateway"
#: How to build it, as the Makefile says when Go is missing.
SETUP_STEP = ("Run `make pushgateway` (it needs Go: /usr/local/go/bin/go, or Debian's "
              "`apt-get install golang`, or `make pushgateway GO=/path/to/go`).")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get(url: str) -> str:
    with urllib.request.urlopen(url, timeout=5) as r:
        return r.read().decode()


@contextlib.contextmanager
def running_pushgateway() -> Iterator[str]:
    """The gateway's base URL (``http://127.0.0.1:PORT``) while it runs."""
    if not BINARY.exists():
        pytest.fail(f"no push gateway at {BINARY}: a set-up step is missing. {SETUP_STEP}")
    port = _free_port()
    proc = subprocess.Popen([str(BINARY), f"--web.listen-address=127.0.0.1:{port}"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 20
        for _ in range(200):  # bounded: 200 tries or 20 s
            if proc.poll() is not None:
                raise RuntimeError(f"push gateway exited: {proc.stderr.read().decode()[-500:]}")
            with contextlib.suppress(OSError):
                get(f"{url}/-/ready")
                break
            if time.monotonic() > deadline:
                raise RuntimeError("push gateway not ready within 20 s")
            time.sleep(0.1)
        else:
            raise RuntimeError("push gateway not ready after 200 tries")
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
