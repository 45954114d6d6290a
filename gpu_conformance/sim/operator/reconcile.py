"""Bring a simulated GPU Operator install up on kwok nodes, the way the operator and the kubelets would.

The objects come from install.py; this module is the kwok-specific part. The real kube-controller-manager
creates the DaemonSet and Deployment pods, the real scheduler binds them, kwok marks them Running. What
no process here does by itself is done in the order the real components would do it:

* nodes start without GPU resources, labelled by NFD and the operator (deploy labels);
* the operand side (sim/operator/operand_loop.py, the same for the real operator): the validation chain's init
  containers pass one at a time, each once its stage is ready; the validator's cuda-validation creates an
  `nvidia-cuda-validator-*` pod that completes; once a node's device-plugin pod runs, its
  capacity/allocatable get the GPU resources; once its GFD pod runs, the GFD labels appear; mig-manager
  reports its state;
* when every operand is rolled out the ClusterPolicy status turns ready/Reconciled.

Container logs are served by kwok per container name (every pod's container of that name shows the same
text), written through `log_writer` before any pod exists.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from kubernetes.client import ApiClient
from kubernetes.client.exceptions import ApiException

from gpu_conformance import operands as op
from gpu_conformance.errors import ConformanceError
from gpu_conformance.sim.operator import install as inst
from gpu_conformance.sim.operator.kwok_nodes import cuda_validator_name, node_object
from gpu_conformance.sim.operator.status import StatusWriter, settle
from gpu_conformance.sim.profiles.catalogue import Profile, get_profile
from gpu_conformance.sim.profiles.nvidia_smi import node_nvidia_smi_L, nvidia_smi_header, probe_output
from gpu_conformance.sim.services.kube_client import Kube

Obj = dict[str, Any]
LogWriter = Callable[[str, str], None]

PROBE_CONTAINER = "gpu-probe"

# Every container name install() writes logs for (the control plane needs them before it starts).
LOG_CONTAINERS: tuple[str, ...] = (
    "driver-validation", "nvidia-fs-validation", "gdrcopy-validation", "toolkit-validation",
    "cuda-validation", "plugin-validation", "nvidia-operator-validator", "nvidia-cuda-validator",
    "nvidia-device-plugin", PROBE_CONTAINER,
)

_POLL = 0.2


class SimInstallError(ConformanceError):
    """The simulated install did not converge (the message says what was still missing)."""


@dataclass
class SimInstall:
    """A simulated install on a cluster: what faults need to find and change it."""

    client: ApiClient
    profile: Profile
    namespace: str
    gpu_nodes: list[str]
    cpu_nodes: list[str]
    manifests: inst.InstallManifests
    clusterpolicy_uid: str
    # node -> name of its nvidia-cuda-validator pod
    cuda_validator_pods: dict[str, str] = field(default_factory=dict)
    log_writer: LogWriter | None = None
    seconds: float = 0.0
    # Stage -> seconds since install() started (what took how long).
    timings: dict[str, float] = field(default_factory=dict)

    @property
    def api(self) -> Kube:
        return Kube(self.client)

    @property
    def nodes(self) -> list[str]:
        return [*self.gpu_nodes, *self.cpu_nodes]


# ---- logs --------------------------------------------------------------------------------
def _logrus(msg: str, level: str = "info", ts: str = "") -> str:
    return f'time="{ts}" level={level} msg="{msg}"'


def _klog(file_line: str, msg: str, ts: float) -> str:
    t = time.gmtime(ts)
    micros = int((ts % 1) * 1_000_000)
    return f"I{t.tm_mon:02d}{t.tm_mday:02d} {time.strftime('%H:%M:%S', t)}.{micros:06d}       1 {file_line}] {msg}"


def container_logs(profile: Profile, manifests: inst.InstallManifests, now: float | None = None) -> dict[str, str]:
    """What each logged container prints on a healthy node of this profile (one text per container name).

    kwok serves logs per container name, so node-specific details come from the first GPU node.
    """
    now = time.time() if now is None else now
    ts = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now))
    first = manifests.gpu_nodes[0] if manifests.gpu_nodes else None
    node = first.name if first else "gpu-node-0"
    hw = first.hardware if first and first.hardware else profile.hardware_for(0)
    smi = nvidia_smi_header(profile.driver_version, profile.cuda_version) + node_nvidia_smi_L(node, hw)
    version = _logrus(f"version: {profile.operator_version}", ts=ts)
    if profile.host_driver:
        driver_validation = [
            version,
            _logrus("Attempting to validate a pre-installed driver on the host", ts=ts),
            "running command chroot with args [/host nvidia-smi]",
            smi.rstrip("\n"),
            _logrus("Detected a pre-installed driver on the host", ts=ts),
        ]
    else:
        driver_validation = [
            version,
            _logrus("Attempting to validate a pre-installed driver on the host", ts=ts),
            _logrus("No pre-installed driver detected on the host: no 'nvidia-smi' file present on the host: "
                    "lstat /host/usr/bin/nvidia-smi: no such file or directory", ts=ts),
            _logrus("Validating containerized driver installation", ts=ts),
            _logrus("Driver is not pre-installed on the host and is managed by GPU Operator. "
                    "Checking driver container status.", ts=ts),
            _logrus("Attempting to validate a driver container installation", ts=ts),
            smi.rstrip("\n"),
        ]
    driver_validation.append(
        _logrus("creating symlinks under /dev/char that correspond to NVIDIA character devices", ts=ts))
    cuda_pod = cuda_validator_name(node)
    logs = {
        "driver-validation": "\n".join(driver_validation),
        "nvidia-fs-validation": "\n".join([version, "running command sh with args [-c lsmod | grep nvidia_fs]",
                                           "nvidia_fs             262144  0"]),
        "gdrcopy-validation": "\n".join([version, "running command sh with args [-c lsmod | grep gdrdrv]",
                                         "gdrdrv                 24576  0"]),
        "toolkit-validation": "\n".join([version, "running command nvidia-smi with args []", smi.rstrip("\n")]),
        "cuda-validation": "\n".join([version, _logrus(f"pod {cuda_pod} is curently in Running phase", ts=ts),
                                      _logrus(f"pod {cuda_pod} have run successfully", ts=ts)]),
        "plugin-validation": version,
        "nvidia-operator-validator": "all validations are successful",
        "nvidia-cuda-validator": "cuda workload validation is successful",
        "nvidia-device-plugin": device_plugin_log(profile, manifests, now),
        PROBE_CONTAINER: probe_output(profile),
    }
    return {k: v if v.endswith("\n") else v + "\n" for k, v in logs.items()}


def device_plugin_log(profile: Profile, manifests: inst.InstallManifests, now: float) -> str:
    """The device plugin's startup lines: config, then one GRPC server per resource it registers."""
    env = {e["name"]: e.get("value", "") for e in inst.device_plugin_env(profile) if "value" in e}
    config = {
        "version": "v1",
        "flags": {"migStrategy": profile.mig_strategy, "failOnInitError": True, "mpsRoot": "/run/nvidia/mps",
                  "nvidiaDriverRoot": "/" if profile.host_driver else "/run/nvidia/driver",
                  "nvidiaDevRoot": "/" if profile.host_driver else "/run/nvidia/driver",
                  "gdsEnabled": False, "mofedEnabled": False, "useNodeFeatureAPI": None,
                  "deviceDiscoveryStrategy": "auto",
                  "plugin": {"passDeviceSpecs": True,
                             "deviceListStrategy": env["DEVICE_LIST_STRATEGY"].split(","),
                             "deviceIDStrategy": "uuid",
                             "cdiAnnotationPrefix": env.get("CDI_ANNOTATION_PREFIX", "cdi.k8s.io/"),
                             "nvidiaCTKPath": "/usr/bin/nvidia-ctk", "containerDriverRoot": "/driver-root"}},
        "resources": {"gpus": [{"pattern": "*", "name": "nvidia.com/gpu"}]},
        "sharing": {"timeSlicing": {}},
        "imex": {},
    }
    if profile.time_slicing_replicas:
        config["sharing"] = {"timeSlicing": {"resources": [
            {"name": "nvidia.com/gpu", "devices": "all", "replicas": profile.time_slicing_replicas}]}}
    resources: list[str] = []
    for n in manifests.gpu_nodes:
        for r in n.gpu_resources:
            if r not in resources:
                resources.append(r)
    lines = [
        _klog("main.go:247", f'"Starting NVIDIA Device Plugin" version="{profile.components.device_plugin}"', now),
        _klog("main.go:250", "Starting FS watcher for /var/lib/kubelet/device-plugins", now),
        _klog("main.go:257", "Starting OS watcher.", now),
        _klog("main.go:272", "Starting Plugins.", now),
        _klog("main.go:329", "Loading configuration.", now),
        _klog("main.go:355", "Updating config with default resource matching patterns.", now),
        _klog("main.go:366", "\nRunning with config:\n" + json.dumps(config, indent=2), now),
        _klog("main.go:369", "Retrieving plugins.", now),
    ]
    for r in resources:
        sock = f"/var/lib/kubelet/device-plugins/nvidia-{r.split('/', 1)[1]}.sock"
        lines += [_klog("server.go:198", f"Starting GRPC server for '{r}'", now),
                  _klog("server.go:142", f"Starting to serve '{r}' on {sock}", now),
                  _klog("server.go:149", f"Registered device plugin for '{r}' with Kubelet", now)]
    return "\n".join(lines)


