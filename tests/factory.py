"""Cluster data shaped like the real objects a GPU Operator install consists of, for unit tests of every layer.

`healthy_snapshot(...)` builds a conformant cluster for a given operator version and mode; the mutation helpers
below break exactly one thing the way a real cluster breaks (kubelet's container states, node resources,
labels, env). One builder per object kind; names, labels, init containers and env follow
../shared/docs/gpu-operator-facts.md (§1c, §2, §3, §5, §6).

    snap = healthy_snapshot("v26.3.3", driver="host")
    stuck_init(pod_for(snap, "nvidia-operator-validator", "gpu-node-1"), "toolkit-validation",
               restarts=12, snapshot=snap, log="nvidia-smi: not found")
"""

from __future__ import annotations

import hashlib
import uuid
from dataclasses import dataclass, replace
from typing import Any

from gpu_conformance import dra_chart, versions
from gpu_conformance import operands as ops
from gpu_conformance.cluster.podstate import pod_ready
from gpu_conformance.cluster.selectors import match_labels
from gpu_conformance.cluster.snapshot import GPU_PRESENT_LABEL, ClusterSnapshot, labels_of, name_of
from gpu_conformance.gpu_operator import clusterpolicy as policy
from gpu_conformance.gpu_operator import dra_driver, gpu_node, nfd, nvidiadriver
from gpu_conformance.gpu_operator import operand_specs as specs
from gpu_conformance.gpu_operator.cuda_validator import cuda_validator_pod
from gpu_conformance.gpu_operator.hardware import BY_PRODUCT, GpuHardware, cuda_version_for_driver
from gpu_conformance.gpu_operator.operand_daemonsets import RenderInput, operand_daemonsets
from gpu_conformance.gpu_operator.operator_deployment import operator_deployment
from gpu_conformance.gpu_operator.releases import ComponentVersions, Images, components_for, images

Obj = dict[str, Any]

T0 = "2026-10-01T09:00:00Z"   # objects created
T1 = "2026-10-01T09:05:00Z"   # containers started
T2 = "2026-10-01T09:06:00Z"   # init containers / cuda validator finished
T3 = "2026-10-01T09:30:00Z"   # later: a runtime refusal after everything was up (sandbox_refused's events)
HOST_DRIVER_VERSION = "580.95.05"
# The factory's nodes run Ubuntu 22.04 on this kernel: the operator appends the OS to the driver image tag.
NODE_OS_ID, NODE_OS_VERSION, NODE_KERNEL = "ubuntu", "22.04", "5.15.0-122-generic"
NODE_OS_TAG = NODE_OS_ID + NODE_OS_VERSION
MIG_PROFILE = "1g.5gb"       # the mixed-strategy profile the factory uses: 7 per A100-40GB
MIG_PER_GPU = 7
GFD_TIMESTAMP = 1790845560


# ---- small utilities -------------------------------------------------------------------------------
def _uid(*parts: str) -> str:
    return str(uuid.uuid5(uuid.NAMESPACE_URL, "/".join(parts)))


CLUSTERPOLICY_UID = _uid("clusterpolicy", "cluster-policy")
NVIDIADRIVER_UID = _uid("nvidiadriver", "default")
# The DaemonSet the NVIDIADriver `default` gets (driver="crd").
DRIVER_CRD_DS = nvidiadriver.app_name("gpu", NODE_OS_TAG, NVIDIADRIVER_UID)


def _suffix(*parts: str, n: int = 5) -> str:
    alphabet = "bcdfghjklmnpqrstvwxz2456789"
    h = int(hashlib.sha256("/".join(parts).encode()).hexdigest(), 16)
    out = ""
    for _ in range(n):
        h, r = divmod(h, len(alphabet))
        out += alphabet[r]
    return out


def _env(pairs: dict[str, str]) -> list[Obj]:
    return [{"name": k, "value": v} for k, v in pairs.items()]


def _container(name: str, image: str, env: dict[str, str] | list[Obj] | None = None, **extra: Any) -> Obj:
    c: Obj = {"name": name, "image": image, "imagePullPolicy": "IfNotPresent"}
    if env:
        c["env"] = _env(env) if isinstance(env, dict) else env
    c.update(extra)
    return c


def _owner(kind: str, name: str, uid: str, api: str = "apps/v1") -> Obj:
    return {"apiVersion": api, "kind": kind, "name": name, "uid": uid, "controller": True,
            "blockOwnerDeletion": True}


@dataclass
class _Ctx:
    version: str
    ns: str
    cdi: bool
    nri: bool
    driver: str
    mig: str
    replicas: int
    rename_shared: bool
    gfd: bool
    device_plugin: bool
    toolkit: bool
    product: str
    gpus: int

    @property
    def v(self) -> tuple[int, int, int]:
        return versions.parse_or_newest(self.version)

    @property
    def comp(self) -> ComponentVersions:
        return components_for(self.version)

    @property
    def images(self) -> Images:
        return images(self.comp, NODE_OS_TAG)

    @property
    def mig_capable(self) -> bool:
        return self.mig == "mixed" or any(p in self.product for p in ("A100", "A30", "H100", "H200"))

    @property
    def hardware(self) -> GpuHardware:
        """The node's GPUs: the catalogue's product (an unknown one with placeholder figures), ctx.gpus of them,
        MIG-partitioned MIG_PER_GPU x MIG_PROFILE under the mixed strategy."""
        hw = BY_PRODUCT.get(self.product) or GpuHardware(self.product, self.product.replace("-", " "), 1, 16384,
                                                         "undefined", 0, 0, self.mig_capable, "Standard-PC")
        if self.mig == "mixed":
            hw = replace(hw, mig_layout=((MIG_PROFILE, MIG_PER_GPU),), mig_config=f"all-{MIG_PROFILE}")
        return replace(hw, count=self.gpus, mig_capable=self.mig_capable)

    @property
    def driver_version(self) -> str:
        return self.comp.driver if self.driver in ("operator", "crd") else HOST_DRIVER_VERSION

    @property
    def cp_uid(self) -> str:
        return CLUSTERPOLICY_UID

    @property
    def runtime_class(self) -> str | None:
        return None if self.nri else "nvidia"

    @property
    def validator_image(self) -> str:
        return self.images.validator

    @property
    def validator_inits(self) -> tuple[str, ...]:
        # Every stage the release's validator asset has: nvidia-fs and gdrcopy validation stay in (as with
        # gds/gdrcopy enabled) so the driver-layer tests have those stages to break.
        return specs.validator_init_containers(self.version, self.device_plugin, gds_enabled=True,
                                               gdrcopy_enabled=True)

    @property
    def sharing_config(self) -> str | None:
        return "time-slicing-config" if self.replicas > 1 else None


# ---- container statuses as kubelet reports them --------------------------------------------------------
def _cid(pod: str, c: str) -> str:
    return "containerd://" + hashlib.sha256(f"{pod}/{c}".encode()).hexdigest()


def _st_completed(pod: str, c: Obj, init: bool) -> Obj:
    return {"name": c["name"], "image": c["image"], "imageID": c["image"] + "@sha256:" + "0" * 64,
            "containerID": _cid(pod, c["name"]), "ready": init, "started": False, "restartCount": 0,
            "state": {"terminated": {"exitCode": 0, "reason": "Completed", "startedAt": T1, "finishedAt": T2,
                                     "containerID": _cid(pod, c["name"])}},
            "lastState": {}}


