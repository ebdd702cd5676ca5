"""A fault-injecting HTTP proxy in front of the local S3 server, on loopback.

The object store misbehaves the ways S3 does under load or in an outage, on a seeded
fraction of the requests that pass while a fault window is open:

* ``slowdown``: ``503 SlowDown`` without touching the store (S3's throttling answer; the
  request was not applied, the SDKs retry it);
* ``lost-reply``: the request reaches the store and is applied, then the connection
  drops before the reply (a timeout or reset after the fact: the client cannot tell a
  PUT that landed from one that did not, and retries it);
* ``slow-reply``: applied, and the reply held back past the client's timeout;
* ``reset``: the connection drops before the request reaches the store (nothing applied);
* an **outage** (:meth:`FaultProxy.outage`): the endpoint restarts - every open
  connection reset, new ones refused for a while, then the same port answers again.

Everything else is passed through byte for byte (headers included: SigV4 signs the
``Host`` header as the client sent it, and the store checks it as received). Each
injected fault is counted by kind and by what the request touched (a completed
instant, a lock, a data file...), so a campaign can assert what it hit.
"""

from __future__ import annotations

import contextlib
import http.client
import random
import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

KINDS = ("slowdown", "lost-reply", "slow-reply", "reset")
#: Plus the endpoint going away as a whole for a while (:meth:`FaultProxy.outage`).
OUTAGE = "outage"

_SLOWDOWN = (b'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>SlowDown</Code>'
             b"<Message>Please reduce your request rate.</Message></Error>")


def touched(method: str, path: str) -> str:
    """What a request touched, for the campaign's phase counts."""
    name = path.split("?", 1)[0].rsplit("/", 1)[-1]
    if "?" in path and method == "GET" and ("list-type" in path or "prefix=" in path):
        return "listing"
    if ".lock" in name or name.endswith(".lease"):
        return "lock"
    if name.endswith((".deltacommit", ".commit", ".rollback", ".clean")):
        return f"completed instant {method}"
    if ".hoodie" in path and (name.endswith((".requested", ".inflight"))):
        return f"pending instant {method}"
    if ".log." in name or name.endswith(".parquet"):
        return f"data file {method}"
    return f"other {method}"


class FaultProxy:
    """``with FaultProxy(upstream, seed) as proxy:`` ... ``proxy.endpoint`` ... ``with
    proxy.window(rate=0.2, kinds=("slowdown",)):`` faults on, for the block."""

    def __init__(self, upstream: str, seed: int, *, hold_s: float = 6.0) -> None:
        self.upstream = urlsplit(upstream).netloc
        self.rng = random.Random(seed)
        self.hold_s = hold_s
        self.rate = 0.0
        self.kinds: tuple[str, ...] = ()
        self.only: tuple[str, ...] = ()
        self.budget: int | None = None
        self.injected: Counter = Counter()
        self.touched: Counter = Counter()
        self.requests = 0
        self._lock = threading.Lock()
        self._open: set = set()  # the client connections being served (reset by an outage)
        self._port = 0
        self._listen()

    def _listen(self) -> None:
        self._server = ThreadingHTTPServer(("127.0.0.1", self._port), self._handler())
        self._server.daemon_threads = True
        self._port = self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever, name="s3-fault-proxy", daemon=True)

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self._port}"

    def __enter__(self) -> FaultProxy:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._close()

    def _close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(10)

    def outage(self, down_s: float) -> None:
        """The endpoint restarts: every open connection is reset, new ones are refused for
        ``down_s``, then it listens again on the same port (what clients see of a store
        process restarting, its objects kept). Counted as a fault of kind ``outage``."""
        import socket as _socket

        self._close()
        with self._lock:
            conns, self._open = list(self._open), set()
            self.injected["outage"] += 1
        for conn in conns:
            with contextlib.suppress(OSError):
                conn.shutdown(_socket.SHUT_RDWR)
        time.sleep(down_s)
        self._listen()
        self._thread.start()

    def window(self, *, rate: float, kinds: tuple[str, ...], only: tuple[str, ...] = (),
               budget: int | None = None) -> _Window:
        """Faults of ``kinds`` on a ``rate`` of requests (of those whose touched kind starts
        with one of ``only``, when given) until the block ends, at most ``budget`` of them."""
        return _Window(self, rate, kinds, only, budget)

    @property
    def total(self) -> int:
        with self._lock:
            return sum(self.injected.values())

    def _draw(self, method: str, path: str) -> str | None:
        with self._lock:
            self.requests += 1
            if not self.kinds or self.budget == 0 or self.rng.random() >= self.rate:
                return None
            what = touched(method, path)
            if self.only and not what.startswith(self.only):
                return None
            kind = self.rng.choice(self.kinds)
            if self.budget is not None:
                self.budget -= 1
            self.injected[kind] += 1
            self.touched[what] += 1
            return kind

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:  # quiet
                pass

            def setup(self) -> None:
                super().setup()
                with proxy._lock:
                    proxy._open.add(self.connection)

            def finish(self) -> None:
                with proxy._lock:
                    proxy._open.discard(self.connection)
                with contextlib.suppress(OSError):
                    super().finish()

            def _forward(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                fault = proxy._draw(self.command, self.path)
                if fault == "reset":
                    self.close_connection = True
                    self.connection.close()
                    return
                if fault == "slowdown":
                    self.send_response(503, "Slow Down")
                    self.send_header("Content-Type", "application/xml")
                    self.send_header("Content-Length", str(len(_SLOWDOWN)))
                    self.end_headers()
                    self.wfile.write(_SLOWDOWN)
                    return
                conn = http.client.HTTPConnection(proxy.upstream, timeout=60)
                try:
                    conn.putrequest(self.command, self.path, skip_host=True, skip_accept_encoding=True)
                    for k, v in self.headers.items():
                        if k.lower() != "expect":  # the proxy answered any 100-continue itself
                            conn.putheader(k, v)
                    conn.endheaders(body if body else None)
                    resp = conn.getresponse()
                    data = resp.read()
                finally:
                    conn.close()
                if fault == "lost-reply":
                    self.close_connection = True
                    self.connection.close()
                    return
                if fault == "slow-reply":
                    time.sleep(proxy.hold_s)
                try:
                    self.send_response_only(resp.status, resp.reason)
                    for k, v in resp.getheaders():
                        if k.lower() not in ("transfer-encoding", "connection"):
                            self.send_header(k, v)
                    if resp.getheader("Content-Length") is None and self.command != "HEAD":
                        self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    if self.command != "HEAD":
                        self.wfile.write(data)
                except OSError:  # the client gave up (a held reply): as on the wire
                    self.close_connection = True

            do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _forward

        return Handler


class _Window:
    def __init__(self, proxy: FaultProxy, rate: float, kinds: tuple[str, ...], only: tuple[str, ...],
                 budget: int | None) -> None:
        self.proxy, self.settings = proxy, (rate, kinds, only, budget)

    def __enter__(self) -> None:
        with self.proxy._lock:
            self.proxy.rate, self.proxy.kinds, self.proxy.only, self.proxy.budget = self.settings

    def __exit__(self, *exc: object) -> None:
        with self.proxy._lock:
            self.proxy.rate, self.proxy.kinds, self.proxy.only, self.proxy.budget = 0.0, (), (), None