# ---- install -----------------------------------------------------------------------------
def create_all(kube: Kube, objs: list[Obj], workers: int = 8, ignore_existing: bool = False) -> None:
    """Create objects concurrently (order inside one call does not matter)."""
    if not objs:
        return

    def create(obj: Obj) -> None:
        try:
            kube.create(obj)
        except ApiException as e:
            if not (ignore_existing and e.status == 409):
                raise

    with ThreadPoolExecutor(max_workers=min(workers, len(objs))) as pool:
        list(pool.map(create, objs))


def _wait(what: Callable[[], bool], deadline: float, message: Callable[[], str]) -> None:
    while not what():
        if time.monotonic() > deadline:
            raise SimInstallError(message())
        time.sleep(_POLL)


def create_namespace_and_crds(kube: Kube, preview: inst.InstallManifests) -> str:
    """The operator's namespace and CRDs (either may exist already); returns the API server's version, which
    the simulated kubelets report as theirs."""
    try:
        kube.create(preview.namespace_object)
    except ApiException as e:
        if e.status != 409:
            raise
    from gpu_conformance.sim.operator.pod_logs import logs_crd

    # kwok's per-pod Logs kind too (the control plane starts kwok watching it).
    create_all(kube, [*preview.crds, logs_crd()], ignore_existing=True)
    return kube.request("GET", "/version").get("gitVersion", "v1.36.0")


