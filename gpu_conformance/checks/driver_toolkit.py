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
from gpu_conformance import upgrade_states as upg
from gpu_conformance.check_input import CheckInput
from gpu_conformance.checks.driver_validation import driver_stage_meaning
from gpu_conformance.checks.per_node import per_gpu_node
from gpu_conformance.checks.pods import (
    DRIVER_CONTAINER,
    HINT_RUNTIME,
    RESTART_WARN,
    PodProblem,
    StartProblem,
    app_pod,
    awaits_toolkit,
    dismissed_refusal,
    driver_starting,
    explained_by_upgrade,
    last_log,
    logs_cmd,
    missing_pod_finding,
    namespace,
    node_driver_starting,
    node_labels,
    operand_pod_findings,
    plural,
    pod_problem,
    problem_finding,
    restart_warn_or_pass,
    start_problem,
    startup_window,
    with_log,
)
from gpu_conformance.checks.registry import check
from gpu_conformance.cluster.gpu_usage import gpu_holders
from gpu_conformance.cluster.podstate import pod_ready, pod_status_text, restart_count, stuck_init_container
from gpu_conformance.cluster.snapshot import ClusterSnapshot, name_of
from gpu_conformance.cluster.timeline import any_container_started
from gpu_conformance.facts import image_tag
from gpu_conformance.model import Finding, Layer, Status
from gpu_conformance.resource_model import ResourceModel
from gpu_conformance.toolkit_runtime_config import config_version_refusal

Obj = dict[str, Any]
L = Layer.DRIVER_TOOLKIT
# What v26.7.0's GPUCluster stack does not deploy (api/nvidia/v1alpha1/gpucluster_types.go: it manages neither
# the driver nor the device plugin; its states are the DRA driver, the DRA validator, DCGM and its exporter).
GPUCLUSTER_NO_DRIVER = ("the GPUCluster does not install the driver (host-installed or an NVIDIADriver CR): the DRA "
                        "kubelet plugin's driver-validation init container waits for it (DPL-010)")
GPUCLUSTER_NO_TOOLKIT = ("the GPUCluster deploys no container toolkit: the DRA driver writes CDI specs "
                         "(/var/run/cdi) the container runtime injects")
GPUCLUSTER_NO_VALIDATOR = ("the GPUCluster runs nvidia-dra-validator instead of the operator validator chain; "
                           "OPR-008 names it when it keeps the GPUCluster notReady")

HINT_ORDER = "Diagnose front to back: driver → toolkit → plugin; the earliest stuck stage is the root cause."
HINT_DRIVER = ("The driver comes first. Operator driver: read the k8s-driver-manager and nvidia-driver-ctr logs; "
               "the driver image must match the node's kernel and OS (precompiled tags are <branch>-<kernel>-<os>) "
               "and a kernel upgrade needs a matching driver. Host driver: `nvidia-smi` must work on the host.")
HINT_TOOLKIT = ("The toolkit writes the host's container runtime config (containerd drop-in "
                "/etc/containerd/conf.d/99-nvidia.toml). With another config file, containerd 1.7's merge can "
                "replace the whole CRI plugin section, losing the nvidia runtime; check the effective config "
                "(`containerd config dump`). Apply runtime changes one node at a time: a SIGHUP killed "
                "containerd 2.2.1 in the field.")
HINT_TOOLKIT_IMAGE = ("Run the container-toolkit image of the operator release (drop a pinned toolkit.version / "
                      "toolkit.image override) or one that reads the node's containerd config; confirm with "
                      "`containerd config dump | head -1` on the node and the image in the toolkit DaemonSet.")
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
# A node's driver mode is a fact of the run (CheckInput.driver_mode), so DRV-001, DRV-002 and the report header agree.
def waits_for_driver(inp: CheckInput, pod: Obj) -> bool:
    """The pod is held at the driver: its driver-validation init container has not passed, or nothing started —
    and nothing of its own (an image it cannot pull, a runtime error) would stop it once the driver is up."""
    if start_problem(inp, pod) is not None:
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
               "useNvidiaDriverCRD without an NVIDIADriver CR; a node no NVIDIADriver selects, or whose CRs report "
               "an error (ConflictingNodeSelector, ReconcileFailed), in the CR's words")