def _st_running(pod: str, c: Obj) -> Obj:
    return {"name": c["name"], "image": c["image"], "imageID": c["image"] + "@sha256:" + "0" * 64,
            "containerID": _cid(pod, c["name"]), "ready": True, "started": True, "restartCount": 0,
            "state": {"running": {"startedAt": T2}}, "lastState": {}}


def _conditions(initialized: bool, ready: bool, ready_reason: str = "ContainersNotReady",
                init_message: str = "", completed: bool = False) -> list[Obj]:
    def cond(t: str, ok: bool, reason: str = "", message: str = "") -> Obj:
        c: Obj = {"type": t, "status": "True" if ok else "False", "lastProbeTime": None,
                  "lastTransitionTime": T2}
        if not ok and reason:
            c["reason"] = reason
        if message:
            c["message"] = message
        return c
    if completed:
        return [cond("PodReadyToStartContainers", False), cond("Initialized", True),
                cond("Ready", False, "PodCompleted"), cond("ContainersReady", False, "PodCompleted"),
                cond("PodScheduled", True)]
    return [cond("PodReadyToStartContainers", True),
            cond("Initialized", initialized, "ContainersNotInitialized", init_message),
            cond("Ready", ready, ready_reason), cond("ContainersReady", ready, ready_reason),
            cond("PodScheduled", True)]


# ---- pods ---------------------------------------------------------------------------------------------
def _pod(ctx: _Ctx, name: str, node: str, labels: dict[str, str], owner: Obj, template: Obj, *,
         succeeded: bool = False, annotations: dict[str, str] | None = None, generate_name: str = "") -> Obj:
    """A pod of `template` (a pod spec) bound to `node`, with the status kubelet reports once it ran."""
    meta: Obj = {"name": name, "generateName": generate_name or name.rsplit("-", 1)[0] + "-",
                 "namespace": ctx.ns, "uid": _uid("pod", ctx.ns, name), "creationTimestamp": T0,
                 "labels": dict(labels), "ownerReferences": [owner]}
    if annotations:
        meta["annotations"] = annotations
    inits = [dict(c) for c in template.get("initContainers", [])]
    containers = [dict(c) for c in template["containers"]]
    spec: Obj = {**template, "nodeName": node, "containers": containers,
                 "restartPolicy": template.get("restartPolicy", "OnFailure" if succeeded else "Always")}
    spec.pop("initContainers", None)
    if inits:
        spec["initContainers"] = inits
    status: Obj = {
        "phase": "Succeeded" if succeeded else "Running",
        "conditions": _conditions(True, not succeeded, completed=succeeded),
        "hostIP": "10.0.0.10", "podIP": "10.244.1." + str(int(_suffix(name, n=2), 36) % 250 + 2),
        "startTime": T1, "qosClass": "BestEffort",
        "containerStatuses": [_st_completed(name, c, False) if succeeded else _st_running(name, c)
                              for c in containers],
    }
    if inits:
        status["initContainerStatuses"] = [_st_completed(name, c, True) for c in inits]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec, "status": status}


def _ds_pod(ctx: _Ctx, ds: Obj, node: str) -> Obj:
    tmpl = ds["spec"]["template"]
    name = f"{name_of(ds)}-{_suffix(name_of(ds), node)}"
    labels = {**tmpl["metadata"]["labels"], "controller-revision-hash": _suffix(name_of(ds), n=10),
              "pod-template-generation": "1"}
    return _pod(ctx, name, node, labels, _owner("DaemonSet", name_of(ds), ds["metadata"]["uid"]), tmpl["spec"],
                annotations=tmpl["metadata"].get("annotations"), generate_name=name_of(ds) + "-")


def _cuda_validator_pod(ctx: _Ctx, node: str) -> Obj:
    name = f"{ops.CUDA_VALIDATOR_APP}-{_suffix('cuda', node)}"
    pod = cuda_validator_pod(ctx.validator_image, ctx.ns, node, ctx.runtime_class, name=name)
    meta = pod["metadata"]
    return _pod(ctx, name, node, meta["labels"], _cp_owner(ctx), pod["spec"], succeeded=True,
                generate_name=ops.CUDA_VALIDATOR_APP + "-", annotations=meta["annotations"])


# ---- nodes --------------------------------------------------------------------------------------------
def _gpu_resources(ctx: _Ctx) -> dict[str, str]:
    return gpu_node.device_plugin_resources(ctx.hardware, ctx.mig, max(ctx.replicas, 1),
                                            rename_shared=ctx.rename_shared)


def _gfd_labels(ctx: _Ctx) -> dict[str, str]:
    return gpu_node.gfd_labels(ctx.hardware, ctx.driver_version, ctx.v, ctx.mig, max(ctx.replicas, 1),
                               GFD_TIMESTAMP, rename_shared=ctx.rename_shared)


def _node(ctx: _Ctx, name: str, gpu: bool) -> Obj:
    labels = {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
              "beta.kubernetes.io/os": "linux", "beta.kubernetes.io/arch": "amd64",
              **nfd.node_labels(NODE_KERNEL, NODE_OS_ID, NODE_OS_VERSION, gpu),
              "feature.node.kubernetes.io/cpu-model.vendor_id": "Intel"}
    capacity = {"cpu": "16", "memory": "65842516Ki", "pods": "110", "ephemeral-storage": "203056560Ki",
                "hugepages-2Mi": "0"}
    if gpu:
        labels.update(gpu_node.operator_node_labels(ctx.v, ctx.hardware, mig_manager=True,
                                                    driver_pre_installed=ctx.driver == "pre-installed",
                                                    driver_pods=ctx.driver in ("operator", "crd")))
        if ctx.gfd:
            labels.update(_gfd_labels(ctx))
        labels.update(gpu_node.mig_manager_labels(ctx.v, ctx.hardware, True))
        if ctx.device_plugin:
            capacity.update(_gpu_resources(ctx))
    allocatable = {**capacity, "cpu": "15800m", "memory": "63643476Ki"}
    return {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "uid": _uid("node", name), "creationTimestamp": T0, "labels": labels,
                     "annotations": {"nfd.node.kubernetes.io/feature-labels": "pci-10de.present" if gpu else "",
                                     "node.alpha.kubernetes.io/ttl": "0"}},
        "spec": {"podCIDR": "10.244.1.0/24"},
        "status": {
            "capacity": capacity, "allocatable": allocatable,
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                            "message": "kubelet is posting ready status", "lastTransitionTime": T0}],
            "nodeInfo": {"kubeletVersion": "v1.33.4", "containerRuntimeVersion": "containerd://2.2.1",
                         "kernelVersion": NODE_KERNEL, "osImage": "Ubuntu 22.04.5 LTS",
                         "operatingSystem": "linux", "architecture": "amd64"},
        },
    }


# ---- ClusterPolicy, NVIDIADriver, RuntimeClasses ---------------------------------------------------------
def _cluster_policy(ctx: _Ctx) -> Obj:
    off = {section for section, enabled in (("driver", ctx.driver != "host"), ("toolkit", ctx.toolkit),
                                            ("devicePlugin", ctx.device_plugin), ("gfd", ctx.gfd)) if not enabled}
    spec = policy.clusterpolicy_spec(ctx.comp, policy.PolicySwitches(
        cdi=ctx.cdi, nri=ctx.nri, mig_strategy=ctx.mig, on=policy.CHART_DEFAULT_ON - off,
        driver_crd=ctx.driver == "crd", sharing_config=ctx.sharing_config))
    return {
        "apiVersion": "nvidia.com/v1", "kind": "ClusterPolicy",
        "metadata": {"name": "cluster-policy", "uid": ctx.cp_uid, "creationTimestamp": T0, "generation": 1,
                     "labels": policy.chart_labels(ctx.comp.operator)},
        "spec": spec,
        "status": policy.ready_status(ctx.ns, ctx.v, T2),
    }


