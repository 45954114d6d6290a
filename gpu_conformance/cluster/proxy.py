"""Which proxy a request to the API server goes through, decided as kubectl (client-go) decides it.

A kubeconfig cluster's ``proxy-url`` is used for every request to that cluster, whatever the environment says.
Without it, ``HTTPS_PROXY``/``https_proxy`` (``HTTP_PROXY``/``http_proxy`` for an http:// server) apply unless
``NO_PROXY``/``no_proxy`` excludes the server, following Go's golang.org/x/net/http/httpproxy rules: an entry
is a host name (matching it and its subdomains), ``.domain`` (subdomains only), ``*.domain``, an IP address, a
CIDR, each optionally with ``:port``; ``*`` excludes everything; localhost and loopback addresses never go
through an environment proxy. The Python client's own rules differ (lower-case first, ALL_PROXY, no loopback
exception), so the decision is made here and handed to the client as a fixed proxy.
"""

from __future__ import annotations

import importlib.util
import ipaddress
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import SplitResult, urlsplit

from gpu_conformance.errors import ClusterAccessError

PROXY_SCHEMES = ("http", "https", "socks5")
_DEFAULT_PORTS = {"http": "80", "https": "443"}


def proxy_for(server: str, proxy_url: str | None, env: Mapping[str, str]) -> str | None:
    """The proxy URL for requests to ``server``, or None to connect directly."""
    if proxy_url:
        return _checked(str(proxy_url), "proxy-url")
    target = urlsplit(server)
    scheme = target.scheme.lower() or "https"
    names = ("HTTPS_PROXY", "https_proxy") if scheme == "https" else ("HTTP_PROXY", "http_proxy")
    name, value = _first_set(env, names)
    if not value:
        return None
    host, port = (target.hostname or "").lower(), str(_port(target) or _DEFAULT_PORTS.get(scheme, ""))
    if not _uses_env_proxy(host, port, _first_set(env, ("NO_PROXY", "no_proxy"))[1]):
        return None
    # Go reads "proxy:3128" as http://proxy:3128.
    return _checked(value if "://" in value else f"http://{value}", name)


def shown(proxy: str) -> str:
    """The proxy URL without a user name or password, for error messages."""
    parts = urlsplit(proxy)
    host = parts.netloc.rpartition("@")[2]
    return f"{parts.scheme}://{host}"


def _first_set(env: Mapping[str, str], names: tuple[str, ...]) -> tuple[str, str]:
    # Go's getEnvAny: the first name that is set and not empty, upper case first.
    for name in names:
        if env.get(name):
            return name, env[name]
    return names[0], ""


def _port(parts: SplitResult) -> int | None:
    try:
        return parts.port
    except ValueError:
        return None


def _checked(url: str, source: str) -> str:
    """Refuse, in one line, a proxy the client could not use (it would fail later with a traceback)."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if _port(parts) is None and parts.netloc.rpartition("@")[2].rpartition("]")[2].count(":"):
        raise ClusterAccessError(f"{source} {shown(url)!r} has a port that is not a number")
    if scheme not in PROXY_SCHEMES or not parts.hostname:
        raise ClusterAccessError(f"{source} {shown(url)!r} is not a usable proxy URL "
                                 f"(expected {', '.join(s + '://host:port' for s in PROXY_SCHEMES)})")
    if scheme == "socks5" and importlib.util.find_spec("socks") is None:
        raise ClusterAccessError(f"{source} {shown(url)!r} is a SOCKS proxy, which needs the PySocks package "
                                 "(pip install pysocks)")
    # urllib3 speaks socks5h (names resolved by the proxy), which is what client-go does for socks5.
    return url if scheme != "socks5" else "socks5h" + url[len("socks5"):]


@dataclass(frozen=True)
class _Entry:
    """One NO_PROXY entry: a network, or a domain (``match_host``: the bare name matches too), and a port."""

    network: ipaddress.IPv4Network | ipaddress.IPv6Network | None
    domain: str
    match_host: bool
    port: str


def _uses_env_proxy(host: str, port: str, no_proxy: str) -> bool:
    if not host or host == "localhost":
        return False
    ip = _ip(host)
    if ip is not None and ip.is_loopback:
        return False
    raw_entries = [raw.strip().lower() for raw in no_proxy.split(",")]
    if "*" in raw_entries:
        return False
    entries = [e for e in map(_entry, raw_entries) if e is not None]
    return not any(_matches(e, host, port, ip) for e in entries)


def _ip(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(text.strip("[]"))
    except ValueError:
        return None


def _entry(raw: str) -> _Entry | None:
    text = raw.strip().lower()
    if not text:
        return None
    if "/" in text:
        try:
            return _Entry(ipaddress.ip_network(text, strict=False), "", False, "")
        except ValueError:
            return None
    host, port = _split_port(text)
    ip = _ip(host)
    if ip is not None:
        return _Entry(ipaddress.ip_network(ip), "", False, port)
    if host.startswith("*."):
        host = host[1:]
    match_host = not host.startswith(".")
    return _Entry(None, host if not match_host else f".{host}", match_host, port) if host.strip(".") else None


def _split_port(text: str) -> tuple[str, str]:
    if text.startswith("["):
        host, _, rest = text[1:].partition("]")
        return host, rest.lstrip(":")
    if text.count(":") == 1:
        host, _, port = text.partition(":")
        return host, port
    return text, ""


def _matches(e: _Entry, host: str, port: str,
             ip: ipaddress.IPv4Address | ipaddress.IPv6Address | None) -> bool:
    if e.port and e.port != port:
        return False
    if e.network is not None:
        return ip is not None and ip.version == e.network.version and ip in e.network
    return host.endswith(e.domain) or (e.match_host and host == e.domain[1:])
