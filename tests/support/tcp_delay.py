"""A loopback TCP relay that delays every reply, or never answers (a hung server).

For servers spoken to over a plain socket (the Hive metastore's thrift): each chunk the
server sends back is held ``delay_s`` before it is passed on; ``hang=True`` accepts
connections and forwards nothing, as a metastore stuck in a long GC or a lock does.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time


class DelayRelay:
    def __init__(self, upstream: tuple[str, int], *, delay_s: float = 0.0, hang: bool = False) -> None:
        self.upstream, self.delay_s, self.hang = upstream, delay_s, hang
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.settimeout(0.2)
        self._stop = threading.Event()
        self._sockets: list[socket.socket] = []
        self._thread = threading.Thread(target=self._accept, name="tcp-delay", daemon=True)

    @property
    def port(self) -> int:
        return int(self._listener.getsockname()[1])

    def __enter__(self) -> DelayRelay:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(10)
        for s in [self._listener, *self._sockets]:
            with contextlib.suppress(OSError):
                s.close()

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                client, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            self._sockets.append(client)
            if self.hang:
                continue  # accepted, never answered
            server = socket.create_connection(self.upstream, timeout=30)
            self._sockets.append(server)
            for src, dst, delay in ((client, server, 0.0), (server, client, self.delay_s)):
                threading.Thread(target=self._pipe, args=(src, dst, delay), daemon=True).start()

    def _pipe(self, src: socket.socket, dst: socket.socket, delay: float) -> None:
        src.settimeout(0.5)
        while not self._stop.is_set():
            try:
                data = src.recv(65536)
            except TimeoutError:
                continue
            except OSError:
                return
            if not data:
                with contextlib.suppress(OSError):
                    dst.shutdown(socket.SHUT_WR)
                return
            if delay:
                time.sleep(delay)
            try:
                dst.sendall(data)
            except OSError:
                return