def _nvidia_driver_cr(ctx: _Ctx) -> Obj:
    return {"apiVersion": nvidiadriver.API_VERSION, "kind": nvidiadriver.KIND,
            "metadata": {"name": "default", "uid": NVIDIADRIVER_UID, "creationTimestamp": T0},
            "spec": nvidiadriver.cr_spec(ctx.comp.driver),
            "status": {"state": "ready", "namespace": ctx.ns,
                       "conditions": [{"type": "Ready", "status": "True", "reason": "Reconciled"}]}}


def _runtimeclasses(ctx: _Ctx) -> list[Obj]:
    return [{"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass", "handler": n,
             "metadata": {"name": n, "uid": _uid("runtimeclass", n), "creationTimestamp": T0,
                          "labels": {"app.kubernetes.io/component": "gpu-operator"},
                          "ownerReferences": [_cp_owner(ctx)]}}
            for n in specs.runtime_class_names(ctx.cdi, ctx.nri)]


# ---- DaemonSets and Deployments as the API server serves them ---------------------------------------------
def _cp_owner(ctx: _Ctx) -> Obj:
    return policy.owner_reference(ctx.cp_uid)


def _served_daemonset(ctx: _Ctx, ds: Obj) -> Obj:
    """A rendered DaemonSet as the API server serves it: uid, timestamps, generation, the defaults it fills in."""
    meta = ds["metadata"]
    meta.update(uid=_uid("ds", ctx.ns, meta["name"]), generation=1, creationTimestamp=T0)
    meta["annotations"] = {**meta.get("annotations", {}), "deprecated.daemonset.template.generation": "1"}
    spec = ds["spec"]
    strategy = spec.setdefault("updateStrategy", {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1}})
    if strategy["type"] == "RollingUpdate":
        strategy["rollingUpdate"].setdefault("maxSurge", 0)
    spec["revisionHistoryLimit"] = 10
    ds["status"] = {}
    return ds


def _operand_daemonsets(ctx: _Ctx) -> list[Obj]:
    """What the operator renders from the factory's ClusterPolicy (the install model), as served. The validator
    keeps every stage its release's asset has (as with gds and gdrcopy enabled), so driver-layer tests have those
    stages to break; driver="crd" adds the NVIDIADriver's DaemonSet."""
    spec = _cluster_policy(ctx)["spec"]
    out = operand_daemonsets(RenderInput(ctx.comp, spec, NODE_OS_TAG), ctx.ns, ctx.cp_uid)
    every_stage = {**spec, "gds": {**spec["gds"], "enabled": True}, "gdrcopy": {**spec["gdrcopy"], "enabled": True}}
    validator = next(d for d in out if name_of(d) == ops.VALIDATOR.daemonset)
    validator["spec"]["template"]["spec"]["initContainers"] = _rendered(ctx, every_stage, ops.VALIDATOR)[
        "spec"]["template"]["spec"]["initContainers"]
    if ctx.driver == "crd":
        # The ClusterPolicy's driver template, which the NVIDIADriver renders under its own name.
        cp_driver = _rendered(ctx, {**spec, "driver": {**spec["driver"], "useNvidiaDriverCRD": False}}, ops.DRIVER)
        out.insert(0, nvidiadriver.driver_daemonset(cp_driver, ctx.v, "default", NVIDIADRIVER_UID, NODE_OS_TAG))
    return [_served_daemonset(ctx, d) for d in out]


def _rendered(ctx: _Ctx, spec: Obj, operand: ops.Operand) -> Obj:
    """The operand's DaemonSet as the operator renders it from ClusterPolicy `spec`."""
    return next(d for d in operand_daemonsets(RenderInput(ctx.comp, spec, NODE_OS_TAG), ctx.ns)
                if name_of(d) == operand.daemonset)


def _deployment(ctx: _Ctx, dep: Obj, node: str) -> tuple[Obj, Obj]:
    """A rendered Deployment as served, all replicas available, and its one pod on `node`."""
    name = name_of(dep)
    rs_hash = _suffix(name, "rs", n=10)
    dep["metadata"].update(uid=_uid("deploy", ctx.ns, name), generation=1, creationTimestamp=T0)
    dep["status"] = {"observedGeneration": 1, "replicas": 1, "updatedReplicas": 1, "readyReplicas": 1,
                     "availableReplicas": 1, "conditions": [
                         {"type": "Available", "status": "True", "reason": "MinimumReplicasAvailable"},
                         {"type": "Progressing", "status": "True", "reason": "NewReplicaSetAvailable"}]}
    tmpl = dep["spec"]["template"]
    pod = _pod(ctx, f"{name}-{rs_hash}-{_suffix(name, node)}", node,
               {**tmpl["metadata"]["labels"], "pod-template-hash": rs_hash},
               _owner("ReplicaSet", f"{name}-{rs_hash}", _uid("rs", ctx.ns, name)), tmpl["spec"],
               generate_name=f"{name}-{rs_hash}-")
    return dep, pod


def _operator(ctx: _Ctx, node: str) -> tuple[Obj, Obj]:
    return _deployment(ctx, operator_deployment(ctx.comp.operator, ctx.v, ctx.images, ctx.ns), node)


def _nfd(ctx: _Ctx, nodes: list[str], control_node: str) -> tuple[list[Obj], list[Obj], list[Obj]]:
    """(deployments, daemonsets, pods) of the NFD sub-chart with release `gpu-operator`."""
    deps, daemonsets, pods = [], [], []
    for obj in nfd.chart_objects(ctx.comp.nfd, ctx.images.nfd, ctx.ns):
        if obj["kind"] == "Deployment":
            d, p = _deployment(ctx, obj, control_node)
            deps.append(d)
            pods.append(p)
        else:
            daemonsets.append(_served_daemonset(ctx, obj))
    pods += [_ds_pod(ctx, ds, n) for ds in daemonsets for n in nodes]
    return deps, daemonsets, pods


