"""Layer 5: the device plugin advertises the GPUs, GFD labels them, and the runtime wiring (CDI, RuntimeClasses)
matches what the operator version and the ClusterPolicy ask for.

`nvidia.com/gpu.present=true` only says the hardware was detected; a GPU is usable by pods when the node's
capacity AND allocatable carry the GPU resource. Since v25.10 CDI is the default: the device plugin hands out CDI
devices (DEVICE_LIST_STRATEGY=cdi-annotations,cdi-cri) and containerd injects them, so workloads need no
runtimeClassName (facts §6b, §6d, §6e).
"""

from __future__ import annotations

import re
from typing import Any

from gpu_conformance import operands as ops
from gpu_conformance import versions
from gpu_conformance.check_input import CheckInput
from gpu_conformance.checks.common import operator_version
from gpu_conformance.checks.driver_toolkit import stage_message, validator_chain
from gpu_conformance.checks.per_node import per_gpu_node
from gpu_conformance.checks.pods import (
    PodProblem,
    explained_by_pause,
    explained_by_upgrade,
    label_gate,
    last_log,
    logs_cmd,
    namespace,
    node_labels,
    operand_pod_findings,
    plural,
    pod_problem,
    selector_text,
    with_log,
)
from gpu_conformance.checks.registry import check
from gpu_conformance.cluster.gpu_usage import gpu_holders, held
from gpu_conformance.cluster.podstate import pod_ready, pod_status_text, stuck_init_container
from gpu_conformance.cluster.snapshot import (
    GPU_RESOURCE,
    GPU_SHARED_RESOURCE,
    MIG_RESOURCE_PREFIX,
    ClusterSnapshot,
    advertised_gpu_resources,
    is_gpu_resource,
    name_of,
)
from gpu_conformance.facts import strategy_uses_cdi
from gpu_conformance.model import Finding, Layer, Status
from gpu_conformance.resource_model import ResourceModel

Obj = dict[str, Any]
L = Layer.DEVICE_PLUGIN
GPU = GPU_RESOURCE
GPU_SHARED = GPU_SHARED_RESOURCE
MIG_PREFIX = MIG_RESOURCE_PREFIX
DP_CONTAINER = ops.DEVICE_PLUGIN_CONTAINER
# What GFD publishes for every GPU family and sharing mode (MIG single/mixed, time-slicing, MPS, vGPU). Any of
# the alternatives counts: the cuda.driver.* names are the older spelling.
GFD_REQUIRED = (("nvidia.com/gpu.product",), ("nvidia.com/gpu.count",),
                ("nvidia.com/cuda.driver-version.full", "nvidia.com/cuda.driver-version.major",
                 "nvidia.com/cuda.driver.major"))
# Published only where NVML reports the GPU's own memory: unified-memory GPUs (GB10 in DGX Spark, Grace-Blackwell
# integrated parts) have none, so its absence is worth a warning, never a failure.
GFD_USUALLY = ("nvidia.com/gpu.memory",)
# In the DRA models no device plugin runs: the DRA driver publishes the GPUs as ResourceSlices (checks/dra.py).
DRA_MODELS = (ResourceModel.DRA_DRIVER, ResourceModel.GPUCLUSTER)
NOT_DEVICE_PLUGIN = ("no device plugin in this model: the DRA driver publishes the GPUs as ResourceSlices and pods "
                     "claim them through ResourceClaims (DPL-010..013 judge it)")
HINT_PRESENT = ("`nvidia.com/gpu.present=true` only means the GPU hardware was detected, not that installation is "
                "done: look at allocatable and the validator. If the plugin's connection to kubelet drops, kubelet "
                "marks the devices unhealthy (allocatable 0) and, when the plugin has not come back within 5 minutes, "
                "sets the resource's capacity to 0 — the key stays, at 0, for good. So a resource at 0 beside others "
                "above 0 (nvidia.com/gpu: 0 next to nvidia.com/mig-<profile> or nvidia.com/gpu.shared after a switch "
                "to MIG mixed or a renamed time-slicing config) is a leftover, not a fault.")
HINT_CDI = ("From v25.10 CDI is the default: the toolkit no longer makes `nvidia` the default runtime, the device "
            "plugin passes CDI device names (DEVICE_LIST_STRATEGY=cdi-annotations,cdi-cri) and containerd/CRI-O "
            "inject the GPU, so workloads need no runtimeClassName. Do not override DEVICE_LIST_STRATEGY in "
            "devicePlugin.env; keep spec.cdi.enabled and the plugin in agreement.")


# ---- helpers -------------------------------------------------------------------------------------------
def _qty(value: Any) -> int:
    try:
        return int(str(value))
    except (TypeError, ValueError):
        return 0


def gpu_resources(node: Obj) -> list[str]:
    """GPU resource keys on the node, at any value: nvidia.com/gpu, nvidia.com/gpu.shared, nvidia.com/mig-<profile>."""
    st = node.get("status", {})
    keys = set(st.get("capacity") or {}) | set(st.get("allocatable") or {})
    return sorted(k for k in keys if is_gpu_resource(k))


def _cap_alloc(node: Obj, resource: str) -> tuple[str | None, str | None]:
    st = node.get("status", {})
    return (st.get("capacity") or {}).get(resource), (st.get("allocatable") or {}).get(resource)


def nri_mode(snapshot: ClusterSnapshot) -> bool:
    return bool(snapshot.policy_spec("cdi", "nriPluginEnabled"))


def expected_list_strategy(version: versions.Version | None, cdi: bool) -> str | None:
    """What the operator renders into DEVICE_LIST_STRATEGY; None when the version is unknown (either is fine)."""
    if not cdi:
        return "envvar"
    new = versions.since(versions.CDI_DEFAULT_ON, version)
    if new is None:
        return None
    return "cdi-annotations,cdi-cri" if new else "envvar,cdi-annotations"


def _dp_enabled(snapshot: ClusterSnapshot) -> bool:
    return snapshot.policy_enabled("devicePlugin", True)


def _gfd_enabled(snapshot: ClusterSnapshot) -> bool:
    return snapshot.policy_enabled("gfd", True)


