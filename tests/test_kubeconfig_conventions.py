"""Issue 26 item 5: the conventions a kubeconfig relies on, as kubectl honours them.

proxy-url and HTTPS_PROXY/NO_PROXY, a 429's Retry-After, exec credentials kept until they expire, and TLS
failures named for what they are. Every server here is on 127.0.0.1; names that do not resolve are only ever
reached through the test proxy, which connects to 127.0.0.1 whatever the name.
"""

from __future__ import annotations

import base64
import importlib.util
import json
import socket
import stat
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest
import yaml
from fake_api import Answer, FakeApi
from http_proxy import HttpProxy
from tls_certs import Leaf, TestCa

from gpu_conformance.cluster.connect import Connection, connect
from gpu_conformance.cluster.proxy import proxy_for
from gpu_conformance.cluster.reader import ClusterReader, ListSpec
from gpu_conformance.errors import ClusterAccessError
from gpu_conformance.probe.api import ProbeApi

# Reserved for tests (RFC 6761): never a real host. Only the proxy can reach it.
API_NAME = "api.kubeconv.test"
PROXY_ENV = ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "NO_PROXY", "no_proxy", "ALL_PROXY",
             "all_proxy")


@pytest.fixture(autouse=True)
def loopback_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """No proxy from the machine's environment, and no name lookups: a request that did not go through the test
    proxy to API_NAME fails here instead of asking a DNS server."""
    for name in PROXY_ENV:
        monkeypatch.delenv(name, raising=False)
    real = socket.getaddrinfo

    def getaddrinfo(host: object, *args: object, **kw: object) -> object:
        if host not in ("127.0.0.1", "localhost", b"127.0.0.1"):
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return real(host, *args, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)


def write_kubeconfig(path: Path, server: str, user: dict | None = None, ca: Path | None = None,
                     **cluster: object) -> Path:
    entry: dict[str, object] = {"server": server, **cluster}
    if ca is not None:
        entry["certificate-authority-data"] = base64.b64encode(ca.read_bytes()).decode()
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [{"name": "k", "cluster": entry}],
        "users": [{"name": "u", "user": user or {"token": "not-a-real-token"}}],
        "contexts": [{"name": "c", "context": {"cluster": "k", "user": "u"}}]}))
    return path


def get_version(conn: Connection) -> object:
    try:
        return ClusterReader(conn).call("GET", "/version", what="get /version")
    finally:
        conn.close()


@pytest.fixture(scope="module")
def ca(tmp_path_factory: pytest.TempPathFactory) -> TestCa:
    return TestCa(tmp_path_factory.mktemp("pki"))


# ---- 1. proxy-url, HTTPS_PROXY, NO_PROXY ------------------------------------------------------------------

def test_proxy_url_of_the_kubeconfig_is_used(tmp_path: Path) -> None:
    with FakeApi() as api, HttpProxy() as proxy:
        server = f"http://{API_NAME}:{api.port}"
        assert get_version(connect(str(write_kubeconfig(tmp_path / "kc", server, **{"proxy-url": proxy.url})))) == {}
    assert proxy.seen == [f"GET {server}/version"]


def test_https_server_is_reached_through_a_connect_tunnel(tmp_path: Path, ca: TestCa) -> None:
    leaf = ca.leaf("tunnel", f"DNS:{API_NAME}")
    with FakeApi(tls=(leaf.cert, leaf.key)) as api, HttpProxy() as proxy:
        kc = write_kubeconfig(tmp_path / "kc", f"https://{API_NAME}:{api.port}", ca=ca.cert,
                              **{"proxy-url": proxy.url})
        assert get_version(connect(str(kc))) == {}
    assert proxy.seen == [f"CONNECT {API_NAME}:{api.port}"]