@per_gpu_node()
def driver_configuration(inp: CheckInput, node: str) -> Finding:
    settings = inp.settings
    expect = settings.expect_driver
    mode = inp.driver_mode(node)
    ev = {"object": f"Node/{node}", "field": "driver configuration", "observed": mode.kind,
          "expected": expect, "source": mode.source}
    if mode.problem:
        return Finding(Status.FAIL, f"{mode.problem}", node=node, evidence=ev,
                       kubectl="kubectl get nvidiadrivers.nvidia.com -o wide")
    elif expect == "operator" and mode.kind != "operator":
        return Finding(Status.FAIL, f"driver is {mode.source}, but --expect-driver="
                       "operator expects the operator's driver container", node=node, evidence=ev)
    elif expect == "host" and mode.kind == "operator":
        return Finding(Status.FAIL, f"driver is the {mode.source}, but --expect-driver="
                       "host expects a host driver (driver.enabled=false or pre-installed)", node=node,
                       evidence=ev)
    else:
        return Finding(Status.PASS, f"{mode.source}", node=node, evidence=ev)


@check("DRV-002", L, "Operator driver pod Ready",
       hint=HINT_DRIVER + " " + HINT_ORDER,
       kubectl="kubectl -n {ns} get pods -o wide --field-selector spec.nodeName={node} | grep driver",
       detects="driver pod missing, its image not pullable, stuck in k8s-driver-manager, nvidia-driver-ctr "
               "crash-looping or not Ready past its startup probe's window (60 s + 120×10 s), quoting "
               "kubelet's startup probe failure events; a driver still within that window without restarts "
               "is a transient WARN; driver upgrade-failed (nvidia.com/gpu-driver-upgrade-state); upgrade "
               "steps in progress reported as a pause, an unknown upgrade state as a warning; WARN on restarts; "
               "a failed build or load quoted by the error above the driver script's cleanup lines; stuck in "
               "k8s-driver-manager naming the pods of any namespace that still hold the node's GPUs",
       na_in=(ResourceModel.GPUCLUSTER,), na_why=GPUCLUSTER_NO_DRIVER)
def driver_pod_ready(inp: CheckInput) -> list[Finding]:
    snapshot, settings = inp.snapshot, inp.settings
    ns = namespace(snapshot, settings)
    out = []
    for node in snapshot.gpu_node_names:
        mode = inp.driver_mode(node)
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
            p = pod_problem(inp, pod)
            late = driver_starting(snapshot, pod)[1]
            if p.stage == "k8s-driver-manager":
                meaning = _driver_manager_meaning(snapshot, node)
            elif p.container == DRIVER_CONTAINER and p.probe_failures:
                # kubelet quoted the probe's output (pod_problem): the startup probe runs nvidia-smi (lsmod before
                # v23.9), so its words are the driver's own diagnosis — no guess between build and load.
                meaning = ("its startup probe fails, so kubelet keeps restarting the driver container: the driver "
                           "is not usable on this node (dmesg on the node says why)")
            elif p.container == DRIVER_CONTAINER:
                meaning = ("the driver did not build/load for this kernel, or its startup probe "
                           "(nvidia-smi) fails")
            if late and p.start is None:
                meaning = f"{meaning} — {late}" if meaning else late
            out.append(problem_finding(inp, ns, node, pod, "driver pod", meaning, HINT_DRIVER))
        else:
            img = next((c.get("image", "") for c in pod.get("spec", {}).get("containers", [])
                        if c.get("name") == "nvidia-driver-ctr"), "")
            version = image_tag(img).split("-")[0]  # 580.126.20-ubuntu22.04 -> 580.126.20
            detail = f" (driver {version})" if version else ""
            out.append(restart_warn_or_pass(ns, node, pod, "driver pod", detail))
        out[-1] = _under_upgrade(inp, node, pod, out[-1])
    return out


