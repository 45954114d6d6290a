"""Pod statuses as kubelet reports a pod that is stuck or crashing (what faults write through /status).

kwok only turns *fresh* pods Ready (no container statuses yet), so a status written here stays as
written, exactly like a real pod stuck in the same place.
"""

from __future__ import annotations

import calendar
import time
from typing import Any

Obj = dict[str, Any]


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def _terminated(code: int, reason: str, ts: str) -> Obj:
    return {"terminated": {"exitCode": code, "reason": reason, "startedAt": ts, "finishedAt": ts}}


def _conditions(initialized: bool, ready: bool, ts: str) -> list[Obj]:
    def cond(t: str, ok: bool) -> Obj:
        c = {"type": t, "status": "True" if ok else "False", "lastTransitionTime": ts}
        if not ok and t != "PodScheduled":
            c["reason"] = "ContainersNotInitialized" if not initialized else "ContainersNotReady"
        return c

    return [cond("PodReadyToStartContainers", True), cond("Initialized", initialized), cond("Ready", ready),
            cond("ContainersReady", ready), cond("PodScheduled", True)]


def stuck_in_init(pod: Obj, container: str, *, crash: bool, restarts: int = 0, exit_code: int = 1,
                  message: str = "") -> Obj:
    """Status of a pod whose init container `container` never completes.

    crash=True: it exits non-zero and kubelet backs off (Init:CrashLoopBackOff, restarts counting);
    crash=False: it runs forever, waiting for an earlier stage (Init:N/M, as the validator's WITH_WAIT loops).
    """
    ts = _now()
    spec = pod.get("spec", {})
    inits, seen = [], False
    for c in spec.get("initContainers") or []:
        base = {"name": c["name"], "image": c.get("image", ""), "imageID": "", "ready": False, "restartCount": 0}
        if c["name"] == container:
            seen = True
            if crash:
                base.update(restartCount=restarts, state={"waiting": {"reason": "CrashLoopBackOff", "message":
                            message or f"back-off 5m0s restarting failed container={container}"}},
                            lastState=_terminated(exit_code, "Error", ts))
            else:
                base.update(restartCount=restarts, state={"running": {"startedAt": ts}})
        elif not seen:
            base.update(ready=True, state=_terminated(0, "Completed", ts))
        else:
            base.update(state={"waiting": {"reason": "PodInitializing"}})
        inits.append(base)
    containers = [{"name": c["name"], "image": c.get("image", ""), "imageID": "", "ready": False,
                   "restartCount": 0, "started": False, "state": {"waiting": {"reason": "PodInitializing"}}}
                  for c in spec.get("containers") or []]
    return {"phase": "Pending", "conditions": _conditions(False, False, ts), "initContainerStatuses": inits,
            "containerStatuses": containers, "startTime": ts}


def crash_looping(pod: Obj, container: str, *, restarts: int = 8, exit_code: int = 1) -> Obj:
    """Status of a pod whose init containers passed and whose `container` keeps crashing."""
    ts = _now()
    spec = pod.get("spec", {})
    inits = [{"name": c["name"], "image": c.get("image", ""), "imageID": "", "ready": True, "restartCount": 0,
              "state": _terminated(0, "Completed", ts)} for c in spec.get("initContainers") or []]
    containers = []
    for c in spec.get("containers") or []:
        if c["name"] == container:
            containers.append({"name": c["name"], "image": c.get("image", ""), "imageID": "", "ready": False,
                               "started": False, "restartCount": restarts,
                               "state": {"waiting": {"reason": "CrashLoopBackOff",
                                                     "message": f"back-off 5m0s restarting failed container="
                                                                f"{container}"}},
                               "lastState": _terminated(exit_code, "Error", ts)})
        else:
            containers.append({"name": c["name"], "image": c.get("image", ""), "imageID": "", "ready": True,
                               "started": True, "restartCount": 0, "state": {"running": {"startedAt": ts}}})
    return {"phase": "Running", "conditions": _conditions(True, False, ts), "initContainerStatuses": inits,
            "containerStatuses": containers, "startTime": ts}