def wait_established(kube: Kube, crds: list[Obj], deadline: float) -> None:
    def established() -> bool:
        for crd in crds:
            got = kube.get("CustomResourceDefinition", crd["metadata"]["name"])
            conds = {c["type"]: c["status"] for c in (got.get("status") or {}).get("conditions") or []}
            if conds.get("Established") != "True":
                return False
        return True

    _wait(established, deadline, lambda: "the operator's CRDs were not Established in time")


def create_clusterpolicy(kube: Kube, obj: Obj, deadline: float) -> Obj:
    """Create the operator's CR (ClusterPolicy, or the GPUCluster of the gpucluster model)."""
    # Right after Established the new resource can still 404 for a moment (discovery catching up).
    while True:
        try:
            return kube.create(obj)
        except ApiException as e:
            if e.status != 404 or time.monotonic() > deadline:
                raise
            time.sleep(_POLL)


def daemonset_rolled_out(ds: Obj, expected: int) -> bool:
    """The operator's isDaemonSetReady plus: the controller has seen the expected nodes."""
    st = ds.get("status", {})
    if st.get("observedGeneration", 0) < ds["metadata"].get("generation", 1):
        return False
    desired = st.get("desiredNumberScheduled", 0)
    if desired != expected:
        return False
    if desired == 0:
        return True
    if st.get("numberUnavailable", 0) or st.get("numberReady", 0) != desired:
        return False
    if ds["spec"].get("updateStrategy", {}).get("type") == "OnDelete":
        return st.get("numberAvailable", 0) == desired
    return st.get("updatedNumberScheduled", 0) == desired and st.get("numberAvailable", 0) == desired


