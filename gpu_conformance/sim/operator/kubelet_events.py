"""The events kubelet records about a pod's containers as the operand loop moves them on (kwok records none).

When a container starts, kubelet records, on the pod with the container's fieldPath: `Pulled` (the image is on the
node: the operands' imagePullPolicy IfNotPresent), `Created` and `Started`; when it backs off a container that
exited non-zero, `BackOff` (Warning). The messages are kubelet's (k8s v1.36: pkg/kubelet/images/image_manager.go,
pkg/kubelet/kuberuntime/kuberuntime_container.go), as the kind tier's real kubelets leave them.
"""

from __future__ import annotations

import time
from typing import Any

Obj = dict[str, Any]
_RUNS = ("running", "terminated")


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
    for name, (key, cs) in _by_name(new).items():
        path = f"spec.{'initContainers' if key == 'initContainerStatuses' else 'containers'}{{{name}}}"
        was = before.get(name, ("", {}))[1]
        restarted = int(cs.get("restartCount") or 0) > int(was.get("restartCount") or 0)
        started = [("Pulled", "Normal", f'Container image "{images.get(name, "")}" already present on machine and '
                                        "can be accessed by the pod", path),
                   ("Created", "Normal", f"Created container: {name}", path),
                   ("Started", "Normal", f"Started container {name}", path)]
        if _state(cs) in _RUNS and (_state(was) not in _RUNS or restarted):
            out += started
        elif ((cs.get("state") or {}).get("waiting") or {}).get("reason") == "CrashLoopBackOff" and (
                restarted or _state(was) != "waiting"):
            # It ran, exited non-zero, and kubelet holds its next start back.
            out += [*started, ("BackOff", "Warning", f"Back-off restarting failed container {name} in pod "
                                                     f"{meta.get('name')}_{meta.get('namespace')}({meta.get('uid')})",
                               path)]
    return out


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
