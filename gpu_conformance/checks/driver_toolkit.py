"""Layer 4: the driver, the container toolkit and the validator chain (driver → toolkit → cuda).

A GPU node's stack comes up in order: driver pod ready → validator/toolkit `driver-validation` → toolkit
configures the runtime → validator `toolkit-validation` → `cuda-validation` (pod nvidia-cuda-validator-*).
The earliest stuck stage is the root cause, so each check names the stage it saw stuck. `plugin-validation`
belongs to the device-plugin layer (DPL-006): it waits for the plugin to advertise GPUs.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from gpu_conformance import operands as ops
from gpu_conformance.checks.common import operator_version
from gpu_conformance.checks.registry import check
from gpu_conformance.cluster.podstate import (
    failing_container,
    pod_ready,
    pod_status_text,
    restart_count,
    stuck_init_container,
)
from gpu_conformance.cluster.snapshot import ClusterSnapshot, labels_of, name_of
from gpu_conformance.model import Finding, Layer, Status
from gpu_conformance.settings import Settings

Obj = dict[str, Any]
L = Layer.DRIVER_TOOLKIT
RESTART_WARN = 1      # the operator's own e2e accepts at most one restart of driver/toolkit/plugin/GFD
LOG_LINES = 20

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


# ---- shared helpers (the device-plugin layer imports these too) ------------------------------------------------
def namespace(snapshot: ClusterSnapshot, settings: Settings) -> str:
    return settings.operator_namespace or snapshot.operator_namespace or "gpu-operator"


def image_tag(image: str) -> str:
    """'nvcr.io/nvidia/driver:580.126.20-ubuntu22.04@sha256:…' -> '580.126.20-ubuntu22.04'; '' when untagged."""
    image = image.split("@", 1)[0]
    tail = image.rsplit("/", 1)[-1]
    return tail.rsplit(":", 1)[1] if ":" in tail else ""


def operator_version_tuple(snapshot: ClusterSnapshot) -> tuple[int, int, int]:
    """The operator version for version-dependent rules; unknown -> newest behaviour."""
    return ops.parse_version(operator_version(snapshot))


def node_labels(snapshot: ClusterSnapshot, node: str) -> dict[str, str]:
    return labels_of(snapshot.node_by_name.get(node, {}))


def app_pod(snapshot: ClusterSnapshot, app: str, node: str) -> Obj | None:
    return snapshot.labelled_pod_on_node({"app": app}, node)


def last_log(snapshot: ClusterSnapshot, pod: Obj, container: str) -> str:
    text = snapshot.logs.get((name_of(pod), container)) or ""
    return "\n".join(text.rstrip().splitlines()[-LOG_LINES:])


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


@dataclass
class PodProblem:
    """Why a pod is not Ready, in words and as evidence."""

    summary: str           # e.g. "stuck in init container k8s-driver-manager (Init:CrashLoopBackOff, 5 restarts)"
    container: str | None  # the container to read logs of
    stage: str | None      # the stuck init container, if that is the problem
    evidence: dict[str, Any]
    log: str = ""


def pod_problem(snapshot: ClusterSnapshot, pod: Obj) -> PodProblem:
    text = pod_status_text(pod)
    stuck = stuck_init_container(pod)
    ev: dict[str, Any] = {"pod": name_of(pod), "status": text, "phase": pod.get("status", {}).get("phase")}
    if stuck is not None:
        detail = f"{text}, {_plural(stuck['restarts'], 'restart')}"
        if stuck["exit_code"] not in (None, 0):
            detail += f", exit code {stuck['exit_code']}"
        ev.update({"stuck_init_container": stuck["name"], "state": stuck["state"], "reason": stuck["reason"],
                   "exit_code": stuck["exit_code"], "restarts": stuck["restarts"]})
        if stuck["message"]:
            ev["message"] = stuck["message"]
        log = last_log(snapshot, pod, stuck["name"])
        return PodProblem(f"stuck in init container {stuck['name']} ({detail})", stuck["name"], stuck["name"],
                          ev, log)
    bad = failing_container(pod)
    if bad is not None:
        detail = f"{bad['reason'] or bad['state']}, {_plural(bad['restarts'], 'restart')}"
        if bad["exit_code"] not in (None, 0):
            detail += f", exit code {bad['exit_code']}"
        if bad["state"] == "running":
            detail = f"running but not Ready, {_plural(bad['restarts'], 'restart')}"
        ev.update({"container": bad["name"], "state": bad["state"], "reason": bad["reason"],
                   "exit_code": bad["exit_code"], "restarts": bad["restarts"]})
        if bad["message"]:
            ev["message"] = bad["message"]
        return PodProblem(f"container {bad['name']} not ready ({detail})", bad["name"], None, ev,
                          last_log(snapshot, pod, bad["name"]))
    return PodProblem(f"not Ready ({text})", None, None, ev)


def with_log(message: str, log: str) -> str:
    lines = [ln.strip() for ln in log.splitlines() if ln.strip()]
    return f'{message} — last log line: "{lines[-1]}"' if lines else message


def logs_cmd(ns: str, pod: Obj, container: str | None, previous: bool = False) -> str:
    if container is None:
        return f"kubectl -n {ns} describe pod {name_of(pod)}"
    return f"kubectl -n {ns} logs {name_of(pod)} -c {container}" + (" --previous" if previous else "")


def problem_finding(check_id: str, snapshot: ClusterSnapshot, ns: str, node: str, pod: Obj, what: str,
                    meaning: str, hint: str, expected: str = "Ready") -> Finding:
    """A FAIL for a pod that is not Ready: what it is stuck in, its logs, and the command to read them."""
    p = pod_problem(snapshot, pod)
    ev = {"object": f"Pod/{name_of(pod)}", "field": "status", "observed": p.evidence["status"],
          "expected": expected, **p.evidence}
    if p.log:
        ev["log"] = p.log
    restarts = p.evidence.get("restarts", 0)
    msg = f"{what} {name_of(pod)} on {node} {p.summary}"
    if meaning:
        msg += f": {meaning}"
    return Finding(check_id, Status.FAIL, with_log(msg, p.log), node=node, evidence=ev, hint=hint,
                   kubectl=logs_cmd(ns, pod, p.container, previous=bool(restarts) and p.evidence.get("state")
                                    == "waiting"))


def restart_warn_or_pass(check_id: str, ns: str, node: str, pod: Obj, what: str, detail: str = "") -> Finding:
    restarts = restart_count(pod)
    ev = {"object": f"Pod/{name_of(pod)}", "field": "status.conditions[Ready]", "observed": "True",
          "expected": "True", "restarts": restarts}
    if restarts > RESTART_WARN:
        return Finding(check_id, Status.WARN,
                       f"{what} {name_of(pod)} on {node} is Ready but restarted {restarts} times "
                       f"(more than {RESTART_WARN}); read its previous logs", node=node, evidence=ev,
                       kubectl=f"kubectl -n {ns} describe pod {name_of(pod)}")
    return Finding(check_id, Status.PASS, f"{what} {name_of(pod)} Ready on {node}{detail}", node=node, evidence=ev,
                   kubectl=f"kubectl -n {ns} get pod {name_of(pod)} -o wide")


def label_gate(check_id: str, snapshot: ClusterSnapshot, node: str, operand: ops.Operand) -> Finding | None:
    """NA/WARN when the node's deploy label keeps the operand off the node on purpose (false, paused-*)."""
    value = node_labels(snapshot, node).get(operand.deploy_label)
    ev = {"object": f"Node/{node}", "field": f"metadata.labels[{operand.deploy_label}]", "observed": value,
          "expected": "true"}
    if value == "false":
        return Finding(check_id, Status.NA, f"{operand.key} opted out on {node} ({operand.deploy_label}=false)",
                       node=node, evidence=ev)
    if value and "paused-for" in value:
        return Finding(check_id, Status.WARN, f"{operand.key} paused on {node} ({operand.deploy_label}={value}): "
                       "transient during a driver upgrade or MIG change", node=node, evidence=ev)
    return None