def _driver_manager_meaning(snapshot: ClusterSnapshot, node: str) -> str:
    """Why k8s-driver-manager cannot finish: it unloads the driver only once no pod uses the GPUs, and with the
    ClusterPolicy's driver.upgradePolicy.autoUpgrade on it leaves evicting them to the upgrade controller (NVIDIA
    k8s-driver-manager isGPUPodEvictionEnabled / isAutoDrainEnabled), which acts only on nodes it moves through an
    upgrade. The pods still holding GPUs there (of any namespace, read for such nodes) are what to look at."""
    generic = "the driver manager could not prepare the node (evict GPU pods, unload the old driver)"
    pods = snapshot.node_pods.get(node)
    holders = gpu_holders(pods, node) if pods is not None else []
    if not holders:
        return generic
    users = ", ".join(f"{h.pod} ({', '.join(f'{r}: {q}' for r, q in h.gpus.items())})" for h in holders)
    if snapshot.policy_spec("driver", "upgradePolicy", "autoUpgrade") is True:
        who = ("driver.upgradePolicy.autoUpgrade is on, so the driver manager leaves their eviction to the upgrade "
               "controller, which evicts only on nodes it takes through an upgrade")
    else:
        who = ("the driver manager did not evict them (driver.manager.env ENABLE_GPU_POD_EVICTION / "
               "ENABLE_AUTO_DRAIN, or an eviction refused: its log says which)")
    return f"the driver manager cannot unload the driver while pods hold this node's GPUs: {users} — {who}"


def _not_ready_restarts(pod: Obj) -> int:
    """The most restarts of a container (init or not) that is not Ready: what isDriverPodFailing counts."""
    st = pod.get("status", {})
    return max((c.get("restartCount", 0) or 0 for c in (st.get("initContainerStatuses") or [])
                + (st.get("containerStatuses") or []) if not c.get("ready")), default=0)


def _under_upgrade(inp: CheckInput, node: str, pod: Obj | None, f: Finding) -> Finding:
    """The driver pod's finding read with the node's driver upgrade state.

    upgrade-failed is a failure in the driver's own words; a step in progress is a pause while the driver is
    healthy, and while the pod-restart step replaces the driver pod (up to the restarts after which the upgrade
    controller itself gives up); anything else broken under a pause stays the node's root cause.
    """
    snapshot = inp.snapshot
    state = upg.upgrade_state(node_labels(snapshot, node))
    if state is None or state in ("", upg.DONE) or f.status == Status.NA:
        return f
    label = f"{upg.UPGRADE_STATE_LABEL}={state}"
    ev = {**f.evidence, upg.UPGRADE_STATE_LABEL: state}
    if not upg.known(state):
        if f.status == Status.FAIL:
            return replace(f, evidence=ev)
        known = ", ".join(v for v in upg.STATES if v)
        return replace(f, status=Status.WARN, evidence=ev,
                       message=f"unknown driver upgrade state {label} (known: {known}); {f.message}")
    st = upg.STATES[state]
    if state == upg.FAILED:
        if f.status == Status.FAIL:
            return replace(f, evidence=ev, message=f"driver upgrade failed ({label}; {st.doing}): {f.message}")
        name = name_of(pod) if pod is not None else "?"
        return replace(f, status=Status.FAIL, evidence=ev,
                       message=f"driver upgrade failed ({label}): driver pod {name} is Ready, so an earlier step "
                               "failed (drain, pod deletion or the validator's 600 s) — the node stays cordoned "
                               "until its driver pod is in sync with its DaemonSet; the node's GPUDriverUpgrade "
                               "events say which step",
                       kubectl=f"kubectl get events -A --field-selector involvedObject.name={node},"
                               "reason=GPUDriverUpgrade")
    if not st.in_progress:  # upgrade-required: the old driver still serves the node
        if f.status == Status.PASS:
            return replace(f, status=Status.WARN, evidence=ev, message=f"{st.doing} ({label}); {f.message}")
        return replace(f, evidence=ev)
    if f.status != Status.FAIL:
        return replace(f, status=Status.WARN, evidence={**ev, "transient": True},
                       message=f"transient: {st.doing} ({label}); {f.message}")
    # The driver restarting in validation-required happens too (the source says so): the same limits apply.
    replacing = state in (upg.POD_RESTART, upg.VALIDATION) and (
        pod is None or (pod_problem(inp, pod).start is None
                        and _not_ready_restarts(pod) <= upg.DRIVER_POD_FAILING_RESTARTS))
    if replacing:
        return replace(f, status=Status.WARN, evidence={**ev, "transient": True},
                       message=f"transient: {st.doing} ({label}): {f.message} — the upgrade controller marks the "
                               f"node upgrade-failed once a container restarts more than "
                               f"{upg.DRIVER_POD_FAILING_RESTARTS} times")
    return replace(f, evidence=ev, message=f"{f.message} (during the driver upgrade step {state})")


