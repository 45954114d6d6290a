"""Layer 4: the driver, the container toolkit and the validator chain (driver → toolkit → cuda).

A GPU node's stack comes up in order: driver pod ready → validator/toolkit `driver-validation` → toolkit
configures the runtime → validator `toolkit-validation` → `cuda-validation` (pod nvidia-cuda-validator-*).
The earliest stuck stage is the root cause, so each check names the stage it saw stuck. `plugin-validation`
belongs to the device-plugin layer (DPL-006): it waits for the plugin to advertise GPUs.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from gpu_conformance import operands as ops
from gpu_conformance.checks.pods import (
    HINT_RUNTIME,
    IMAGE_REASONS,
    RESTART_WARN,
    RUNTIME_REASONS,
    PodProblem,
    StartProblem,
    app_pod,
    awaits_toolkit,
    dismissed_refusal,
    label_gate,
    last_log,
    logs_cmd,
    missing_pod_finding,
    namespace,
    operand_pod_findings,
    plural,
    pod_problem,
    problem_finding,
    restart_warn_or_pass,
    start_problem,
    with_log,
)
from gpu_conformance.checks.registry import check
from gpu_conformance.cluster.podstate import pod_ready, pod_status_text, restart_count, stuck_init_container
from gpu_conformance.cluster.snapshot import ClusterSnapshot, name_of
from gpu_conformance.cluster.timeline import any_container_started, container_started, parse_time, stamp
from gpu_conformance.facts import DriverMode, facts, image_tag, operand_pod
from gpu_conformance.facts import driver_mode as compute_driver_mode
from gpu_conformance.model import Finding, Layer, Status
from gpu_conformance.settings import Settings

Obj = dict[str, Any]
L = Layer.DRIVER_TOOLKIT

HINT_ORDER = "Diagnose front to back: driver → toolkit → plugin; the earliest stuck stage is the root cause."
HINT_DRIVER = ("The driver comes first. Operator driver: read the k8s-driver-manager and nvidia-driver-ctr logs; "
               "the driver image must match the node's kernel and OS (precompiled tags are <branch>-<kernel>-<os>) "
               "and a kernel upgrade needs a matching driver. Host driver: `nvidia-smi` must work on the host.")
HINT_TOOLKIT = ("The toolkit writes the host's container runtime config (containerd drop-in "
                "/etc/containerd/conf.d/99-nvidia.toml). With another config file, containerd 1.7's merge can "
                "replace the whole CRI plugin section, losing the nvidia runtime; check the effective config "
                "(`containerd config dump`). Apply runtime changes one node at a time: a SIGHUP killed "
                "containerd 2.2.1 in the field.")
HINT_CUDA = ("vectorAdd runs under the nvidia runtime after driver and toolkit validated: a failure points at the "
             "GPU itself (XID/ECC errors), a CUDA/driver mismatch or the validator image not being pullable.")

# What a stuck validator init container means, and which component to look at.
STAGES: dict[str, tuple[str, str, str]] = {
    "driver-validation": ("driver", "the NVIDIA driver is not usable on this node (nvidia-smi fails or the driver "
                                    "container is not ready)", HINT_DRIVER),
    "nvidia-fs-validation": ("driver", "the GPUDirect Storage module nvidia_fs is not loaded", HINT_DRIVER),
    "gdrcopy-validation": ("driver", "the GDRCopy module gdrdrv is not loaded", HINT_DRIVER),
    "toolkit-validation": ("toolkit", "the container runtime is not configured for NVIDIA", HINT_TOOLKIT),
    "cuda-validation": ("cuda", "the CUDA workload pod nvidia-cuda-validator-* did not succeed", HINT_CUDA),
    "plugin-validation": ("device plugin", "the device plugin has not advertised nvidia.com/gpu (or "
                                           "nvidia.com/mig-*) in the node's capacity", ""),
}
DRIVER_LAYER_CHAIN = ("driver-validation", "toolkit-validation", "cuda-validation")


# ---- driver configuration ----------------------------------------------------------------------------------
def driver_mode(snapshot: ClusterSnapshot, node: str) -> DriverMode:
    """Computed once per snapshot (facts), so DRV-001, DRV-002 and the report header agree."""
    return facts(snapshot).driver_modes.get(node) or compute_driver_mode(snapshot, node)


# The driver container's startupProbe in the operator's state-driver DaemonSet: kubelet gives a driver that compiles
# its module this long before it kills the container. The DaemonSet carries the real one (ClusterPolicy
# spec.driver.startupProbe overrides the asset's); this fallback is the asset's default from v23.3.2 to v26.7.0
# (initialDelaySeconds 60, failureThreshold 120, periodSeconds 10; v22.9.x–v23.3.1 had 30 s and 60 or 120 × 10 s).
DRIVER_CONTAINER = "nvidia-driver-ctr"
DRIVER_STARTUP_SECONDS = 60 + 120 * 10


def startup_window(snapshot: ClusterSnapshot, pod: Obj) -> int:
    """Seconds kubelet lets the driver container start (startupProbe delay + threshold × period)."""
    owners = {o.get("uid") for o in pod.get("metadata", {}).get("ownerReferences") or []}
    for ds in snapshot.daemonsets:
        if ds.get("metadata", {}).get("uid") not in owners:
            continue
        for c in ds.get("spec", {}).get("template", {}).get("spec", {}).get("containers") or []:
            probe = c.get("startupProbe") if c.get("name") == DRIVER_CONTAINER else None
            if probe:
                # Kubernetes defaults: failureThreshold 3, periodSeconds 10, initialDelaySeconds 0.
                return (int(probe.get("initialDelaySeconds") or 0)
                        + int(probe.get("failureThreshold") or 3) * int(probe.get("periodSeconds") or 10))
    return DRIVER_STARTUP_SECONDS


def driver_starting(snapshot: ClusterSnapshot, pod: Obj) -> tuple[bool, str]:
    """(still within its startup, what it is doing) for a not-Ready operator driver pod.

    Starting: nothing restarted, no container waits in an image or runtime error, and the driver container (or,
    before it runs, the pod) started less than the startup window ago. A node's driver compiles for minutes on a
    fresh node; until kubelet's startup probe gives up it is work in progress, after that a failure. Without a
    read time or a start time the duration is unknown: in progress, and the message says it could not be timed.
    """
    st = pod.get("status") or {}
    statuses = (st.get("initContainerStatuses") or []) + (st.get("containerStatuses") or [])
    if any(int(cs.get("restartCount") or 0) > 0 for cs in statuses):
        return False, ""
    for cs in statuses:
        state = cs.get("state") or {}
        reason = (state.get("waiting") or {}).get("reason", "")
        if reason in IMAGE_REASONS or reason in RUNTIME_REASONS or reason == "CrashLoopBackOff":
            return False, ""
        term = state.get("terminated")
        if term is not None and term.get("exitCode", 0) != 0:
            return False, ""
    ctr = next((cs for cs in st.get("containerStatuses") or [] if cs.get("name") == DRIVER_CONTAINER), None)
    since = container_started(ctr) if ctr is not None else None
    what = f"{DRIVER_CONTAINER} starting (loading or compiling the driver)" if since is not None else \
        "preparing the node (init containers)"
    if since is None:
        since = parse_time(st.get("startTime"))
        if since is None and any_container_started(pod):
            what = "starting"
    window = startup_window(snapshot, pod)
    now = parse_time(snapshot.read_at)
    if now is None or since is None:
        return True, f"{what} since {stamp(since)} (the time of the read is {stamp(now)}: cannot tell how long)"
    age = int((now - since).total_seconds())
    if age > window:
        return False, f"{what} for {age // 60} min, longer than its startup probe allows ({window // 60} min)"
    return True, f"{what} for {age // 60} min of the {window // 60} min its startup probe allows"


def node_driver_starting(snapshot: ClusterSnapshot, node: str) -> str:
    """What the operator driver on `node` is doing while it is still starting ('' when it is not)."""
    mode = driver_mode(snapshot, node)
    if mode.kind != "operator" or mode.pod is None or pod_ready(mode.pod):
        return ""
    starting, what = driver_starting(snapshot, mode.pod)
    return f"driver pod {name_of(mode.pod)} {what}" if starting else ""


def waits_for_driver(snapshot: ClusterSnapshot, pod: Obj) -> bool:
    """The pod is held at the driver: its driver-validation init container has not passed, or nothing started —
    and nothing of its own (an image it cannot pull, a runtime error) would stop it once the driver is up."""
    if start_problem(snapshot, pod) is not None:
        return False
    stuck = stuck_init_container(pod)
    return (stuck is not None and stuck["name"] == "driver-validation") or not any_container_started(pod)


@check("DRV-001", L, "Driver configuration as expected",
       hint="State the driver configuration explicitly: driver.enabled=true (the operator's driver container), "
            "driver.enabled=false (host driver), or pre-installed auto-detection (k8s-driver-manager labels the "
            "node nvidia.com/gpu.deploy.driver=pre-installed). Run with --expect-driver operator|host to hold "
            "the cluster to it.",
       kubectl="kubectl get clusterpolicy -o jsonpath='{.items[0].spec.driver.enabled}' ; "
               "kubectl get node {node} -L nvidia.com/gpu.deploy.driver",
       detects="node in host/pre-installed driver mode when --expect-driver=operator (or the reverse); "
               "useNvidiaDriverCRD without an NVIDIADriver CR")
def driver_configuration(snapshot: ClusterSnapshot, settings: Settings) -> list[Finding]:
    expect = settings.expect_driver
    out = []
    for node in snapshot.gpu_node_names:
        mode = driver_mode(snapshot, node)
        ev = {"object": f"Node/{node}", "field": "driver configuration", "observed": mode.kind,
              "expected": expect, "source": mode.source}
        if mode.problem:
            out.append(Finding(Status.FAIL, f"{mode.problem}", node=node, evidence=ev,
                               kubectl="kubectl get nvidiadrivers.nvidia.com -o wide"))
        elif expect == "operator" and mode.kind != "operator":
            out.append(Finding(Status.FAIL, f"driver is {mode.source}, but --expect-driver="
                               "operator expects the operator's driver container", node=node, evidence=ev))
        elif expect == "host" and mode.kind == "operator":
            out.append(Finding(Status.FAIL, f"driver is the {mode.source}, but --expect-driver="
                               "host expects a host driver (driver.enabled=false or pre-installed)", node=node,
                               evidence=ev))
        else:
            out.append(Finding(Status.PASS, f"{mode.source}", node=node, evidence=ev))
    return out


@check("DRV-002", L, "Operator driver pod Ready",
       hint=HINT_DRIVER + " " + HINT_ORDER,
       kubectl="kubectl -n {ns} get pods -o wide --field-selector spec.nodeName={node} | grep driver",
       detects="driver pod missing, its image not pullable, stuck in k8s-driver-manager, nvidia-driver-ctr "
               "crash-looping or not Ready past its startup probe's window (60 s + 120×10 s); a driver still "
               "within that window without restarts is a transient WARN; WARN on restarts")
def driver_pod_ready(snapshot: ClusterSnapshot, settings: Settings) -> list[Finding]:
    ns = namespace(snapshot, settings)
    out = []
    for node in snapshot.gpu_node_names:
        mode = driver_mode(snapshot, node)
        ev = {"object": f"Node/{node}", "field": "driver configuration", "observed": mode.kind,
              "expected": "operator"}
        if mode.kind != "operator":
            why = ("the toolkit's and validator's driver-validation check it (DRV-003, DRV-004)")
            out.append(Finding(Status.NA, f"no driver pod expected — {mode.source}; {why}",
                               node=node, evidence=ev))
            continue
        pod = mode.pod
        if pod is None:
            f = missing_pod_finding(snapshot, ns, node, ops.DRIVER, "driver")
            if mode.problem:
                f = replace(f, message=f"{f.message} ({mode.problem})")
            out.append(f)
        elif not pod_ready(pod) and (progress := driver_starting(snapshot, pod))[0]:
            out.append(Finding(Status.WARN, f"transient: driver pod {name_of(pod)} on {node} is not Ready yet — "
                               f"{progress[1]}", node=node,
                               evidence={"object": f"Pod/{name_of(pod)}", "field": "status.conditions[Ready]",
                                         "observed": pod_status_text(pod), "expected": "True",
                                         "startup_window_s": startup_window(snapshot, pod), "transient": True},
                               kubectl=logs_cmd(ns, pod, DRIVER_CONTAINER)))
        elif not pod_ready(pod):
            meaning = ""
            p = pod_problem(snapshot, pod)
            late = driver_starting(snapshot, pod)[1]
            if p.stage == "k8s-driver-manager":
                meaning = ("the driver manager could not prepare the node (evict GPU pods, unload the old "
                           "driver)")
            elif p.container == DRIVER_CONTAINER:
                meaning = ("the driver did not build/load for this kernel, or its startup probe "
                           "(nvidia-smi) fails")
            if late and p.start is None:
                meaning = f"{meaning} — {late}" if meaning else late
            out.append(problem_finding(snapshot, ns, node, pod, "driver pod", meaning, HINT_DRIVER))
        else:
            img = next((c.get("image", "") for c in pod.get("spec", {}).get("containers", [])
                        if c.get("name") == "nvidia-driver-ctr"), "")
            version = image_tag(img).split("-")[0]  # 580.126.20-ubuntu22.04 -> 580.126.20
            detail = f" (driver {version})" if version else ""
            out.append(restart_warn_or_pass(ns, node, pod, "driver pod", detail))
    return out


@check("DRV-003", L, "Container toolkit pod Ready",
       hint=HINT_TOOLKIT + " If the toolkit waits in driver-validation, the driver is the problem. " + HINT_ORDER,
       kubectl="kubectl -n {ns} get pods -o wide -l app=nvidia-container-toolkit-daemonset "
               "--field-selector spec.nodeName={node}",
       detects="toolkit pod missing, waiting in driver-validation (driver broken) or its container "
               "crash-looping (runtime config); WARN on restarts")
def toolkit_pod_ready(snapshot: ClusterSnapshot, settings: Settings) -> list[Finding]:
    def explain(p: PodProblem) -> tuple[str, str]:
        if p.stage == "driver-validation":
            return f"{STAGES['driver-validation'][1]} (driver)", HINT_DRIVER + " " + HINT_ORDER
        return "it could not configure the container runtime for NVIDIA (toolkit)", HINT_TOOLKIT

    disabled = None if snapshot.policy_enabled("toolkit", True) else (
        "ClusterPolicy spec.toolkit.enabled=false — the NVIDIA runtime must be configured on the host; the "
        "validator's toolkit-validation checks it (DRV-004)")
    out = operand_pod_findings(snapshot, settings, ops.TOOLKIT, "toolkit pod", "container toolkit",
                               disabled, "spec.toolkit.enabled", explain)
    # A toolkit waiting for a driver that is still within its startup window is the expected order, not a fault:
    # the driver's transient finding (DRV-002) speaks for the node.
    for i, f in enumerate(out):
        pod = operand_pod(snapshot, ops.TOOLKIT, f.node or "") if f.status == Status.FAIL else None
        starting = node_driver_starting(snapshot, f.node or "") if pod is not None else ""
        if pod is not None and starting and waits_for_driver(snapshot, pod):
            out[i] = Finding(Status.NA, f"toolkit pod {name_of(pod)} on {f.node} waits in driver-validation for "
                             f"the driver, which is still starting ({starting}; DRV-002)", node=f.node,
                             evidence={"object": f"Pod/{name_of(pod)}", "status": pod_status_text(pod),
                                       "waits_for": "driver"})
    return out


def validator_chain(pod: Obj) -> list[str]:
    return [c.get("name", "") for c in pod.get("spec", {}).get("initContainers") or []]


def stage_message(snapshot: ClusterSnapshot, pod: Obj, stuck: dict[str, Any]) -> str:
    """'validator stuck in toolkit-validation (Init:CrashLoopBackOff, 12 restarts): the container runtime is not
    configured for NVIDIA (toolkit)'."""
    component, meaning, _ = STAGES.get(stuck["name"], ("?", "this validation did not pass", ""))
    detail = f"{pod_status_text(pod)}, {plural(stuck['restarts'], 'restart')}"
    if stuck["state"] == "running" and not stuck["restarts"]:
        detail = f"{pod_status_text(pod)}, running"
    return f"validator stuck in {stuck['name']} ({detail}): {meaning} ({component})"


