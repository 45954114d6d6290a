"""Turning --kubeconfig/--context (or in-cluster config) into an API client, with one-line errors."""

from __future__ import annotations

import base64
import binascii
import os
import threading
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit, urlunsplit

import urllib3
import yaml
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException
from kubernetes.config.config_exception import ConfigException
from kubernetes.config.kube_config import KubeConfigLoader

from gpu_conformance.cluster.credentials import CredentialFiles
from gpu_conformance.cluster.exec_plugin import ExecCredential, ExecPlugin
from gpu_conformance.cluster.proxy import proxy_for
from gpu_conformance.errors import ClusterAccessError

# Requests to the API server must never hang a run; every call passes this (connect, read) timeout.
REQUEST_TIMEOUT = (5, 60)
# What one request through the client can raise: an HTTP error status, a transport error (timeouts, TLS, a
# dropped connection), a socket error.
API_ERRORS = (ApiException, urllib3.exceptions.HTTPError, OSError)
# An exec credential plugin runs again at most this often, however expired its token looks (_token_refresher).
EXEC_RERUN_INTERVAL = 10.0


@dataclass
class Connection:
    api: client.ApiClient
    server: str
    context: str
    user: str = ""
    credentials: CredentialFiles | None = None
    # The proxy requests go through ("" for none), named when the server cannot be reached.
    proxy: str = ""

    def close(self) -> None:
        self.api.close()
        if self.credentials is not None:
            self.credentials.close()


def _kubeconfig_path(kubeconfig: str | None) -> Path | None:
    if kubeconfig:
        return Path(kubeconfig).expanduser()
    env = os.environ.get("KUBECONFIG")
    if env:
        # Like kubectl, the first existing file of a KUBECONFIG list is the one with the current context.
        for part in env.split(os.pathsep):
            if part and Path(part).expanduser().exists():
                return Path(part).expanduser()
        return Path(env.split(os.pathsep)[0]).expanduser()
    default = Path("~/.kube/config").expanduser()
    return default if default.exists() else None


def connect(kubeconfig: str | None = None, context: str | None = None) -> Connection:
    """Build a client from a kubeconfig, or in-cluster config when running in a pod without one."""
    path = _kubeconfig_path(kubeconfig)
    if path is None:
        if os.environ.get("KUBERNETES_SERVICE_HOST"):
            try:
                config.load_incluster_config()
            except ConfigException as e:
                raise ClusterAccessError(f"in-cluster config unusable: {e}") from None
            cfg = client.Configuration.get_default_copy()
            _set_transport(cfg, None)
            return Connection(client.ApiClient(cfg), cfg.host, "in-cluster", "serviceaccount", proxy=cfg.proxy or "")
        raise ClusterAccessError(
            "no kubeconfig: pass --kubeconfig, set KUBECONFIG, create ~/.kube/config, or run in a pod "
            "(or use --cluster=sim for the built-in simulated cluster)"
        )
    raw = read_kubeconfig(path)
    ctx_name, ctx = _select_context(raw, path, context)
    user_name = str(ctx.get("user") or "")
    creds = CredentialFiles()
    try:
        cfg = _configuration(raw, path, ctx_name, ctx, creds)
    except BaseException:
        creds.close()
        raise
    api = client.ApiClient(cfg)
    # The in-memory credential files live exactly as long as the client that reads them.
    weakref.finalize(api, creds.close)
    return Connection(api, cfg.host, ctx_name, user_name, creds, proxy=cfg.proxy or "")


def read_kubeconfig(path: Path) -> dict[str, Any]:
    """The kubeconfig as a mapping, with the shape of its lists checked: bad files end in one line."""
    if not path.is_file():
        raise ClusterAccessError(f"kubeconfig {path} not found")
    try:
        text = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as e:
        raise ClusterAccessError(f"kubeconfig {path} is not readable: not UTF-8 text (byte 0x{e.object[e.start]:02x} "
                                 f"at offset {e.start})") from None
    except OSError as e:
        raise ClusterAccessError(f"kubeconfig {path} is not readable: {e.strerror or e}") from None
    try:
        raw = yaml.safe_load(text) or {}
    except yaml.YAMLError as e:
        first = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise ClusterAccessError(f"kubeconfig {path} is not readable: {first}") from None
    if not isinstance(raw, dict):
        raise ClusterAccessError(f"kubeconfig {path} is not a kubeconfig (expected a YAML mapping)")
    for key, body in (("contexts", "context"), ("clusters", "cluster"), ("users", "user")):
        entries = raw.get(key)
        if entries is None:
            continue
        if not isinstance(entries, list) or not all(
                isinstance(e, dict) and isinstance(e.get("name"), str) and isinstance(e.get(body) or {}, dict)
                for e in entries):
            raise ClusterAccessError(f"kubeconfig {path} is not a kubeconfig: {key!r} must be a list of "
                                     f"{{name: ..., {body}: {{...}}}} entries")
    if not isinstance(raw.get("current-context") or "", str):
        raise ClusterAccessError(f"kubeconfig {path} is not a kubeconfig: 'current-context' must be a name")
    return raw


