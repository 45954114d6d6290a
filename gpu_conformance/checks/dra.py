"""The DRA models (resource_model.py): the GPUCluster and the one-model rule (operator layer), and NVIDIA's DRA
driver on each node — its kubelet plugin, the GPU DeviceClass, the ResourceSlices and their free devices
(device-plugin layer, where the DRA driver takes the device plugin's place on the GPU path).

Facts from gpu-operator v26.7.0: controllers/gpucluster_controller.go (status and conditions),
controllers/clusterpolicy_controller.go (refuses beside a GPUCluster), manifests/state-dra-driver/ (DaemonSet,
DeviceClasses); and NVIDIA/k8s-dra-driver-gpu 0.5.0 (the ResourceSlice devices).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from gpu_conformance import operands as ops
from gpu_conformance.check_input import CheckInput
from gpu_conformance.checks.common import cluster_finding
from gpu_conformance.checks.pods import (
    PodProblem,
    explained_by_pause,
    label_gate,
    missing_pod_finding,
    namespace,
    node_labels,
    pod_problem,
    problem_finding,
    restart_warn_or_pass,
)
from gpu_conformance.checks.registry import check
from gpu_conformance.cluster.podstate import pod_ready
from gpu_conformance.cluster.snapshot import ClusterSnapshot, is_gpu_resource, name_of
from gpu_conformance.dra_chart import KUBELET_PLUGIN_DAEMONSET as CHART_KUBELET_PLUGIN_DAEMONSET
from gpu_conformance.dra_chart import KUBELET_PLUGIN_SELECTOR
from gpu_conformance.model import Finding, Layer, Status
from gpu_conformance.resource_model import (
    GPU_DEVICE_CLASS,
    KUBELET_PLUGIN_APP,
    KUBELET_PLUGIN_DAEMONSET,
    KUBELET_PLUGIN_DEPLOY_LABEL,
    ResourceModel,
)
from gpu_conformance.resource_slices import Device
from gpu_conformance.settings import Settings

Obj = dict[str, Any]
DEVICE_PLUGIN_MODEL = (ResourceModel.DEVICE_PLUGIN,)
NOT_DRA = "GPUs are advertised by the device plugin (nvidia.com/gpu), judged by DPL-001..008"
# The kubelet plugin as an operand, so the shared pod helpers (deploy-label gate, missing pod, stuck stage) apply.
KUBELET_PLUGIN = ops.Operand("dra-driver", KUBELET_PLUGIN_DAEMONSET, None, True, KUBELET_PLUGIN_DEPLOY_LABEL,
                             ("driver-validation",), state="state-dra-driver")
# The DaemonSets a GPUCluster owns at v26.7.0 (manifests/state-dra-driver, state-dra-validation, state-dcgm,
# state-dcgm-exporter): what its OperandNotReady waits for.
GPUCLUSTER_DAEMONSETS = (KUBELET_PLUGIN_DAEMONSET, "nvidia-dra-validator", "nvidia-dcgm-dra",
                         "nvidia-dcgm-exporter-dra")
# GFD's product label spells the NVML name with dashes for spaces (and may append -SHARED / -MIG-...).
GFD_PRODUCT, GFD_COUNT, GFD_MEMORY_MIB = "nvidia.com/gpu.product", "nvidia.com/gpu.count", "nvidia.com/gpu.memory"


def _condition(obj: Obj, ctype: str) -> Obj:
    status = obj.get("status")
    conditions = status.get("conditions") if isinstance(status, dict) else None
    return next((c for c in conditions if isinstance(c, dict) and c.get("type") == ctype), {}) \
        if isinstance(conditions, list) else {}


# ---- operator layer ----------------------------------------------------------------------------------------
@check("OPR-009", Layer.OPERATOR, "one GPU resource model",
       hint="A ClusterPolicy and a GPUCluster cannot co-exist (v26.7.0): the ClusterPolicy controller stops with "
            "ReconcileFailed 'ClusterPolicy and GPUCluster cannot co-exist' and the GPUCluster controller with "
            "PrerequisiteNotMet, so neither stack is reconciled. Keep one: Helm clusterPolicy.deployCR or "
            "gpuCluster.deployCR, not both.",
       kubectl="kubectl get clusterpolicies.nvidia.com,gpuclusters.nvidia.com",
       detects="a ClusterPolicy and a GPUCluster both present (an unsupported combination: every other failure "
               "is its consequence); passes naming the model otherwise",
       rank=-1)
def one_resource_model(inp: CheckInput) -> list[Finding]:
    snap = inp.snapshot
    model = inp.facts.resource_model
    if not inp.facts.both_models:
        return [cluster_finding(Status.PASS, f"GPU resource model: {model}", resource_model=str(model))]
    cps = sorted(name_of(c) for c in snap.clusterpolicies)
    gcs = sorted(name_of(g) for g in snap.gpu_clusters)
    said = [m for o in (*snap.clusterpolicies, *snap.gpu_clusters) if (m := _condition(o, "Error").get("message"))]
    return [cluster_finding(
        Status.FAIL, f"ClusterPolicy {', '.join(cps)} and GPUCluster {', '.join(gcs)} both exist: the operator "
        "reconciles neither (each controller refuses while the other CR exists)"
        + (f"; it says: {said[0]}" if said else ""),
        object="clusterpolicies.nvidia.com, gpuclusters.nvidia.com", observed={"clusterpolicies": cps,
                                                                               "gpuclusters": gcs},
        expected="one of them", operator_says=said)]


@check("OPR-008", Layer.OPERATOR, "GPUCluster is ready",
       hint="The GPUCluster controller writes status.state (ready/notReady) and the Ready/Error conditions: Ready "
            "with reason Reconciled when every state synced; Error with ReconcileFailed ('Error syncing state ...'), "
            "PrerequisiteNotMet (a ClusterPolicy exists) or OperandNotReady ('Waiting for operand pods to be "
            "ready'), a symptom the per-node checks (DPL-010) explain.",
       kubectl="kubectl get gpuclusters.nvidia.com -o jsonpath='{range .items[*]}{.metadata.name} {.status.state} "
               "{.status.conditions}{\"\\n\"}{end}'",
       detects="GPUCluster never reconciled, ReconcileFailed, PrerequisiteNotMet; OperandNotReady that no node's "
               "kubelet plugin explains",
       na_in=(ResourceModel.DEVICE_PLUGIN, ResourceModel.DRA_DRIVER),
       na_why="no GPUCluster; the ClusterPolicy is judged by OPR-003")
def gpucluster_ready(inp: CheckInput) -> list[Finding]:
    snap, settings = inp.snapshot, inp.settings
    gc = sorted(snap.gpu_clusters, key=lambda g: ((g.get("metadata") or {}).get("creationTimestamp", ""),
                                                  name_of(g)))[0]
    status = gc.get("status") if isinstance(gc.get("status"), dict) else {}
    state = str(status.get("state") or "")
    ready, error = _condition(gc, "Ready"), _condition(gc, "Error")
    ev: dict[str, Any] = {"object": f"gpucluster/{name_of(gc)}", "field": "status",
                          "status.state": state or "<unset>",
                          "Ready": {k: ready.get(k) for k in ("status", "reason", "message")},
                          "Error": {k: error.get(k) for k in ("status", "reason", "message")}}
    if state == "ready" and ready.get("status") == "True":
        return [cluster_finding(Status.PASS, f"GPUCluster {name_of(gc)} ready (Ready=True, reason "
                                f"{ready.get('reason') or '?'})", **ev)]
    if not state and not ready and not error:
        return [cluster_finding(Status.FAIL, f"GPUCluster {name_of(gc)} has no status: the operator has never "
                                "reconciled it (is a v26.7+ operator running?)", **ev)]
    reason, message = error.get("reason", ""), error.get("message", "")
    if reason == "OperandNotReady":
        return [_operand_not_ready(snap, settings, gc, ev)]
    text = f"GPUCluster {name_of(gc)} state={state or '<unset>'}, Error reason {reason or '?'}" + (
        f": {message}" if message else "")
    return [cluster_finding(Status.FAIL, text, **ev)]


def _operand_not_ready(snap: ClusterSnapshot, settings: Settings, gc: Obj, ev: dict[str, Any]) -> Finding:
    """OperandNotReady is the controller's summary of unavailable operand pods: a symptom where a node's kubelet
    plugin explains it (DPL-010 judges that node), the GPUCluster's own failure only where nothing does."""
    unavailable = {name_of(d): (d.get("status") or {}).get("numberUnavailable", 0) for d in snap.daemonsets
                   if name_of(d) in GPUCLUSTER_DAEMONSETS and (d.get("status") or {}).get("numberUnavailable")}
    plugin_down = [n for n in snap.gpu_node_names
                   if (p := snap.labelled_pod_on_node({"app": KUBELET_PLUGIN_APP}, n)) is None or not pod_ready(p)]
    ev = {**ev, "unavailable_daemonsets": unavailable, "kubelet_plugin_not_ready_on": plugin_down}
    head = f"GPUCluster {name_of(gc)} notReady (OperandNotReady: waiting for operand pods)"
    others = sorted(d for d in unavailable if d != KUBELET_PLUGIN_DAEMONSET)
    if plugin_down and not others:
        return Finding(Status.WARN, f"{head}: the DRA kubelet plugin is not Ready on {', '.join(plugin_down)} "
                       "(judged per node by DPL-010)", evidence=ev, blocking=False)
    if others:
        return Finding(Status.FAIL, f"{head}: DaemonSet(s) with unavailable pods: "
                       + ", ".join(f"{d} ({unavailable[d]})" for d in others), evidence=ev, blocking=False,
                       kubectl=f"kubectl -n {namespace(snap, settings)} get ds {' '.join(others)} -o wide")
    return Finding(Status.WARN, f"{head}, but no operand DaemonSet reports an unavailable pod now: a status "
                   "written before the pods became Ready", evidence=ev, blocking=False)