def _plugin_withdrawn(inp: CheckInput, node: str) -> str | None:
    """Why no operator device plugin runs on `node` by configuration (None: it should run there).

    The validator's plugin-validation only waits for a GPU resource in the node's capacity: it does not know that
    nothing will advertise one. The operator removes it when spec.devicePlugin.enabled=false only from v23.9.0
    (TransformValidatorComponent); no release's validator skips a node labelled
    nvidia.com/gpu.deploy.device-plugin=false (cmd/nvidia-validator validateGPUResource, v22.9.0..v26.7.0).
    """
    if not _dp_enabled(inp.snapshot):
        return ("the operator's device plugin is disabled (ClusterPolicy spec.devicePlugin.enabled=false); releases "
                "before v23.9.0 keep plugin-validation in the validator then, v23.9.0 removes it")
    if node_labels(inp.snapshot, node).get(ops.DEVICE_PLUGIN.deploy_label) == "false":
        return (f"the device plugin is opted out on this node ({ops.DEVICE_PLUGIN.deploy_label}=false), which no "
                "release's plugin-validation honours")
    return None


# ---- per-node checks -------------------------------------------------------------------------------------
@check("DPL-001", L, "Device plugin pod Ready",
       hint="The device plugin waits in toolkit-validation until the validator has written toolkit-ready: a plugin "
            "in Init:0/1 is blocked upstream — fix the driver, then the toolkit (driver → toolkit → plugin).",
       kubectl="kubectl -n {ns} get pods -o wide -l app=nvidia-device-plugin-daemonset "
               "--field-selector spec.nodeName={node}",
       detects="device plugin pod missing, waiting in toolkit-validation (blocked upstream), config-manager-init "
               "stuck or nvidia-device-plugin crash-looping; WARN on restarts",
       na_in=DRA_MODELS, na_why=NOT_DEVICE_PLUGIN)
def device_plugin_ready(inp: CheckInput) -> list[Finding]:
    snapshot = inp.snapshot
    def explain(p: PodProblem) -> tuple[str, str]:
        if p.stage == "toolkit-validation":
            return ("toolkit-ready was never written on this node — blocked upstream (driver → toolkit), see the "
                    "driver-toolkit layer"), ""
        if p.stage == "config-manager-init":
            cfg = snapshot.policy_spec("devicePlugin", "config", "name") or "?"
            return f"the device plugin config (ConfigMap {cfg}) could not be loaded", ""
        return "the plugin cannot start or register with kubelet (read its log: NVML init, CDI spec)", ""

    disabled = None if _dp_enabled(snapshot) else (
        "ClusterPolicy spec.devicePlugin.enabled=false — no operator device plugin; GPUs must be advertised by "
        "another plugin")
    return operand_pod_findings(inp, ops.DEVICE_PLUGIN, "device plugin pod",
                                "device plugin", disabled, "spec.devicePlugin.enabled", explain)


def _explained(inp: CheckInput, node: str, finding: Finding) -> Finding:
    """A resource failure the device plugin's pause, or its coming back in a driver upgrade step, explains."""
    snapshot = inp.snapshot
    finding = explained_by_pause(snapshot, node, ops.DEVICE_PLUGIN, finding)
    return explained_by_upgrade(inp, node, inp.operand_pod(ops.DEVICE_PLUGIN, node), finding)


def _expected_resource(snapshot: ClusterSnapshot) -> str:
    if snapshot.policy_spec("mig", "strategy") == "mixed":
        return f"{GPU} or {MIG_PREFIX}<profile>"
    return f"{GPU} (or {GPU_SHARED} when renamed)"


@check("DPL-002", L, "GPU resource advertised in capacity and allocatable",
       hint=HINT_PRESENT,
       kubectl="kubectl get node {node} -o jsonpath='{.status.capacity}{\"\\n\"}{.status.allocatable}'",
       detects="GPU node with no GPU resource above 0 in capacity and allocatable (nvidia.com/gpu, nvidia.com/mig-*, "
               "nvidia.com/gpu.shared); a key kubelet keeps at 0 beside advertised ones passes",
       na_in=DRA_MODELS, na_why=NOT_DEVICE_PLUGIN)
@per_gpu_node()
def gpu_resource_advertised(inp: CheckInput, node: str) -> Finding:
    snapshot = inp.snapshot
    n = snapshot.node_by_name[node]
    resources = gpu_resources(n)
    quantities = {r: dict(zip(("capacity", "allocatable"), _cap_alloc(n, r), strict=True)) for r in resources}
    # The same rule the probe requests by: a resource counts when capacity and allocatable are above 0.
    good = list(advertised_gpu_resources(n))
    ev = {"object": f"Node/{node}", "field": "status.capacity / status.allocatable",
          "observed": quantities or "no GPU resource", "expected": f"{_expected_resource(snapshot)} > 0"}
    if good:
        shown = ", ".join(f"{r} capacity {quantities[r]['capacity']}, allocatable {quantities[r]['allocatable']}"
                          for r in good)
        # A key at 0 beside advertised resources is what kubelet keeps of a resource the plugin no longer
        # registers (MIG mixed, a .shared rename): said, not failed.
        stale = [r for r in resources if _qty(quantities[r]["capacity"]) == 0 and r not in good]
        if stale:
            shown += (f" ({', '.join(stale)} at 0: kept by kubelet from an earlier registration, "
                      "not requested by workloads)")
        return Finding(Status.PASS, f"{node} advertises {shown}", node=node, evidence=ev)
    if not _dp_enabled(snapshot):
        return Finding(Status.NA, "no GPU resource advertised, and the operator's device "
                       "plugin is disabled (spec.devicePlugin.enabled=false)", node=node, evidence=ev)
    if resources:
        shown = "; ".join(f"{r} capacity={q['capacity'] or 'absent'}, allocatable={q['allocatable'] or 'absent'}"
                          for r, q in quantities.items())
        why = ("kubelet counts no healthy device: the plugin's connection dropped or every device is unhealthy"
               if any(_qty(q["capacity"]) > 0 for q in quantities.values()) else
               "the device plugin registers no GPU resource now (a key at 0 is what kubelet keeps of a resource "
               "registered before)")
    else:
        shown = f"{GPU} capacity=absent, allocatable=absent"
        why = "the device plugin never registered with kubelet on this node"
    withdrawn = _plugin_withdrawn(inp, node)
    if withdrawn is not None:
        why = f"{withdrawn.split(';')[0]}, and nothing else advertises a GPU resource here"
    present = node_labels(snapshot, node).get("nvidia.com/gpu.present")
    msg = (f"{node} advertises no usable GPU: {shown} (expected {_expected_resource(snapshot)} > 0) — {why}; "
           f"nvidia.com/gpu.present={present} only means the hardware was detected")
    return _explained(inp, node,
                              Finding(Status.FAIL, msg, node=node, evidence=ev,
                                      kubectl=f"kubectl describe node {node}"))