def _entries(raw: dict[str, Any], key: str, body: str) -> dict[str, dict[str, Any]]:
    return {e["name"]: e.get(body) or {} for e in raw.get(key) or []}


def _select_context(raw: dict[str, Any], path: Path, context: str | None) -> tuple[str, dict[str, Any]]:
    contexts = _entries(raw, "contexts", "context")
    ctx_name = context or raw.get("current-context")
    if not ctx_name:
        raise ClusterAccessError(f"kubeconfig {path} has no current-context; pass --context "
                                 f"(available: {', '.join(sorted(contexts)) or 'none'})")
    if ctx_name not in contexts:
        raise ClusterAccessError(f"context {ctx_name!r} not found in kubeconfig {path} "
                                 f"(available: {', '.join(sorted(contexts)) or 'none'})")
    return ctx_name, contexts[ctx_name]


def _configuration(raw: dict[str, Any], path: Path, ctx_name: str, ctx: dict[str, Any],
                   creds: CredentialFiles) -> client.Configuration:
    """A client Configuration for one context, its credentials held in memory (see credentials.py)."""
    cluster_name, user_name = str(ctx.get("cluster") or ""), str(ctx.get("user") or "")
    clusters, users = _entries(raw, "clusters", "cluster"), _entries(raw, "users", "user")
    if cluster_name not in clusters:
        raise ClusterAccessError(f"kubeconfig {path}: context {ctx_name!r} names cluster {cluster_name!r}, "
                                 "which it does not define")
    cluster = dict(clusters[cluster_name])
    user = dict(users.get(user_name) or {})
    _materialise(cluster, "certificate-authority", f"cluster {cluster_name!r}", path, creds)
    _materialise(user, "client-certificate", f"user {user_name!r}", path, creds)
    _materialise(user, "client-key", f"user {user_name!r}", path, creds)
    plugin: ExecPlugin | None = None
    credential: ExecCredential | None = None
    if isinstance(user.get("exec"), dict):
        plugin = ExecPlugin(user.pop("exec"), user_name, path, cluster)
        credential = plugin.run()
        _use_exec_credential(user, credential, creds)
    one_context = {"apiVersion": "v1", "kind": "Config", "current-context": ctx_name,
                   "contexts": [{"name": ctx_name, "context": ctx}],
                   "clusters": [{"name": cluster_name, "cluster": cluster}],
                   "users": [{"name": user_name, "user": user}]}
    cfg = client.Configuration()
    try:
        KubeConfigLoader(one_context, ctx_name, config_base_path=str(path.parent),
                         temp_file_path=creds.fallback_dir()).load_and_set(cfg)
    except (ConfigException, ValueError, TypeError, KeyError, OSError) as e:
        raise ClusterAccessError(f"kubeconfig {path} context {ctx_name!r} unusable: {e}") from None
    if plugin is not None and credential is not None and credential.token and credential.expires:
        cfg.refresh_api_key_hook = _token_refresher(plugin, credential)
    _set_transport(cfg, cluster.get("proxy-url"))
    return cfg


def _set_transport(cfg: client.Configuration, proxy_url: str | None) -> None:
    """The proxy kubectl would use (proxy.py), and urllib3 retrying connections only, never answers.

    The proxy is fixed so that the client applies no rules of its own on top; NO_PROXY is already applied,
    and a kubeconfig's proxy-url is used whatever NO_PROXY says, as by kubectl. urllib3's default retries
    slept for whatever a 429/503's Retry-After said (up to 6 hours) three times inside one request, past every
    bound of the run; Retry-After is waited for by the callers' tenacity retries, within their bounds.
    """
    proxy = proxy_for(cfg.host, proxy_url, os.environ)
    cfg.proxy, cfg.proxy_headers = _proxy_credentials(proxy)
    cfg.no_proxy = ""
    cfg.retries = urllib3.Retry(3, respect_retry_after_header=False)


