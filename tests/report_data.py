"""Synthetic RunResults for the reporter tests, built through the real verdict.decide.

The checks are the real catalogue's and the policy keys the ones the session writes, so a reporter cannot pass
on a vocabulary the product never produces. Findings carry hint/kubectl filled in the way Check.run does.
"""

from __future__ import annotations

import base64
import html as htmllib
import re
import zlib
from collections.abc import Iterable
from html.parser import HTMLParser
from typing import Any

from gpu_conformance import catalogue
from gpu_conformance.model import Check, Finding, Layer, Status
from gpu_conformance.run_result import RunResult
from gpu_conformance.verdict import decide

NAMESPACE = "gpu-operator"

# The real catalogue's checks: report tests must speak the vocabulary the product produces.
CHECKS: list[Check] = catalogue.all_checks()
_BY_ID = {c.id: c for c in CHECKS}

CLUSTER = {
    "server": "https://api.gpu-lab.example:6443",
    "context": "gpu-lab",
    "kubernetes_version": "v1.30.4",
    "requests": 42,
    "read_seconds": 1.8,
}
# What the session writes for a v24.9-style install (keys from operands.POLICY_SWITCHES, in a shuffled order
# so that the report's own ordering is what the tests see).
POLICY = {
    "GFD": True,
    "MIG strategy": "single",
    "CDI": False,
    "device plugin": True,
    "driver": True,
    "toolkit": True,
    "CDI NRI plugin": False,
    "DCGM exporter": True,
}

# The failing node's root cause, as the brief words it.
DRIVER_FAIL_NODE = "gpu-node-1"
DRIVER_FAIL_MESSAGE = "validator stuck in toolkit-validation for 12 min (nvidia-container-toolkit not ready)"


def operator_info(version: str = "v24.9.0", **policy: Any) -> dict[str, Any]:
    return {
        "namespace": NAMESPACE,
        "version": version,
        "image": f"nvcr.io/nvidia/gpu-operator:{version}",
        "policy": {**POLICY, **policy},
    }


def finding(check_id: str, status: Status, message: str, node: str | None = None,
            evidence: dict[str, Any] | None = None) -> Finding:
    """A finding completed with the check's hint and kubectl, as Check._complete does for real checks."""
    c = _BY_ID[check_id]
    return Finding(status, message, node, evidence or {}, c.hint, c.render_kubectl(NAMESPACE, node),
                   check_id=check_id)


def pod_name(prefix: str, node: str) -> str:
    """A DaemonSet pod name with a stable per-node suffix, like nvidia-driver-daemonset-4kq9z."""
    return f"{prefix}-{zlib.crc32(node.encode()):08x}"[: len(prefix) + 6]


def node_names(n: int) -> list[str]:
    return [f"gpu-node-{i}" for i in range(n)]


def cluster_pass() -> list[Finding]:
    return [
        finding("OPR-003", Status.PASS, "ClusterPolicy cluster-policy is ready",
                evidence={"object": "clusterpolicy/cluster-policy", "status.state": "ready"}),
        finding("OPR-004", Status.PASS, "gpu-operator-6d9f7b8c4-x2x9q is Running"),
        finding("DPL-008", Status.PASS, "RuntimeClass nvidia has handler nvidia"),
    ]


def node_pass(node: str, layers: Iterable[Layer] | None = None) -> list[Finding]:
    """Passing findings for one node, for the given layers (all node-level checks by default)."""
    wanted = set(layers) if layers is not None else None
    out = [
        finding("NFD-002", Status.PASS, f"{node} has feature.node.kubernetes.io/pci-10de.present=true", node),
        finding("LBL-001", Status.PASS, "no deploy label disables an operand", node),
        # Pod names differ per node, as in a real cluster: these findings cannot be merged into one.
        finding("DRV-002", Status.PASS, f"{pod_name('nvidia-driver-daemonset', node)} is Ready (driver 550.127.05)",
                node),
        finding("DRV-004", Status.PASS, "all validator init containers completed", node),
        finding("DPL-002", Status.PASS, f"{node} advertises 8 nvidia.com/gpu", node,
                evidence={"object": f"node/{node}", "status.allocatable.nvidia.com/gpu": "8"}),
        finding("PRB-003", Status.PASS, "nvidia-smi saw 1 GPU", node),
    ]
    return [f for f in out if wanted is None or _BY_ID[f.check_id].layer in wanted]


