"""A local server's start retries ports it picked itself that another process took
before the server bound them (streamer/local/process.py): the broker fixture of a test
session once failed so, erroring every test that used it ("Address already in use").
The server here is a real child process binding a real loopback port."""

from __future__ import annotations

import socket
import sys
from dataclasses import dataclass, field
from typing import ClassVar

import pytest

from streamer.errors import StreamerError
from streamer.local.process import BIND_ATTEMPTS, ManagedProcess

_LISTEN = ("import socket, sys, time\n"
           "s = socket.socket()\n"
           "s.bind(('127.0.0.1', int(sys.argv[1])))\n"
           "s.listen()\n"
           "time.sleep(120)\n")


@dataclass
class _Listener(ManagedProcess):
    """Listens on ``port``; a start picks the next of ``picks`` (as servers pick a free port)."""

    port: int = 0
    picks: list[int] = field(default_factory=list)

    LOG_NAME: ClassVar[str] = "listener.log"

    def _launch(self, timeout_s: float) -> None:
        self._own_workdir("mor-listener-")
        self.port = self.port or self.picks.pop(0)
        self._spawn([sys.executable, "-c", _LISTEN, str(self.port)])
        self._wait_for_port(self.port, timeout_s, StreamerError)


def _bound() -> socket.socket:
    """A loopback port held bound (not listening: a connection to it is refused)."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    return s


def test_a_picked_port_taken_before_the_bind_is_picked_again():
    with _bound() as taken, _bound() as spare:
        free = spare.getsockname()[1]
        spare.close()  # released: the second pick
        server = _Listener(picks=[taken.getsockname()[1], free])
        try:
            server.start(20)
            assert server.port == free and server.picks == []
            with socket.create_connection(("127.0.0.1", free), timeout=5):
                pass
        finally:
            server.stop()


def test_a_given_port_is_never_changed():
    with _bound() as taken:
        port = taken.getsockname()[1]
        server = _Listener(port=port)
        with pytest.raises(StreamerError, match="Address already in use"):
            server.start(20)
        assert server.port == port


def test_the_retries_are_bounded():
    held = [_bound() for _ in range(BIND_ATTEMPTS)]
    try:
        server = _Listener(picks=[s.getsockname()[1] for s in held])
        with pytest.raises(StreamerError, match="Address already in use"):
            server.start(20)
        assert server.picks == []
    finally:
        for s in held:
            s.close()
