"""Kubeconfig exec credential plugins (aws eks get-token, gke-gcloud-auth-plugin, kubelogin), run with a bound.

The kubernetes client runs the plugin without a timeout (a hanging plugin hangs the run for ever) and, when
the plugin is missing or fails, only logs it and goes on without credentials, so the API server's 403 for the
anonymous user was reported as an RBAC problem. Here the plugin runs once per need, in its own process group,
for at most ``GPU_CONFORMANCE_EXEC_TIMEOUT`` seconds, and every failure is one line naming the plugin.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import signal
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpu_conformance.errors import ClusterAccessError

TIMEOUT_ENV = "GPU_CONFORMANCE_EXEC_TIMEOUT"
DEFAULT_TIMEOUT = 60.0
# Refresh a token this long before it expires, so a request never goes out with one about to lapse.
EXPIRY_MARGIN = dt.timedelta(seconds=30)


def plugin_timeout() -> float:
    raw = os.environ.get(TIMEOUT_ENV, "")
    try:
        value = float(raw) if raw else DEFAULT_TIMEOUT
    except ValueError:
        raise ClusterAccessError(f"{TIMEOUT_ENV}={raw!r} is not a number of seconds") from None
    if not value > 0 or value == float("inf"):
        raise ClusterAccessError(f"{TIMEOUT_ENV} must be a positive number of seconds, not {raw!r}")
    return value


@dataclass
class ExecCredential:
    """What a plugin answered: a token, or a client certificate and key (PEM), and when it expires."""

    token: str | None = None
    client_certificate: bytes | None = None
    client_key: bytes | None = None
    expires: dt.datetime | None = None

    def expired(self, now: dt.datetime | None = None) -> bool:
        now = now or dt.datetime.now(dt.UTC)
        return self.expires is not None and now >= self.expires - EXPIRY_MARGIN


@dataclass
class ExecPlugin:
    """users[].user.exec of a kubeconfig."""

    config: dict[str, Any]
    user: str
    kubeconfig: Path
    cluster: dict[str, Any] = field(default_factory=dict)

    @property
    def command(self) -> str:
        return str(self.config.get("command") or "")

    def _argv(self) -> list[str]:
        command = self.command
        if not command:
            raise ClusterAccessError(f"kubeconfig {self.kubeconfig}: user {self.user!r} has an exec credential "
                                     "plugin without a command")
        args = self.config.get("args") or []
        if not isinstance(args, list):
            raise ClusterAccessError(f"kubeconfig {self.kubeconfig}: exec args of user {self.user!r} must be a list")
        # Like kubectl: a relative path with a directory part is relative to the kubeconfig's directory.
        if os.sep in command and not os.path.isabs(command):
            command = str(self.kubeconfig.parent / command)
        return [command, *map(str, args)]

    def _env(self) -> dict[str, str]:
        env = dict(os.environ)
        for item in self.config.get("env") or []:
            if isinstance(item, dict) and "name" in item:
                env[str(item["name"])] = str(item.get("value", ""))
        spec: dict[str, Any] = {"interactive": False}
        if self.config.get("provideClusterInfo"):
            spec["cluster"] = {k: v for k, v in self.cluster.items()
                               if k in ("server", "certificate-authority-data", "insecure-skip-tls-verify",
                                        "tls-server-name", "proxy-url")}
        env["KUBERNETES_EXEC_INFO"] = json.dumps({"apiVersion": self._api_version(), "kind": "ExecCredential",
                                                  "spec": spec})
        return env

    def _api_version(self) -> str:
        return str(self.config.get("apiVersion") or "client.authentication.k8s.io/v1")

    def _fail(self, what: str) -> ClusterAccessError:
        return ClusterAccessError(f"credential plugin {self.command!r} of user {self.user!r} "
                                  f"(kubeconfig {self.kubeconfig}) {what}")

    def run(self, timeout: float | None = None) -> ExecCredential:
        timeout = plugin_timeout() if timeout is None else timeout
        argv = self._argv()
        try:
            proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                    env=self._env(), start_new_session=True)
        except (FileNotFoundError, NotADirectoryError):
            hint = self.config.get("installHint")
            raise self._fail("is not installed (not found)"
                             + (f": {str(hint).strip().splitlines()[0]}" if hint else "")) from None
        except PermissionError:
            raise self._fail("cannot be executed (permission denied)") from None
        except OSError as e:
            raise self._fail(f"cannot be started: {e.strerror or e}") from None
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            # Its own process group: a plugin that forked (a shell, a browser helper) goes with it.
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            raise self._fail(f"did not answer within {timeout:g} s (waiting for a login? "
                             f"set {TIMEOUT_ENV} to wait longer)") from None
        except BaseException:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            raise
        if proc.returncode != 0:
            first = next((ln.strip() for ln in err.decode("utf-8", "replace").splitlines() if ln.strip()), "")
            raise self._fail(f"failed with exit code {proc.returncode}" + (f": {first[:300]}" if first else ""))
        return self._parse(out)

    def _parse(self, out: bytes) -> ExecCredential:
        try:
            data = json.loads(out.decode("utf-8"))
        except (UnicodeDecodeError, ValueError):
            raise self._fail("did not print an ExecCredential (not JSON)") from None
        status = data.get("status") if isinstance(data, dict) else None
        if not isinstance(status, dict):
            raise self._fail("printed JSON without an ExecCredential status")
        cred = ExecCredential()
        expiry = status.get("expirationTimestamp")
        if expiry:
            try:
                cred.expires = dt.datetime.fromisoformat(str(expiry).replace("Z", "+00:00"))
            except ValueError:
                raise self._fail(f"answered an unreadable expirationTimestamp {str(expiry)[:40]!r}") from None
            if cred.expires.tzinfo is None:
                cred.expires = cred.expires.replace(tzinfo=dt.UTC)
        if isinstance(status.get("token"), str) and status["token"]:
            cred.token = status["token"]
        elif isinstance(status.get("clientCertificateData"), str) and isinstance(status.get("clientKeyData"), str):
            cred.client_certificate = status["clientCertificateData"].encode()
            cred.client_key = status["clientKeyData"].encode()
        else:
            raise self._fail("answered without a token or a client certificate and key")
        return cred