@check("DRV-003", L, "Container toolkit pod Ready",
       hint=HINT_TOOLKIT + " If the toolkit waits in driver-validation, the driver is the problem. " + HINT_ORDER,
       kubectl="kubectl -n {ns} get pods -o wide -l app=nvidia-container-toolkit-daemonset "
               "--field-selector spec.nodeName={node}",
       detects="toolkit pod missing, waiting in driver-validation (driver broken) or its container "
               "crash-looping (runtime config; a toolkit image before v1.17.4 on a containerd 2 node: \"unsupported "
               "config version: 3\" names the image); WARN on restarts",
       na_in=(ResourceModel.GPUCLUSTER,), na_why=GPUCLUSTER_NO_TOOLKIT)
def toolkit_pod_ready(inp: CheckInput) -> list[Finding]:
    snapshot = inp.snapshot
    def explain(p: PodProblem) -> tuple[str, str]:
        # pod_problem names the pod in its evidence as "pod" (the finding's "object" is added later).
        pod = next((pod for pod in snapshot.pods if name_of(pod) == p.evidence.get("pod")), None)
        if p.stage == "driver-validation":
            node = (pod or {}).get("spec", {}).get("nodeName", "")
            meaning = driver_validation_meaning(inp, node, p.log, pod)
            return f"{meaning} (driver)", HINT_DRIVER + " " + HINT_ORDER
        refusal = config_version_refusal(p.log, _container_image(pod, p.container)) if p.log else None
        if refusal is not None:
            # The toolkit names the config it could not edit; the image it runs is what decides that.
            return f"{refusal} (toolkit)", HINT_TOOLKIT_IMAGE
        return "it could not configure the container runtime for NVIDIA (toolkit)", HINT_TOOLKIT

    disabled = None if snapshot.policy_enabled("toolkit", True) else (
        "ClusterPolicy spec.toolkit.enabled=false — the NVIDIA runtime must be configured on the host; the "
        "validator's toolkit-validation checks it (DRV-004)")
    out = operand_pod_findings(inp, ops.TOOLKIT, "toolkit pod", "container toolkit",
                               disabled, "spec.toolkit.enabled", explain)
    # A toolkit waiting for a driver that is still within its startup window is the expected order, not a fault:
    # the driver's transient finding (DRV-002) speaks for the node.
    for i, f in enumerate(out):
        held = f.status == Status.FAIL or f.evidence.get("transient")
        pod = inp.operand_pod(ops.TOOLKIT, f.node or "") if held else None
        starting = node_driver_starting(inp, f.node or "") if pod is not None else ""
        if pod is not None and starting and waits_for_driver(inp, pod):
            out[i] = Finding(Status.NA, f"toolkit pod {name_of(pod)} on {f.node} waits in driver-validation for "
                             f"the driver, which is still starting ({starting}; DRV-002)", node=f.node,
                             evidence={"object": f"Pod/{name_of(pod)}", "status": pod_status_text(pod),
                                       "waits_for": "driver"})
    return out


def _container_image(pod: Obj | None, container: str | None) -> str:
    """The image of the pod's named container (its first container when unnamed); '' without a pod."""
    spec = (pod or {}).get("spec") or {}
    containers = (spec.get("initContainers") or []) + (spec.get("containers") or [])
    named = next((c for c in containers if c.get("name") == container), None)
    main = (spec.get("containers") or [{}])[0]
    return str((named or main).get("image", ""))


def validator_chain(pod: Obj) -> list[str]:
    return [c.get("name", "") for c in pod.get("spec", {}).get("initContainers") or []]


def driver_validation_meaning(inp: CheckInput, node: str, log: str, pod: Obj | None) -> str:
    """What a stuck driver-validation means on this node: the validator's own words when its log (last lines, and
    the first ones the reader took for this container) names the step that failed (driver_validation.py), else the
    general meaning. Host driver or operator's decides how a loop on the driver-container path reads."""
    host = bool(node) and inp.driver_mode(node).kind != "operator"
    head = inp.snapshot.log_heads.get((name_of(pod), "driver-validation"), "") if pod is not None else ""
    return driver_stage_meaning(log, host, head) or STAGES["driver-validation"][1]


def stage_message(snapshot: ClusterSnapshot, pod: Obj, stuck: dict[str, Any], meaning: str | None = None) -> str:
    """'validator stuck in toolkit-validation (Init:CrashLoopBackOff, 12 restarts): the container runtime is not
    configured for NVIDIA (toolkit)'. `meaning` replaces the stage's general meaning when the log says more."""
    component, general, _ = STAGES.get(stuck["name"], ("?", "this validation did not pass", ""))
    meaning = meaning or general
    detail = f"{pod_status_text(pod)}, {plural(stuck['restarts'], 'restart')}"
    if stuck["state"] == "running" and not stuck["restarts"]:
        detail = f"{pod_status_text(pod)}, running"
    return f"validator stuck in {stuck['name']} ({detail}): {meaning} ({component})"