# ---- the public builder ---------------------------------------------------------------------------------
def healthy_snapshot(version: str = "v26.3.3", gpu_nodes: int = 3, cpu_nodes: int = 1, driver: str = "operator",
                     cdi: bool | None = None, mig: str = "single", time_slicing_replicas: int = 0,
                     namespace: str = "gpu-operator", *, nri: bool = False, rename_shared: bool = False,
                     gfd: bool = True, device_plugin: bool = True, toolkit: bool = True,
                     gpu_product: str | None = None, gpus_per_node: int = 1) -> ClusterSnapshot:
    """A conformant cluster: every layer passes.

    driver: "operator" (driver DaemonSet pod per node), "host" (driver.enabled=false), "pre-installed"
    (driver.enabled=true but nodes labelled gpu.deploy.driver=pre-installed, so no driver pod) or "crd"
    (useNvidiaDriverCRD with NVIDIADriver `default`). cdi defaults to on for v25.10+, off before.
    mig: "none" | "single" | "mixed" (mixed uses an A100 advertised as nvidia.com/mig-1g.5gb, 7 per GPU).
    time_slicing_replicas > 1 multiplies nvidia.com/gpu (or moves it to nvidia.com/gpu.shared with rename_shared).
    nri: v26.3+ NRI plugin mode (CDI on, no RuntimeClasses, no runtimeClassName on operands).
    """
    if driver not in ("operator", "host", "pre-installed", "crd"):
        raise ValueError(f"driver must be operator|host|pre-installed|crd, not {driver!r}")
    if mig not in ("none", "single", "mixed"):
        raise ValueError(f"mig must be none|single|mixed, not {mig!r}")
    if cdi is None:
        cdi = bool(versions.since(versions.CDI_DEFAULT_ON, versions.parse_or_newest(version)))
    cdi = cdi or nri
    product = gpu_product or ("NVIDIA-A100-SXM4-40GB" if mig == "mixed" else "Tesla-T4")
    ctx = _Ctx(version, namespace, cdi, nri, driver, mig, time_slicing_replicas, rename_shared, gfd,
               device_plugin, toolkit, product, gpus_per_node)

    gpu_names = [f"gpu-node-{i}" for i in range(1, gpu_nodes + 1)]
    cpu_names = [f"cpu-node-{i}" for i in range(1, cpu_nodes + 1)]
    nodes = [_node(ctx, n, True) for n in gpu_names] + [_node(ctx, n, False) for n in cpu_names]
    control = (cpu_names or gpu_names or ["cpu-node-1"])[0]

    op_dep, op_pod = _operator(ctx, control)
    nfd_deps, nfd_ds, nfd_pods = _nfd(ctx, [name_of(n) for n in nodes], control)
    daemonsets = _operand_daemonsets(ctx)
    pods: list[Obj] = []
    by_name = {name_of(n): n for n in nodes}
    for ds in daemonsets:
        selector = ds["spec"]["template"]["spec"]["nodeSelector"]
        pods += [_ds_pod(ctx, ds, n) for n in gpu_names if match_labels(selector, labels_of(by_name[n]))]
    pods += [_cuda_validator_pod(ctx, n) for n in gpu_names
             if by_name[n]["metadata"]["labels"].get(ops.VALIDATOR.deploy_label) == "true"]

    snap = ClusterSnapshot(
        nodes=nodes,
        pods=[op_pod] + nfd_pods + pods,
        daemonsets=nfd_ds + daemonsets,
        deployments=[op_dep] + nfd_deps,
        events=[],
        operator_pods=[op_pod],
        nfd_pods=nfd_pods,
        clusterpolicies=[_cluster_policy(ctx)],
        nvidiadrivers=[_nvidia_driver_cr(ctx)] if driver == "crd" else [],
        runtimeclasses=_runtimeclasses(ctx),
        crds={ops.CLUSTERPOLICY_CRD, ops.NVIDIADRIVER_CRD},
        logs={},
        operator_namespace=namespace,
        server="https://10.0.0.1:6443",
        context="test",
        kubernetes_version="v1.33.4",
        requests=14,
    )
    return refresh(snap)


# ---- keeping derived state consistent ------------------------------------------------------------------
_CACHED = ("active_clusterpolicy", "node_by_name", "gpu_nodes", "gpu_node_names", "_pods_by_owner_uid",
           "pods_by_node", "runtimeclass_names", "excluded_gpu_nodes", "_gpu_evidence_nodes",
           "_events_by_object")


def refresh(snapshot: ClusterSnapshot) -> ClusterSnapshot:
    """Forget the snapshot's cached lookups and recompute DaemonSet/Deployment status from the pods.

    Call after adding/removing objects or changing node labels (helpers taking `snapshot` do it themselves).
    """
    for attr in _CACHED:
        snapshot.__dict__.pop(attr, None)
    for ds in snapshot.daemonsets:
        selector = ds["spec"]["template"]["spec"].get("nodeSelector") or {}
        targets = {name_of(n) for n in snapshot.nodes if match_labels(selector, labels_of(n))}
        pods = [p for p in snapshot.pods_of(ds) if not p["metadata"].get("deletionTimestamp")]
        scheduled = [p for p in pods if p["spec"].get("nodeName") in targets]
        ready = sum(1 for p in scheduled if pod_ready(p))
        status = {"currentNumberScheduled": len(scheduled), "desiredNumberScheduled": len(targets),
                  "numberMisscheduled": len(pods) - len(scheduled), "numberReady": ready,
                  "numberAvailable": ready, "updatedNumberScheduled": len(scheduled),
                  "observedGeneration": ds["metadata"].get("generation", 1)}
        if len(targets) - ready > 0:
            status["numberUnavailable"] = len(targets) - ready
        ds["status"] = status
    for dep in snapshot.deployments:
        sel = dep["spec"]["selector"]["matchLabels"]
        ready = sum(1 for p in snapshot.pods_with_labels(sel) if pod_ready(p))
        dep["status"].update({"readyReplicas": ready, "availableReplicas": ready})
        if ready == 0:
            dep["status"].pop("readyReplicas")
            dep["status"].pop("availableReplicas")
    return snapshot


# ---- lookups --------------------------------------------------------------------------------------------
def node(snapshot: ClusterSnapshot, name: str) -> Obj:
    for n in snapshot.nodes:
        if name_of(n) == name:
            return n
    raise LookupError(f"no node {name!r} in the snapshot")


def pod_for(snapshot: ClusterSnapshot, app: str, node_name: str) -> Obj:
    """The pod with label app=<app> on the node (app is the DaemonSet name, or nvidia-cuda-validator)."""
    for p in snapshot.pods:
        if labels_of(p).get("app") == app and p["spec"].get("nodeName") == node_name:
            return p
    raise LookupError(f"no pod app={app} on {node_name}")


def daemonset(snapshot: ClusterSnapshot, name: str) -> Obj:
    ds = snapshot.daemonset(name)
    if ds is None:
        raise LookupError(f"no DaemonSet {name}")
    return ds


# ---- faults: pods -----------------------------------------------------------------------------------------
def _find_status(pod: Obj, key: str, container: str) -> tuple[int, Obj]:
    for i, cs in enumerate(pod["status"].get(key) or []):
        if cs["name"] == container:
            return i, cs
    raise LookupError(f"pod {name_of(pod)} has no {key} entry for {container!r}")


def _break_state(pod: Obj, cs: Obj, reason: str, restarts: int, exit_code: int, message: str) -> None:
    meta = pod["metadata"]
    pod_ref = f"{meta['name']}_{meta.get('namespace', '')}({meta.get('uid', '')})"
    cs.update({"ready": False, "started": reason == "Running", "restartCount": restarts})
    last = {"terminated": {"exitCode": exit_code, "reason": "Error", "startedAt": T1, "finishedAt": T2,
                           "containerID": cs.get("containerID", "")}} if restarts else {}
    if message and last:
        last["terminated"]["message"] = message
    cs["lastState"] = last
    if reason == "Running":
        cs["state"] = {"running": {"startedAt": T2}}
    elif reason in ("Error", "OOMKilled", "ContainerCannotRun", "StartError"):
        cs["state"] = {"terminated": {"exitCode": exit_code, "reason": reason, "startedAt": T1, "finishedAt": T2,
                                      "containerID": cs.get("containerID", ""), **({"message": message}
                                                                                    if message else {})}}
    else:
        waiting: Obj = {"reason": reason}
        if reason == "CrashLoopBackOff":
            waiting["message"] = f"back-off 5m0s restarting failed container={cs['name']} pod={pod_ref}"
        elif message:
            waiting["message"] = message
        cs["state"] = {"waiting": waiting}