def test_https_proxy_env_is_used_and_proxy_url_wins_over_it(tmp_path: Path, ca: TestCa,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    leaf = ca.leaf("env", f"DNS:{API_NAME}")
    with FakeApi(tls=(leaf.cert, leaf.key)) as api, HttpProxy() as proxy, HttpProxy() as other:
        server = f"https://{API_NAME}:{api.port}"
        monkeypatch.setenv("HTTPS_PROXY", proxy.url)
        monkeypatch.setenv("NO_PROXY", "example.com,10.0.0.0/8")
        assert get_version(connect(str(write_kubeconfig(tmp_path / "kc", server, ca=ca.cert)))) == {}
        kc = write_kubeconfig(tmp_path / "kc2", server, ca=ca.cert, **{"proxy-url": other.url})
        # NO_PROXY does not apply to a kubeconfig's proxy-url (kubectl: http.ProxyURL).
        monkeypatch.setenv("NO_PROXY", "*")
        assert get_version(connect(str(kc))) == {}
    assert len(proxy.seen) == 1 and len(other.seen) == 1


def test_proxy_credentials_of_the_url_are_sent_to_the_proxy(tmp_path: Path, ca: TestCa) -> None:
    leaf = ca.leaf("auth", f"DNS:{API_NAME}")
    with FakeApi(tls=(leaf.cert, leaf.key)) as api, HttpProxy() as proxy:
        with_user = proxy.url.replace("http://", "http://alice:s%40cret@")
        kc = write_kubeconfig(tmp_path / "kc", f"https://{API_NAME}:{api.port}", ca=ca.cert,
                              **{"proxy-url": with_user})
        assert get_version(connect(str(kc))) == {}
    assert proxy.auth == ["Basic " + base64.b64encode(b"alice:s@cret").decode()]


@pytest.mark.parametrize(("server", "env", "expected"), [
    ("https://api.corp.example:6443", {"HTTPS_PROXY": "http://p:3128"}, "http://p:3128"),
    ("https://api.corp.example:6443", {"https_proxy": "p:3128"}, "http://p:3128"),
    ("https://api.corp.example:6443", {"HTTPS_PROXY": "http://P:1", "https_proxy": "http://q:2"}, "http://P:1"),
    ("https://api.corp.example:6443", {"HTTP_PROXY": "http://p:3128"}, None),
    ("http://api.corp.example:8080", {"HTTP_PROXY": "http://p:3128"}, "http://p:3128"),
    ("https://api.corp.example:6443", {"HTTPS_PROXY": "http://p:1", "NO_PROXY": "api.corp.example"}, None),
    ("https://api.corp.example:6443", {"HTTPS_PROXY": "http://p:1", "no_proxy": "corp.example"}, None),
    ("https://api.corp.example:6443", {"HTTPS_PROXY": "http://p:1", "NO_PROXY": ".corp.example"}, None),
    ("https://corp.example:6443", {"HTTPS_PROXY": "http://p:1", "NO_PROXY": ".corp.example"}, "http://p:1"),
    ("https://api.corp.example:6443", {"HTTPS_PROXY": "http://p:1", "NO_PROXY": "*.corp.example"}, None),
    ("https://xcorp.example:6443", {"HTTPS_PROXY": "http://p:1", "NO_PROXY": "corp.example"}, "http://p:1"),
    ("https://api.corp.example:6443", {"HTTPS_PROXY": "http://p:1", "NO_PROXY": "api.corp.example:443"},
     "http://p:1"),
    ("https://api.corp.example:6443", {"HTTPS_PROXY": "http://p:1", "NO_PROXY": "api.corp.example:6443"}, None),
    ("https://10.1.2.3:6443", {"HTTPS_PROXY": "http://p:1", "NO_PROXY": "10.1.2.3"}, None),
    ("https://10.1.2.3:6443", {"HTTPS_PROXY": "http://p:1", "NO_PROXY": "10.0.0.0/8"}, None),
    ("https://11.1.2.3:6443", {"HTTPS_PROXY": "http://p:1", "NO_PROXY": "10.0.0.0/8"}, "http://p:1"),
    ("https://[fd00::1]:6443", {"HTTPS_PROXY": "http://p:1", "NO_PROXY": "fd00::/8"}, None),
    ("https://api.corp.example:6443", {"HTTPS_PROXY": "http://p:1", "NO_PROXY": "x.example, *"}, None),
    # Go's ProxyFromEnvironment never proxies loopback.
    ("https://127.0.0.1:6443", {"HTTPS_PROXY": "http://p:1"}, None),
    ("https://localhost:6443", {"HTTPS_PROXY": "http://p:1"}, None),
])
def test_environment_proxy_rules_are_client_go_s(server: str, env: dict[str, str], expected: str | None) -> None:
    assert proxy_for(server, None, env) == expected


@pytest.mark.parametrize(("proxy_url", "words"), [
    ("ftp://p:21", "is not a usable proxy URL"),
    ("http://p:port", "has a port that is not a number"),
    ("socks5://p:1080", "needs the PySocks package"),
])
def test_unusable_proxy_url_is_one_line(proxy_url: str, words: str) -> None:
    if proxy_url.startswith("socks5") and importlib.util.find_spec("socks") is not None:
        pytest.skip("PySocks is installed here")
    with pytest.raises(ClusterAccessError, match=words):
        proxy_for("https://k:6443", proxy_url, {})


def test_dead_proxy_fails_naming_it_instead_of_connecting_directly(tmp_path: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{s.getsockname()[1]}"
    with FakeApi() as api:
        conn = connect(str(write_kubeconfig(tmp_path / "kc", api.url, **{"proxy-url": dead})))
        with pytest.raises(ClusterAccessError) as err:
            get_version(conn)
        assert api.requests == []
    assert str(err.value) == f"cannot reach the API server at {api.url} through proxy {dead}: connection refused"


# ---- 2. 429 with Retry-After ---------------------------------------------------------------------------------

class Throttle:
    """429 with Retry-After: 1 for the first `times` requests; any request before the announced time is answered
    429 again and counted as too early (a client that does not wait). Four times: one more than urllib3's own
    Retry-After retries (which used to sleep inside a request, unbounded, and then give up)."""

    def __init__(self, times: int = 4, body: bytes = b"{}") -> None:
        self.left, self.body = times, body
        self.not_before = 0.0
        self.too_early = 0
        self.lock = threading.Lock()

    def __call__(self, _: BaseHTTPRequestHandler) -> Answer:
        with self.lock:
            now = time.monotonic()
            if now < self.not_before:
                self.too_early += 1
            elif self.left == 0:
                return 200, {}, self.body
            else:
                self.left -= 1
            self.not_before = now + 1
            return 429, {"Retry-After": "1"}, b'{"kind": "Status", "code": 429}'


@pytest.fixture
def throttled(tmp_path: Path) -> Iterator[tuple[Throttle, Connection]]:
    throttle = Throttle(body=b'{"kind": "NodeList", "items": [{"metadata": {"name": "n"}}]}')
    with FakeApi(throttle) as api:
        conn = connect(str(write_kubeconfig(tmp_path / "kc", api.url)))
        try:
            yield throttle, conn
        finally:
            conn.close()


def test_reader_waits_what_retry_after_says(throttled: tuple[Throttle, Connection]) -> None:
    throttle, conn = throttled
    t0 = time.monotonic()
    items = ClusterReader(conn).list_raw(ListSpec("nodes", "/api/v1/nodes", "", "nodes"))
    assert items == [{"metadata": {"name": "n"}}]
    assert throttle.too_early == 0 and time.monotonic() - t0 >= 3.9


def test_reader_call_waits_what_retry_after_says(throttled: tuple[Throttle, Connection]) -> None:
    throttle, conn = throttled
    t0 = time.monotonic()
    assert ClusterReader(conn).call("GET", "/api/v1/nodes")["kind"] == "NodeList"
    assert throttle.too_early == 0 and time.monotonic() - t0 >= 3.9


def test_probe_waits_what_retry_after_says(throttled: tuple[Throttle, Connection]) -> None:
    throttle, conn = throttled
    t0 = time.monotonic()
    assert ProbeApi(conn).json("GET", "/api/v1/nodes")["kind"] == "NodeList"
    assert throttle.too_early == 0 and time.monotonic() - t0 >= 3.9


@pytest.mark.parametrize("client", ["reader", "probe"])
def test_retry_after_beyond_the_bound_gives_up_at_once(tmp_path: Path, client: str) -> None:
    with FakeApi(lambda _: (429, {"Retry-After": "3600"}, b"{}")) as api:
        conn = connect(str(write_kubeconfig(tmp_path / "kc", api.url)))
        t0 = time.monotonic()
        with pytest.raises(ClusterAccessError, match=r"HTTP 429 .*\(the server asked to retry after 3600 s\)$"):
            if client == "reader":
                ClusterReader(conn).call("GET", "/api/v1/nodes")
            else:
                ProbeApi(conn, bound=5).json("GET", "/api/v1/nodes")
        conn.close()
        assert time.monotonic() - t0 < 2 and len(api.requests) == 1


# ---- 3. exec credentials kept until they expire ---------------------------------------------------------------

def counting_plugin(tmp_path: Path, expiry: str | None) -> tuple[Path, Path]:
    runs = tmp_path / "runs"
    status = {"token": "from-the-plugin", **({"expirationTimestamp": expiry} if expiry else {})}
    cred = {"apiVersion": "client.authentication.k8s.io/v1", "kind": "ExecCredential", "status": status}
    script = tmp_path / "plugin.sh"
    script.write_text(f"#!/bin/sh\necho run >> '{runs}'\ncat <<'EOF'\n{json.dumps(cred)}\nEOF\n")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return script, runs


@pytest.mark.parametrize("expiry", ["2001-01-01T00:00:00Z", None])
def test_exec_plugin_is_not_run_for_every_request(tmp_path: Path, expiry: str | None) -> None:
    script, runs = counting_plugin(tmp_path, expiry)
    with FakeApi() as api:
        user = {"exec": {"apiVersion": "client.authentication.k8s.io/v1", "command": str(script)}}
        conn = connect(str(write_kubeconfig(tmp_path / "kc", api.url, user)))
        reader = ClusterReader(conn)
        for _ in range(30):
            reader.call("GET", "/version")
        conn.close()
    assert len(runs.read_text().splitlines()) <= (2 if expiry else 1)
    assert {r[2].get("authorization") for r in api.requests} == {"Bearer from-the-plugin"}


def test_expired_exec_credential_is_renewed_once_the_interval_has_passed(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("gpu_conformance.cluster.connect.EXEC_RERUN_INTERVAL", 0.5)
    script, runs = counting_plugin(tmp_path, "2001-01-01T00:00:00Z")
    with FakeApi() as api:
        user = {"exec": {"apiVersion": "client.authentication.k8s.io/v1", "command": str(script)}}
        conn = connect(str(write_kubeconfig(tmp_path / "kc", api.url, user)))
        reader = ClusterReader(conn)
        reader.call("GET", "/version")
        time.sleep(0.6)
        for _ in range(10):
            reader.call("GET", "/version")
        conn.close()
    assert len(runs.read_text().splitlines()) == 2


# ---- 4. TLS failures named for what they are -----------------------------------------------------------------

def served_certificate(case: str, ca: TestCa, tmp_path: Path) -> Leaf | None:
    """What the server presents; the kubeconfig trusts `ca` only."""
    if case == "other-name":
        return ca.leaf("other", "DNS:other.example")
    if case == "expired":
        return ca.leaf("old", "IP:127.0.0.1", "20200101000000Z", "20210101000000Z")
    if case == "unknown-ca":
        return TestCa(tmp_path / "ca2", "stranger").leaf("s", "IP:127.0.0.1")
    if case == "self-signed":
        itself = TestCa(tmp_path / "ca3", "itself")
        return Leaf(itself.cert, itself.key)
    return None


@pytest.mark.parametrize(("case", "words"), [
    ("other-name", "the server's TLS certificate is for other.example, not 127.0.0.1"),
    ("expired", "the server's TLS certificate has expired"),
    ("unknown-ca", "TLS certificate not trusted"),
    ("self-signed", "TLS certificate not trusted"),
    ("not-tls", "the server does not speak TLS"),
])
def test_tls_failures_are_named_for_what_they_are(tmp_path: Path, ca: TestCa, case: str, words: str) -> None:
    leaf = served_certificate(case, ca, tmp_path)
    with FakeApi(tls=(leaf.cert, leaf.key) if leaf else None) as api:
        kc = write_kubeconfig(tmp_path / "kc", f"https://127.0.0.1:{api.port}", ca=ca.cert)
        with pytest.raises(ClusterAccessError) as err:
            get_version(connect(str(kc)))
    message = str(err.value)
    assert message.startswith(f"cannot reach the API server at https://127.0.0.1:{api.port}: {words}"), message
    assert "\n" not in message
    if case not in ("unknown-ca", "self-signed"):
        assert "not trusted" not in message


def test_the_sim_clients_wait_out_a_short_retry_after(monkeypatch: pytest.MonkeyPatch) -> None:
    # A fresh API server answers 429 "storage is (re)initializing" (Retry-After: 1) right after a CRD is created;
    # urllib3 no longer retries it silently, so the simulator's client waits for it (while_busy), within a bound.
    from kubernetes.client.exceptions import ApiException

    from gpu_conformance.cluster.retry_after import while_busy

    answers = [ApiException(status=429, reason="Too Many Requests"), "ok"]
    answers[0].headers = {"Retry-After": "0"}

    def call() -> str:
        a = answers.pop(0)
        if isinstance(a, BaseException):
            raise a
        return a

    assert while_busy(call) == "ok" and not answers
    too_long = ApiException(status=429, reason="Too Many Requests")
    too_long.headers = {"Retry-After": "3600"}
    with pytest.raises(ApiException):
        while_busy(lambda: (_ for _ in ()).throw(too_long), bound=5)