def missing_pod_finding(check_id: str, snapshot: ClusterSnapshot, ns: str, node: str, operand: ops.Operand,
                        what: str, selector: str) -> Finding:
    ds = snapshot.daemonset(operand.daemonset)
    st = (ds or {}).get("status", {})
    label = node_labels(snapshot, node).get(operand.deploy_label)
    if ds is None:
        where = f"DaemonSet {operand.daemonset} does not exist"
    else:
        where = (f"DaemonSet {operand.daemonset}: desired {st.get('desiredNumberScheduled', 0)}, "
                 f"ready {st.get('numberReady', 0)}")
    return Finding(check_id, Status.FAIL,
                   f"no {what} pod ({selector}) on {node}: {where}; node label {operand.deploy_label}={label}",
                   node=node,
                   evidence={"object": f"DaemonSet/{operand.daemonset}", "field": "pods on node",
                             "observed": "none", "expected": "1 Ready pod", "daemonset_status": st,
                             "deploy_label": label},
                   kubectl=f"kubectl -n {ns} get pods -o wide -l {selector} --field-selector spec.nodeName={node}")


# ---- driver configuration ----------------------------------------------------------------------------------
@dataclass
class DriverMode:
    kind: str     # "operator" | "host" | "pre-installed"
    source: str   # how it was recognised, for messages
    pod: Obj | None = None
    problem: str = ""  # a configuration that cannot work (e.g. useNvidiaDriverCRD without a CR)