def _set_conditions(pod: Obj, initialized: bool, ready: bool, not_init: list[str] | None = None) -> None:
    msg = f"containers with incomplete status: [{' '.join(not_init)}]" if not_init else ""
    pod["status"]["conditions"] = _conditions(initialized, ready, init_message=msg)


def _after(snapshot: ClusterSnapshot | None, pod: Obj, container: str, log: str | None) -> None:
    if snapshot is not None:
        if log is not None:
            snapshot.logs[(name_of(pod), container)] = log
        refresh(snapshot)


def stuck_init(pod: Obj, container: str, reason: str = "CrashLoopBackOff", restarts: int = 5, *,
               exit_code: int = 1, message: str = "", snapshot: ClusterSnapshot | None = None,
               log: str | None = None) -> Obj:
    """Make the pod stop at init container `container`, the way kubelet reports it.

    reason: a waiting reason (CrashLoopBackOff, ImagePullBackOff, ErrImagePull, CreateContainerConfigError),
    a termination reason (Error, OOMKilled) or "Running" (an init container that loops, e.g. the device
    plugin's toolkit-validation waiting for toolkit-ready). Later init and main containers wait in
    PodInitializing, the pod is Pending and not Ready. With `snapshot`, `log` is stored as that container's
    last log lines and DaemonSet status is recomputed.
    """
    idx, cs = _find_status(pod, "initContainerStatuses", container)
    _break_state(pod, cs, reason, restarts, exit_code, message)
    later = pod["status"]["initContainerStatuses"][idx + 1:]
    for other in later:
        other.update({"ready": False, "started": False, "restartCount": 0, "lastState": {},
                      "state": {"waiting": {"reason": "PodInitializing"}}})
        other.pop("containerID", None)
    for other in pod["status"].get("containerStatuses") or []:
        other.update({"ready": False, "started": False, "restartCount": 0, "lastState": {},
                      "state": {"waiting": {"reason": "PodInitializing"}}})
        other.pop("containerID", None)
    pod["status"]["phase"] = "Pending"
    _set_conditions(pod, False, False, [container] + [c["name"] for c in later])
    _after(snapshot, pod, container, log)
    return pod


def crash_container(pod: Obj, container: str, reason: str = "CrashLoopBackOff", restarts: int = 5, *,
                    exit_code: int = 1, message: str = "", snapshot: ClusterSnapshot | None = None,
                    log: str | None = None) -> Obj:
    """A main container failing after init completed (pod Running, not Ready)."""
    _, cs = _find_status(pod, "containerStatuses", container)
    _break_state(pod, cs, reason, restarts, exit_code, message)
    pod["status"]["phase"] = "Running"
    _set_conditions(pod, True, False)
    _after(snapshot, pod, container, log)
    return pod


def set_restarts(pod: Obj, container: str, restarts: int) -> Obj:
    """A healthy container that has restarted `restarts` times (lastState terminated Error)."""
    for key in ("containerStatuses", "initContainerStatuses"):
        for cs in pod["status"].get(key) or []:
            if cs["name"] == container:
                cs["restartCount"] = restarts
                cs["lastState"] = {"terminated": {"exitCode": 1, "reason": "Error", "startedAt": T0,
                                                  "finishedAt": T1}} if restarts else {}
                return pod
    raise LookupError(f"pod {name_of(pod)} has no container {container!r}")


def fail_pod(pod: Obj, container: str, exit_code: int = 1, *, snapshot: ClusterSnapshot | None = None,
             log: str | None = None) -> Obj:
    """A run-to-completion pod (nvidia-cuda-validator) ended phase Failed, `container` terminated Error."""
    key = "initContainerStatuses" if any(c["name"] == container for c in pod["status"].get(
        "initContainerStatuses") or []) else "containerStatuses"
    _, cs = _find_status(pod, key, container)
    _break_state(pod, cs, "Error", 0, exit_code, "")
    if key == "initContainerStatuses":
        for other in pod["status"].get("containerStatuses") or []:
            other.update({"ready": False, "started": False, "state": {"waiting": {"reason": "PodInitializing"}}})
    pod["status"]["phase"] = "Failed"
    pod["status"]["conditions"] = _conditions(key != "initContainerStatuses", False, "PodFailed")
    _after(snapshot, pod, container, log)
    return pod


def set_log(snapshot: ClusterSnapshot, pod: Obj, container: str, text: str) -> None:
    snapshot.logs[(name_of(pod), container)] = text


def remove_pods(snapshot: ClusterSnapshot, app: str, node_name: str | None = None) -> list[Obj]:
    """Delete the pods labelled app=<app> (on one node, or everywhere); returns what was removed."""
    gone = [p for p in snapshot.pods if labels_of(p).get("app") == app
            and (node_name is None or p["spec"].get("nodeName") == node_name)]
    snapshot.pods = [p for p in snapshot.pods if p not in gone]
    snapshot.operator_pods = [p for p in snapshot.operator_pods if p not in gone]
    snapshot.nfd_pods = [p for p in snapshot.nfd_pods if p not in gone]
    refresh(snapshot)
    return gone


def remove_daemonset(snapshot: ClusterSnapshot, name: str, with_pods: bool = True) -> None:
    ds = daemonset(snapshot, name)
    snapshot.daemonsets = [d for d in snapshot.daemonsets if d is not ds]
    if with_pods:
        app = ds["spec"]["template"]["metadata"]["labels"]["app"]
        remove_pods(snapshot, app)
    refresh(snapshot)


# ---- faults: nodes, policy, DaemonSet env, cluster objects ---------------------------------------------
def set_node_resource(snapshot: ClusterSnapshot, node_name: str, capacity: int | str | None,
                      allocatable: int | str | None, resource: str = "nvidia.com/gpu") -> Obj:
    """Set (None = remove) a node's extended resource in status.capacity / status.allocatable."""
    n = node(snapshot, node_name)
    for key, value in (("capacity", capacity), ("allocatable", allocatable)):
        if value is None:
            n["status"][key].pop(resource, None)
        else:
            n["status"][key][resource] = str(value)
    return n


def drop_label(snapshot: ClusterSnapshot, node_name: str, key: str) -> Obj:
    n = node(snapshot, node_name)
    n["metadata"]["labels"].pop(key, None)
    refresh(snapshot)
    return n


def set_label(snapshot: ClusterSnapshot, node_name: str, key: str, value: str) -> Obj:
    n = node(snapshot, node_name)
    n["metadata"]["labels"][key] = value
    refresh(snapshot)
    return n


def set_policy(snapshot: ClusterSnapshot, path: str, value: Any) -> Obj:
    """Set ClusterPolicy spec field by dotted path ('cdi.enabled'); value None deletes the field."""
    cp = snapshot.clusterpolicies[0]
    cur = cp["spec"]
    *parents, leaf = path.split(".")
    for p in parents:
        cur = cur.setdefault(p, {})
    if value is None:
        cur.pop(leaf, None)
    else:
        cur[leaf] = value
    refresh(snapshot)
    return cp


def set_env(snapshot: ClusterSnapshot, ds_name: str, container: str, name: str, value: str | None) -> Obj:
    """Set (None = remove) one env var of a DaemonSet's container template."""
    ds = daemonset(snapshot, ds_name)
    spec = ds["spec"]["template"]["spec"]
    for c in spec.get("containers", []) + spec.get("initContainers", []):
        if c["name"] == container:
            env = [e for e in c.get("env", []) if e["name"] != name]
            if value is not None:
                env.append({"name": name, "value": value})
            c["env"] = env
            return ds
    raise LookupError(f"DaemonSet {ds_name} has no container {container!r}")