@check("DPL-003", L, "Allocatable GPUs equal capacity",
       hint="Allocatable below capacity means kubelet holds back devices the plugin reported unhealthy (XID errors, "
            "a GPU fallen off the bus, a lost plugin connection). Read the device plugin log and `nvidia-smi -q` "
            "on the node.",
       kubectl="kubectl describe node {node}",
       detects="allocatable nvidia.com/gpu (or mig-*/gpu.shared) below capacity: unhealthy devices",
       na_in=DRA_MODELS, na_why=NOT_DEVICE_PLUGIN)
@per_gpu_node()
def allocatable_equals_capacity(inp: CheckInput, node: str) -> Finding:
    snapshot, settings = inp.snapshot, inp.settings
    ns = namespace(snapshot, settings)
    n = snapshot.node_by_name[node]
    resources = [r for r in gpu_resources(n) if _qty(_cap_alloc(n, r)[0]) > 0]
    if not resources:
        return Finding(Status.NA, "no GPU resource in capacity (see DPL-002)", node=node)
    short = []
    for r in resources:
        cap, alloc = (_qty(q) for q in _cap_alloc(n, r))
        if alloc < cap:
            short.append((r, cap, alloc))
    ev = {"object": f"Node/{node}", "field": "status.allocatable",
          "observed": {r: _cap_alloc(n, r)[1] for r in resources},
          "expected": {r: _cap_alloc(n, r)[0] for r in resources}}
    if short:
        parts = [f"{r} allocatable {a} < capacity {c}: {c - a} of {c} devices unhealthy" for r, c, a in short]
        pod = inp.operand_pod(ops.DEVICE_PLUGIN, node)
        return _explained(inp, node, Finding(
            Status.FAIL, "" + "; ".join(parts) + " (kubelet withholds devices the device plugin reports "
            "unhealthy)", node=node, evidence=ev,
            kubectl=logs_cmd(ns, pod, DP_CONTAINER) if pod else f"kubectl describe node {node}"))
    else:
        return Finding(Status.PASS, f"allocatable equals capacity for "
                       f"{', '.join(resources)}", node=node, evidence=ev)


@check("DPL-004", L, "Advertised GPU count matches GFD",
       hint="GFD counts the GPUs NVML sees; the device plugin advertises count × time-slicing/MPS replicas "
            "(per MIG profile under the mixed strategy). A shortfall means the plugin skipped devices (failed NVML "
            "init, excluded or unhealthy at start).",
       kubectl="kubectl get node {node} -L nvidia.com/gpu.count,nvidia.com/gpu.replicas,nvidia.com/gpu.product",
       detects="capacity differs from nvidia.com/gpu.count × nvidia.com/gpu.replicas (or nvidia.com/mig-<p>.count)",
       na_in=DRA_MODELS, na_why=NOT_DEVICE_PLUGIN)
@per_gpu_node()
def count_matches_gfd(inp: CheckInput, node: str) -> Finding:
    snapshot = inp.snapshot
    n = snapshot.node_by_name[node]
    labels = node_labels(snapshot, node)
    cap = n.get("status", {}).get("capacity") or {}
    if not _gfd_enabled(snapshot):
        return Finding(Status.NA, "GFD disabled (spec.gfd.enabled=false), no "
                       "nvidia.com/gpu.count to compare with", node=node)
    mig_counts = {k[: -len(".count")]: v for k, v in labels.items()
                  if k.startswith(MIG_PREFIX) and k.endswith(".count")}
    if snapshot.policy_spec("mig", "strategy") == "mixed" and mig_counts:
        pairs = [(res, _qty(v), cap.get(res)) for res, v in sorted(mig_counts.items())]
        basis = "per MIG profile (mixed strategy)"
    elif "nvidia.com/gpu.count" in labels:
        count, replicas = _qty(labels["nvidia.com/gpu.count"]), max(_qty(labels.get("nvidia.com/gpu.replicas")), 1)
        # The name the plugin advertises now: a .shared key kubelet keeps at 0 after the rename was
        # dropped (or a stale nvidia.com/gpu: 0 after it was added) is not the one to compare.
        advertised = advertised_gpu_resources(n)
        res = next((r for r in (GPU_SHARED, GPU) if r in advertised), GPU_SHARED if GPU_SHARED in cap else GPU)
        pairs = [(res, count * replicas, cap.get(res))]
        basis = f"nvidia.com/gpu.count={count} × nvidia.com/gpu.replicas={replicas}"
    else:
        return Finding(Status.NA, "no GFD count label (see DPL-005)", node=node)
    if all(observed is None for _, _, observed in pairs):
        return Finding(Status.NA, "no GPU resource in capacity to compare (see DPL-002)",
                       node=node)
    bad = [(r, e, o) for r, e, o in pairs if _qty(o) != e]
    ev = {"object": f"Node/{node}", "field": "status.capacity", "observed": {r: o for r, _, o in pairs},
          "expected": {r: str(e) for r, e, _ in pairs}, "basis": basis}
    if bad:
        parts = [f"capacity {r}={o if o is not None else 'absent'} but GFD expects {e}" for r, e, o in bad]
        return _explained(inp, node, Finding(
            Status.FAIL, "" + "; ".join(parts) + f" ({basis}): the device plugin does not advertise every "
            "GPU GFD sees", node=node, evidence=ev))
    else:
        shown = ", ".join(f"{r}={o}" for r, _, o in pairs)
        return Finding(Status.PASS, f"capacity {shown} matches GFD ({basis})", node=node,
                       evidence=ev)


@check("DPL-005", L, "GFD labels present",
       hint="GFD publishes its labels through NFD (NodeFeature CR nvidia-features-for-<node>); nfd-master must accept "
            "the nvidia.com namespace (the operator's chart sets extraLabelNs). A GFD pod in Init:0/1 is blocked "
            "upstream by toolkit-validation.",
       kubectl="kubectl get node {node} -o json | grep -o 'nvidia.com/[a-z.-]*'",
       detects="GPU node without nvidia.com/gpu.product, gpu.count or cuda.driver-version.* while GFD is enabled "
               "(a missing gpu.memory only warns: unified-memory GPUs have none)",
       na_in=DRA_MODELS, na_why=NOT_DEVICE_PLUGIN)