def driver_pod(snapshot: ClusterSnapshot, node: str) -> Obj | None:
    key, value = ops.DRIVER_COMPONENT_LABEL
    return snapshot.labelled_pod_on_node({key: value}, node)


def driver_mode(snapshot: ClusterSnapshot, node: str) -> DriverMode:
    """Which driver configuration a GPU node is in, from its driver pod, deploy label and the ClusterPolicy."""
    label = node_labels(snapshot, node).get(ops.DRIVER.deploy_label)
    pod = driver_pod(snapshot, node)
    use_crd = bool(snapshot.policy_spec("driver", "useNvidiaDriverCRD"))
    if pod is not None:
        owner = next((r for r in pod.get("metadata", {}).get("ownerReferences") or []), {})
        owned_by = f"{owner.get('kind', 'DaemonSet')} {owner.get('name', '?')}"
        return DriverMode("operator", f"operator driver container (pod {name_of(pod)} of {owned_by})", pod)
    if label == "pre-installed":
        return DriverMode("pre-installed", f"pre-installed host driver detected by k8s-driver-manager "
                          f"({ops.DRIVER.deploy_label}=pre-installed)")
    if use_crd:
        if ops.NVIDIADRIVER_CRD not in snapshot.crds:
            problem = f"spec.driver.useNvidiaDriverCRD=true but the CRD {ops.NVIDIADRIVER_CRD} is not installed"
        elif not snapshot.nvidiadrivers:
            problem = "spec.driver.useNvidiaDriverCRD=true but no NVIDIADriver CR exists, so no driver is deployed"
        else:
            problem = ""
        names = ", ".join(name_of(d) for d in snapshot.nvidiadrivers) or "none"
        return DriverMode("operator", f"operator driver container via NVIDIADriver CR ({names})", problem=problem)
    if not snapshot.policy_enabled("driver", True):
        return DriverMode("host", "host driver (ClusterPolicy spec.driver.enabled=false)")
    if label == "false":
        return DriverMode("host", f"host driver (driver opted out on this node: {ops.DRIVER.deploy_label}=false)")
    return DriverMode("operator", "operator driver container (spec.driver.enabled=true)")


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
            out.append(Finding("DRV-001", Status.FAIL, f"{mode.problem}", node=node, evidence=ev,
                               kubectl="kubectl get nvidiadrivers.nvidia.com -o wide"))
        elif expect == "operator" and mode.kind != "operator":
            out.append(Finding("DRV-001", Status.FAIL, f"driver is {mode.source}, but --expect-driver="
                               "operator expects the operator's driver container", node=node, evidence=ev))
        elif expect == "host" and mode.kind == "operator":
            out.append(Finding("DRV-001", Status.FAIL, f"driver is the {mode.source}, but --expect-driver="
                               "host expects a host driver (driver.enabled=false or pre-installed)", node=node,
                               evidence=ev))
        else:
            out.append(Finding("DRV-001", Status.PASS, f"{mode.source}", node=node, evidence=ev))
    return out