def probe_pod(node: str, ok: bool = True, **extra: Any) -> dict[str, Any]:
    pod = {
        "name": f"gpu-conformance-probe-{node}",
        "node": node,
        "phase": "Succeeded" if ok else "Pending",
        "output": "GPU 0: NVIDIA A100-SXM4-80GB (UUID: GPU-5f1c6e2a-0000-0000-0000-000000000000)" if ok else "",
        "events": ["Scheduled", "Pulled", "Started"] if ok else
                  ["0/3 nodes are available: 1 Insufficient nvidia.com/gpu."],
        "logs": "" if not ok else "Thu Jan 1 00:00:00 2026\n| NVIDIA-SMI 550.127.05  Driver Version: 550.127.05 |",
        "gpus_seen": 1 if ok else 0,
        "cdi": False,
    }
    pod.update(extra)
    return pod


def make_result(
    nodes: list[str],
    findings: list[Finding],
    *,
    probe: dict[str, Any] | None = None,
    settings: dict[str, Any] | None = None,
    driver_config: dict[str, str] | None = None,
    operator: dict[str, Any] | None = None,
    cluster: dict[str, Any] | None = None,
    run_id: str = "run-20260101-000000",
    layers_run: list[Layer] | None = None,
) -> RunResult:
    verdict = decide(CHECKS, findings, nodes, layers_run)
    return RunResult(
        run_id=run_id,
        started_at="2026-01-01T00:00:00Z",
        duration_seconds=74.25,
        cluster=dict(cluster or CLUSTER),
        operator=operator or operator_info(),
        driver_config=driver_config if driver_config is not None else {n: "operator" for n in nodes},
        checks=list(CHECKS),
        findings=findings,
        verdict=verdict,
        probe=probe if probe is not None else {"pods": [probe_pod(n) for n in nodes], "skipped": ""},
        settings=settings if settings is not None else {"expect_driver": "auto", "probe_image": "cuda:12.6"},
    )


def healthy_cluster(n: int = 3, **kw: Any) -> RunResult:
    nodes = node_names(n)
    findings = cluster_pass() + [f for node in nodes for f in node_pass(node)]
    return make_result(nodes, findings, **kw)


def driver_failure_findings(node: str = DRIVER_FAIL_NODE, extra_evidence: dict[str, Any] | None = None,
                            message: str = DRIVER_FAIL_MESSAGE) -> list[Finding]:
    """One node fails at driver-toolkit; its later-layer checks also fail, which the verdict must block."""
    evidence = {
        "object": "pod/nvidia-operator-validator-7xk2p",
        "field": "status.initContainerStatuses[toolkit-validation].state",
        "observed": "waiting for 12m",
        "expected": "terminated, exit code 0",
        **(extra_evidence or {}),
    }
    return [
        finding("NFD-002", Status.PASS, f"{node} has feature.node.kubernetes.io/pci-10de.present=true", node),
        finding("LBL-001", Status.PASS, "no deploy label disables an operand", node),
        finding("DRV-002", Status.PASS, f"nvidia-driver-daemonset pod on {node} is Ready", node),
        finding("DRV-004", Status.FAIL, message, node, evidence),
        finding("DPL-002", Status.FAIL, f"{node} advertises 0 nvidia.com/gpu", node,
                evidence={"object": f"node/{node}", "status.allocatable.nvidia.com/gpu": "0"}),
        finding("PRB-003", Status.FAIL, "probe pod stayed Pending: Insufficient nvidia.com/gpu", node),
    ]


def driver_failure_cluster(**kw: Any) -> RunResult:
    nodes = node_names(3)
    findings = cluster_pass()
    for node in nodes:
        findings += driver_failure_findings(node) if node == DRIVER_FAIL_NODE else node_pass(node)
    probe = {"pods": [probe_pod(n, ok=n != DRIVER_FAIL_NODE) for n in nodes], "skipped": ""}
    return make_result(nodes, findings, probe=kw.pop("probe", probe), **kw)


OPERATOR_FAIL_MESSAGE = "ClusterPolicy cluster-policy is notReady: driver daemonset has 0 of 3 pods ready"