def set_operator_version(snapshot: ClusterSnapshot, tag: str) -> None:
    """Run the operator of release `tag`: its image tag and the chart's version labels on its Deployment (what
    checks read as the operator version); the operands stay as they are."""
    dep = snapshot.deployment(ops.OPERATOR_DEPLOYMENT)
    assert dep is not None
    c = dep["spec"]["template"]["spec"]["containers"][0]
    c["image"] = c["image"].rsplit(":", 1)[0] + ":" + tag
    labels = dep["metadata"]["labels"]
    for key, value in _HELM_VERSION_LABELS.items():
        if key in labels:
            labels[key] = value.format(tag)
    refresh(snapshot)


# The labels through which the chart names its release (gpu-operator.labels).
_HELM_VERSION_LABELS = {"app.kubernetes.io/version": "{}", "helm.sh/chart": "gpu-operator-{}"}


def pin_images_by_digest(snapshot: ClusterSnapshot) -> None:
    """Every image as an OLM bundle pins it: repository@sha256:<digest>, no tag (the version is not in the image);
    OLM installs the operator without Helm, so its Deployment has no chart labels either."""
    import hashlib

    def pin(c: Obj) -> None:
        repo = c["image"].split("@", 1)[0]
        tail = repo.rsplit("/", 1)[-1]
        if ":" in tail:
            repo = repo[: len(repo) - len(tail)] + tail.split(":", 1)[0]
        c["image"] = f"{repo}@sha256:{hashlib.sha256(c['image'].encode()).hexdigest()}"

    for obj in snapshot.deployments + snapshot.daemonsets + snapshot.pods + snapshot.operator_pods:
        spec = obj.get("spec", {})
        spec = spec.get("template", {}).get("spec", spec)
        for c in (spec.get("containers") or []) + (spec.get("initContainers") or []):
            pin(c)
    dep = snapshot.deployment(ops.OPERATOR_DEPLOYMENT)
    for key in _HELM_VERSION_LABELS if dep else ():
        dep["metadata"]["labels"].pop(key, None)
    refresh(snapshot)


def drop_runtimeclass(snapshot: ClusterSnapshot, name: str) -> None:
    snapshot.runtimeclasses = [rc for rc in snapshot.runtimeclasses if name_of(rc) != name]
    refresh(snapshot)


def add_runtimeclass(snapshot: ClusterSnapshot, name: str, handler: str | None = None) -> None:
    snapshot.runtimeclasses.append({"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass",
                                    "handler": handler or name, "metadata": {"name": name}})
    refresh(snapshot)


# ---- node health and events (what a real cluster shows when a node or its runtime breaks) ----------------
def set_node_condition(snapshot: ClusterSnapshot, node_name: str, ctype: str, status: str, reason: str = "",
                       message: str = "") -> Obj:
    """Set one node condition; Ready=False/Unknown also gets the node controller's taint, as on a real cluster."""
    n = node(snapshot, node_name)
    conds = [c for c in n["status"].get("conditions") or [] if c.get("type") != ctype]
    conds.append({"type": ctype, "status": status, "reason": reason, "message": message,
                  "lastHeartbeatTime": T2, "lastTransitionTime": T2})
    n["status"]["conditions"] = conds
    if ctype == "Ready" and status != "True":
        key = "node.kubernetes.io/unreachable" if status == "Unknown" else "node.kubernetes.io/not-ready"
        n["spec"].setdefault("taints", []).extend([{"key": key, "effect": "NoSchedule"},
                                                    {"key": key, "effect": "NoExecute", "timeAdded": T2}])
    refresh(snapshot)
    return n


def add_event(snapshot: ClusterSnapshot, kind: str, name: str, reason: str, message: str,
              etype: str = "Warning", count: int = 12, *, first: str = T1, last: str = T2) -> Obj:
    """An Event about an object in the operator namespace, as kubelet or a controller records it (core/v1 form:
    firstTimestamp/lastTimestamp; see events_api_form for the events.k8s.io/v1 form)."""
    ev = {"apiVersion": "v1", "kind": "Event",
          "metadata": {"name": f"{name}.{_suffix(name, reason, n=16)}", "namespace": snapshot.operator_namespace},
          "involvedObject": {"kind": kind, "name": name, "namespace": snapshot.operator_namespace},
          "reason": reason, "message": message, "type": etype, "count": count,
          "firstTimestamp": first, "lastTimestamp": last}
    snapshot.events.append(ev)
    return ev


def events_api_form(event: Obj, last: str | None) -> Obj:
    """The event as written through events.k8s.io/v1 and read as core/v1: no first/lastTimestamp, eventTime (the
    first occurrence, MicroTime) and series.lastObservedTime once repeated; last=None drops every timestamp."""
    first = event.pop("firstTimestamp", None)
    event["lastTimestamp"] = None
    event["firstTimestamp"] = None
    if last is None:
        event["eventTime"] = None
        return event
    event["eventTime"] = (first or last).replace("Z", ".000000Z")
    event["series"] = {"count": event.get("count", 2), "lastObservedTime": last.replace("Z", ".123456Z")}
    return event


def sandbox_refused(snapshot: ClusterSnapshot, pod: Obj, message: str, *, first: str = T2, last: str = T3) -> Obj:
    """A pod whose sandbox the runtime cannot create: Pending, nothing started, FailedCreatePodSandBox events.

    By default the events come after every operand became Ready (T2 → T3): a runtime that refuses now. Give
    earlier times for the bring-up story (refusals before the toolkit wrote the handler)."""
    for key in ("initContainerStatuses", "containerStatuses"):
        for cs in pod["status"].get(key) or []:
            cs.update({"ready": False, "started": False, "restartCount": 0, "lastState": {},
                       "state": {"waiting": {"reason": "PodInitializing" if key == "containerStatuses"
                                             else "PodInitializing"}}})
            cs.pop("containerID", None)
    pod["status"]["phase"] = "Pending"
    inits = [c["name"] for c in pod["status"].get("initContainerStatuses") or []]
    _set_conditions(pod, False, False, inits or None)
    add_event(snapshot, "Pod", name_of(pod), "FailedCreatePodSandBox", message, first=first, last=last)
    refresh(snapshot)
    return pod


# ---- as the API server serves them -----------------------------------------------------------------
def _fields_v1(value: Any) -> Any:
    """A managedFields fieldsV1 tree for a value: {"f:key": {...}} per dict key, {"k:..."} per list item."""
    if isinstance(value, dict):
        return {f"f:{k}": _fields_v1(v) for k, v in value.items()}
    if isinstance(value, list):
        return {f"k:{{\"name\":\"{i.get('name', n)}\"}}" if isinstance(i, dict) else f"v:{i}": _fields_v1(i)
                for n, i in enumerate(value)}
    return {}