def install_timeout(nodes: int) -> float:
    # A guard against a hung install, not a target. Since the validation chain runs stage by stage (one
    # round per init container, a cuda-validator pod per node) 1,000 GPU nodes cost ~1,340 CPU-seconds:
    # ~670 s on 2 free cores, and 1,226 s was not enough at load 8-14 (0.4 s per node, 482 s, was).
    return 90.0 + 1.5 * max(0, nodes - 20)


def install(client: ApiClient, profile: str | Profile = "default", gpu_nodes: int = 3, cpu_nodes: int = 1,
            namespace: str = "gpu-operator", log_writer: LogWriter | None = None,
            timeout: float | None = None) -> SimInstall:
    """Install the simulated GPU Operator on new kwok nodes and wait until it is fully converged.

    The deadline grows with the cluster: 90 s, plus 1.5 s per node beyond 20 (install_timeout: a fixed 90 s
    made `sim up --gpu-nodes 1000` fail).
    """
    p = get_profile(profile)
    start = time.monotonic()
    deadline = start + (install_timeout(gpu_nodes + cpu_nodes) if timeout is None else timeout)
    timings: dict[str, float] = {}

    def mark(stage: str) -> None:
        timings[stage] = round(time.monotonic() - start, 3)

    kube = Kube(client)
    gpu_names = [f"gpu-node-{i}" for i in range(gpu_nodes)]
    cpu_names = [f"cpu-node-{i}" for i in range(cpu_nodes)]
    preview = inst.build(p, namespace, gpu_names, cpu_names)

    # Logs first: kwok serves them as soon as a pod with that container name runs.
    if log_writer is not None:
        for container, text in container_logs(p, preview).items():
            log_writer(container, text)
    mark("logs")

    kubelet_version = create_namespace_and_crds(kube, preview)
    # While the CRDs get established: nodes and what Helm creates (none of it needs the ClusterPolicy).
    create_all(kube, [node_object(n, p, kubelet_version) for n in preview.nodes])
    mark("nodes")
    create_all(kube, [o for o in preview.helm_objects if o["kind"] in ("ServiceAccount", "ConfigMap")])
    create_all(kube, [o for o in preview.helm_objects if o["kind"] not in ("ServiceAccount", "ConfigMap")])
    mark("helm")
    wait_established(kube, preview.crds, deadline)
    status_writer = StatusWriter(kube, namespace, p.operator_version)
    if preview.clusterpolicy is not None:
        cp = create_clusterpolicy(kube, preview.clusterpolicy, deadline)
        uid = cp["metadata"]["uid"]
        # The operator's first reconcile runs before its DaemonSets exist, and a DaemonSet not found counts as
        # ready: the real operator writes ready/Reconciled here (a race a suite run right after install sees).
        status_writer.write()
        manifests = inst.build(p, namespace, gpu_names, cpu_names, clusterpolicy_uid=uid)
    else:
        assert preview.gpucluster is not None
        uid = ""
        gc = create_clusterpolicy(kube, preview.gpucluster, deadline)  # same 404-after-Established retry
        manifests = inst.build(p, namespace, gpu_names, cpu_names, gpucluster_uid=gc["metadata"]["uid"])
    mark("clusterpolicy")

    # RuntimeClasses and ServiceAccounts before any pod that names them (admission rejects the pod).
    create_all(kube, [*manifests.runtime_classes, *manifests.service_accounts, *manifests.configmaps,
                      *manifests.device_classes])
    create_all(kube, [*manifests.daemonsets, *manifests.deployments, *manifests.services])
    # The dra-driver model: the DRA driver's own Helm release beside the operator (its namespace first).
    chart = manifests.dra_chart_objects
    create_all(kube, [o for o in chart if o["kind"] == "Namespace"], ignore_existing=True)
    create_all(kube, [o for o in chart if o["kind"] == "ServiceAccount"], ignore_existing=True)
    create_all(kube, [o for o in chart if o["kind"] not in ("Namespace", "ServiceAccount")], ignore_existing=True)
    mark("operands")

    sim = SimInstall(client=client, profile=p, namespace=namespace, gpu_nodes=gpu_names, cpu_nodes=cpu_names,
                     manifests=manifests, clusterpolicy_uid=uid, log_writer=log_writer, timings=timings)
    # Then the DaemonSets count their pods: notReady (state-driver, ...) until every operand is available.
    status_writer.write()
    _converge(kube, sim, deadline, mark)
    sim.seconds = round(time.monotonic() - start, 3)
    return sim