def operator_failure_cluster(**kw: Any) -> RunResult:
    """The operator layer fails cluster-wide: every node's root cause is the operator, the rest is blocked."""
    nodes = node_names(3)
    findings = [
        finding("OPR-003", Status.FAIL, OPERATOR_FAIL_MESSAGE,
                evidence={"object": "clusterpolicy/cluster-policy", "status.state": "notReady"}),
        finding("OPR-004", Status.PASS, "gpu-operator-6d9f7b8c4-x2x9q is Running"),
        finding("DPL-008", Status.FAIL, "RuntimeClass nvidia not found"),
    ]
    for node in nodes:
        findings += node_pass(node, [Layer.NFD, Layer.DEPLOY_LABELS])
        findings.append(finding("DRV-002", Status.FAIL, f"no driver pod on {node}", node))
    probe = {"pods": [], "skipped": "the operator layer failed cluster-wide; no probe pod was started"}
    return make_result(nodes, findings, probe=probe, **kw)


LARGE_DRIVER_FAILING = [f"gpu-node-{i}" for i in range(990, 997)]   # 7 nodes at driver-toolkit
LARGE_PLUGIN_FAILING = [f"gpu-node-{i}" for i in range(997, 1000)]  # 3 nodes at device-plugin


def fleet(n: int, driver_failing: Iterable[str] = (), plugin_failing: Iterable[str] = (), **kw: Any) -> RunResult:
    """n GPU nodes: some fail at driver-toolkit (DRV-004), some at device-plugin (DPL-002), the rest pass."""
    nodes = node_names(n)
    drv, plug = set(driver_failing), set(plugin_failing)
    findings = cluster_pass()
    for node in nodes:
        if node in drv:
            # The message names the node: the report must still group these as one problem.
            findings += driver_failure_findings(node, message=f"validator on {node} stuck in toolkit-validation")
        elif node in plug:
            findings += node_pass(node, [Layer.NFD, Layer.DEPLOY_LABELS, Layer.DRIVER_TOOLKIT])
            findings.append(finding("DPL-002", Status.FAIL, f"{node} advertises 0 nvidia.com/gpu", node,
                                    evidence={"object": f"node/{node}", "status.allocatable.nvidia.com/gpu": "0"}))
            findings.append(finding("PRB-003", Status.FAIL, "probe pod stayed Pending", node))
        else:
            findings += node_pass(node)
    probe = {"pods": [probe_pod(node, ok=node not in drv | plug) for node in nodes], "skipped": ""}
    return make_result(nodes, findings, probe=kw.pop("probe", probe), **kw)


def large_cluster(**kw: Any) -> RunResult:
    """1,000 GPU nodes: 990 healthy, 7 failing at driver-toolkit, 3 at device-plugin."""
    return fleet(1000, LARGE_DRIVER_FAILING, LARGE_PLUGIN_FAILING, **kw)


# --- secrets that must never reach a report --------------------------------------------------------------

SA_TOKEN = ("eyJhbGciOiJSUzI1NiIsImtpZCI6InRlc3QifQ.eyJzdWIiOiJzeXN0ZW06c2VydmljZWFjY291bnQ6Z3B1In0"
            ".c2lnbmF0dXJlLXNlY3JldC12YWx1ZQ")
BEARER = "sha256~Zq3bSecretBearerValue9f8e7d6c"
PEM_BODY = "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7SECRETPEMBODYxyz"
PEM = f"-----BEGIN PRIVATE KEY-----\n{PEM_BODY}\nc2VjcmV0LXBlbS1saW5lLXR3bw==\n-----END PRIVATE KEY-----"
CLIENT_KEY_DATA = base64.b64encode(PEM.encode()).decode()
CLIENT_CERT_DATA = base64.b64encode(
    b"-----BEGIN CERTIFICATE-----\nMIIC-cert-secret\n-----END CERTIFICATE-----").decode()
PASSWORD = "hunter2-Very-Secret-Pw"
API_KEY = "nvapi-SECRETapikeyVALUE123456"
# Substrings of the above that no written file may contain.
SECRET_MARKERS = [SA_TOKEN, SA_TOKEN.split(".")[1], BEARER, PEM_BODY, CLIENT_KEY_DATA[:40],
                  CLIENT_CERT_DATA[:40], PASSWORD, API_KEY]