def failed_in_init(pod: Obj, container: str, exit_code: int = 1) -> Obj:
    """A run-to-completion pod (restartPolicy OnFailure/Never) that ended Failed in an init container."""
    st = stuck_in_init(pod, container, crash=False)
    ts = _now()
    for cs in st["initContainerStatuses"]:
        if cs["name"] == container:
            cs.update(state=_terminated(exit_code, "Error", ts), restartCount=0)
    # Its main container never started, so it stays "waiting" in the status kubelet reports.
    st["phase"] = "Failed"
    return st


def no_sandbox(pod: Obj) -> Obj:
    """A pod whose sandbox the container runtime cannot create (e.g. no runtime for its RuntimeClass handler).

    No container ever starts: kubelet reports every init and app container waiting in PodInitializing and
    PodReadyToStartContainers=False; the reason is only in the FailedCreatePodSandBox events.
    """
    ts = _now()
    spec = pod.get("spec", {})

    def waiting(c: Obj) -> Obj:
        return {"name": c["name"], "image": c.get("image", ""), "imageID": "", "ready": False, "started": False,
                "restartCount": 0, "state": {"waiting": {"reason": "PodInitializing"}}}

    conditions = _conditions(False, False, ts)
    conditions[0].update(status="False")
    return {"phase": "Pending", "conditions": conditions,
            "initContainerStatuses": [waiting(c) for c in spec.get("initContainers") or []],
            "containerStatuses": [waiting(c) for c in spec.get("containers") or []], "startTime": ts}


def image_pull_backoff(pod: Obj, container: str) -> Obj:
    """Init containers done, `container`'s image cannot be pulled: kubelet backs off (ImagePullBackOff)."""
    st = crash_looping(pod, container, restarts=0)
    for cs in st["containerStatuses"]:
        if cs["name"] == container:
            cs.pop("lastState", None)
            cs["state"] = {"waiting": {"reason": "ImagePullBackOff",
                                       "message": f'Back-off pulling image "{cs["image"]}"'}}
        else:
            cs.update(ready=False, started=False, state={"waiting": {"reason": "PodInitializing"}})
    st["phase"] = "Pending"
    return st


def marked_not_ready(pod: Obj) -> Obj:
    """The pod's status with Ready=False, as the node lifecycle controller marks the pods of a node whose
    kubelet went silent (MarkPodsNotReady); containers still read as running, nobody can tell otherwise."""
    st = dict(pod.get("status") or {})
    ts = _now()
    conds = []
    for c in st.get("conditions") or []:
        c = dict(c)
        if c["type"] == "Ready" and c.get("status") != "False":
            c.update(status="False", lastTransitionTime=ts)
        conds.append(c)
    st["conditions"] = conds
    return st


def marked_back_ready(pod: Obj, settled: float = 10.0) -> bool:
    """Ready=False for `settled` s while its containers are ready: only the node lifecycle controller leaves
    a pod so (marked_not_ready); kubelet sets Ready again on its next status sync once it posts for the node
    again. The wait: a fault writes the node's NotReady and then its pods, and a reader of two watches may
    see the pods first."""
    st = pod.get("status") or {}
    conds = {c.get("type"): c for c in st.get("conditions") or []}
    ready, containers = conds.get("Ready") or {}, conds.get("ContainersReady") or {}
    if st.get("phase") != "Running" or ready.get("status") != "False" or containers.get("status") != "True":
        return False
    try:
        since = calendar.timegm(time.strptime(ready.get("lastTransitionTime") or "", "%Y-%m-%dT%H:%M:%SZ"))
    except ValueError:
        return False
    return time.time() - since >= settled