@check("DRV-004", L, "Validator chain driver → toolkit → cuda completed",
       hint="The validator's stuck init container is the stuck stage: `kubectl describe po -l "
            "app=nvidia-operator-validator`. " + HINT_ORDER,
       kubectl="kubectl -n {ns} describe pod -l app=nvidia-operator-validator",
       detects="validator pod missing or stuck in driver-validation / toolkit-validation / cuda-validation "
               "(named, with state, restarts and last log lines)")
def validator_chain_completed(snapshot: ClusterSnapshot, settings: Settings) -> list[Finding]:
    ns = namespace(snapshot, settings)
    out = []
    for node in snapshot.gpu_node_names:
        gate = label_gate(snapshot, node, ops.VALIDATOR)
        if gate is not None:
            out.append(gate)
            continue
        pod = operand_pod(snapshot, ops.VALIDATOR, node)
        if pod is None:
            out.append(missing_pod_finding(snapshot, ns, node, ops.VALIDATOR, "validator"))
            continue
        starting = "" if pod_ready(pod) else node_driver_starting(snapshot, node)
        if starting and waits_for_driver(snapshot, pod):
            out.append(Finding(Status.NA, f"validator {name_of(pod)} waits for the driver, which is still starting "
                               f"({starting}; DRV-002)", node=node,
                               evidence={"object": f"Pod/{name_of(pod)}", "status": pod_status_text(pod),
                                         "waits_for": "driver"}))
            continue
        if not pod_ready(pod) and not any_container_started(pod) and (why := awaits_toolkit(snapshot, pod)):
            # Its sandbox needs the nvidia handler: no validation stage ran, the toolkit (DRV-003) or the driver
            # before it (DRV-002) is what keeps it waiting.
            out.append(Finding(Status.NA, f"validator {name_of(pod)} cannot start before the toolkit on {node} is "
                               f"Ready (see DRV-002, DRV-003): {why}", node=node,
                               evidence={"object": f"Pod/{name_of(pod)}", "status": pod_status_text(pod),
                                         "waits_for": "toolkit", "history": why}))
            continue
        chain = validator_chain(pod)
        missing = [c for c in DRIVER_LAYER_CHAIN if c not in chain]
        stuck = stuck_init_container(pod)
        ev: dict[str, Any] = {"object": f"Pod/{name_of(pod)}", "field": "status.initContainerStatuses",
                              "expected": "completed: " + ", ".join(c for c in chain
                                                                     if c != "plugin-validation"),
                              "init_containers": chain, "status": pod_status_text(pod)}
        sp = start_problem(snapshot, pod)
        cuda_pod = app_pod(snapshot, ops.CUDA_VALIDATOR_APP, node)
        if sp is not None:
            # The validator image cannot be pulled, or the runtime refuses the pod: no stage ran, none is to blame.
            out.append(problem_finding(snapshot, ns, node, pod, "validator pod", "", sp.hint))
        elif stuck is not None and stuck["name"] == "cuda-validation" and cuda_pod is not None \
                and cuda_pod.get("status", {}).get("phase") != "Succeeded":
            # The validator only waits for the CUDA workload pod; DRV-005 has that pod's own failure and log.
            ev.update({"observed": "waiting in cuda-validation", "stage": "cuda-validation"})
            out.append(Finding(Status.NA, f"validator {name_of(pod)} waits in cuda-validation for "
                               f"{name_of(cuda_pod)} (judged by DRV-005)", node=node, evidence=ev))
        elif stuck is not None and stuck["name"] != "plugin-validation":
            _, _, hint = STAGES.get(stuck["name"], ("", "", HINT_ORDER))
            log = last_log(snapshot, pod, stuck["name"])
            ev.update({"observed": f"{stuck['name']} {stuck['state']} {stuck['reason']}".strip(),
                       "stage": stuck["name"], "state": stuck["state"], "reason": stuck["reason"],
                       "exit_code": stuck["exit_code"], "restarts": stuck["restarts"]})
            if stuck["message"]:
                ev["message"] = stuck["message"]
            if log:
                ev["log"] = log
            out.append(Finding(Status.FAIL, with_log(f"{stage_message(snapshot, pod, stuck)}",
                                                                log), node=node, evidence=ev,
                               hint=f"{hint} {HINT_ORDER}".strip(),
                               kubectl=logs_cmd(ns, pod, stuck["name"],
                                                previous=stuck["restarts"] > 0 and stuck["state"] == "waiting")))
        elif stuck is None and not pod_ready(pod):
            out.append(problem_finding(snapshot, ns, node, pod, "validator pod",
                                       "all validations completed but the validator container is not running",
                                       HINT_ORDER))
        elif missing:
            ev["observed"] = "missing " + ", ".join(missing)
            out.append(Finding(Status.WARN, f"validator {name_of(pod)} has no init container "
                               f"{', '.join(missing)} (init containers: {', '.join(chain)}), so this stage is not "
                               "validated", node=node, evidence=ev,
                               kubectl=f"kubectl -n {ns} get pod {name_of(pod)} -o yaml"))
        else:
            ev["observed"] = "completed"
            done = [c for c in chain if c != "plugin-validation"]
            tail = ("; now waiting in plugin-validation (device-plugin layer, DPL-006)"
                    if stuck is not None else "")
            if stuck is None and restart_count(pod) > RESTART_WARN:
                out.append(restart_warn_or_pass(ns, node, pod, "validator"))
            else:
                out.append(Finding(Status.PASS, f"validator {name_of(pod)} completed "
                                   f"{', '.join(done)}{tail}", node=node, evidence=ev,
                                   kubectl=f"kubectl -n {ns} get pod {name_of(pod)} -o wide"))
    return out