# ---- device-plugin layer: the DRA driver ---------------------------------------------------------------------
@check("DPL-010", Layer.DEVICE_PLUGIN, "DRA kubelet plugin pod Ready on the node",
       hint="The kubelet plugin publishes the node's GPUs as ResourceSlices and prepares claimed GPUs (container "
            "gpus). GPUCluster model: the operator's DaemonSet nvidia-dra-driver-kubelet-plugin, whose "
            "driver-validation init container waits for the NVIDIA driver (a pod stuck there is a driver "
            "problem). dra-driver model: the chart's DaemonSet nvidia-dra-driver-gpu-kubelet-plugin in the "
            "release namespace (pods labelled nvidia-dra-driver-gpu-component=kubelet-plugin), whose init-container "
            "waits for the driver root; the chart renders the gpus container only with resources.gpus.enabled=true "
            "(and gpuResourcesEnabledOverride=true).",
       kubectl="kubectl -n {ns} get pods -o wide -l app=nvidia-dra-driver-kubelet-plugin "
               "--field-selector spec.nodeName={node}",
       detects="DRA kubelet plugin pod missing, stuck in driver-validation (driver not ready) or crash-looping; "
               "WARN on restarts",
       rank=-1, na_in=DEVICE_PLUGIN_MODEL, na_why=NOT_DRA)
