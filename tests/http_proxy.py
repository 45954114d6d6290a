"""A forward HTTP proxy on 127.0.0.1 for tests: CONNECT tunnels (https:// servers) and absolute-URI requests
(http:// servers), which is what urllib3's ProxyManager sends.

Whatever host a request names, the proxy connects to 127.0.0.1 at that port: a test can give the API server a
name that does not resolve (so only a request through the proxy can reach it) and no traffic leaves loopback.
"""

from __future__ import annotations

import http.client
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

from fake_api import Served, send
from tcp_proxy import pipe

_HOP_BY_HOP = {"connection", "proxy-connection", "keep-alive", "transfer-encoding", "proxy-authorization", "te",
               "upgrade"}


class _ProxyHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _ProxyServer

    def do_CONNECT(self) -> None:  # noqa: N802 - http.server's naming
        self._record()
        port = int(self.path.rpartition(":")[2])
        try:
            upstream = socket.create_connection(("127.0.0.1", port), timeout=10)
        except OSError:
            self.send_error(502)
            return
        self.send_response(200, "Connection established")
        self.end_headers()
        self.close_connection = True
        _pipe_both(self.connection, upstream)

    def _record(self) -> None:
        self.server.seen.append(f"{self.command} {self.path}")
        self.server.auth.append(self.headers.get("Proxy-Authorization") or "")

    def _forward(self) -> None:
        self._record()
        target = urlsplit(self.path)
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP_BY_HOP}
        upstream = http.client.HTTPConnection("127.0.0.1", target.port or 80, timeout=10)
        try:
            upstream.request(self.command, target.path + (f"?{target.query}" if target.query else ""),
                             body=body or None, headers=headers)
            resp = upstream.getresponse()
            data = resp.read()
        finally:
            upstream.close()
        send(self, resp.status, {k: v for k, v in resp.getheaders()
                                 if k.lower() not in _HOP_BY_HOP and k.lower() != "content-length"}, data)

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _forward

    def log_message(self, *args: object) -> None:
        pass


def _pipe_both(a: socket.socket, b: socket.socket) -> None:
    t = threading.Thread(target=pipe, args=(b, a), daemon=True)
    t.start()
    pipe(a, b)
    t.join(timeout=10)


class _ProxyServer(ThreadingHTTPServer):
    daemon_threads = True
    seen: list[str]
    auth: list[str]


class HttpProxy(Served):
    """Start with ``with HttpProxy() as proxy``; ``proxy.url`` to use it, ``proxy.seen`` what it was asked."""

    def __init__(self) -> None:
        self._server = _ProxyServer(("127.0.0.1", 0), _ProxyHandler)
        self._server.seen, self._server.auth = [], []
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"

    @property
    def seen(self) -> list[str]:
        return self._server.seen

    @property
    def auth(self) -> list[str]:
        """The Proxy-Authorization header of each request ("" without one)."""
        return self._server.auth