def _converge(kube: Kube, sim: SimInstall, deadline: float, mark: Callable[[str], None]) -> None:
    """Play kubelet and the operand programs (sim/operator/operand_loop.py, shared with the real operator) until
    everything is rolled out, then settle the ClusterPolicy status from the same watch copies."""
    from gpu_conformance.sim.operator.operand_loop import OperandSim

    m = sim.manifests
    # Once: the install's node labels do not change while it converges (per round it was ~5% of the CPU).
    expected = {name: len(nodes) for name, nodes in inst.expected_daemonset_nodes(m).items()}
    nfd = [inst.nfd_name("master"), inst.nfd_name("gc")] if sim.profile.nfd_enabled else []
    if sim.profile.nfd_enabled:
        expected[inst.nfd_name("worker")] = len(m.nodes)
    deployments = [op.OPERATOR_DEPLOYMENT, *nfd, *(d["metadata"]["name"] for d in m.deployments)]
    operands = OperandSim(kube, sim.profile, sim.namespace, show_fresh_waiting=False, watch=True)
    try:
        _converge_rounds(kube, sim, operands, expected, deployments, deadline)
        mark("converged")
        settle(kube, sim.namespace, sim.profile.operator_version, watches=operands.status_watches())
        mark("ready")
    finally:
        operands.close()


def _converge_rounds(kube: Kube, sim: SimInstall, operands: Any, expected: dict[str, int], deployments: list[str],
                     deadline: float) -> None:
    m = sim.manifests
    ns = sim.namespace
    plans = {n.name: n for n in m.gpu_nodes}
    validator_nodes = set(inst.expected_daemonset_nodes(m).get(op.VALIDATOR.daemonset, []))
    while True:
        seen = operands.generation()
        if operands.step():
            if time.monotonic() > deadline:   # still writing, but never done: a livelock, not progress
                raise SimInstallError("simulated GPU Operator did not converge in time: the operand loop was "
                                      "still changing pods at the deadline")
            continue  # the writes are in the loop's copy already: the next stage can go at once
        pods = operands.pods
        cuda = {p["spec"].get("nodeName"): p for p in pods if p["metadata"].get("labels", {}).get("app")
                == op.CUDA_VALIDATOR_APP and p.get("status", {}).get("phase") == "Succeeded"}
        pending: list[str] = []
        pending += [f"cuda-validator on {n}" for n in sorted(validator_nodes - set(cuda))]
        pending += [f"GPU capacity on {n}" for n, plan in plans.items()
                    if plan.gpu_resources and n not in operands.advertised]
        if m.dra_chart_objects:  # the chart's DaemonSet is not the operator's: its published slices say it is up
            pending += [f"ResourceSlice of {n}" for n in plans if n not in operands.published]
        if not pending:
            dss = {d["metadata"]["name"]: d for d in kube.list("DaemonSet", ns)}
            pending += [f"DaemonSet {name} ({expected[name]} nodes)" for name in sorted(expected)
                        if name not in dss or not daemonset_rolled_out(dss[name], expected[name])]
            deps = {d["metadata"]["name"]: d for d in kube.list("Deployment", ns)}
            pending += [f"Deployment {name}" for name in deployments
                        if deps.get(name, {}).get("status", {}).get("availableReplicas", 0) < 1]
        if not pending:
            sim.cuda_validator_pods = {n: cuda[n]["metadata"]["name"] for n in sorted(cuda)}
            return
        if time.monotonic() > deadline:
            raise SimInstallError("simulated GPU Operator did not converge in time; still waiting for: "
                                  + ", ".join(pending[:10]) + (" …" if len(pending) > 10 else ""))
        # Nodes and pods come by watch: wake on the next change (the DaemonSet/Deployment statuses above are
        # read again at least every _POLL s).
        operands.wait_for_change(seen, _POLL)