@per_gpu_node()
def gfd_labels_present(inp: CheckInput, node: str) -> Finding:
    snapshot, settings = inp.snapshot, inp.settings
    ns = namespace(snapshot, settings)
    if not _gfd_enabled(snapshot):
        return Finding(Status.NA, "GFD disabled (spec.gfd.enabled=false)", node=node)
    gate = label_gate(snapshot, node, ops.GFD)
    if gate is not None:
        return gate
    labels = node_labels(snapshot, node)
    missing = [alts[0] for alts in GFD_REQUIRED if not any(a in labels for a in alts)]
    ev = {"object": f"Node/{node}", "field": "metadata.labels", "observed": {
        a: labels.get(a) for alts in GFD_REQUIRED for a in alts[:1]}, "expected": [a[0] for a in GFD_REQUIRED]}
    if not missing:
        cuda = next(labels[a] for a in GFD_REQUIRED[2] if a in labels)
        memory = labels.get(GFD_USUALLY[0])
        shown = (f"GFD labels present ({labels['nvidia.com/gpu.product']} × {labels['nvidia.com/gpu.count']}"
                 f"{f', {memory} MiB' if memory else ''}, driver {cuda})")
        if memory is None:
            return Finding(Status.WARN, f"{shown}; no {GFD_USUALLY[0]}: GFD omits it on unified-memory "
                           "GPUs (e.g. GB10), elsewhere NVML could not read the memory size", node=node,
                           evidence={**ev, "usually": list(GFD_USUALLY)})
        else:
            return Finding(Status.PASS, shown, node=node, evidence=ev)
    pod = inp.operand_pod(ops.GFD, node)
    if pod is None:
        state = "no gpu-feature-discovery pod on the node"
        cmd = (f"kubectl -n {ns} get pods -o wide -l {selector_text(snapshot, ops.GFD)} "
               f"--field-selector spec.nodeName={node}")
    elif not pod_ready(pod):
        state = f"gpu-feature-discovery pod {name_of(pod)} {pod_problem(inp, pod).summary}"
        cmd = f"kubectl -n {ns} describe pod {name_of(pod)}"
    else:
        state = (f"gpu-feature-discovery pod {name_of(pod)} is Ready, so NFD did not apply its labels "
                 "(nfd-master extraLabelNs / NodeFeature API)")
        cmd = logs_cmd(ns, pod, "gpu-feature-discovery")
    ev["gfd_pod"] = state
    missing += [a for a in GFD_USUALLY if a not in labels]
    return Finding(Status.FAIL, f"{node} lacks GFD labels {', '.join(missing)}: {state}",
                   node=node, evidence=ev, kubectl=cmd)


# ---- plugin-validation ---------------------------------------------------------------------------------------
# plugin-validation first polls the node's capacity for a GPU resource of at least 1 (nvidia.com/gpu* or
# nvidia.com/mig-*); with WITH_WORKLOAD=true it then creates the pod nvidia-device-plugin-validator, bound to the
# node by spec.nodeName and asking for 1 of an allocatable GPU resource (a MIG one first), and waits for it to
# succeed. Template default "true" through v25.3 in the assets; the chart sets it true through v23.3 and false
# since; the validator binary's own default is false at v22.9 and true at v26.7 — so only the rendered env says.
PLUGIN_STAGE = "plugin-validation"
# kubelet's device manager refusing a pod it cannot give the devices it asks for: the pod fails at admission with
# reason UnexpectedAdmissionError, "Allocate failed due to requested number of devices unavailable for <resource>.
# Requested: n, Available: m, which is unexpected" (pkg/kubelet/cm/devicemanager, lifecycle admission).
ADMISSION_REFUSED = "UnexpectedAdmissionError"
_UNAVAILABLE = re.compile(r"devices unavailable for (\S+?)\. Requested: (\d+), Available: (\d+)")
# Pods of the validator's own test: not a workload that keeps GPUs from it.
_VALIDATOR_TEST_APPS = (ops.PLUGIN_VALIDATOR_APP,)


def _validator_sees(node: Obj, field: str) -> dict[str, int]:
    """GPU resources of at least 1 in the node's capacity/allocatable, as plugin-validation looks for them."""
    res = node.get("status", {}).get(field) or {}
    return {k: _qty(v) for k, v in sorted(res.items()) if is_gpu_resource(k) and _qty(v) >= 1}


def plugin_workload(snapshot: ClusterSnapshot) -> bool | None:
    """WITH_WORKLOAD of plugin-validation as the validator DaemonSet renders it; None when nothing says."""
    ds = snapshot.daemonset(ops.VALIDATOR.daemonset)
    inits = (ds or {}).get("spec", {}).get("template", {}).get("spec", {}).get("initContainers") or []
    ctr = next((c for c in inits if c.get("name") == PLUGIN_STAGE), None)
    value = next((str(e.get("value", "")) for e in (ctr or {}).get("env") or [] if e.get("name") == "WITH_WORKLOAD"),
                 None)
    return None if value is None else value.strip().lower() in ("true", "1", "yes", "t")


def _refusal(test_pod: Obj | None) -> tuple[str, str | None, int | None]:
    """kubelet's words when it refused the test pod at admission: (message, resource, available) or ('', None, None)."""
    st = (test_pod or {}).get("status") or {}
    if st.get("reason") != ADMISSION_REFUSED:
        return "", None, None
    message = " ".join(str(st.get("message") or ADMISSION_REFUSED).split())
    m = _UNAVAILABLE.search(message)
    return message, (m.group(1) if m else None), (int(m.group(3)) if m else None)


def _workload_candidates(allocatable: dict[str, int]) -> dict[str, int]:
    """What the test pod may ask for: a MIG resource when one is allocatable, else nvidia.com/gpu*."""
    mig = {k: v for k, v in allocatable.items() if k.startswith(MIG_PREFIX)}
    return mig or {k: v for k, v in allocatable.items() if not k.startswith(MIG_PREFIX)}


