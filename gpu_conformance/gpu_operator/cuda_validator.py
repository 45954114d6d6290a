"""The pod the validator's cuda-validation stage creates on each GPU node to run a CUDA sample.

From NVIDIA/gpu-operator at each release tag: validator/(manifests/)cuda-workload-validation.yaml (names, labels,
the CDI annotation, containers and their commands) and cmd/nvidia-validator/main.go (the image, pull policy and
RuntimeClass from VALIDATOR_* env, the node name, and the owner references copied from the validator DaemonSet,
i.e. the ClusterPolicy). Read by the simulated validator and by tests/factory.py.
"""

from __future__ import annotations

from typing import Any

from gpu_conformance import operands as op
from gpu_conformance.gpu_operator.operand_specs import GPU_TOLERATION, env

Obj = dict[str, Any]

INIT_CONTAINER = "cuda-validation"
# The management CDI device NRI mode injects into the sample's container (the manifest's own annotation).
CDI_ANNOTATION = {f"nvidia.cdi.k8s.io/container.{INIT_CONTAINER}": "management.nvidia.com/gpu=all"}
SUCCESS_MESSAGE = "echo cuda workload validation is successful"


def cuda_validator_pod(image: str, namespace: str, node: str, runtime_class: str | None,
                       owner: Obj | None = None, name: str | None = None) -> Obj:
    """The pod as the validator creates it (generateName), or named `name`; owner: the ClusterPolicy reference."""
    meta: Obj = {"namespace": namespace, "labels": {"app": op.CUDA_VALIDATOR_APP}, "annotations": dict(CDI_ANNOTATION)}
    if name:
        meta["name"] = name
    else:
        meta["generateName"] = f"{op.CUDA_VALIDATOR_APP}-"
    spec: Obj = {
        "nodeName": node, "restartPolicy": "OnFailure", "serviceAccountName": "nvidia-operator-validator",
        "tolerations": [GPU_TOLERATION],
        "initContainers": [{"name": INIT_CONTAINER, "image": image, "imagePullPolicy": "IfNotPresent",
                            "command": ["sh", "-c"], "args": ["vectorAdd"], "securityContext": {"privileged": True},
                            "env": [env("NVIDIA_VISIBLE_DEVICES", "all")]}],
        "containers": [{"name": op.CUDA_VALIDATOR_APP, "image": image, "imagePullPolicy": "IfNotPresent",
                        "command": ["sh", "-c"], "args": [SUCCESS_MESSAGE],
                        "securityContext": {"privileged": True, "readOnlyRootFilesystem": True}}],
    }
    if runtime_class:
        spec["runtimeClassName"] = runtime_class
    if owner:
        meta["ownerReferences"] = [owner]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}