@check("DRV-004", L, "Validator chain driver → toolkit → cuda completed",
       hint="The validator's stuck init container is the stuck stage: `kubectl describe po -l "
            "app=nvidia-operator-validator`. " + HINT_ORDER,
       kubectl="kubectl -n {ns} describe pod -l app=nvidia-operator-validator",
       detects="validator pod missing or stuck in driver-validation / toolkit-validation / cuda-validation "
               "(named, with state, restarts and last log lines)",
       na_in=(ResourceModel.GPUCLUSTER,), na_why=GPUCLUSTER_NO_VALIDATOR)
@per_gpu_node(ops.VALIDATOR)
def validator_chain_completed(inp: CheckInput, node: str) -> Finding:
    snapshot, settings = inp.snapshot, inp.settings
    ns = namespace(snapshot, settings)
    pod = inp.operand_pod(ops.VALIDATOR, node)
    if pod is None:
        return explained_by_upgrade(inp, node, None,
                                    missing_pod_finding(snapshot, ns, node, ops.VALIDATOR, "validator"))
    starting = "" if pod_ready(pod) else node_driver_starting(inp, node)
    if starting and waits_for_driver(inp, pod):
        return Finding(Status.NA, f"validator {name_of(pod)} waits for the driver, which is still starting "
                       f"({starting}; DRV-002)", node=node,
                       evidence={"object": f"Pod/{name_of(pod)}", "status": pod_status_text(pod),
                                 "waits_for": "driver"})
    if not pod_ready(pod) and not any_container_started(pod) and (why := awaits_toolkit(inp, pod)):
        # Its sandbox needs the nvidia handler: no validation stage ran, the toolkit (DRV-003) or the driver
        # before it (DRV-002) is what keeps it waiting.
        return Finding(Status.NA, f"validator {name_of(pod)} cannot start before the toolkit on {node} is "
                       f"Ready (see DRV-002, DRV-003): {why}", node=node,
                       evidence={"object": f"Pod/{name_of(pod)}", "status": pod_status_text(pod),
                                 "waits_for": "toolkit", "history": why})
    chain = validator_chain(pod)
    missing = [c for c in DRIVER_LAYER_CHAIN if c not in chain]
    stuck = stuck_init_container(pod)
    ev: dict[str, Any] = {"object": f"Pod/{name_of(pod)}", "field": "status.initContainerStatuses",
                          "expected": "completed: " + ", ".join(c for c in chain
                                                                 if c != "plugin-validation"),
                          "init_containers": chain, "status": pod_status_text(pod)}
    sp = start_problem(inp, pod)
    cuda_pod = app_pod(snapshot, ops.CUDA_VALIDATOR_APP, node)
    if sp is not None:
        # The validator image cannot be pulled, or the runtime refuses the pod: no stage ran, none is to blame.
        return problem_finding(inp, ns, node, pod, "validator pod", "", sp.hint)
    elif stuck is not None and stuck["name"] == "cuda-validation" and cuda_pod is not None \
            and cuda_pod.get("status", {}).get("phase") != "Succeeded":
        # The validator only waits for the CUDA workload pod; DRV-005 has that pod's own failure and log.
        ev.update({"observed": "waiting in cuda-validation", "stage": "cuda-validation"})
        return Finding(Status.NA, f"validator {name_of(pod)} waits in cuda-validation for "
                       f"{name_of(cuda_pod)} (judged by DRV-005)", node=node, evidence=ev)
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
        meaning = driver_validation_meaning(inp, node, log, pod) if stuck["name"] == "driver-validation" else None
        return explained_by_upgrade(inp, node, pod, Finding(
            Status.FAIL, with_log(f"{stage_message(snapshot, pod, stuck, meaning)}", log), node=node, evidence=ev,
            hint=f"{hint} {HINT_ORDER}".strip(),
            kubectl=logs_cmd(ns, pod, stuck["name"],
                         previous=stuck["restarts"] > 0 and stuck["state"] == "waiting")))
    elif stuck is None and not pod_ready(pod):
        return problem_finding(inp, ns, node, pod, "validator pod",
                               "all validations completed but the validator container is not running",
                               HINT_ORDER)
    elif missing:
        ev["observed"] = "missing " + ", ".join(missing)
        return Finding(Status.WARN, f"validator {name_of(pod)} has no init container "
                       f"{', '.join(missing)} (init containers: {', '.join(chain)}), so this stage is not "
                       "validated", node=node, evidence=ev,
                       kubectl=f"kubectl -n {ns} get pod {name_of(pod)} -o yaml")
    else:
        ev["observed"] = "completed"
        done = [c for c in chain if c != "plugin-validation"]
        tail = ("; now waiting in plugin-validation (device-plugin layer, DPL-006)"
                if stuck is not None else "")
        if stuck is None and restart_count(pod) > RESTART_WARN:
            return restart_warn_or_pass(ns, node, pod, "validator")
        else:
            return Finding(Status.PASS, f"validator {name_of(pod)} completed "
                           f"{', '.join(done)}{tail}", node=node, evidence=ev,
                           kubectl=f"kubectl -n {ns} get pod {name_of(pod)} -o wide")