def as_served(obj: Obj) -> Obj:
    """A copy of a factory object with what a real API server adds that no check reads (managedFields,
    volumes and mounts, security contexts, image IDs, a node's image list): factory objects are ~7x smaller
    than real ones, so a memory bound measured on them alone says nothing about trimming."""
    import copy

    out = copy.deepcopy(obj)
    meta = out.setdefault("metadata", {})
    meta["resourceVersion"] = "123456789"
    meta["managedFields"] = [
        {"manager": m, "operation": "Update", "apiVersion": "v1", "time": T1, "fieldsType": "FieldsV1",
         "fieldsV1": _fields_v1(out.get(part) or {})} for m, part in (("kube-controller-manager", "spec"),
                                                                      ("kubelet", "status"))]
    if out.get("kind") == "Pod":
        spec = out["spec"]
        spec["volumes"] = [{"name": f"vol-{i}", "hostPath": {"path": f"/run/nvidia/vol-{i}", "type": ""}}
                           for i in range(8)]
        spec.update({"dnsPolicy": "ClusterFirst", "schedulerName": "default-scheduler",
                     "terminationGracePeriodSeconds": 30, "enableServiceLinks": True, "preemptionPolicy":
                     "PreemptLowerPriority", "securityContext": {}, "hostPID": True})
        for c in spec.get("containers", []) + spec.get("initContainers", []):
            c.update({"terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File",
                      "imagePullPolicy": "IfNotPresent", "securityContext": {"privileged": True},
                      "volumeMounts": [{"name": v["name"], "mountPath": v["hostPath"]["path"],
                                        "mountPropagation": "HostToContainer"} for v in spec["volumes"]]})
            c.setdefault("env", []).extend({"name": f"NVIDIA_SETTING_{i}", "value": "x" * 24} for i in range(6))
        st = out["status"]
        st["podIPs"] = [{"ip": st.get("podIP", "")}]
        st["hostIPs"] = [{"ip": st.get("hostIP", "")}]
        for cs in st.get("containerStatuses", []) + st.get("initContainerStatuses", []):
            cs["imageID"] = "nvcr.io/nvidia/k8s@sha256:" + "0" * 64
            cs["volumeMounts"] = [{"name": f"vol-{i}", "mountPath": f"/run/nvidia/vol-{i}"} for i in range(8)]
    if out.get("kind") == "Node":
        st = out.setdefault("status", {})
        st["images"] = [{"names": [f"registry.example.com/team/image-{i}@sha256:{'1' * 64}",
                                   f"registry.example.com/team/image-{i}:v1.{i}"], "sizeBytes": 123456789}
                        for i in range(40)]
        st["addresses"] = [{"type": "InternalIP", "address": "10.0.0.10"}]
        st["daemonEndpoints"] = {"kubeletEndpoint": {"Port": 10250}}
    return out


def lose_nfd_gpu_label(snapshot: ClusterSnapshot, node_name: str, *, keep_features: bool = False) -> Obj:
    """What follows when a GPU node loses NFD's NVIDIA PCI label (state_manager.go labelGPUNodes): the operator sets
    gpu.present=false and removes the deploy labels, the DaemonSet controller withdraws the operand pods, the GPUs
    leave capacity. keep_features: NFD still labels the node (the GPU left the PCI bus); else every NFD label goes."""
    n = node(snapshot, node_name)
    labels = n["metadata"]["labels"]
    for key in list(labels):
        if key.startswith(ops.DEPLOY_PREFIX) or key.endswith("pci-10de.present") or (
                not keep_features and key.startswith("feature.node.kubernetes.io/")):
            labels.pop(key)
    labels[GPU_PRESENT_LABEL] = "false"
    for key in ("capacity", "allocatable"):
        n["status"][key] = {k: v for k, v in n["status"][key].items() if not k.startswith("nvidia.com/")}
    operand_apps = {o.app for o in ops.OPERANDS} | {ops.CUDA_VALIDATOR_APP}
    snapshot.pods = [p for p in snapshot.pods if not (p["spec"].get("nodeName") == node_name
                                                        and labels_of(p).get("app") in operand_apps)]
    refresh(snapshot)
    return n


def add_mps_control_daemon(snapshot: ClusterSnapshot, nodes: list[str]) -> Obj:
    """The MPS control daemon (state-mps-control-daemon, v24.3+) on nodes labelled nvidia.com/mps.capable=true, shaped
    like the device plugin's DaemonSet it ships with; returns the DaemonSet."""
    import copy

    name = specs.MPS_DAEMONSET
    dp = daemonset(snapshot, ops.DEVICE_PLUGIN.daemonset)
    ds = copy.deepcopy(dp)
    ds["metadata"].update({"name": name, "uid": _uid("ds", snapshot.operator_namespace, name),
                           "labels": {**ds["metadata"]["labels"], "app": name}})
    ds["spec"]["selector"] = {"matchLabels": {"app": name}}
    tmpl = ds["spec"]["template"]
    tmpl["metadata"]["labels"] = {**tmpl["metadata"]["labels"], "app": name}
    tmpl["spec"]["nodeSelector"] = {**tmpl["spec"]["nodeSelector"], "nvidia.com/mps.capable": "true"}
    tmpl["spec"]["containers"] = [{**tmpl["spec"]["containers"][0], "name": "mps-control-daemon-ctr"}]
    snapshot.daemonsets.append(ds)
    for n in nodes:
        node(snapshot, n)["metadata"]["labels"]["nvidia.com/mps.capable"] = "true"
        pod = copy.deepcopy(pod_for(snapshot, ops.DEVICE_PLUGIN.app, n))
        pname = f"{name}-{_suffix(name, n)}"
        pod["metadata"].update({"name": pname, "uid": _uid("pod", snapshot.operator_namespace, pname),
                                "labels": {**pod["metadata"]["labels"], "app": name},
                                "ownerReferences": [_owner("DaemonSet", name, ds["metadata"]["uid"])]})
        pod["spec"]["containers"] = [{**pod["spec"]["containers"][0], "name": "mps-control-daemon-ctr"}]
        pod["status"]["containerStatuses"] = [{**pod["status"]["containerStatuses"][0],
                                               "name": "mps-control-daemon-ctr"}]
        snapshot.pods.append(pod)
    refresh(snapshot)
    return ds


# ---- the DRA models (gpu_conformance/resource_model.py), as gpu-operator v26.7.0 renders them -------------------
DRA_VERSION = "v26.7.0"
DRA_PLUGIN = dra_driver.KUBELET_PLUGIN
DRA_DRIVER = dra_driver.DRIVER_NAME


def _dra_ctx(snapshot: ClusterSnapshot) -> _Ctx:
    return _Ctx(DRA_VERSION, snapshot.operator_namespace, True, False, "host", "none", 0, False, False, False,
                False, "Tesla-T4", 1)


def _kubelet_plugin(ctx: _Ctx, owner: Obj | None) -> Obj:
    return _served_daemonset(ctx, dra_driver.kubelet_plugin_daemonset(DRA_VERSION, ctx.comp.dra_driver, False, ctx.ns,
                                                                      owner))


def _served(obj: Obj, kind: str) -> Obj:
    """A cluster-scoped object as the API server serves it (uid, creationTimestamp)."""
    obj["metadata"].update(uid=_uid(kind, obj["metadata"]["name"]), creationTimestamp=T0)
    return obj


def _device_classes() -> list[Obj]:
    return [_served(dc, "deviceclass") for dc in dra_driver.device_classes()]


def _gpu_hardware(product: str) -> GpuHardware:
    return BY_PRODUCT.get(product) or BY_PRODUCT["Tesla-T4"]


def gpu_uuid(node_name: str, index: int) -> str:
    h = hashlib.sha256(f"{node_name}/{index}".encode()).hexdigest()
    return f"GPU-{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"