@check("DRV-002", L, "Operator driver pod Ready",
       hint=HINT_DRIVER + " " + HINT_ORDER,
       kubectl="kubectl -n {ns} get pods -o wide -l app.kubernetes.io/component=nvidia-driver "
               "--field-selector spec.nodeName={node}",
       detects="driver pod missing, stuck in k8s-driver-manager, nvidia-driver-ctr crash-looping or not Ready; "
               "WARN on restarts")
def driver_pod_ready(snapshot: ClusterSnapshot, settings: Settings) -> list[Finding]:
    ns = namespace(snapshot, settings)
    out = []
    for node in snapshot.gpu_node_names:
        mode = driver_mode(snapshot, node)
        ev = {"object": f"Node/{node}", "field": "driver configuration", "observed": mode.kind,
              "expected": "operator"}
        if mode.kind != "operator":
            why = ("the toolkit's and validator's driver-validation check it (DRV-003, DRV-004)")
            out.append(Finding("DRV-002", Status.NA, f"no driver pod expected — {mode.source}; {why}",
                               node=node, evidence=ev))
            continue
        pod = mode.pod
        if pod is None:
            key, value = ops.DRIVER_COMPONENT_LABEL
            f = missing_pod_finding("DRV-002", snapshot, ns, node, ops.DRIVER, "driver", f"{key}={value}")
            if mode.problem:
                f = Finding(f.check_id, f.status, f"{f.message} ({mode.problem})", f.node, f.evidence,
                            kubectl=f.kubectl)
            out.append(f)
        elif not pod_ready(pod):
            meaning = ""
            p = pod_problem(snapshot, pod)
            if p.stage == "k8s-driver-manager":
                meaning = ("the driver manager could not prepare the node (evict GPU pods, unload the old "
                           "driver)")
            elif p.container == "nvidia-driver-ctr":
                meaning = ("the driver did not build/load for this kernel, or its startup probe "
                           "(nvidia-smi) fails")
            out.append(problem_finding("DRV-002", snapshot, ns, node, pod, "driver pod", meaning, HINT_DRIVER))
        else:
            img = next((c.get("image", "") for c in pod.get("spec", {}).get("containers", [])
                        if c.get("name") == "nvidia-driver-ctr"), "")
            version = image_tag(img).split("-")[0]  # 580.126.20-ubuntu22.04 -> 580.126.20
            detail = f" (driver {version})" if version else ""
            out.append(restart_warn_or_pass("DRV-002", ns, node, pod, "driver pod", detail))
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
    return operand_pod_findings("DRV-003", snapshot, settings, ops.TOOLKIT, "toolkit pod", "container toolkit",
                                disabled, "spec.toolkit.enabled", explain)