@check("DRV-005", L, "CUDA validation pod succeeded",
       hint=HINT_CUDA,
       kubectl="kubectl -n {ns} get pods -o wide -l app=nvidia-cuda-validator --field-selector spec.nodeName={node}",
       detects="nvidia-cuda-validator-* pod Failed or stuck (vectorAdd cannot run: restartPolicy OnFailure keeps "
               "it Pending with its init container restarting), a new one after the validator gave up on an earlier "
               "one, or none created while the validator waits in cuda-validation")
@per_gpu_node(ops.VALIDATOR)
def cuda_validator_succeeded(inp: CheckInput, node: str) -> Finding:
    snapshot, settings = inp.snapshot, inp.settings
    ns = namespace(snapshot, settings)
    pod = app_pod(snapshot, ops.CUDA_VALIDATOR_APP, node)
    validator = inp.operand_pod(ops.VALIDATOR, node)
    stuck = stuck_init_container(validator) if validator is not None else None
    chain = validator_chain(validator) if validator is not None else []
    reached = (validator is not None and "cuda-validation" in chain
               and (stuck is None or chain.index(stuck["name"]) >= chain.index("cuda-validation")))
    if pod is None:
        if validator is None:
            return Finding(Status.NA, "no validator pod, so no CUDA validation ran "
                           "(see DRV-004)", node=node)
        elif not reached:
            where = stuck["name"] if stuck else "?"
            return Finding(Status.NA, f"CUDA validation not run yet — the validator is "
                           f"still in {where} (see DRV-004)", node=node,
                           evidence={"object": f"Pod/{name_of(validator)}", "stage": where})
        elif stuck is not None and stuck["name"] == "cuda-validation":
            return Finding(Status.FAIL, f"validator waits in cuda-validation but no "
                           f"{ops.CUDA_VALIDATOR_APP}-* pod exists on the node (it could not be created: "
                           "check events and the validator's RBAC)", node=node,
                           evidence={"object": f"Pod/{ops.CUDA_VALIDATOR_APP}-*", "observed": "none",
                                     "expected": "phase Succeeded"},
                           kubectl=logs_cmd(ns, validator, "cuda-validation"))
        else:
            return Finding(Status.PASS, f"cuda-validation completed in the validator "
                           f"(its {ops.CUDA_VALIDATOR_APP} pod has since been removed)", node=node)
    phase = pod.get("status", {}).get("phase")
    ev = {"object": f"Pod/{name_of(pod)}", "field": "status.phase", "observed": phase, "expected": "Succeeded",
          "status": pod_status_text(pod)}
    if phase == "Succeeded":
        return Finding(Status.PASS, f"{name_of(pod)} Succeeded (vectorAdd ran on the GPU)",
                       node=node, evidence=ev, kubectl=f"kubectl -n {ns} logs {name_of(pod)} -c "
                                                        "cuda-validation")
    p = pod_problem(inp, pod)
    broken = phase == "Failed" or p.stage is not None and p.evidence.get("state") != "running" \
        or p.evidence.get("restarts", 0) > 0 or p.evidence.get("reason") not in (None, "", "PodInitializing")
    gave_up = stuck["restarts"] if stuck is not None and stuck["name"] == "cuda-validation" else 0
    if not broken and gave_up and validator is not None:
        # NVIDIA's validator polls its CUDA pod for Succeeded 60 times 5 s apart, then exits 1; kubelet restarts
        # cuda-validation, which replaces the pod (validator/main.go, v25.3.4). A fresh pod after such a restart is
        # another attempt, not progress: vectorAdd has already failed to succeed on this node.
        ev["validator_restarts"] = gave_up
        return Finding(Status.FAIL, f"{name_of(pod)} {phase} ({p.evidence['status']}) is a new attempt: the "
                       f"validator's cuda-validation already gave up on an earlier CUDA pod "
                       f"{plural(gave_up, 'time')} (it waits 5 min for each), so vectorAdd has not succeeded on "
                       "this node", node=node, evidence=ev,
                       kubectl=logs_cmd(ns, validator, "cuda-validation", previous=True))
    if not broken:
        return Finding(Status.WARN, f"{name_of(pod)} still running ({p.evidence['status']}):"
                       " CUDA validation in progress", node=node, evidence=ev,
                       kubectl=f"kubectl -n {ns} describe pod {name_of(pod)}")
    ev.update(p.evidence)
    if p.log:
        ev["log"] = p.log
    msg = f"{name_of(pod)} {phase} — {p.summary}: vectorAdd could not run on the GPU"
    return Finding(Status.FAIL, with_log(msg, p.log), node=node, evidence=ev,
                   kubectl=logs_cmd(ns, pod, p.container or "cuda-validation"))