def _workload_stage(inp: CheckInput, ns: str, node: str, pod: Obj, stuck: dict[str, Any],
                    advertised: dict[str, int], log: str, ev: dict[str, Any], cmd: str) -> Finding:
    """plugin-validation stuck while the node advertises GPUs: its test pod did not succeed. Busy, or broken?

    A node whose GPUs are all held by running pods (any namespace) gives pods GPUs: only the validator's own test
    pod cannot get one (gpu-operator #481). Finished pods hold nothing. Otherwise the test pod's failure is the
    node's: a pod asking for one GPU did not run.
    """
    snapshot = inp.snapshot
    n = snapshot.node_by_name[node]
    shown = ", ".join(f"{r}={q}" for r, q in advertised.items())
    ev["advertised"] = advertised
    workload = plugin_workload(snapshot)
    ev["WITH_WORKLOAD"] = "unknown" if workload is None else str(workload).lower()
    if workload is False:
        # Capacity is all it checks, and capacity is there now: it failed before the plugin registered, and its next
        # retry (kubelet's crash back-off) passes.
        return Finding(Status.WARN, f"transient: validator {name_of(pod)} failed {PLUGIN_STAGE} before the device "
                       f"plugin advertised its GPUs; the node now advertises {shown} (WITH_WORKLOAD=false: capacity "
                       "is all it checks), so its next retry passes", node=node,
                       evidence={**ev, "transient": True}, kubectl=cmd)
    test_pod = snapshot.labelled_pod_on_node({"app": ops.PLUGIN_VALIDATOR_APP}, node)
    refused, refused_res, available = _refusal(test_pod)
    allocatable = _validator_sees(n, "allocatable")
    candidates = _workload_candidates(allocatable)
    pods = snapshot.node_pods.get(node)
    holders = gpu_holders(pods, node, _VALIDATOR_TEST_APPS) if pods is not None else None
    if test_pod is not None:
        ev["test_pod"] = {"name": name_of(test_pod), "status": pod_status_text(test_pod),
                          **({"refused": refused} if refused else {})}
    if holders is not None:
        ev["gpus_held_by_pods"] = {h.pod: h.gpus for h in holders}
    asked = [refused_res] if refused_res in candidates else list(candidates)
    full = [r for r in asked if holders is not None and held(holders, r) >= candidates[r]]
    said = f' — kubelet refused it: "{refused}"' if refused else ""
    if asked and (len(full) == len(asked) or (holders is None and available == 0)):
        if holders is not None:
            users = ", ".join(f"{h.pod} ({', '.join(f'{r}: {q}' for r, q in h.gpus.items())})" for h in holders)
            busy = "; ".join(f"all {candidates[r]} {r} held by running pods" for r in full) + f": {users}"
        else:
            busy = "kubelet has no free GPU for it (who holds them was not read)"
        return Finding(Status.WARN, f"all GPUs in use, not broken: {busy}. The device plugin advertises {shown} "
                       f"and workloads hold every GPU, so the validator's own test pod ({ops.PLUGIN_VALIDATOR_APP}, "
                       f"WITH_WORKLOAD={ev['WITH_WORKLOAD']}) cannot get one and {PLUGIN_STAGE} restarts until a "
                       f"GPU is free{said}", node=node, evidence={**ev, "busy": True}, kubectl=cmd,
                       hint="Nothing to fix on the GPU path: the validation passes once a GPU is free. To stop the "
                            "restarts, set validator.plugin.env WITH_WORKLOAD=false (the chart's default since "
                            "v23.6): the node's capacity is then all plugin-validation checks.")
    if holders is None:
        usage = "who holds its GPUs was not read"
    else:
        usage = "; ".join(f"{held(holders, r)} of {candidates[r]} {r} held by running pods" for r in asked) \
            or "no allocatable GPU"
    if test_pod is None:
        what = f"its test pod {ops.PLUGIN_VALIDATOR_APP}-* is not there (not created, or already cleaned up)"
    elif refused:
        what = f"kubelet refused its test pod {name_of(test_pod)}: \"{refused}\""
    else:
        p = pod_problem(inp, test_pod) if not pod_ready(test_pod) else None
        what = (f"its test pod {name_of(test_pod)} did not succeed ({p.summary if p else pod_status_text(test_pod)})"
                + (f": {p.log.splitlines()[-1]}" if p and p.log else ""))
    msg = (f"validator stuck in {PLUGIN_STAGE} ({pod_status_text(pod)}, {plural(stuck['restarts'], 'restart')}): the "
           f"device plugin advertises {shown} ({usage}), but a pod asking for one GPU did not run — {what}")
    return Finding(Status.FAIL, with_log(msg, log), node=node, evidence=ev, kubectl=cmd,
                   hint="The node advertises GPUs but the validator's test pod could not use one: read its events "
                        f"(kubectl -n {ns} describe pod -l app={ops.PLUGIN_VALIDATOR_APP}) and the device plugin "
                        "log (Allocate errors, unhealthy devices).")


@check("DPL-006", L, "Validator plugin-validation completed",
       hint="plugin-validation polls the node's capacity (30 × 5 s) for nvidia.com/gpu or nvidia.com/mig-*; it "
            "fails when the device plugin has not registered — look at the device plugin pod first. With "
            "WITH_WORKLOAD=true it then runs a test pod asking for one GPU (nvidia-device-plugin-validator), which "
            "kubelet refuses while running pods hold every GPU: busy, not broken.",
       kubectl="kubectl -n {ns} logs -l app=nvidia-operator-validator -c plugin-validation",
       detects="validator stuck in plugin-validation: the device plugin has not advertised GPUs, or (WITH_WORKLOAD="
               "true) its test pod did not run although a GPU is free; every GPU held by running pods of any "
               "namespace (finished pods hold none) is a warning, as is a stale failure from before the GPUs "
               "were advertised; plugin-validation waiting for a device plugin the configuration withdrew "
               "(spec.devicePlugin.enabled=false before v23.9.0, a node labelled gpu.deploy.device-plugin=false) "
               "names that setting",
       na_in=DRA_MODELS, na_why=NOT_DEVICE_PLUGIN)