def kubelet_plugin_ready(inp: CheckInput) -> list[Finding]:
    snap, settings = inp.snapshot, inp.settings
    if inp.facts.resource_model is ResourceModel.DRA_DRIVER:
        return _chart_kubelet_plugin(inp)
    ns = namespace(snap, settings)

    def explain(p: PodProblem) -> str:
        if p.stage == "driver-validation":
            return ("the NVIDIA driver is not ready on this node (driver-validation waits for it: the host driver "
                    "or the NVIDIADriver CR's pod)")
        return "the kubelet plugin cannot start or register with kubelet (read the gpus container's log: NVML, CDI)"

    out = []
    for node in snap.gpu_node_names:
        gate = label_gate(snap, node, KUBELET_PLUGIN)
        if gate is not None:
            # k8s-driver-manager pauses the plugin's label across a driver reload (paused-for-*): a pause, which
            # holds the node back from the probe. LBL-001 records pauses in the ClusterPolicy models only.
            out.append(replace(gate, evidence={**gate.evidence, "transient": True})
                       if gate.status == Status.WARN else gate)
            continue
        pod = snap.labelled_pod_on_node({"app": KUBELET_PLUGIN_APP}, node)
        if pod is None:
            out.append(missing_pod_finding(snap, ns, node, KUBELET_PLUGIN, "DRA kubelet plugin"))
        elif not pod_ready(pod):
            out.append(problem_finding(inp, ns, node, pod, "DRA kubelet plugin",
                                       explain(pod_problem(inp, pod)), ""))
        else:
            out.append(restart_warn_or_pass(ns, node, pod, "DRA kubelet plugin"))
    return out


