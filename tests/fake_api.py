"""A scripted stand-in for the API server on 127.0.0.1, plain HTTP or TLS, for tests of the transport.

``answer(handler)`` returns (status, extra headers, body) for each request; the default answers every request
with an empty object. Every request is recorded as (method, path, headers with lower-case names).
"""

from __future__ import annotations

import ssl
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Self

Answer = tuple[int, dict[str, str], bytes]


def empty_object(_: BaseHTTPRequestHandler) -> Answer:
    return 200, {}, b"{}"


def send(handler: BaseHTTPRequestHandler, status: int, headers: dict[str, str], body: bytes) -> None:
    """One whole answer, its length given (the connection stays open for the next request)."""
    handler.send_response(status)
    for k, v in headers.items():
        handler.send_header(k, v)
    handler.send_header("Content-Length", str(len(body)))
    handler.end_headers()
    handler.wfile.write(body)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def _answer(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        with self.server.lock:
            self.server.requests.append((self.command, self.path, {k.lower(): v for k, v in self.headers.items()}))
        status, headers, body = self.server.answer(self)
        send(self, status, {"Content-Type": "application/json", **headers}, body)

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _answer

    def log_message(self, *args: object) -> None:
        pass


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    answer: Callable[[BaseHTTPRequestHandler], Answer]
    requests: list[tuple[str, str, dict[str, str]]]
    lock: threading.Lock


class Served:
    """A server of this module's kind, serving in a thread for the length of a ``with`` block."""

    _server: ThreadingHTTPServer

    def __enter__(self) -> Self:
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()


class FakeApi(Served):
    def __init__(self, answer: Callable[[BaseHTTPRequestHandler], Answer] = empty_object,
                 tls: tuple[Path, Path] | None = None) -> None:
        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._server.answer, self._server.requests, self._server.lock = answer, [], threading.Lock()
        self.port = self._server.server_address[1]
        if tls is not None:
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ctx.load_cert_chain(str(tls[0]), str(tls[1]))
            self._server.socket = ctx.wrap_socket(self._server.socket, server_side=True)
        self.url = f"{'https' if tls else 'http'}://127.0.0.1:{self.port}"

    @property
    def requests(self) -> list[tuple[str, str, dict[str, str]]]:
        return self._server.requests

