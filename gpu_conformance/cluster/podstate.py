"""Pure helpers over one pod dict (as the API returns it): readiness, what `kubectl get pod` shows, stuck stages.

`pod_status_text` follows kubectl's printer (printPod in k8s.io/kubernetes/pkg/printers/internalversion):
the first unfinished init container decides `Init:<reason>` / `Init:<i>/<n>`, otherwise the last container
with a waiting/terminated reason wins, and a pod being deleted shows `Terminating`.
"""

from __future__ import annotations

from typing import Any

Obj = dict[str, Any]

_TERMINAL_PHASES = ("Succeeded", "Failed")
# Container waiting reasons kubelet sets when the image cannot be had ...
IMAGE_REASONS = ("ErrImagePull", "ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull")
# ... and when the runtime cannot create or start the container (a runtime/CDI/config problem, not the program):
# the kubelet retries, but the answer will not change within a probe's or a validator's lifetime.
RUNTIME_REASONS = ("CreateContainerError", "RunContainerError", "CreateContainerConfigError", "StartError",
                   "ContainerCannotRun")


def _status(pod: Obj) -> Obj:
    return pod.get("status") or {}


def _spec(pod: Obj) -> Obj:
    return pod.get("spec") or {}


def _condition_true(pod: Obj, ctype: str) -> bool:
    return any(c.get("type") == ctype and c.get("status") == "True" for c in _status(pod).get("conditions") or [])


def pod_ready(pod: Obj) -> bool:
    """The pod's Ready condition is True."""
    return _condition_true(pod, "Ready")


def is_terminating(pod: Obj) -> bool:
    return bool((pod.get("metadata") or {}).get("deletionTimestamp"))


def _init_statuses_in_spec_order(pod: Obj) -> list[tuple[Obj, Obj | None]]:
    """(spec, status) per init container, in spec order; status None when kubelet has not reported it."""
    statuses = {s.get("name"): s for s in _status(pod).get("initContainerStatuses") or []}
    specs = _spec(pod).get("initContainers") or []
    if specs:
        return [(c, statuses.get(c.get("name"))) for c in specs]
    # A pod dict without spec (trimmed): fall back to the statuses as reported.
    return [({"name": s.get("name")}, s) for s in _status(pod).get("initContainerStatuses") or []]


def _is_sidecar(spec: Obj) -> bool:
    return spec.get("restartPolicy") == "Always"


def _completed_ok(status: Obj | None) -> bool:
    term = ((status or {}).get("state") or {}).get("terminated")
    return term is not None and term.get("exitCode", 0) == 0


def pod_status_text(pod: Obj) -> str:
    """What the STATUS column of `kubectl get pod` shows for this pod."""
    st = _status(pod)
    reason = st.get("reason") or st.get("phase") or "Unknown"
    initializing = False
    inits = _init_statuses_in_spec_order(pod)
    reported = [(i, spec, cs) for i, (spec, cs) in enumerate(inits) if cs is not None]
    for i, spec, cs in reported:  # like kubectl: only containers kubelet has reported on
        state = cs.get("state") or {}
        term, waiting = state.get("terminated"), state.get("waiting")
        if term is not None and term.get("exitCode", 0) == 0:
            continue
        if _is_sidecar(spec) and cs.get("started"):
            continue
        if term is not None:
            if term.get("reason"):
                reason = "Init:" + term["reason"]
            elif term.get("signal"):
                reason = f"Init:Signal:{term['signal']}"
            else:
                reason = f"Init:ExitCode:{term.get('exitCode')}"
        elif waiting is not None and waiting.get("reason") and waiting.get("reason") != "PodInitializing":
            reason = "Init:" + waiting["reason"]
        else:
            reason = f"Init:{i}/{len(inits)}"
        initializing = True
        break

    if not initializing or _condition_true(pod, "Initialized"):
        has_running = False
        for cs in reversed(st.get("containerStatuses") or []):
            state = cs.get("state") or {}
            waiting, term = state.get("waiting"), state.get("terminated")
            if waiting is not None and waiting.get("reason"):
                reason = waiting["reason"]
            elif term is not None and term.get("reason"):
                reason = term["reason"]
            elif term is not None:
                reason = f"Signal:{term['signal']}" if term.get("signal") else f"ExitCode:{term.get('exitCode')}"
            elif cs.get("ready") and state.get("running") is not None:
                has_running = True
        if reason == "Completed" and has_running:
            reason = "Running" if pod_ready(pod) else "NotReady"

    if is_terminating(pod):
        if st.get("reason") == "NodeLost":
            return "Unknown"
        if st.get("phase") not in _TERMINAL_PHASES:
            return "Terminating"
    return reason


def _describe(status: Obj | None) -> tuple[str, str, int | None, str]:
    """(state, reason, exit_code, message) of one container status; exit code/message fall back to lastState."""
    state = (status or {}).get("state") or {}
    last = ((status or {}).get("lastState") or {}).get("terminated") or {}
    if "terminated" in state and state["terminated"] is not None:
        t = state["terminated"]
        return "terminated", t.get("reason", ""), t.get("exitCode"), t.get("message", "") or last.get("message", "")
    if "running" in state and state["running"] is not None:
        return "running", "", last.get("exitCode"), last.get("message", "")
    w = state.get("waiting") or {}
    # A termination message says why it failed; the back-off message only says that it did.
    return "waiting", w.get("reason", ""), last.get("exitCode"), last.get("message", "") or w.get("message", "")


def stuck_init_container(pod: Obj) -> dict[str, Any] | None:
    """The first init container that has not terminated with exit code 0, or None when all completed.

    Returns {name, index, total, state: waiting|running|terminated, reason, exit_code, restarts, message};
    exit_code and message come from the last termination when the container is waiting to restart.
    A started sidecar init container (restartPolicy Always) does not count as stuck.
    """
    inits = _init_statuses_in_spec_order(pod)
    for i, (spec, cs) in enumerate(inits):
        if _completed_ok(cs):
            continue
        if _is_sidecar(spec) and (cs or {}).get("started"):
            continue
        state, reason, exit_code, message = _describe(cs)
        return {
            "name": spec.get("name", ""),
            "index": i,
            "total": len(inits),
            "state": state,
            "reason": reason,
            "exit_code": exit_code,
            "restarts": int((cs or {}).get("restartCount") or 0),
            "message": message,
        }
    return None


def restart_count(pod: Obj) -> int:
    """The highest restart count over the pod's containers and init containers."""
    st = _status(pod)
    counts = [int(cs.get("restartCount") or 0)
              for cs in (st.get("containerStatuses") or []) + (st.get("initContainerStatuses") or [])]
    return max(counts, default=0)


def crashlooping(pod: Obj) -> list[str]:
    """Names of containers (init or main) waiting in CrashLoopBackOff."""
    st = _status(pod)
    return [cs.get("name", "")
            for cs in (st.get("initContainerStatuses") or []) + (st.get("containerStatuses") or [])
            if ((cs.get("state") or {}).get("waiting") or {}).get("reason") == "CrashLoopBackOff"]


def failing_container(pod: Obj) -> dict[str, Any] | None:
    """The first main container that is not ready (after init completed), described like stuck_init_container."""
    for cs in _status(pod).get("containerStatuses") or []:
        if cs.get("ready"):
            continue
        state, reason, exit_code, message = _describe(cs)
        return {"name": cs.get("name", ""), "state": state, "reason": reason, "exit_code": exit_code,
                "restarts": int(cs.get("restartCount") or 0), "message": message}
    return None