def ready_again(pod: Obj) -> Obj:
    """The status kubelet writes for such a pod: Ready=True again, everything else as it was."""
    st = dict(pod.get("status") or {})
    ts = _now()
    st["conditions"] = [dict(c, status="True", lastTransitionTime=ts) if c.get("type") == "Ready" else c
                        for c in st.get("conditions") or []]
    return st


def running_ready(pod: Obj, host_ip: str = "127.0.0.1") -> Obj:
    """Every init container exited 0, every container runs and is ready (what kubelet reports once a pod's
    init chain is through)."""
    ts = _now()
    spec = pod.get("spec", {})
    inits = [{"name": c["name"], "image": c.get("image", ""), "imageID": "", "ready": True, "restartCount": 0,
              "started": False, "state": _terminated(0, "Completed", ts)} for c in spec.get("initContainers") or []]
    containers = [{"name": c["name"], "image": c.get("image", ""), "imageID": "", "ready": True, "started": True,
                   "restartCount": 0, "state": {"running": {"startedAt": ts}}} for c in spec.get("containers") or []]
    return {"phase": "Running", "conditions": _conditions(True, True, ts), "initContainerStatuses": inits,
            "containerStatuses": containers, "startTime": ts, "hostIP": host_ip, "hostIPs": [{"ip": host_ip}]}


def completed(pod: Obj) -> Obj:
    """A run-to-completion pod whose init containers and containers all exited 0 (kubectl: Completed)."""
    ts = _now()

    def terminated(c: Obj) -> Obj:
        return {"name": c["name"], "image": c.get("image", ""), "imageID": "", "ready": False, "started": False,
                "restartCount": 0, "state": _terminated(0, "Completed", ts)}

    spec = pod.get("spec", {})
    return {"phase": "Succeeded",
            "conditions": [
                {"type": "PodReadyToStartContainers", "status": "False", "lastTransitionTime": ts},
                {"type": "Initialized", "status": "True", "reason": "PodCompleted", "lastTransitionTime": ts},
                {"type": "Ready", "status": "False", "reason": "PodCompleted", "lastTransitionTime": ts},
                {"type": "ContainersReady", "status": "False", "reason": "PodCompleted", "lastTransitionTime": ts},
                {"type": "PodScheduled", "status": "True", "lastTransitionTime": ts}],
            "initContainerStatuses": [terminated(c) for c in spec.get("initContainers") or []],
            "containerStatuses": [terminated(c) for c in spec.get("containers") or []]}


def shape(status: Obj | None) -> tuple[Any, ...]:
    """What distinguishes two statuses for a reader (phase, each container's state and reason, readiness),
    ignoring timestamps and restart counts: a status is rewritten only when its shape changes."""
    st = status or {}

    def states(key: str) -> tuple[tuple[str, str, str, int], ...]:
        out = []
        for cs in st.get(key) or []:
            state = cs.get("state") or {}
            kind = next(iter(state), "")
            detail = state.get(kind) or {}
            out.append((cs.get("name", ""), kind, detail.get("reason", ""), int(detail.get("exitCode", 0) or 0)))
        return tuple(out)

    conds = tuple(sorted((c.get("type", ""), c.get("status", "")) for c in st.get("conditions") or []
                         if c.get("type") in ("Ready", "Initialized", "PodReadyToStartContainers")))
    return st.get("phase", ""), states("initContainerStatuses"), states("containerStatuses"), conds


def init_progress(pod: Obj) -> int:
    """How many of the pod's init containers (in order) have exited 0."""
    done = {cs.get("name"): ((cs.get("state") or {}).get("terminated") or {}).get("exitCode") == 0
            and "terminated" in (cs.get("state") or {})
            for cs in (pod.get("status") or {}).get("initContainerStatuses") or []}
    n = 0
    for c in pod.get("spec", {}).get("initContainers") or []:
        if not done.get(c["name"]):
            break
        n += 1
    return n