@check("DRV-005", L, "CUDA validation pod succeeded",
       hint=HINT_CUDA,
       kubectl="kubectl -n {ns} get pods -o wide -l app=nvidia-cuda-validator --field-selector spec.nodeName={node}",
       detects="nvidia-cuda-validator-* pod Failed or stuck (vectorAdd cannot run), or never created while the "
               "validator waits in cuda-validation")
def cuda_validator_succeeded(snapshot: ClusterSnapshot, settings: Settings) -> list[Finding]:
    ns = namespace(snapshot, settings)
    out = []
    for node in snapshot.gpu_node_names:
        gate = label_gate(snapshot, node, ops.VALIDATOR)
        if gate is not None:
            out.append(gate)
            continue
        pod = app_pod(snapshot, ops.CUDA_VALIDATOR_APP, node)
        validator = operand_pod(snapshot, ops.VALIDATOR, node)
        stuck = stuck_init_container(validator) if validator is not None else None
        chain = validator_chain(validator) if validator is not None else []
        reached = (validator is not None and "cuda-validation" in chain
                   and (stuck is None or chain.index(stuck["name"]) >= chain.index("cuda-validation")))
        if pod is None:
            if validator is None:
                out.append(Finding(Status.NA, "no validator pod, so no CUDA validation ran "
                                   "(see DRV-004)", node=node))
            elif not reached:
                where = stuck["name"] if stuck else "?"
                out.append(Finding(Status.NA, f"CUDA validation not run yet — the validator is "
                                   f"still in {where} (see DRV-004)", node=node,
                                   evidence={"object": f"Pod/{name_of(validator)}", "stage": where}))
            elif stuck is not None and stuck["name"] == "cuda-validation":
                out.append(Finding(Status.FAIL, f"validator waits in cuda-validation but no "
                                   f"{ops.CUDA_VALIDATOR_APP}-* pod exists on the node (it could not be created: "
                                   "check events and the validator's RBAC)", node=node,
                                   evidence={"object": f"Pod/{ops.CUDA_VALIDATOR_APP}-*", "observed": "none",
                                             "expected": "phase Succeeded"},
                                   kubectl=logs_cmd(ns, validator, "cuda-validation")))
            else:
                out.append(Finding(Status.PASS, f"cuda-validation completed in the validator "
                                   f"(its {ops.CUDA_VALIDATOR_APP} pod has since been removed)", node=node))
            continue
        phase = pod.get("status", {}).get("phase")
        ev = {"object": f"Pod/{name_of(pod)}", "field": "status.phase", "observed": phase, "expected": "Succeeded",
              "status": pod_status_text(pod)}
        if phase == "Succeeded":
            out.append(Finding(Status.PASS, f"{name_of(pod)} Succeeded (vectorAdd ran on the GPU)",
                               node=node, evidence=ev, kubectl=f"kubectl -n {ns} logs {name_of(pod)} -c "
                                                                "cuda-validation"))
            continue
        p = pod_problem(snapshot, pod)
        broken = phase == "Failed" or p.stage is not None and p.evidence.get("state") != "running" \
            or p.evidence.get("restarts", 0) > 0 or p.evidence.get("reason") not in (None, "", "PodInitializing")
        if not broken:
            out.append(Finding(Status.WARN, f"{name_of(pod)} still running ({p.evidence['status']}):"
                               " CUDA validation in progress", node=node, evidence=ev,
                               kubectl=f"kubectl -n {ns} describe pod {name_of(pod)}"))
            continue
        ev.update(p.evidence)
        if p.log:
            ev["log"] = p.log
        msg = f"{name_of(pod)} {phase} — {p.summary}: vectorAdd could not run on the GPU"
        out.append(Finding(Status.FAIL, with_log(msg, p.log), node=node, evidence=ev,
                           kubectl=logs_cmd(ns, pod, p.container or "cuda-validation")))
    return out