@check("DRV-006", L, "Container runtime creates the operand pods",
       hint=HINT_RUNTIME,
       kubectl="kubectl -n {ns} get events --field-selector reason=FailedCreatePodSandBox ; "
               "kubectl -n {ns} get pods -o wide --field-selector spec.nodeName={node}",
       detects="operand pods the runtime cannot create: FailedCreatePodSandBox (no runtime for \"nvidia\" is "
               "configured, RuntimeHandler \"nvidia\" not supported), CreateContainerError / RunContainerError, "
               "StartError / ContainerCannotRun (also as the last state kubelet backs off from), "
               "unresolvable CDI devices — named ahead of any driver verdict when seen after the pod last ran and, "
               "for runtimeClass operands, after the node's toolkit became Ready (earlier refusals are bring-up)",
       rank=-1)
@per_gpu_node()
def runtime_creates_operand_pods(inp: CheckInput, node: str) -> Finding:
    snapshot, settings = inp.snapshot, inp.settings
    ns = namespace(snapshot, settings)
    refused: list[tuple[Obj, StartProblem]] = []
    history: dict[str, str] = {}
    for pod in snapshot.pods_by_node.get(node, []):
        if pod.get("metadata", {}).get("deletionTimestamp"):
            continue
        sp = start_problem(inp, pod)
        if sp is not None and sp.kind in ("sandbox", "container"):
            refused.append((pod, sp))
        elif why := dismissed_refusal(inp, pod):
            history[name_of(pod)] = why
    if not refused:
        msg = "no operand pod refused by the container runtime"
        if history:
            # Said, not judged: the reader sees the events too and should know why they are not the cause.
            msg += (f" now; earlier refusals of {plural(len(history), 'pod')} are not held against it "
                    f"(e.g. {next(iter(history.values()))})")
        return Finding(Status.PASS, msg, node=node,
                       evidence={"history": history} if history else {})
    pod, sp = refused[0]
    others = f" (and {len(refused) - 1} more pod{'s' if len(refused) > 2 else ''})" if len(refused) > 1 else ""
    ev = {"object": f"Pod/{name_of(pod)}", "field": "events" if sp.kind == "sandbox" else "status",
          "observed": f"{sp.reason}: {sp.message}", "expected": "pod sandbox and containers created",
          "pods": {name_of(p): f"{s.reason}: {s.message}" for p, s in refused}}
    if sp.seen:
        ev["last_seen"] = sp.seen
    when = {"": "", "unknown": " (the event carries no time: it cannot be placed before or after the toolkit "
                               "became Ready)"}.get(sp.seen, f" (last seen {sp.seen})")
    return Finding(Status.FAIL, f"{sp.meaning}: pod {name_of(pod)}{others} — {sp.reason}: "
                   f"\"{sp.message}\"{when}", node=node, evidence=ev, hint=sp.hint,
                   kubectl=f"kubectl -n {ns} describe pod {name_of(pod)}")