def _proxy_credentials(proxy: str | None) -> tuple[str | None, dict[str, str] | None]:
    """http(s)://user:password@proxy as Go sends it: Proxy-Authorization Basic (urllib3 drops the user part).

    SOCKS proxies are left as they are: urllib3's SOCKS support reads the user and password from the URL.
    """
    parts = urlsplit(proxy or "")
    if not proxy or "@" not in parts.netloc or not parts.scheme.startswith("http"):
        return proxy, None
    userinfo, _, host = parts.netloc.rpartition("@")
    auth = ":".join(unquote(p) for p in userinfo.split(":", 1))
    return urlunsplit(parts._replace(netloc=host)), urllib3.make_headers(proxy_basic_auth=auth)


def _materialise(entry: dict[str, Any], key: str, where: str, path: Path, creds: CredentialFiles) -> None:
    """Replace ``<key>-data`` (base64) by ``<key>``: the path of an in-memory copy of the decoded bytes."""
    data = entry.pop(f"{key}-data", None)
    if not data:
        return
    try:
        decoded = base64.b64decode(str(data), validate=True)
    except (binascii.Error, ValueError):
        raise ClusterAccessError(f"kubeconfig {path}: {key}-data of {where} is not base64") from None
    entry[key] = creds.path_for(decoded, key)


def _use_exec_credential(user: dict[str, Any], cred: ExecCredential, creds: CredentialFiles) -> None:
    if cred.token:
        user["token"] = cred.token
    if cred.client_certificate and cred.client_key:
        user["client-certificate"] = creds.path_for(cred.client_certificate, "exec-client-certificate")
        user["client-key"] = creds.path_for(cred.client_key, "exec-client-key")


def _token_refresher(plugin: ExecPlugin, cred: ExecCredential) -> Callable[[client.Configuration], None]:
    """Run the plugin again when its token is about to expire (an EKS token lasts 15 minutes).

    Called before every request. A token without an expiry is used for the whole run (the hook is not set for
    it), as client-go does. An expired one makes the plugin run again, but at most once per
    EXEC_RERUN_INTERVAL: a plugin whose fresh token already looks expired (the clock here ahead of the
    issuer's, or a plugin stamping the time of issue) ran before every request, 53 times in one run, and its
    token is what the server accepts or not either way. A 401 does not make it run again: the reader ends the
    run on a 401 with one line naming the context, which is clearer than a second credential failing the same.
    """
    lock = threading.Lock()
    current = [cred]
    last_run = [time.monotonic()]

    def refresh(cfg: client.Configuration) -> None:
        with lock:
            if current[0].expired() and time.monotonic() - last_run[0] >= EXEC_RERUN_INTERVAL:
                current[0] = plugin.run()
                last_run[0] = time.monotonic()
            cfg.api_key["BearerToken"] = f"Bearer {current[0].token}"

    return refresh


def raw_request(api: client.ApiClient, method: str, path: str, query: list[tuple[str, str]] | None = None,
                body: Any = None, timeout: tuple[float, float] | float = REQUEST_TIMEOUT,
                content_type: str = "application/json") -> bytes:
    """One HTTP request through the official client's auth and TLS, returning the raw body.

    The typed API methods would parse every object into Python models; for a 5,000-node LIST the raw
    JSON is several times faster and is all the checks need. Raises ApiException for HTTP errors.
    """
    headers = {"Accept": "application/json"}
    if body is not None:
        headers["Content-Type"] = content_type
    m, url, hdrs, ser_body, post = api.param_serialize(
        method=method, resource_path=path, query_params=query or [], header_params=headers, body=body,
        auth_settings=["BearerToken"])
    resp = api.call_api(m, url, header_params=hdrs, body=ser_body, post_params=post, _request_timeout=timeout)
    data = resp.read()
    if resp.status >= 400:
        raise _http_error(resp.status, resp.reason, data, resp.headers)
    return data


def raw_stream(api: client.ApiClient, path: str, query: list[tuple[str, str]] | None = None,
               timeout: tuple[float, float] | float = REQUEST_TIMEOUT) -> urllib3.HTTPResponse:
    """A GET whose body is left unread: the caller streams it (resp.stream) and must call resp.release_conn().

    Raises ApiException for HTTP errors, as raw_request does.
    """
    m, url, hdrs, _, _ = api.param_serialize(method="GET", resource_path=path, query_params=query or [],
                                             header_params={"Accept": "application/json"},
                                             auth_settings=["BearerToken"])
    resp = api.call_api(m, url, header_params=hdrs, _request_timeout=timeout).response
    if resp.status >= 400:
        data = resp.data
        resp.release_conn()
        raise _http_error(resp.status, resp.reason, data, resp.headers)
    return resp


def _http_error(status: int, reason: str | None, data: bytes, headers: Any) -> ApiException:
    """An ApiException with the answer's headers: callers read Retry-After from them."""
    e = ApiException(status=status, reason=reason, body=data.decode("utf-8", "replace")[:500])
    e.headers = headers
    return e