def _chart_kubelet_plugin(inp: CheckInput) -> list[Finding]:
    """The chart's kubelet plugin, read cluster-wide by its labels (reader.py): no deploy label gates it (the chart
    schedules it by NFD's pci-10de label), and its namespace is the release's."""
    snap = inp.snapshot
    by_node: dict[str, list[Obj]] = {}
    for p in snap.dra_plugin_pods:
        by_node.setdefault((p.get("spec") or {}).get("nodeName") or "", []).append(p)
    namespaces = sorted({str((p.get("metadata") or {}).get("namespace") or "") for p in snap.dra_plugin_pods})
    selector = KUBELET_PLUGIN_SELECTOR
    out = []
    for node in snap.gpu_node_names:
        pod = snap.pod_on_node(by_node.get(node, []), node)
        if pod is None:
            where = (f"the chart's pods run in namespace {', '.join(namespaces)} but none on this node"
                     if namespaces else f"no pod of the chart anywhere (is {CHART_KUBELET_PLUGIN_DAEMONSET} "
                     "installed, with resources.gpus.enabled=true?)")
            out.append(Finding(
                Status.FAIL, f"no DRA kubelet plugin pod ({selector}) on {node}: {where}", node=node,
                evidence={"object": f"DaemonSet/{CHART_KUBELET_PLUGIN_DAEMONSET}", "field": "pods on node",
                          "observed": "none", "expected": "1 Ready pod", "namespaces": namespaces},
                kubectl=f"kubectl get pods -A -o wide -l {selector} --field-selector spec.nodeName={node}"))
            continue
        ns = str((pod.get("metadata") or {}).get("namespace") or "")
        if not pod_ready(pod):
            out.append(problem_finding(inp, ns, node, pod, "DRA kubelet plugin",
                                       "the kubelet plugin cannot start or register with kubelet (read the gpus "
                                       "container's log: NVML, CDI, the driver root)", ""))
        else:
            out.append(restart_warn_or_pass(ns, node, pod, "DRA kubelet plugin"))
    return out


@check("DPL-011", Layer.DEVICE_PLUGIN, "GPU DeviceClass exists",
       hint="The operator creates DeviceClass gpu.nvidia.com (CEL: driver gpu.nvidia.com, type gpu), plus "
            "mig.nvidia.com and vfio.gpu.nvidia.com; a ResourceClaim names it to get a GPU. It needs the "
            "resource.k8s.io/v1 API (Kubernetes 1.34 or later).",
       kubectl="kubectl get deviceclasses -o wide",
       detects="DeviceClass gpu.nvidia.com missing (every claim for a GPU fails), or not selecting the driver's "
               "GPUs",
       na_in=DEVICE_PLUGIN_MODEL, na_why=NOT_DRA)
