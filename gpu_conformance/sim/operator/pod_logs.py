"""Logs of one pod's container, for what differs per pod (a claim pod sees the GPU its claim was allocated).

The control plane serves logs per container name (kwok ClusterLogs from its config file: every pod's container of
that name shows the same text). kwok also serves per-pod `Logs` objects (kwok.x-k8s.io/v1alpha1, namespaced, named
after the pod) from the API server when started with enableCRDs: [Logs], which the control plane does; a per-pod
rule wins over the cluster-wide ones (kwok v0.8.0 pkg/kwok/server/debugging_logs.go getPodLogs). kwok reads the
file on every request, so the text may be written before or after the pod runs.
"""

from __future__ import annotations

import os
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

Obj = dict[str, Any]

LOGS_API = "kwok.x-k8s.io/v1alpha1"
LOGS_CRD_NAME = "logs.kwok.x-k8s.io"
# Set on a claim pod once its own output is served; kwok starts the pod only then (data/kwok-stages.yaml).
SERVED_ANNOTATION = "sim.gpu-conformance/claim-output"


def logs_crd() -> Obj:
    """Our own schema of kwok's namespaced Logs kind (group, names and scope as kwok's; the spec kept whole)."""
    return {
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": LOGS_CRD_NAME},
        "spec": {"group": "kwok.x-k8s.io", "scope": "Namespaced",
                 "names": {"kind": "Logs", "listKind": "LogsList", "plural": "logs", "singular": "logs"},
                 "versions": [{"name": "v1alpha1", "served": True, "storage": True, "subresources": {"status": {}},
                               "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                                   "apiVersion": {"type": "string"}, "kind": {"type": "string"},
                                   "metadata": {"type": "object"},
                                   "spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
                                   "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}}}}]},
    }


def cri_text(text: str) -> str:
    """CRI log format, what kwok's reader parses: "<RFC3339Nano> stdout F <line>" per line."""
    now = time.time_ns()
    base = datetime.fromtimestamp(now // 1_000_000_000, tz=UTC).strftime("%Y-%m-%dT%H:%M:%S")
    stamp = f"{base}.{now % 1_000_000_000:09d}Z"
    return "".join(f"{stamp} stdout F {line}\n" for line in text.splitlines())


def serve(kube: Any, logs_dir: Path, namespace: str, pod: str, texts: dict[str, str]) -> None:
    """Make `kubectl logs` of these containers of this pod return these texts."""
    logs_dir.mkdir(parents=True, exist_ok=True)
    rules = []
    for container, text in texts.items():
        path = logs_dir / f"{namespace}_{pod}_{container}.log"
        tmp = path.with_name(f".{path.name}.tmp")
        tmp.write_text(cri_text(text))
        os.replace(tmp, path)  # kwok never reads half a file
        rules.append({"containers": [container], "logsFile": str(path)})
    kube.create({"apiVersion": LOGS_API, "kind": "Logs", "metadata": {"name": pod, "namespace": namespace},
                 "spec": {"logs": rules}})