def operand_pod_findings(check_id: str, snapshot: ClusterSnapshot, settings: Settings, operand: ops.Operand,
                         what: str, missing_what: str, disabled: str | None, policy_field: str,
                         explain: Callable[[PodProblem], tuple[str, str]]) -> list[Finding]:
    """One finding per GPU node on an operand's pod: n/a when the policy disables it, the deploy label's say,
    missing, not ready (explained by the stage it is stuck in), or ready (a warning after restarts)."""
    ns = namespace(snapshot, settings)
    out = []
    for node in snapshot.gpu_node_names:
        if disabled is not None:
            out.append(Finding(check_id, Status.NA, f"{disabled}", node=node,
                               evidence={"object": "ClusterPolicy", "field": policy_field, "observed": False,
                                         "expected": True}))
            continue
        gate = label_gate(check_id, snapshot, node, operand)
        if gate is not None:
            out.append(gate)
            continue
        pod = app_pod(snapshot, operand.app, node)
        if pod is None:
            out.append(missing_pod_finding(check_id, snapshot, ns, node, operand, missing_what,
                                           f"app={operand.app}"))
        elif not pod_ready(pod):
            meaning, hint = explain(pod_problem(snapshot, pod))
            out.append(problem_finding(check_id, snapshot, ns, node, pod, what, meaning, hint))
        else:
            out.append(restart_warn_or_pass(check_id, ns, node, pod, what))
    return out


def validator_chain(pod: Obj) -> list[str]:
    return [c.get("name", "") for c in pod.get("spec", {}).get("initContainers") or []]