@per_gpu_node()
def plugin_validation_completed(inp: CheckInput, node: str) -> Finding:
    snapshot, settings = inp.snapshot, inp.settings
    ns = namespace(snapshot, settings)
    if not _dp_enabled(snapshot) and versions.since(versions.PLUGIN_VALIDATION_FOLLOWS_DEVICE_PLUGIN,
                                                    inp.facts.operator.parsed):
        return Finding(Status.NA, "plugin-validation is removed from the validator when "
                       "spec.devicePlugin.enabled=false (from v23.9.0)", node=node)
    gate = label_gate(snapshot, node, ops.VALIDATOR)
    if gate is not None:
        return gate
    pod = inp.operand_pod(ops.VALIDATOR, node)
    if pod is None:
        return Finding(Status.NA, "no validator pod (see DRV-004)", node=node)
    chain = validator_chain(pod)
    stuck = stuck_init_container(pod)
    ev: dict[str, Any] = {"object": f"Pod/{name_of(pod)}", "field": "status.initContainerStatuses"
                          "[plugin-validation]", "expected": "completed", "status": pod_status_text(pod)}
    withdrawn = _plugin_withdrawn(inp, node)
    if "plugin-validation" not in chain and withdrawn is not None:
        ev["observed"] = "absent"
        return Finding(Status.NA, f"validator {name_of(pod)} has no plugin-validation: {withdrawn.split(';')[0]}",
                       node=node, evidence=ev)
    if "plugin-validation" not in chain:
        ev["observed"] = "absent"
        return Finding(Status.WARN, f"validator {name_of(pod)} has no plugin-validation "
                       "although the device plugin is enabled, so GPU advertisement is not validated",
                       node=node, evidence=ev)
    elif stuck is None:
        ev["observed"] = "completed"
        return Finding(Status.PASS, f"validator {name_of(pod)} completed "
                       "plugin-validation", node=node, evidence=ev)
    elif stuck["name"] != "plugin-validation":
        ev["observed"] = f"not reached (stuck in {stuck['name']})"
        return Finding(Status.NA, f"plugin-validation not reached — validator stuck "
                       f"earlier in {stuck['name']} (see DRV-004)", node=node, evidence=ev)
    else:
        log = snapshot.logs.get((name_of(pod), "plugin-validation")) or ""
        ev.update({"observed": f"{stuck['state']} {stuck['reason']}".strip(), "stage": "plugin-validation",
                   "state": stuck["state"], "reason": stuck["reason"], "exit_code": stuck["exit_code"],
                   "restarts": stuck["restarts"]})
        if log:
            ev["log"] = log
        cmd = logs_cmd(ns, pod, "plugin-validation",
                       previous=stuck["restarts"] > 0 and stuck["state"] == "waiting")
        advertised = _validator_sees(snapshot.node_by_name[node], "capacity")
        if not advertised and withdrawn is not None:
            # Not a plugin that failed to register: nothing is meant to advertise, and the stage waits regardless.
            ev["withdrawn"] = withdrawn
            return Finding(Status.FAIL, with_log(
                f"{stage_message(snapshot, pod, stuck)} — it waits for a GPU resource nothing on this node will "
                f"advertise: {withdrawn}", log), node=node, evidence=ev, kubectl=cmd)
        if not advertised:
            return explained_by_upgrade(inp, node, pod, Finding(
                Status.FAIL, with_log(f"{stage_message(snapshot, pod, stuck)}", log), node=node, evidence=ev,
                kubectl=cmd))
        else:
            return explained_by_upgrade(inp, node, pod,
                                        _workload_stage(inp, ns, node, pod, stuck, advertised, log, ev,
                                                        cmd))


# ---- the MIG manager's outcome ------------------------------------------------------------------------------
MIG_CONFIG = "nvidia.com/mig.config"
MIG_STATE = "nvidia.com/mig.config.state"
MIG_CONTAINER = "nvidia-mig-manager"
# What nvidia-mig-manager (mig-parted pkg/mig/reconfigure) writes while it applies nvidia.com/mig.config.
MIG_WORKING = ("pending", "rebooting")
MIG_DONE = "success"
MIG_FAILED = "failed"
HINT_MIG = ("nvidia-mig-manager applies the MIG profile named by the node label nvidia.com/mig.config (from the "
            "mig-parted ConfigMap) and reports it in nvidia.com/mig.config.state: pending or rebooting while it "
            "works, success or failed at the end. failed leaves the GPUs in their previous layout, so the "
            "advertised GPU resources are not what was asked for. Read the mig-manager log: a profile the "
            "ConfigMap lacks or the GPU cannot take, GPU processes outside Kubernetes still holding the GPU, a MIG "
            "mode change that needs a reboot (WITH_REBOOT=false). Setting nvidia.com/mig.config again retries.")


def _mig_failed(inp: CheckInput, ns: str, node: str, profile: str, ev: dict[str, Any]) -> Finding:
    """A failed reconfiguration in the MIG manager's own words: its last log lines, when the snapshot has them."""
    snapshot = inp.snapshot
    pod = inp.operand_pod(ops.MIG_MANAGER, node)
    log = last_log(snapshot, pod, MIG_CONTAINER) if pod is not None else ""
    if log:
        ev["log"] = log
    msg = (f"the MIG manager failed to apply {MIG_CONFIG}={profile} on {node} ({MIG_STATE}={MIG_FAILED}): the GPUs "
           "keep their previous MIG layout")
    cmd = logs_cmd(ns, pod, MIG_CONTAINER) if pod is not None else (
        f"kubectl -n {ns} get pods -o wide -l {selector_text(snapshot, ops.MIG_MANAGER)} "
        f"--field-selector spec.nodeName={node}")
    return Finding(Status.FAIL, with_log(msg, log), node=node, evidence=ev, kubectl=cmd)


@check("DPL-009", L, "MIG manager applied the requested MIG layout",
       hint=HINT_MIG,
       kubectl="kubectl get node {node} -L nvidia.com/mig.config,nvidia.com/mig.config.state ; "
               "kubectl -n {ns} logs -l app=nvidia-mig-manager -c nvidia-mig-manager --tail=20",
       detects="nvidia.com/mig.config.state=failed (the MIG profile in nvidia.com/mig.config was not applied), "
               "quoting the MIG manager's log; pending/rebooting reported as a transient pause, an unknown state "
               "as a warning",
       # A failed repartition explains the resource counts DPL-002/DPL-004 would blame on the plugin.
       rank=-1)