def gpu_device_class(inp: CheckInput) -> list[Finding]:
    snap = inp.snapshot
    dc = inp.facts.dra.device_class(GPU_DEVICE_CLASS)
    ev: dict[str, Any] = {"object": f"deviceclass/{GPU_DEVICE_CLASS}", "observed": "absent", "expected": "present",
                          "deviceclasses": sorted(name_of(d) for d in snap.device_classes)}
    if dc is None:
        where = "" if snap.device_classes else (
            f" (no DeviceClass at all: is resource.k8s.io/v1 served? Kubernetes {snap.kubernetes_version or '?'})")
        return [cluster_finding(Status.FAIL, f"DeviceClass {GPU_DEVICE_CLASS} does not exist: no ResourceClaim can "
                                f"ask for a GPU{where}", **ev)]
    spec = dc.get("spec") or {}
    cel = [((s or {}).get("cel") or {}).get("expression", "") for s in spec.get("selectors") or []]
    ev.update(observed="present", selectors=cel, extendedResourceName=spec.get("extendedResourceName"))
    if cel and not any(GPU_DEVICE_CLASS in e for e in cel):
        return [cluster_finding(Status.FAIL, f"DeviceClass {GPU_DEVICE_CLASS} selects no device of driver "
                                f"{GPU_DEVICE_CLASS} ({'; '.join(cel)}): claims of it match no GPU", **ev)]
    extended = f", extended resource {spec['extendedResourceName']}" if spec.get("extendedResourceName") else ""
    return [cluster_finding(Status.PASS, f"DeviceClass {GPU_DEVICE_CLASS} exists{extended}", **ev)]


def _gfd_int(labels: dict[str, str], key: str) -> int | None:
    try:
        return int(labels[key])
    except (KeyError, ValueError):
        return None