def stage_message(snapshot: ClusterSnapshot, pod: Obj, stuck: dict[str, Any]) -> str:
    """'validator stuck in toolkit-validation (Init:CrashLoopBackOff, 12 restarts): the container runtime is not
    configured for NVIDIA (toolkit)'."""
    component, meaning, _ = STAGES.get(stuck["name"], ("?", "this validation did not pass", ""))
    detail = f"{pod_status_text(pod)}, {_plural(stuck['restarts'], 'restart')}"
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
        gate = label_gate("DRV-004", snapshot, node, ops.VALIDATOR)
        if gate is not None:
            out.append(gate)
            continue
        pod = app_pod(snapshot, ops.VALIDATOR.app, node)
        if pod is None:
            out.append(missing_pod_finding("DRV-004", snapshot, ns, node, ops.VALIDATOR, "validator",
                                           f"app={ops.VALIDATOR.app}"))
            continue
        chain = validator_chain(pod)
        missing = [c for c in DRIVER_LAYER_CHAIN if c not in chain]
        stuck = stuck_init_container(pod)
        ev: dict[str, Any] = {"object": f"Pod/{name_of(pod)}", "field": "status.initContainerStatuses",
                              "expected": "completed: " + ", ".join(c for c in chain
                                                                     if c != "plugin-validation"),
                              "init_containers": chain, "status": pod_status_text(pod)}
        if stuck is not None and stuck["name"] != "plugin-validation":
            _, _, hint = STAGES.get(stuck["name"], ("", "", HINT_ORDER))
            log = last_log(snapshot, pod, stuck["name"])
            ev.update({"observed": f"{stuck['name']} {stuck['state']} {stuck['reason']}".strip(),
                       "stage": stuck["name"], "state": stuck["state"], "reason": stuck["reason"],
                       "exit_code": stuck["exit_code"], "restarts": stuck["restarts"]})
            if stuck["message"]:
                ev["message"] = stuck["message"]
            if log:
                ev["log"] = log
            out.append(Finding("DRV-004", Status.FAIL, with_log(f"{stage_message(snapshot, pod, stuck)}",
                                                                log), node=node, evidence=ev,
                               hint=f"{hint} {HINT_ORDER}".strip(),
                               kubectl=logs_cmd(ns, pod, stuck["name"],
                                                previous=stuck["restarts"] > 0 and stuck["state"] == "waiting")))
        elif stuck is None and not pod_ready(pod):
            out.append(problem_finding("DRV-004", snapshot, ns, node, pod, "validator pod",
                                       "all validations completed but the validator container is not running",
                                       HINT_ORDER))
        elif missing:
            ev["observed"] = "missing " + ", ".join(missing)
            out.append(Finding("DRV-004", Status.WARN, f"validator {name_of(pod)} has no init container "
                               f"{', '.join(missing)} (init containers: {', '.join(chain)}), so this stage is not "
                               "validated", node=node, evidence=ev,
                               kubectl=f"kubectl -n {ns} get pod {name_of(pod)} -o yaml"))
        else:
            ev["observed"] = "completed"
            done = [c for c in chain if c != "plugin-validation"]
            tail = ("; now waiting in plugin-validation (device-plugin layer, DPL-006)"
                    if stuck is not None else "")
            if stuck is None and restart_count(pod) > RESTART_WARN:
                out.append(restart_warn_or_pass("DRV-004", ns, node, pod, "validator"))
            else:
                out.append(Finding("DRV-004", Status.PASS, f"validator {name_of(pod)} completed "
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
        gate = label_gate("DRV-005", snapshot, node, ops.VALIDATOR)
        if gate is not None:
            out.append(gate)
            continue
        pod = app_pod(snapshot, ops.CUDA_VALIDATOR_APP, node)
        validator = app_pod(snapshot, ops.VALIDATOR.app, node)
        stuck = stuck_init_container(validator) if validator is not None else None
        chain = validator_chain(validator) if validator is not None else []
        reached = (validator is not None and "cuda-validation" in chain
                   and (stuck is None or chain.index(stuck["name"]) >= chain.index("cuda-validation")))
        if pod is None:
            if validator is None:
                out.append(Finding("DRV-005", Status.NA, "no validator pod, so no CUDA validation ran "
                                   "(see DRV-004)", node=node))
            elif not reached:
                where = stuck["name"] if stuck else "?"
                out.append(Finding("DRV-005", Status.NA, f"CUDA validation not run yet — the validator is "
                                   f"still in {where} (see DRV-004)", node=node,
                                   evidence={"object": f"Pod/{name_of(validator)}", "stage": where}))
            elif stuck is not None and stuck["name"] == "cuda-validation":
                out.append(Finding("DRV-005", Status.FAIL, f"validator waits in cuda-validation but no "
                                   f"{ops.CUDA_VALIDATOR_APP}-* pod exists on the node (it could not be created: "
                                   "check events and the validator's RBAC)", node=node,
                                   evidence={"object": f"Pod/{ops.CUDA_VALIDATOR_APP}-*", "observed": "none",
                                             "expected": "phase Succeeded"},
                                   kubectl=logs_cmd(ns, validator, "cuda-validation")))
            else:
                out.append(Finding("DRV-005", Status.PASS, f"cuda-validation completed in the validator "
                                   f"(its {ops.CUDA_VALIDATOR_APP} pod has since been removed)", node=node))
            continue
        phase = pod.get("status", {}).get("phase")
        ev = {"object": f"Pod/{name_of(pod)}", "field": "status.phase", "observed": phase, "expected": "Succeeded",
              "status": pod_status_text(pod)}
        if phase == "Succeeded":
            out.append(Finding("DRV-005", Status.PASS, f"{name_of(pod)} Succeeded (vectorAdd ran on the GPU)",
                               node=node, evidence=ev, kubectl=f"kubectl -n {ns} logs {name_of(pod)} -c "
                                                                "cuda-validation"))
            continue
        p = pod_problem(snapshot, pod)
        broken = phase == "Failed" or p.stage is not None and p.evidence.get("state") != "running" \
            or p.evidence.get("restarts", 0) > 0 or p.evidence.get("reason") not in (None, "", "PodInitializing")
        if not broken:
            out.append(Finding("DRV-005", Status.WARN, f"{name_of(pod)} still running ({p.evidence['status']}):"
                               " CUDA validation in progress", node=node, evidence=ev,
                               kubectl=f"kubectl -n {ns} describe pod {name_of(pod)}"))
            continue
        ev.update(p.evidence)
        if p.log:
            ev["log"] = p.log
        msg = f"{name_of(pod)} {phase} — {p.summary}: vectorAdd could not run on the GPU"
        out.append(Finding("DRV-005", Status.FAIL, with_log(msg, p.log), node=node, evidence=ev,
                           kubectl=logs_cmd(ns, pod, p.container or "cuda-validation")))
    return out