@per_gpu_node()
def mig_config_applied(inp: CheckInput, node: str) -> Finding:
    snapshot, settings = inp.snapshot, inp.settings
    ns = namespace(snapshot, settings)
    labels = node_labels(snapshot, node)
    state, profile = labels.get(MIG_STATE), labels.get(MIG_CONFIG, "<unset>")
    ev: dict[str, Any] = {"object": f"Node/{node}", "field": f"metadata.labels[{MIG_STATE}]", "observed": state,
                          "expected": MIG_DONE, MIG_CONFIG: profile}
    if state is None:
        return Finding(Status.PASS, f"no MIG reconfiguration reported ({MIG_STATE} absent)", node=node,
                       evidence=ev)
    elif state == MIG_DONE:
        return Finding(Status.PASS, f"MIG layout {profile} applied ({MIG_STATE}={state})", node=node,
                       evidence=ev)
    elif state == MIG_FAILED:
        return _mig_failed(inp, ns, node, profile, ev)
    elif state in MIG_WORKING:
        return Finding(Status.WARN, f"transient: the MIG manager is applying {MIG_CONFIG}={profile} "
                       f"({MIG_STATE}={state}); GPU resources change when it finishes", node=node,
                       evidence={**ev, "transient": True})
    else:
        # A state a newer MIG manager may write: say it by name, never guess what it means.
        return Finding(Status.WARN, f"unknown MIG manager state {MIG_STATE}={state!r} (known: "
                       f"{', '.join((*MIG_WORKING, MIG_DONE, MIG_FAILED))}); {MIG_CONFIG}={profile}",
                       node=node, evidence=ev)


# ---- cluster-wide checks -----------------------------------------------------------------------------------
# The CDI kind of `nvidia-ctk cdi generate`'s node spec, and the NVIDIA runtime's own default-kind default.
NODE_CDI_KIND = "nvidia.com/gpu"


def toolkit_default_kind(snapshot: ClusterSnapshot) -> str | None:
    """The default CDI kind the operator's toolkit gives NVIDIA's runtime (its DaemonSet's
    NVIDIA_CONTAINER_RUNTIME_MODES_CDI_DEFAULT_KIND, the runtime's own default when unset); None without a toolkit
    DaemonSet (a toolkit on the host, whose setting the cluster does not show)."""
    ds = snapshot.daemonset(ops.TOOLKIT.daemonset)
    if ds is None:
        return None
    containers = ds.get("spec", {}).get("template", {}).get("spec", {}).get("containers") or []
    env = {e.get("name"): e.get("value") for c in containers for e in c.get("env") or []}
    return str(env.get("NVIDIA_CONTAINER_RUNTIME_MODES_CDI_DEFAULT_KIND") or NODE_CDI_KIND)


@check("DPL-007", L, "CDI mode consistent and as expected",
       hint=HINT_CDI,
       kubectl="kubectl get clusterpolicy -o jsonpath='{.items[0].spec.cdi}' ; kubectl -n {ns} get ds "
               "nvidia-device-plugin-daemonset -o jsonpath='{.spec.template.spec.containers[0].env}'",
       detects="ClusterPolicy CDI setting and the device plugin's DEVICE_LIST_STRATEGY disagree, or differ from "
               "--expect-cdi (e.g. CDI expected but the plugin on envvar: a probe without runtimeClassName gets "
               "no GPU)",
       na_in=DRA_MODELS, na_why=NOT_DEVICE_PLUGIN)
def cdi_mode(inp: CheckInput) -> list[Finding]:
    snapshot, settings = inp.snapshot, inp.settings
    ns = namespace(snapshot, settings)
    version = inp.facts.operator.parsed
    vtext = operator_version(inp) or "unknown (what every supported version renders is accepted)"
    policy_cdi, source = inp.facts.cdi
    env = inp.facts.device_plugin_env
    strategy = None if env is None else env.get("DEVICE_LIST_STRATEGY", "envvar")
    plugin_cdi = None if strategy is None else strategy_uses_cdi(strategy)
    expected_strategy = expected_list_strategy(version, policy_cdi)
    ev = {"object": "ClusterPolicy + DaemonSet/" + ops.DEVICE_PLUGIN.daemonset,
          "field": "spec.cdi.enabled, env DEVICE_LIST_STRATEGY",
          "observed": {"cdi": source, "DEVICE_LIST_STRATEGY": strategy, "operator_version": vtext},
          "expected": {"expect_cdi": settings.expect_cdi, "DEVICE_LIST_STRATEGY": expected_strategy}}
    cmd = (f"kubectl -n {ns} get ds {ops.DEVICE_PLUGIN.daemonset} -o jsonpath="
           "'{.spec.template.spec.containers[0].env}'")
    no_gpu = ("so a probe without runtimeClassName gets no GPU: with CDI the nvidia runtime is not the default, "
              "and runc ignores NVIDIA_VISIBLE_DEVICES")

    def fail(msg: str) -> list[Finding]:
        return [Finding(Status.FAIL, msg, evidence=ev, kubectl=cmd)]

    if settings.expect_cdi == "yes" and not policy_cdi:
        return fail(f"CDI expected (--expect-cdi=yes) but the ClusterPolicy has it off ({source}); operator {vtext}")
    if settings.expect_cdi == "yes" and plugin_cdi is False:
        return fail(f"CDI expected (--expect-cdi=yes) but the device plugin is on envvar "
                    f"(DEVICE_LIST_STRATEGY={strategy}), {no_gpu}")
    if settings.expect_cdi == "no" and (policy_cdi or plugin_cdi):
        return fail(f"CDI not expected (--expect-cdi=no) but it is on ({source}, DEVICE_LIST_STRATEGY={strategy}): "
                    "GPUs are injected by the runtime's CDI support (containerd ≥ 1.7 enable_cdi), not by the "
                    "nvidia runtime")
    if plugin_cdi is not None and policy_cdi and not plugin_cdi:
        mismatch = (f"ClusterPolicy enables CDI ({source}) but the device plugin is on envvar "
                    f"(DEVICE_LIST_STRATEGY={strategy})")
        if versions.since(versions.CDI_DEFAULT_ON, version) is False:
            # Before v25.10 the toolkit makes `nvidia` containerd's default runtime, and in CDI mode
            # nvidia-container-runtime reads NVIDIA_VISIBLE_DEVICES entries as CDI devices of its default kind
            # (nvidia-container-toolkit internal/modifier/cdi.go getDevicesFromSpec). Which kind decides it.
            kind = toolkit_default_kind(snapshot)
            if kind is not None and kind != NODE_CDI_KIND:
                # The operator's toolkit sets management.nvidia.com/gpu (assets/state-container-toolkit), whose only
                # spec is its own management spec with the one device `all`: the GPU IDs resolve to nothing and
                # the runtime refuses the container. Seen on the kind tier with the operator's toolkit v1.17.8.
                ev["observed"]["toolkit default CDI kind"] = kind
                return fail(f"{mismatch}: the nvidia runtime, the default runtime before v25.10, then reads the "
                            f"variable's GPU IDs as CDI devices of its default kind {kind} (the toolkit "
                            f"DaemonSet's NVIDIA_CONTAINER_RUNTIME_MODES_CDI_DEFAULT_KIND), which no spec lists "
                            f"(the toolkit's management spec has only `{kind}=all`): GPU containers fail to start "
                            f"with \"unresolvable CDI devices {kind}=GPU-…\" (operator {vtext})")
            # A toolkit installed on the host (toolkit.enabled=false) defaults to nvidia.com/gpu, the kind of the
            # spec `nvidia-ctk cdi generate` writes there: a pod still gets its GPU through CDI, from the node's spec
            # instead of the plugin's. An inconsistency to fix, not a node without GPUs (the probe proves it).
            return [Finding(Status.WARN, f"{mismatch}: with the host's toolkit (no toolkit DaemonSet) GPUs still "
                            f"reach pods through the nvidia runtime, the default runtime before v25.10, which in CDI "
                            f"mode resolves the variable's GPU IDs as {NODE_CDI_KIND} CDI devices from the node's "
                            f"spec; the plugin's own CDI devices go unused (operator {vtext})",
                            evidence=ev, kubectl=cmd)]
        return fail(f"{mismatch}, {no_gpu}")
    if plugin_cdi and not policy_cdi:
        return fail(f"the device plugin hands out CDI devices (DEVICE_LIST_STRATEGY={strategy}) but the ClusterPolicy "
                    f"has CDI off ({source}): the runtime was not set up for CDI (enable_cdi), so GPU containers fail "
                    "to start or get no GPU")
    mode = "on" if policy_cdi else "off"
    if strategy is None:
        return [Finding(Status.PASS, f"CDI {mode} ({source}); no device plugin DaemonSet to compare",
                        evidence=ev)]
    if expected_strategy is not None and strategy.replace(" ", "") != expected_strategy:
        return [Finding(Status.WARN, f"CDI {mode} ({source}) and the device plugin agree, but "
                        f"DEVICE_LIST_STRATEGY={strategy} differs from what operator {vtext} renders "
                        f"({expected_strategy}); overridden in devicePlugin.env?", evidence=ev, kubectl=cmd)]
    return [Finding(Status.PASS, f"CDI {mode} ({source}); device plugin DEVICE_LIST_STRATEGY={strategy} "
                    f"as operator {vtext} renders it", evidence=ev)]


