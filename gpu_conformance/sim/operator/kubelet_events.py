"""The events kubelet records about a pod's containers as the operand loop moves them on (kwok records none).

When a container starts, kubelet records, on the pod with the container's fieldPath: `Pulled` (the image is on the
node: the operands' imagePullPolicy IfNotPresent), `Created` and `Started`; when it backs off a container that
exited non-zero, `BackOff` (Warning); when the runtime cannot make the pod's sandbox, `FailedCreatePodSandBox`
(Warning); when the pod is deleted, `Killing` for each container still running. The messages are kubelet's (k8s
v1.36: pkg/kubelet/images/image_manager.go, pkg/kubelet/kuberuntime/kuberuntime_container.go), as the kind tier's
real kubelets leave them.
"""

from __future__ import annotations

import hashlib
import time
from typing import Any

Obj = dict[str, Any]
_RUNS = ("running", "terminated")
# containerd's answer when a pod's RuntimeClass handler is not in its config (the toolkit not run yet, or removed),
# as the faults quote it (containerd 1.7's wording) ...
NO_NVIDIA_RUNTIME = ('Failed to create pod sandbox: rpc error: code = Unknown desc = failed to get sandbox runtime: '
                     'no runtime for "nvidia" is configured')


def no_runtime_for_sandbox(pod_uid: str) -> str:
    """... and containerd 2's, as the kind tier's nodes leave it, naming the sandbox it could not make."""
    sandbox = hashlib.sha256(f"sandbox-{pod_uid}".encode()).hexdigest()
    return ('Failed to create pod sandbox: rpc error: code = Unknown desc = unable to get OCI runtime for sandbox '
            f'"{sandbox}": no runtime for "nvidia" is configured')


def _no_sandbox(status: Obj | None) -> bool:
    """Pending without a sandbox (a completed pod's sandbox is gone too, but its containers ran)."""
    st = status or {}
    return st.get("phase") == "Pending" and any(
        c.get("type") == "PodReadyToStartContainers" and c.get("status") == "False" for c in st.get("conditions") or [])


def _state(cs: Obj | None) -> str:
    return next(iter((cs or {}).get("state") or {}), "")


def _by_name(status: Obj | None) -> dict[str, tuple[str, Obj]]:
    """container name -> (the spec list it is in, its status)."""
    st = status or {}
    return {cs.get("name", ""): (key, cs) for key in ("initContainerStatuses", "containerStatuses")
            for cs in st.get(key) or []}


def changes(pod: Obj, old: Obj | None, new: Obj) -> list[tuple[str, str, str, str]]:
    """(reason, type, message, fieldPath) for each container `new` shows started or backed off since `old`."""
    images = {c["name"]: c.get("image", "") for key in ("initContainers", "containers")
              for c in (pod.get("spec") or {}).get(key) or []}
    before = _by_name(old)
    meta = pod.get("metadata") or {}
    out: list[tuple[str, str, str, str]] = []
    if _no_sandbox(new) and not _no_sandbox(old):
        # Only runtimeClassName nvidia pods are held without a sandbox by the operand loop.
        out.append(("FailedCreatePodSandBox", "Warning", no_runtime_for_sandbox(str(meta.get("uid"))), ""))
    for name, (key, cs) in _by_name(new).items():
        path = f"spec.{'initContainers' if key == 'initContainerStatuses' else 'containers'}{{{name}}}"
        was = before.get(name, ("", {}))[1]
        restarted = int(cs.get("restartCount") or 0) > int(was.get("restartCount") or 0)
        started = started_events(images.get(name, ""), path)
        if _state(cs) in _RUNS and (_state(was) not in _RUNS or restarted):
            out += started
        elif ((cs.get("state") or {}).get("waiting") or {}).get("reason") == "CrashLoopBackOff" and (
                restarted or _state(was) != "waiting"):
            # It ran, exited non-zero, and kubelet holds its next start back.
            out += [*started, ("BackOff", "Warning", f"Back-off restarting failed container {name} in pod "
                                                     f"{meta.get('name')}_{meta.get('namespace')}({meta.get('uid')})",
                               path)]
    return out


def started_events(image: str, field_path: str) -> list[tuple[str, str, str, str]]:
    """Pulled, Created, Started of one container (k8s v1.36 kubelet's words; the container is in the fieldPath)."""
    return [("Pulled", "Normal", f'Container image "{image}" already present on machine and can be accessed by the '
                                 "pod", field_path),
            ("Created", "Normal", "Container created", field_path),
            ("Started", "Normal", "Container started", field_path)]


def killed(pod: Obj) -> list[tuple[str, str, str, str]]:
    """Killing, for each container the pod (as last seen) had running when it was deleted: kubelet stops them
    (k8s v1.36 pkg/kubelet/kuberuntime/kuberuntime_container.go killContainer), init containers too, as the kind
    tier showed for a validator held in driver-validation."""
    return [("Killing", "Normal", f"Stopping container {name}",
             f"spec.{'initContainers' if key == 'initContainerStatuses' else 'containers'}{{{name}}}")
            for name, (key, cs) in _by_name(pod.get("status")).items() if _state(cs) == "running"]


def kwok_started(pod: Obj) -> list[tuple[str, str, str, str]]:
    """The events of a pod kwok made Running (it records none): each of its containers started."""
    return [e for key in ("initContainers", "containers") for c in (pod.get("spec") or {}).get(key) or []
            for e in started_events(c.get("image", ""), f"spec.{key}{{{c['name']}}}")]


def event_object(pod: Obj, reason: str, type_: str, message: str, field_path: str) -> Obj:
    """The Event kubelet would create for the pod (source kubelet on the pod's node)."""
    meta = pod["metadata"]
    node = (pod.get("spec") or {}).get("nodeName", "")
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    return {"apiVersion": "v1", "kind": "Event",
            "metadata": {"generateName": f"{meta['name']}.", "namespace": meta.get("namespace")},
            "involvedObject": {"kind": "Pod", "namespace": meta.get("namespace"), "name": meta["name"],
                               "uid": meta.get("uid"), "apiVersion": "v1", "fieldPath": field_path},
            "reason": reason, "message": message, "type": type_,
            "source": {"component": "kubelet", "host": node}, "reportingComponent": "kubelet",
            "reportingInstance": node, "firstTimestamp": now, "lastTimestamp": now, "count": 1}