def resource_slice(node_name: str, gpus: int, product: str = "Tesla-T4", generation: int = 1) -> Obj:
    """The kubelet plugin's slice for one node: pool named after it, one device gpu-<minor> per GPU."""
    hw = _gpu_hardware(product)
    devices = [dra_driver.gpu_device(i, gpu_uuid(node_name, i), product.replace("-", " "), hw, HOST_DRIVER_VERSION,
                                     cuda_version_for_driver(HOST_DRIVER_VERSION)) for i in range(gpus)]
    sl = dra_driver.resource_slice(node_name, _uid("node", node_name), devices, generation)
    name = f"{node_name}-{DRA_DRIVER}-{_suffix(node_name, 'slice')}"
    sl["metadata"].update(name=name, uid=_uid("slice", name), creationTimestamp=T0)
    del sl["metadata"]["generateName"]
    return sl


def resource_claim(namespace: str, name: str, node_name: str, device: str, *, admin: bool = False) -> Obj:
    """A claim allocated one device of the node's pool (admin: an adminAccess allocation, like the validator's)."""
    result: Obj = {"request": "gpu", "driver": DRA_DRIVER, "pool": node_name, "device": device}
    if admin:
        result["adminAccess"] = True
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": name, "namespace": namespace, "uid": _uid("claim", namespace, name),
                         "creationTimestamp": T1},
            "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]}},
            "status": {"allocation": {"devices": {"results": [result]}}}}


def _add_dra_driver(snapshot: ClusterSnapshot, owner: Obj | None, gpus: int, product: str) -> None:
    ctx = _dra_ctx(snapshot)
    ds = _kubelet_plugin(ctx, owner)
    snapshot.daemonsets.append(ds)
    for n in snapshot.gpu_node_names:
        set_label(snapshot, n, "nvidia.com/gpu.deploy.dra-driver", "true")
        snapshot.pods.append(_ds_pod(ctx, ds, n))
    snapshot.device_classes = _device_classes()
    snapshot.resource_slices = [resource_slice(n, gpus, product) for n in snapshot.gpu_node_names]
    snapshot.resource_claims = []
    refresh(snapshot)


def _chart_kubelet_plugin(ctx: _Ctx) -> Obj:
    """The DRA driver chart's kubelet plugin under the operator's driver (the install model's chart objects)."""
    ds = next(o for o in dra_driver.chart_objects("/run/nvidia/driver") if o["kind"] == "DaemonSet")
    return _served_daemonset(ctx, ds)


def add_chart_dra_driver(snapshot: ClusterSnapshot, gpus: int = 1, product: str = "Tesla-T4") -> None:
    """NVIDIA's DRA driver chart installed beside the ClusterPolicy: its kubelet-plugin pods (in the chart's own
    namespace, read cluster-wide by label), DeviceClasses gpu.nvidia.com and mig.nvidia.com, the slices."""
    ctx = replace(_dra_ctx(snapshot), ns=dra_chart.DEFAULT_NAMESPACE)
    ds = _chart_kubelet_plugin(ctx)
    snapshot.dra_plugin_pods = [_ds_pod(ctx, ds, n) for n in snapshot.gpu_node_names]
    snapshot.device_classes = [_served(dc, "deviceclass") for dc in dra_driver.chart_device_classes()]
    snapshot.resource_slices = [resource_slice(n, gpus, product) for n in snapshot.gpu_node_names]
    snapshot.resource_claims = []
    refresh(snapshot)


def dra_plugin_pod(snapshot: ClusterSnapshot, node_name: str) -> Obj:
    """The node's DRA kubelet-plugin pod in either model: the chart's (dra_plugin_pods) or the operator's."""
    for p in snapshot.dra_plugin_pods:
        if p["spec"].get("nodeName") == node_name:
            return p
    return pod_for(snapshot, DRA_PLUGIN, node_name)


def remove_dra_plugin_pod(snapshot: ClusterSnapshot, node_name: str) -> None:
    """Delete the node's DRA kubelet-plugin pod, whichever model put it there."""
    snapshot.dra_plugin_pods = [p for p in snapshot.dra_plugin_pods if p["spec"].get("nodeName") != node_name]
    remove_pods(snapshot, DRA_PLUGIN, node_name)


def healthy_dra_driver_snapshot(gpu_nodes: int = 3, gpus_per_node: int = 1) -> ClusterSnapshot:
    """The dra-driver model: a ClusterPolicy with the device plugin off (devicePlugin.enabled=false) and NVIDIA's
    DRA driver chart beside it; driver, toolkit and GFD as in the ClusterPolicy model."""
    snap = healthy_snapshot(DRA_VERSION, gpu_nodes=gpu_nodes, device_plugin=False, gpus_per_node=gpus_per_node)
    add_chart_dra_driver(snap, gpus_per_node, "Tesla-T4")
    return snap


def gpucluster(state: str = "ready", reason: str = "Reconciled", message: str = "") -> Obj:
    """GPUCluster gpu-cluster (a singleton: the CRD's CEL rule) with the status the v26.7.0 controller writes."""
    conds = policy.clusterpolicy_conditions(state == "ready", reason, message or dra_driver.READY_MESSAGE
                                            if state == "ready" else message)
    cr = _served(dra_driver.gpucluster(components_for(DRA_VERSION), False), "gpucluster")
    cr["metadata"]["finalizers"] = ["nvidia.com/gpucluster-finalizer"]
    cr["status"] = {"state": state, "namespace": "gpu-operator", "conditions": [
        {"type": t, "status": st, "reason": r, "message": m, "lastTransitionTime": T1} for t, st, r, m in conds]}
    return cr


def healthy_gpucluster_snapshot(gpu_nodes: int = 3, gpus_per_node: int = 1) -> ClusterSnapshot:
    """The gpucluster model (v26.7.0 tech preview): GPUCluster gpu-cluster, no ClusterPolicy, no operand of the
    ClusterPolicy stack (Helm clusterPolicy.deployCR=false), a host-installed driver, the DRA kubelet plugin."""
    snap = healthy_snapshot(DRA_VERSION, gpu_nodes=gpu_nodes, driver="host", device_plugin=False, gfd=False,
                            gpus_per_node=gpus_per_node)
    ns = snap.operator_namespace
    operand_ds = {name_of(d) for d in snap.daemonsets if d["metadata"].get("namespace") == ns}
    snap.daemonsets = [d for d in snap.daemonsets if name_of(d) not in operand_ds]
    snap.pods = [p for p in snap.pods if not any(r.get("kind") == "DaemonSet" and r.get("name") in operand_ds
                                                 for r in p["metadata"].get("ownerReferences") or [])
                 and not name_of(p).startswith("nvidia-cuda-validator")]
    snap.clusterpolicies = []
    snap.runtimeclasses = []
    for n in snap.nodes:
        labels = n["metadata"]["labels"]
        for k in [k for k in labels if k.startswith("nvidia.com/gpu.deploy.")]:
            del labels[k]
        if k_gpu := labels.get(GPU_PRESENT_LABEL):
            labels.update({k: "true" for k in ops.GPUCLUSTER_DEPLOY_LABELS} if k_gpu == "true" else {})
    snap.gpu_clusters = [gpucluster()]
    owner = dra_driver.owner_reference("GPUCluster", dra_driver.GPUCLUSTER_NAME, _uid("gpucluster", "gpu-cluster"))
    _add_dra_driver(refresh(snap), owner, gpus_per_node, "Tesla-T4")
    return snap