@check("DRV-006", L, "Container runtime creates the operand pods",
       hint=HINT_RUNTIME,
       kubectl="kubectl -n {ns} get events --field-selector reason=FailedCreatePodSandBox ; "
               "kubectl -n {ns} get pods -o wide --field-selector spec.nodeName={node}",
       detects="operand pods the runtime cannot create: FailedCreatePodSandBox (no runtime for \"nvidia\" is "
               "configured, RuntimeHandler \"nvidia\" not supported), CreateContainerError / RunContainerError, "
               "unresolvable CDI devices — named ahead of any driver verdict when seen after the pod last ran and, "
               "for runtimeClass operands, after the node's toolkit became Ready (earlier refusals are bring-up)",
       rank=-1)
def runtime_creates_operand_pods(snapshot: ClusterSnapshot, settings: Settings) -> list[Finding]:
    ns = namespace(snapshot, settings)
    out = []
    for node in snapshot.gpu_node_names:
        refused: list[tuple[Obj, StartProblem]] = []
        history: dict[str, str] = {}
        for pod in snapshot.pods_by_node.get(node, []):
            if pod.get("metadata", {}).get("deletionTimestamp"):
                continue
            sp = start_problem(snapshot, pod)
            if sp is not None and sp.kind in ("sandbox", "container"):
                refused.append((pod, sp))
            elif why := dismissed_refusal(snapshot, pod):
                history[name_of(pod)] = why
        if not refused:
            msg = "no operand pod refused by the container runtime"
            if history:
                # Said, not judged: the reader sees the events too and should know why they are not the cause.
                msg += (f" now; earlier refusals of {plural(len(history), 'pod')} are not held against it "
                        f"(e.g. {next(iter(history.values()))})")
            out.append(Finding(Status.PASS, msg, node=node,
                               evidence={"history": history} if history else {}))
            continue
        pod, sp = refused[0]
        others = f" (and {len(refused) - 1} more pod{'s' if len(refused) > 2 else ''})" if len(refused) > 1 else ""
        ev = {"object": f"Pod/{name_of(pod)}", "field": "events" if sp.kind == "sandbox" else "status",
              "observed": f"{sp.reason}: {sp.message}", "expected": "pod sandbox and containers created",
              "pods": {name_of(p): f"{s.reason}: {s.message}" for p, s in refused}}
        if sp.seen:
            ev["last_seen"] = sp.seen
        when = {"": "", "unknown": " (the event carries no time: it cannot be placed before or after the toolkit "
                                   "became Ready)"}.get(sp.seen, f" (last seen {sp.seen})")
        out.append(Finding(Status.FAIL, f"{sp.meaning}: pod {name_of(pod)}{others} — {sp.reason}: "
                           f"\"{sp.message}\"{when}", node=node, evidence=ev, hint=sp.hint,
                           kubectl=f"kubectl -n {ns} describe pod {name_of(pod)}"))
    return out
