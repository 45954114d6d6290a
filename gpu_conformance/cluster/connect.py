"""Turning --kubeconfig/--context (or in-cluster config) into an API client, with one-line errors."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException
from kubernetes.config.config_exception import ConfigException

from gpu_conformance.errors import ClusterAccessError

# Requests to the API server must never hang a run; every call passes this (connect, read) timeout.
REQUEST_TIMEOUT = (5, 60)


@dataclass
class Connection:
    api: client.ApiClient
    server: str
    context: str
    user: str = ""

    def close(self) -> None:
        self.api.close()


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
            return Connection(client.ApiClient(cfg), cfg.host, "in-cluster", "serviceaccount")
        raise ClusterAccessError(
            "no kubeconfig: pass --kubeconfig, set KUBECONFIG, create ~/.kube/config, or run in a pod "
            "(or use --cluster=sim for the built-in simulated cluster)"
        )
    if not path.is_file():
        raise ClusterAccessError(f"kubeconfig {path} not found")
    try:
        raw = yaml.safe_load(path.read_text()) or {}
    except (OSError, yaml.YAMLError) as e:
        first = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise ClusterAccessError(f"kubeconfig {path} is not readable: {first}") from None
    if not isinstance(raw, dict):
        raise ClusterAccessError(f"kubeconfig {path} is not a kubeconfig (expected a YAML mapping)")
    contexts = {c.get("name"): c.get("context", {}) for c in raw.get("contexts") or [] if isinstance(c, dict)}
    ctx_name = context or raw.get("current-context")
    if not ctx_name:
        raise ClusterAccessError(f"kubeconfig {path} has no current-context; pass --context "
                                 f"(available: {', '.join(sorted(map(str, contexts))) or 'none'})")
    if ctx_name not in contexts:
        raise ClusterAccessError(f"context {ctx_name!r} not found in kubeconfig {path} "
                                 f"(available: {', '.join(sorted(map(str, contexts))) or 'none'})")
    cfg = client.Configuration()
    try:
        config.load_kube_config(config_file=str(path), context=ctx_name, client_configuration=cfg,
                                persist_config=False)
    except (ConfigException, ValueError, TypeError, OSError) as e:
        raise ClusterAccessError(f"kubeconfig {path} context {ctx_name!r} unusable: {e}") from None
    # The client would honour HTTP(S)_PROXY; a conformance read of one cluster should go straight to it.
    cfg.proxy = None
    user = str((contexts.get(ctx_name) or {}).get("user", ""))
    return Connection(client.ApiClient(cfg), cfg.host, str(ctx_name), user)


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
        raise ApiException(status=resp.status, reason=resp.reason, body=data.decode("utf-8", "replace")[:500])
    return data