@check("DPL-008", L, "RuntimeClasses as the mode requires",
       hint="The operator creates RuntimeClass `nvidia` (spec.operator.runtimeClass), plus `nvidia-cdi` and "
            "`nvidia-legacy` when CDI is on, and none in NRI plugin mode. Operands (validator, device plugin, GFD, "
            "DCGM) run with runtimeClassName nvidia and fail with 'RuntimeClass not found' without it.",
       kubectl="kubectl get runtimeclass -o wide",
       detects="RuntimeClass nvidia (or nvidia-cdi/nvidia-legacy with CDI) missing or with a wrong handler; "
               "WARN on leftovers (CDI off, NRI mode)",
       na_in=DRA_MODELS, na_why=NOT_DEVICE_PLUGIN)
def runtimeclasses(inp: CheckInput) -> list[Finding]:
    snapshot = inp.snapshot
    present = {name_of(rc): rc.get("handler") for rc in snapshot.runtimeclasses}
    nvidia_like = sorted(n for n in present if n.startswith("nvidia"))
    if nri_mode(snapshot):
        ev = {"object": "RuntimeClass", "field": "names", "observed": nvidia_like, "expected": [],
              "mode": "NRI plugin (spec.cdi.nriPluginEnabled=true)"}
        if nvidia_like:
            return [Finding(Status.WARN, f"NRI plugin mode creates no RuntimeClasses, but "
                            f"{', '.join(nvidia_like)} exist (left over; operands no longer use them)", evidence=ev)]
        return [Finding(Status.PASS, "NRI plugin mode: no RuntimeClasses expected, none present",
                        evidence=ev)]
    cdi, source = inp.facts.cdi
    main = snapshot.policy_spec("operator", "runtimeClass") or "nvidia"
    expected = [main] + (["nvidia-cdi", "nvidia-legacy"] if cdi else [])
    ev = {"object": "RuntimeClass", "field": "metadata.name / handler", "observed": present,
          "expected": {n: n for n in expected}, "mode": f"CDI {'on' if cdi else 'off'} ({source})"}
    missing = [n for n in expected if n not in present]
    wrong = [n for n in expected if n in present and present[n] != n]
    if missing or wrong:
        parts = []
        if missing:
            parts.append(f"RuntimeClass {', '.join(missing)} missing")
        if wrong:
            parts.append(", ".join(f"RuntimeClass {n} has handler {present[n]!r} (expected {n!r}, the handler the "
                                   "toolkit writes)" for n in wrong))
        why = (f"operand pods with runtimeClassName {main} cannot start" if main in missing
               else "the operator creates these when CDI is on")
        return [Finding(Status.FAIL, f"{'; '.join(parts)} (CDI {'on' if cdi else 'off'}: expected "
                        f"{', '.join(expected)}; found {', '.join(sorted(present)) or 'none'}): {why}", evidence=ev)]
    leftover = [n for n in ("nvidia-cdi", "nvidia-legacy") if n in present and n not in expected]
    if leftover:
        return [Finding(Status.WARN, f"RuntimeClass {', '.join(leftover)} exist although CDI is off "
                        f"({source}); the operator deletes them, so they are left over", evidence=ev)]
    return [Finding(Status.PASS, f"RuntimeClasses {', '.join(expected)} present (CDI "
                    f"{'on' if cdi else 'off'})", evidence=ev)]