def _attribute_problems(gpus: list[Device], labels: dict[str, str]) -> tuple[list[str], list[str]]:
    """(failures, warnings) about the devices' uuid/productName/memory, against each other and GFD's labels."""
    fails, warns = [], []
    for attr, missing in (("uuid", [d.name for d in gpus if not d.uuid]),
                          ("productName", [d.name for d in gpus if not d.product]),
                          ("capacity memory", [d.name for d in gpus if d.type == "gpu" and d.memory is None])):
        if missing:
            fails.append(f"{', '.join(missing)} without {attr}")
    uuids = [d.uuid for d in gpus if d.uuid]
    dup = sorted({u for u in uuids if uuids.count(u) > 1})
    if dup:
        fails.append(f"the same uuid on several devices: {', '.join(dup)}")
    product = labels.get(GFD_PRODUCT)
    whole = [d for d in gpus if d.type == "gpu"]
    off = sorted({d.product for d in whole if d.product and product
                  and not product.startswith(d.product.replace(" ", "-"))})
    if off:
        warns.append(f"productName {', '.join(off)} but GFD says {GFD_PRODUCT}={product}")
    mib = _gfd_int(labels, GFD_MEMORY_MIB)
    mem_off = sorted({d.memory // 2**20 for d in whole if d.memory is not None and mib is not None
                      and abs(d.memory // 2**20 - mib) > 1})
    if mem_off:
        warns.append(f"capacity memory {', '.join(f'{m} MiB' for m in mem_off)} but GFD says "
                     f"{GFD_MEMORY_MIB}={mib}")
    return fails, warns


@check("DPL-012", Layer.DEVICE_PLUGIN, "ResourceSlices publish the node's GPUs",
       hint="The kubelet plugin publishes one pool per node (spec.pool.name = the node) of driver gpu.nvidia.com; "
            "each GPU is a device with attributes type, uuid, productName and capacity memory. A pool whose newest "
            "generation lacks slices (resourceSliceCount) is not allocatable. Fewer GPUs than GFD counts means "
            "the plugin skipped devices (NVML, unhealthy at start).",
       kubectl="kubectl get resourceslices --field-selector spec.nodeName={node},spec.driver=gpu.nvidia.com -o yaml",
       detects="no ResourceSlice of gpu.nvidia.com for the node, an incomplete pool, fewer GPUs than "
               "nvidia.com/gpu.count, devices without uuid/productName/memory",
       na_in=DEVICE_PLUGIN_MODEL, na_why=NOT_DRA)
def slices_publish_gpus(inp: CheckInput) -> list[Finding]:
    snap = inp.snapshot
    view = inp.facts.dra
    out = []
    for node in snap.gpu_node_names:
        ns_ = view.node(node)
        labels = node_labels(snap, node)
        expected = _gfd_int(labels, GFD_COUNT)
        gpus = ns_.gpus
        whole = ns_.whole_gpus
        ev: dict[str, Any] = {"object": f"ResourceSlices of {node}", "field": "spec.devices",
                              "slices": sorted(name_of(s) for s in ns_.slices),
                              "observed": [d.name for d in gpus],
                              "expected": f"{expected} GPU(s) ({GFD_COUNT})" if expected is not None else ">= 1 GPU"}

        def fail(msg: str, ev: dict[str, Any] = ev, node: str = node) -> Finding:
            # Without a Ready kubelet plugin nothing publishes the node's GPUs: DPL-010 is the cause; while its
            # deploy label is paused the slices are withdrawn on purpose (a warning).
            return explained_by_pause(snap, node, KUBELET_PLUGIN,
                                      Finding(Status.FAIL, msg, node=node, evidence=ev, explained_by=("DPL-010",)))

        if not ns_.slices and labels.get(KUBELET_PLUGIN_DEPLOY_LABEL) == "false":
            out.append(Finding(Status.NA, f"{node} opted out of the DRA driver ({KUBELET_PLUGIN_DEPLOY_LABEL}=false)",
                               node=node, evidence=ev))
            continue
        if not ns_.slices:
            out.append(fail(f"no ResourceSlice of driver gpu.nvidia.com for {node}: no GPU of this node can be "
                            "claimed"))
            continue
        if ns_.incomplete:
            out.append(fail(f"incomplete pool on {node}: {'; '.join(ns_.incomplete)} — the scheduler allocates "
                            "nothing from it"))
            continue
        if not gpus:
            out.append(fail(f"ResourceSlices of {node} list no GPU device (type gpu or mig)"))
            continue
        fails, warns = _attribute_problems(gpus, labels)
        has_mig = any(d.type == "mig" for d in gpus)
        if expected is not None and not has_mig and len(whole) != expected:
            fails.insert(0, f"{len(whole)} GPU device(s) published but GFD counts {GFD_COUNT}={expected}")
        if fails:
            out.append(fail(f"ResourceSlices of {node}: {'; '.join(fails)}"))
        elif warns:
            out.append(Finding(Status.WARN, f"ResourceSlices of {node}: {'; '.join(warns)}", node=node,
                               evidence=ev))
        else:
            basis = f", as {GFD_COUNT} says" if expected is not None and not has_mig else ""
            out.append(Finding(Status.PASS, f"{node} publishes {len(gpus)} GPU device(s){basis}", node=node,
                               evidence=ev))
    return out


@check("DPL-013", Layer.DEVICE_PLUGIN, "a GPU device is free to claim",
       hint="Every GPU device of the node is allocated to a ResourceClaim: busy, not broken. A new claim waits "
            "(FailedScheduling 'cannot allocate all claims') until one is released. adminAccess claims (the "
            "operator's nvidia-dra-validator) do not take a device.",
       kubectl="kubectl get resourceclaims -A -o wide",
       detects="WARN when every GPU device of the node is allocated, naming the claims",
       na_in=DEVICE_PLUGIN_MODEL, na_why=NOT_DRA)
def device_free(inp: CheckInput) -> list[Finding]:
    snap = inp.snapshot
    view = inp.facts.dra
    out = []
    for node in snap.gpu_node_names:
        gpus = view.node(node).gpus
        if not gpus:
            out.append(Finding(Status.NA, f"no GPU device published for {node} (see DPL-012)", node=node))
            continue
        held = {d.name: view.holders[d.key] for d in gpus if d.key in view.holders}
        ev = {"object": f"ResourceSlices of {node}", "field": "devices allocated (ResourceClaim status.allocation)",
              "observed": held, "expected": "at least one device free", "devices": [d.name for d in gpus]}
        if len(held) < len(gpus):
            out.append(Finding(Status.PASS, f"{len(gpus) - len(held)} of {len(gpus)} GPU device(s) free on {node}",
                               node=node, evidence=ev))
            continue
        claims = sorted({c for cs in held.values() for c in cs})
        out.append(Finding(Status.WARN, f"every GPU device of {node} is allocated ({len(gpus)}), to "
                           f"{', '.join(claims)}: busy, not broken", node=node, evidence=ev))
    return out


@check("DPL-014", Layer.DEVICE_PLUGIN, "one GPU allocator per node",
       hint="The device plugin and the DRA driver each hand out every GPU of the node, neither knowing of the "
            "other: a pod asking nvidia.com/gpu and a pod claiming gpu.nvidia.com can get the same GPU. Beside the "
            "DRA driver's chart, install the GPU Operator with the device plugin off (devicePlugin.enabled=false); "
            "in the GPUCluster model the operator deploys no device plugin.",
       kubectl="kubectl get nodes {node} -o jsonpath='{.status.allocatable}'; kubectl get resourceslices "
               "--field-selector spec.nodeName={node},spec.driver=gpu.nvidia.com",
       detects="the node's GPUs published as ResourceSlices of gpu.nvidia.com while the device plugin advertises "
               "nvidia.com/gpu there (or runs there): the same GPUs handed out twice",
       na_in=DEVICE_PLUGIN_MODEL, na_why=NOT_DRA)
def one_allocator(inp: CheckInput) -> list[Finding]:
    snap = inp.snapshot
    view = inp.facts.dra
    policy_on = bool(snap.clusterpolicies) and snap.policy_enabled("devicePlugin", ops.DEVICE_PLUGIN.default_enabled)
    out = []
    for node in snap.gpu_node_names:
        gpus = view.node(node).gpus
        n = snap.node_by_name.get(node) or {}
        alloc = (n.get("status") or {}).get("allocatable") or {}
        advertised = {k: v for k, v in alloc.items() if is_gpu_resource(k) and _positive(v)}
        dp_pod = snap.labelled_pod_on_node({"app": ops.DEVICE_PLUGIN.daemonset}, node)
        ev: dict[str, Any] = {"object": f"node/{node}", "field": "status.allocatable; ResourceSlices",
                              "device_plugin_resources": advertised, "dra_devices": [d.name for d in gpus],
                              "device_plugin_pod": name_of(dp_pod) if dp_pod else None,
                              "clusterpolicy_devicePlugin_enabled": policy_on if snap.clusterpolicies else None,
                              "expected": "one allocator: the DRA driver"}
        if not gpus:
            out.append(Finding(Status.NA, f"no GPU device published for {node} (see DPL-012)", node=node,
                               evidence=ev))
        elif advertised or dp_pod is not None:
            by = (", ".join(f"{k}={v}" for k, v in sorted(advertised.items())) if advertised
                  else f"its pod {name_of(dp_pod)} runs there")
            out.append(Finding(Status.FAIL, f"{node}: both the device plugin ({by}) and the DRA driver "
                               f"({len(gpus)} device(s) in ResourceSlices) hand out its GPUs: the same GPU can go "
                               "to two pods", node=node, evidence=ev))
        elif policy_on:
            out.append(Finding(Status.WARN, f"{node}: the ClusterPolicy enables the device plugin beside the DRA "
                               "driver; it advertises nothing here yet, but will hand out the same GPUs when its "
                               "pod runs", node=node, evidence=ev))
        else:
            out.append(Finding(Status.PASS, f"{node}: the DRA driver alone hands out its GPUs", node=node,
                               evidence=ev))
    return out


def _positive(value: Any) -> bool:
    try:
        return int(str(value)) > 0
    except (TypeError, ValueError):
        return False