def secret_cluster(**kw: Any) -> RunResult:
    """The driver-failure cluster with credentials planted in evidence, messages, probe logs and settings."""
    evidence = {
        "env": [{"name": "NGC_API_KEY", "value": API_KEY}, {"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}],
        "kubeconfig": {"users": [{"name": "admin", "user": {"client-key-data": CLIENT_KEY_DATA,
                                                            "client-certificate-data": CLIENT_CERT_DATA,
                                                            "token": BEARER}}]},
        "request_headers": {"Authorization": f"Bearer {SA_TOKEN}"},
        "container_log_tail": f"login failed: password={PASSWORD}\n{PEM}",
        "args": ["--registry-password", PASSWORD, "--v", "2"],
    }
    nodes = node_names(3)
    findings = cluster_pass()
    for node in nodes:
        if node == DRIVER_FAIL_NODE:
            findings += driver_failure_findings(
                node, extra_evidence=evidence,
                message=f"{DRIVER_FAIL_MESSAGE}; last API call used Authorization: Bearer {BEARER}")
        else:
            findings += node_pass(node)
    probe = {
        "pods": [probe_pod(n, ok=n != DRIVER_FAIL_NODE) for n in nodes[:2]] + [
            probe_pod(nodes[2], ok=False,
                      logs=f"curl -H 'Authorization: Bearer {SA_TOKEN}' https://10.96.0.1\n{PEM}\n"
                           f"client-key-data: {CLIENT_KEY_DATA}",
                      events=[f"token {SA_TOKEN} rejected", f"pulling with password={PASSWORD}"],
                      output=f"NGC_API_KEY={API_KEY}")
        ],
        "skipped": "",
    }
    settings = {
        "kubeconfig": "/root/.kube/config",
        "token": BEARER,
        "extra": {"registry_password": PASSWORD, "kubeconfig_inline": f"client-key-data: {CLIENT_KEY_DATA}"},
        "probe_env": [{"name": "HF_TOKEN", "value": SA_TOKEN}],
    }
    return make_result(nodes, findings, probe=probe, settings=settings, **kw)


# --- reading a rendered page back -------------------------------------------------------------------------

class GridParser(HTMLParser):
    """Reads table#grid: row label -> [(data-status, visible cell text)] for the six layer cells."""

    def __init__(self) -> None:
        super().__init__()
        self.rows: dict[str, list[tuple[str, str]]] = {}
        self._in_grid = self._in_body = False
        self._label: list[str] | None = None
        self._cells: list[tuple[str, str]] = []
        self._cell: tuple[str, list[str]] | None = None
        self._details = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag == "table" and a.get("id") == "grid":
            self._in_grid = True
        elif self._in_grid and tag == "tbody":
            self._in_body = True
        elif self._in_body and tag == "tr":
            self._label, self._cells = None, []
        elif self._in_body and tag == "th" and a.get("scope") == "row":
            self._label = []
        elif self._in_body and tag == "details":
            self._details += 1
        elif self._in_body and tag == "td" and "cell" in (a.get("class") or ""):
            self._cell = (a.get("data-status") or "", [])

    def handle_endtag(self, tag: str) -> None:
        if tag == "details" and self._details:
            self._details -= 1
        elif tag == "td" and self._cell is not None:
            self._cells.append((self._cell[0], "".join(self._cell[1]).strip()))
            self._cell = None
        elif tag == "tr" and self._in_body and self._label is not None:
            self.rows["".join(self._label).strip()] = self._cells
            self._label = None
        elif tag == "tbody":
            self._in_body = False
        elif tag == "table":
            self._in_grid = False

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell[1].append(data)
        elif self._label is not None and not self._details and not self._cells:
            self._label.append(data)


def grid(page: str) -> dict[str, list[tuple[str, str]]]:
    p = GridParser()
    p.feed(page)
    return p.rows


def text_of(page: str) -> str:
    """The page as a reader sees it: inline tags vanish, block tags separate, entities decoded."""
    page = re.sub(r"<(style|script)\b.*?</\1>", " ", page, flags=re.S)
    page = re.sub(r"</?(span|a|code|strong|b|small|abbr)\b[^>]*>", "", page)
    return re.sub(r"\s+", " ", htmllib.unescape(re.sub(r"<[^>]+>", " ", page)))
