"""The GPU Operator's own Deployment as its chart renders it, with the labels every chart-made object carries.

From NVIDIA/gpu-operator deployments/gpu-operator at each release tag: templates/operator.yaml (labels, selector,
priority class, node selector, tolerations, affinity, args, env, probes, metrics port), templates/_helpers.tpl
(`gpu-operator.labels`) and values.yaml (operator.priorityClassName, tolerations, affinity). Read by the simulated
install and by tests/factory.py.
"""

from __future__ import annotations

from typing import Any

from gpu_conformance import operands as op
from gpu_conformance import versions
from gpu_conformance.gpu_operator.nfd import CONTROL_PLANE_TOLERATION, RELEASE
from gpu_conformance.gpu_operator.operand_specs import PRIORITY_CLASS, env, env_field
from gpu_conformance.gpu_operator.releases import Images
from gpu_conformance.versions import Version

Obj = dict[str, Any]

CONTAINER = "gpu-operator"
# The labels that select the operator's pod (the Deployment's selector); its pods also carry the chart labels.
SELECTOR = {"app.kubernetes.io/component": "gpu-operator", "app": "gpu-operator"}


def chart_labels(chart_version: str) -> dict[str, str]:
    """`gpu-operator.labels`: on the operator Deployment and the ServiceAccounts the chart creates."""
    return {"app.kubernetes.io/name": "gpu-operator", "helm.sh/chart": f"gpu-operator-{chart_version}",
            "app.kubernetes.io/instance": RELEASE, "app.kubernetes.io/version": chart_version,
            "app.kubernetes.io/managed-by": "Helm"}


def operator_env(version: Version, img: Images) -> list[Obj]:
    """The operator container's env; VALIDATOR_IMAGE only where the chart passes it."""
    out = [env("WATCH_NAMESPACE", ""), env_field("OPERATOR_NAMESPACE", "metadata.namespace"),
           env("DRIVER_MANAGER_IMAGE", img.driver_manager)]
    if versions.since(versions.OPERATOR_VALIDATOR_IMAGE_ENV, version):
        out.append(env("VALIDATOR_IMAGE", img.validator))
    return out


def operator_deployment(chart_version: str, version: Version, img: Images, namespace: str) -> Obj:
    """The Deployment `gpu-operator` of release `chart_version` running images `img`."""
    labels = {**chart_labels(chart_version), "app.kubernetes.io/component": "gpu-operator",
              "nvidia.com/gpu-driver-upgrade-drain.skip": "true"}
    return {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": op.OPERATOR_DEPLOYMENT, "namespace": namespace, "labels": labels},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": dict(SELECTOR)},
            "template": {
                "metadata": {"labels": {**labels, "app": "gpu-operator"}},
                "spec": {
                    "serviceAccountName": "gpu-operator",
                    "priorityClassName": PRIORITY_CLASS,
                    "nodeSelector": {"kubernetes.io/os": "linux"},
                    "tolerations": [{**CONTROL_PLANE_TOLERATION, "key": "node-role.kubernetes.io/master"},
                                    dict(CONTROL_PLANE_TOLERATION)],
                    "affinity": {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
                        {"weight": 1, "preference": {"matchExpressions": [
                            {"key": "node-role.kubernetes.io/control-plane", "operator": "In",
                             "values": [""]}]}}]}},
                    "containers": [{
                        "name": CONTAINER, "image": img.operator, "imagePullPolicy": "IfNotPresent",
                        "command": ["gpu-operator"], "args": ["--leader-elect"],
                        "env": operator_env(version, img),
                        "ports": [{"name": "metrics", "containerPort": 8080}],
                        "livenessProbe": {"httpGet": {"path": "/healthz", "port": 8081},
                                          "initialDelaySeconds": 15, "periodSeconds": 20},
                        "readinessProbe": {"httpGet": {"path": "/readyz", "port": 8081},
                                           "initialDelaySeconds": 5, "periodSeconds": 10},
                    }],
                },
            },
        },
    }
