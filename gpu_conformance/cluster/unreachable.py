"""Why the API server could not be reached, worded for what to fix.

Every TLS failure used to read "certificate not trusted", which sent users to their CA bundle when the
certificate was trusted but issued for another name (a load balancer's address, a tls-server-name to set), or
had expired, or when the server was not speaking TLS at all.
"""

from __future__ import annotations

import socket
import ssl
from collections.abc import Iterator
from urllib.parse import urlsplit

from kubernetes import client

from gpu_conformance.cluster.connect import Connection
from gpu_conformance.cluster.proxy import shown

# OpenSSL's X509_V_ERR_* codes (ssl.SSLCertVerificationError.verify_code).
_NOT_YET_VALID, _EXPIRED = 9, 10
_NAME_MISMATCH = {62, 64}  # host name, IP address
_UNTRUSTED = {2, 18, 19, 20, 21}
# How OpenSSL versions word a TLS client's first read of a plain-HTTP answer.
_NOT_TLS = ("WRONG_VERSION_NUMBER", "wrong version number", "record layer failure", "packet length too long")


def unreachable(conn: Connection, e: BaseException) -> str:
    """"cannot reach the API server at S[ through proxy P]: why" for a transport error of a request."""
    through = f" through proxy {shown(conn.proxy)}" if conn.proxy else ""
    return f"cannot reach the API server at {conn.server}{through}: {root_reason(e, conn)}"


def root_reason(e: BaseException, conn: Connection | None = None) -> str:
    """The innermost cause of a transport error, in a few words."""
    tls = next((x for x in _chain(e) if isinstance(x, ssl.SSLError)), None)
    if tls is not None:
        return _tls_reason(tls, conn)
    reason = getattr(e, "reason", None)
    while reason is not None and getattr(reason, "reason", None) is not None:
        reason = reason.reason
    text = str(reason or e)
    if "Connection refused" in text:
        return "connection refused"
    if "timed out" in text.lower():
        return "timed out"
    if "Name or service not known" in text or "nodename nor servname" in text:
        return "host name does not resolve"
    return text.splitlines()[0][:200]


def _chain(e: BaseException) -> Iterator[BaseException]:
    """e and what it wraps: urllib3 keeps causes in .reason and in args, Python in __cause__/__context__."""
    seen: set[int] = set()
    todo: list[object] = [e]
    while todo and len(seen) < 20:
        x = todo.pop(0)
        if not isinstance(x, BaseException) or id(x) in seen:
            continue
        seen.add(id(x))
        yield x
        todo.extend([getattr(x, "reason", None), *x.args, x.__cause__, x.__context__])


def _tls_reason(e: ssl.SSLError, conn: Connection | None) -> str:
    code = getattr(e, "verify_code", None)
    if code in _NAME_MISMATCH:
        return _name_mismatch(e, conn)
    if code == _EXPIRED:
        return "the server's TLS certificate has expired (or this machine's clock is wrong)"
    if code == _NOT_YET_VALID:
        return "the server's TLS certificate is not valid yet (or this machine's clock is wrong)"
    if code in _UNTRUSTED:
        return ("TLS certificate not trusted: it is not signed by the kubeconfig's certificate-authority "
                f"({getattr(e, 'verify_message', '') or 'unknown issuer'})")
    if isinstance(e, ssl.SSLCertVerificationError):
        return f"TLS certificate not accepted: {getattr(e, 'verify_message', '') or e}"
    if any(word in str(e) for word in _NOT_TLS):
        return "the server does not speak TLS (an http:// endpoint, or the wrong port?)"
    return f"TLS handshake failed: {str(e).splitlines()[0][:200]}"


def _name_mismatch(e: ssl.SSLError, conn: Connection | None) -> str:
    cfg = conn.api.configuration if conn is not None else None
    wanted = (cfg.tls_server_name or urlsplit(cfg.host).hostname) if cfg is not None else None
    # A second look at the certificate goes straight to the server; through a proxy it is not taken.
    names = _certificate_names(cfg) if cfg is not None and not (conn and conn.proxy) else []
    if wanted and names:
        return f"the server's TLS certificate is for {', '.join(names[:5])}, not {wanted}"
    return f"the server's TLS certificate name does not match the server ({wanted or 'its address'})"


def _certificate_names(cfg: client.Configuration) -> list[str]:
    """The names in the server's certificate, read in a handshake that checks the CA but not the name."""
    target = urlsplit(cfg.host)
    host = target.hostname or ""
    try:
        ctx = ssl.create_default_context(cafile=cfg.ssl_ca_cert or None)
        ctx.check_hostname = False
        with socket.create_connection((host, target.port or 443), timeout=5) as raw, \
                ctx.wrap_socket(raw, server_hostname=cfg.tls_server_name or host) as tls:
            cert = tls.getpeercert() or {}
    except (OSError, ValueError):
        return []
    names = [str(v) for k, v in cert.get("subjectAltName", ()) if k in ("DNS", "IP Address")]
    common = [str(v) for rdn in cert.get("subject", ()) for k, v in rdn if k == "commonName"]
    return names or common
