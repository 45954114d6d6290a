"""Facts about the cluster that several checks, the probe and the report need, computed once per run.

`build_facts(snapshot)` works them all out from the read; the session calls it once and hands the result to every
check (check_input.CheckInput), the report header and the reports, so a fact cannot be worked out twice and
disagree with itself (the report header and DRV-001 once named different driver modes for the same node).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, NamedTuple

from gpu_conformance import operands as ops
from gpu_conformance import versions
from gpu_conformance.cluster.selectors import match_labels
from gpu_conformance.cluster.snapshot import ClusterSnapshot, labels_of, name_of
from gpu_conformance.resource_model import ResourceModel, both_models, resource_model
from gpu_conformance.resource_slices import DraView

Obj = dict[str, Any]


def image_tag(image: str) -> str:
    """'nvcr.io/nvidia/driver:580.126.20-ubuntu22.04@sha256:…' -> '580.126.20-ubuntu22.04'; '' when untagged."""
    image = image.split("@", 1)[0]
    tail = image.rsplit("/", 1)[-1]
    return tail.rsplit(":", 1)[1] if ":" in tail else ""


# ---- operator ----------------------------------------------------------------------------------------------
def operator_deployment(snap: ClusterSnapshot) -> Obj | None:
    """The Helm chart names it gpu-operator; other installs (OLM) keep the app=gpu-operator pod label."""
    dep = snap.deployment(ops.OPERATOR_DEPLOYMENT)
    if dep:
        return dep
    key, value = ops.OPERATOR_POD_LABEL
    for d in snap.deployments:
        tmpl = d.get("spec", {}).get("template", {}).get("metadata", {}).get("labels") or {}
        if tmpl.get(key) == value:
            return d
    return None


def operator_image(snap: ClusterSnapshot) -> str:
    dep = operator_deployment(snap)
    if dep:
        for c in dep.get("spec", {}).get("template", {}).get("spec", {}).get("containers") or []:
            if c.get("name") == "gpu-operator" or "gpu-operator" in c.get("image", ""):
                return c.get("image", "")
    for p in snap.operator_pods:
        for c in p.get("spec", {}).get("containers") or []:
            return c.get("image", "")
    return ""


@dataclass(frozen=True)
class OperatorVersion:
    tag: str                        # 'v25.3.4', '' when unknown
    parsed: versions.Version | None
    source: str                     # where it was read, for messages ('' when unknown)

    @property
    def known(self) -> bool:
        return self.parsed is not None


def _validator_image(snap: ClusterSnapshot, operands: OperandPodIndex) -> str:
    ds = snap.daemonset(ops.VALIDATOR.daemonset)
    pods = [ds] if ds else []
    pods += operands.pods(ops.VALIDATOR)[:1]
    for obj in pods:
        spec = obj.get("spec", {})
        spec = spec.get("template", {}).get("spec", spec)
        for c in (spec.get("containers") or []) + (spec.get("initContainers") or []):
            if "gpu-operator" in c.get("image", ""):
                return c["image"]
    return ""


def detect_operator_version(snap: ClusterSnapshot, operands: OperandPodIndex) -> OperatorVersion:
    """From what the cluster says, most direct first: image tag, OLM CSV, Helm labels, the validator's image tag.

    OLM bundles (certified operator up to v25.10) pin images by digest with no tag; the CSV then names the version.
    """
    image = operator_image(snap)
    candidates: list[tuple[str, str]] = [(image_tag(image), f"operator image {image}")]
    for csv in snap.csvs:
        if "gpu-operator" in name_of(csv):
            candidates.append((csv.get("spec", {}).get("version", "") or name_of(csv),
                               f"ClusterServiceVersion {name_of(csv)}"))
    dep = operator_deployment(snap)
    if dep:
        dl = labels_of(dep)
        candidates.append((dl.get("app.kubernetes.io/version", ""), "Deployment label app.kubernetes.io/version"))
        candidates.append((dl.get("helm.sh/chart", ""), f"Deployment label helm.sh/chart={dl.get('helm.sh/chart')}"))
    vimage = _validator_image(snap, operands)
    candidates.append((image_tag(vimage), f"validator image {vimage}"))
    for tag, source in candidates:
        parsed = versions.parse(tag)
        if parsed is not None:
            return OperatorVersion(versions.text(parsed), parsed, source)
    return OperatorVersion("", None, "")


# ---- operand pods, by the DaemonSet that owns them ------------------------------------------------------------
# Labels are no way to find an operand's pods: driver pods carry app.kubernetes.io/component=nvidia-driver only
# from v23.9.0, and any other DaemonSet may carry the same labels. Ownership is what the operator itself relies on.

# ClusterPolicy's precompiled and OpenShift driver-toolkit DaemonSets append -<kernel>-<os> / -<rhcos> to the name.
_DRIVER_NAME_PREFIX = ops.DRIVER.daemonset + "-"
# An NVIDIADriver CR of this type deploys the vGPU host manager of sandbox workloads, not a container driver.
_VGPU_HOST_MANAGER = "vgpu-host-manager"


def _owner_name(obj: Obj, kind: str) -> str | None:
    """The name of the object's owner of `kind` (a pod's DaemonSet, a DaemonSet's NVIDIADriver); None without one."""
    return next((ref.get("name", "") for ref in obj.get("metadata", {}).get("ownerReferences") or []
                 if ref.get("kind") == kind), None)


def _cr_driver_prefixes(snap: ClusterSnapshot) -> tuple[str, ...]:
    """Name prefixes of the DaemonSets NVIDIADriver CRs deploy: nvidia-<driverType>-driver-<os>-<hash>."""
    types = {(cr.get("spec") or {}).get("driverType") or "gpu" for cr in snap.nvidiadrivers}
    return tuple(f"nvidia-{t}-driver-" for t in sorted(types) if t != _VGPU_HOST_MANAGER)


def _is_driver_daemonset(ds: Obj, cr_prefixes: tuple[str, ...]) -> bool:
    """ClusterPolicy's driver DaemonSet by name; an NVIDIADriver's by owner, or by the name its CR gives it."""
    name = name_of(ds)
    if name == ops.DRIVER.daemonset or name.startswith(_DRIVER_NAME_PREFIX):
        return True
    if labels_of(ds).get(ops.DRIVER_COMPONENT_LABEL[0]) == f"nvidia-{_VGPU_HOST_MANAGER}":
        return False
    return _owner_name(ds, "NVIDIADriver") is not None or bool(cr_prefixes) and name.startswith(cr_prefixes)


def operand_daemonsets(snap: ClusterSnapshot, operand: ops.Operand) -> list[Obj]:
    """The operand's DaemonSets in the snapshot (the driver has one per precompiled kernel or NVIDIADriver pool)."""
    if operand is ops.DRIVER:
        prefixes = _cr_driver_prefixes(snap)
        return [d for d in snap.daemonsets if _is_driver_daemonset(d, prefixes)]
    return [d for d in snap.daemonsets if name_of(d) == operand.daemonset]


def _operand_labels(operand: ops.Operand) -> tuple[dict[str, str], ...]:
    """The labels operand pods were once found by: the last resort, when no DaemonSet of theirs is in the snapshot."""
    own = ({"app": operand.app},)
    return own + ((dict([ops.DRIVER_COMPONENT_LABEL]),) if operand is ops.DRIVER else ())


@dataclass(frozen=True)
class _OperandPods:
    """How one operand's pods are told from the others', strongest evidence first (tier 0, 1, 2)."""

    owners: frozenset[str]                  # its DaemonSets' names
    selectors: tuple[dict[str, str], ...]   # their spec.selector.matchLabels
    foreign: frozenset[str]                 # every other DaemonSet of the snapshot
    labels: tuple[dict[str, str], ...]

    def tier(self, pod: Obj, owner: str | None) -> int | None:
        """0: owned by one of its DaemonSets; 1: ownerless but selected by one; 2: its labels; None: not its pod.

        `owner` is the name of the pod's DaemonSet (None without one). A pod another DaemonSet of the snapshot owns
        is never the operand's, whatever labels it carries.
        """
        if owner in self.owners:
            return 0
        if owner in self.foreign:
            return None
        labels = labels_of(pod)
        if owner is None and any(match_labels(s, labels) for s in self.selectors):
            return 1
        return 2 if any(match_labels(lab, labels) for lab in self.labels) else None


def _operand_matcher(snap: ClusterSnapshot, operand: ops.Operand) -> _OperandPods:
    own = operand_daemonsets(snap, operand)
    owners = frozenset(name_of(d) for d in own)
    # An empty matchLabels (a selector of matchExpressions only) would select every pod.
    selectors = tuple(sel for d in own if (sel := (d.get("spec", {}).get("selector") or {}).get("matchLabels")))
    foreign = frozenset(name_of(d) for d in snap.daemonsets) - owners
    return _OperandPods(owners, selectors, foreign, _operand_labels(operand))


@dataclass(frozen=True)
class OperandPodIndex:
    """Which pods are each operand's, worked out once: every check asks for several operands' pods on every node."""

    everywhere: dict[str, list[Obj]]          # operand key -> all its pods
    on_node: dict[tuple[str, str], Obj]       # (operand key, node) -> its newest live pod of the best tier there

    def pods(self, operand: ops.Operand) -> list[Obj]:
        """Every pod of the operand in the operator namespace, on any node (terminating ones too)."""
        return self.everywhere.get(operand.key, [])

    def pod(self, operand: ops.Operand, node: str) -> Obj | None:
        """The operand's newest live pod on the node, from the strongest evidence any pod there gives (see tier)."""
        return self.on_node.get((operand.key, node))


def operand_index(snap: ClusterSnapshot) -> OperandPodIndex:
    matchers = {o.key: _operand_matcher(snap, o) for o in ops.OPERANDS}
    everywhere: dict[str, list[Obj]] = {key: [] for key in matchers}
    candidates: dict[tuple[str, str], list[tuple[int, Obj]]] = {}
    for pod in snap.pods:
        owner = _owner_name(pod, "DaemonSet")
        live = not pod.get("metadata", {}).get("deletionTimestamp")
        node = pod.get("spec", {}).get("nodeName") or ""
        for key, match in matchers.items():
            tier = match.tier(pod, owner)
            if tier is None:
                continue
            everywhere[key].append(pod)
            if live and node:
                candidates.setdefault((key, node), []).append((tier, pod))
    on_node = {}
    for (key, node), found in candidates.items():
        best = min(t for t, _ in found)
        pod = snap.pod_on_node([p for t, p in found if t == best], node)
        if pod is not None:
            on_node[(key, node)] = pod
    return OperandPodIndex(everywhere, on_node)


# ---- driver ------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class DriverMode:
    kind: str     # "operator" | "host" | "pre-installed"
    source: str   # how it was recognised, for messages
    pod: Obj | None = None
    problem: str = ""  # a configuration that cannot work (e.g. useNvidiaDriverCRD without a CR)
    via_crd: bool = False  # the operator's driver, managed by NVIDIADriver CRs

    @property
    def report_name(self) -> str:
        """The short name the report's header counts ('operator', 'nvidiadriver-cr', 'host', 'pre-installed')."""
        return "nvidiadriver-cr" if self.kind == "operator" and self.via_crd else self.kind


# NVIDIADriver status (controllers/nvidiadriver_controller.go, v23.9.0..v26.7.0): on an error the controller sets
# Ready=False and Error=True with one of these reasons and its own message, and stops reconciling that CR.
NVIDIADRIVER_ERROR_REASONS = ("ConflictingNodeSelector", "ReconcileFailed", "DriverNotReady")
# v26.7.0: the node label naming the NVIDIADriver CR a node belongs to.
_DRIVER_OWNER_LABEL = "nvidia.com/gpu-operator.driver.owner"


def nvidiadriver_error(cr: Obj) -> tuple[str, str] | None:
    """(reason, message) of the CR's Error=True condition; None while it reports no error."""
    cond = next((c for c in (cr.get("status") or {}).get("conditions") or []
                 if c.get("type") == "Error" and c.get("status") == "True"), None)
    return (cond.get("reason") or "?", cond.get("message") or "") if cond else None


def nvidiadrivers_for_node(snap: ClusterSnapshot, node: str) -> list[Obj]:
    """The NVIDIADriver CRs that select the node, as the operator's nodeSelector validator reads them.

    v26.7 names a node's CR in the owner label. Otherwise a CR selects by spec.nodeSelector, an unset one meaning
    every GPU node (nvidia.com/gpu.present=true, GetNodeSelector); a v26.7 CR with spec.default=true is the
    fallback of nodes no other CR selects. More than one selecting CR is a conflict: the node gets no driver.
    """
    labels = labels_of(snap.node_by_name.get(node, {}))
    owner = labels.get(_DRIVER_OWNER_LABEL)
    if owner:
        return [cr for cr in snap.nvidiadrivers if name_of(cr) == owner]

    def default(cr: Obj) -> bool:
        return bool((cr.get("spec") or {}).get("default"))

    chosen = [cr for cr in snap.nvidiadrivers if not default(cr) and match_labels(
        (cr.get("spec") or {}).get("nodeSelector") or {"nvidia.com/gpu.present": "true"}, labels)]
    return chosen or [cr for cr in snap.nvidiadrivers if default(cr)]


def nvidiadriver_problem(snap: ClusterSnapshot, node: str) -> str:
    """Why no NVIDIADriver deploys a driver on the node, in the CRs' own words; '' when nothing says so."""
    crs = nvidiadrivers_for_node(snap, node)
    if not crs:
        shown = "; ".join(f"{name_of(cr)}: {(cr.get('spec') or {}).get('nodeSelector')}" for cr in snap.nvidiadrivers)
        return f"no NVIDIADriver selects this node (nodeSelectors: {shown}), so no driver is deployed on it"
    said = [f"NVIDIADriver {name_of(cr)} reports {err[0]}: {err[1]}" if err[1] else
            f"NVIDIADriver {name_of(cr)} reports {err[0]}"
            for cr in crs if (err := nvidiadriver_error(cr)) is not None and err[0] != "DriverNotReady"]
    if said:
        return "; ".join(said)
    if len(crs) > 1:
        return (f"NVIDIADrivers {', '.join(name_of(cr) for cr in crs)} all select this node; the operator deploys "
                "none of them on a node two select (ConflictingNodeSelector)")
    return ""


def driver_mode(snap: ClusterSnapshot, node: str, operands: OperandPodIndex, model: ResourceModel) -> DriverMode:
    """Which driver configuration a GPU node is in, from its driver pod, deploy label and the ClusterPolicy."""
    label = labels_of(snap.node_by_name.get(node, {})).get(ops.DRIVER.deploy_label)
    pod = operands.pod(ops.DRIVER, node)
    use_crd = bool(snap.policy_spec("driver", "useNvidiaDriverCRD"))
    if pod is not None:
        owner = next((r for r in pod.get("metadata", {}).get("ownerReferences") or []), {})
        owned_by = f"{owner.get('kind', 'DaemonSet')} {owner.get('name', '?')}"
        return DriverMode("operator", f"operator driver container (pod {name_of(pod)} of {owned_by})", pod,
                          via_crd=use_crd)
    if label == "pre-installed":
        return DriverMode("pre-installed", f"pre-installed host driver detected by k8s-driver-manager "
                          f"({ops.DRIVER.deploy_label}=pre-installed)")
    if model == ResourceModel.GPUCLUSTER:
        # v26.7.0's GPUCluster installs no driver: it is on the host, or an NVIDIADriver CR deploys it.
        if snap.nvidiadrivers:
            names = ", ".join(name_of(d) for d in snap.nvidiadrivers)
            return DriverMode("operator", f"operator driver container via NVIDIADriver CR ({names}) beside the "
                              "GPUCluster", problem=nvidiadriver_problem(snap, node), via_crd=True)
        return DriverMode("host", "host driver (the GPUCluster installs none, and no NVIDIADriver CR exists)")
    if use_crd:
        if ops.NVIDIADRIVER_CRD not in snap.crds:
            problem = f"spec.driver.useNvidiaDriverCRD=true but the CRD {ops.NVIDIADRIVER_CRD} is not installed"
        elif not snap.nvidiadrivers:
            problem = "spec.driver.useNvidiaDriverCRD=true but no NVIDIADriver CR exists, so no driver is deployed"
        else:
            # The CR's own condition says why this node has no driver pod (a conflicting nodeSelector, a failed
            # reconcile) better than a missing DaemonSet pod does.
            problem = nvidiadriver_problem(snap, node)
        names = ", ".join(name_of(d) for d in snap.nvidiadrivers) or "none"
        return DriverMode("operator", f"operator driver container via NVIDIADriver CR ({names})", problem=problem,
                          via_crd=True)
    if not snap.policy_enabled("driver", True):
        return DriverMode("host", "host driver (ClusterPolicy spec.driver.enabled=false)")
    if label == "false":
        return DriverMode("host", f"host driver (driver opted out on this node: {ops.DRIVER.deploy_label}=false)")
    return DriverMode("operator", "operator driver container (spec.driver.enabled=true)")


# ---- CDI --------------------------------------------------------------------------------------------------------
class CdiSetting(NamedTuple):
    """Whether CDI injects the GPUs (DPL-007, RuntimeClasses, PRB-004 all read this one answer) and why."""

    on: bool
    source: str


def strategy_uses_cdi(strategy: str) -> bool:
    return any(s.strip() in ("cdi-annotations", "cdi-cri") for s in strategy.split(","))


def device_plugin_env(snap: ClusterSnapshot) -> dict[str, str] | None:
    """The env of the device plugin DaemonSet's plugin container; None when there is no such DaemonSet."""
    ds = snap.daemonset(ops.DEVICE_PLUGIN.daemonset)
    if ds is None:
        return None
    containers = ds.get("spec", {}).get("template", {}).get("spec", {}).get("containers") or []
    ctr = next((c for c in containers if c.get("name") == ops.DEVICE_PLUGIN_CONTAINER),
               containers[0] if containers else {})
    return {e.get("name", ""): str(e.get("value", "")) for e in ctr.get("env") or [] if "value" in e}


def cdi_policy(snap: ClusterSnapshot, version: versions.Version | None) -> tuple[bool | None, str]:
    """CDI on/off per the ClusterPolicy, with where that came from (the field, or the version's default).

    None when the field is unset and the operator version unknown: both answers are then acceptable.
    """
    value = snap.policy_spec("cdi", "enabled")
    if value is not None:
        return bool(value), f"spec.cdi.enabled={str(bool(value)).lower()}"
    on = versions.since(versions.CDI_DEFAULT_ON, version)
    if on is None:
        return None, "spec.cdi.enabled unset and operator version unknown"
    return on, f"spec.cdi.enabled unset (default {str(on).lower()} for operator {versions.text(version)})"


def effective_cdi(snap: ClusterSnapshot, version: versions.Version | None,
                  env: dict[str, str] | None) -> CdiSetting:
    """cdi_policy, with an undecidable policy settled by what the device plugin actually does (its `env`)."""
    on, source = cdi_policy(snap, version)
    if on is not None:
        return CdiSetting(on, source)
    plugin = strategy_uses_cdi(env.get("DEVICE_LIST_STRATEGY", "envvar")) if env is not None else False
    return CdiSetting(plugin, f"{source}; the device plugin's DEVICE_LIST_STRATEGY says {'on' if plugin else 'off'}")


# ---- all of it, once -----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ClusterFacts:
    """What the run derives from the read, once: the checks, the probe's plan, the report header and the reports
    all read this one object."""

    operator: OperatorVersion
    resource_model: ResourceModel
    # A ClusterPolicy beside a GPUCluster (OPR-009): every other failure is its consequence.
    both_models: bool
    operands: OperandPodIndex
    # The device plugin container's env (None without its DaemonSet), and the CDI answer it helps settle.
    device_plugin_env: dict[str, str] | None
    cdi: CdiSetting
    # The DRA objects (ResourceSlices, claims, DeviceClasses) indexed by node and device.
    dra: DraView
    # GPU node -> its driver configuration (DRV-001 judges it, the header counts it).
    driver_modes: dict[str, DriverMode] = field(default_factory=dict)

    def rule(self, name: str) -> bool | None:
        return versions.since(name, self.operator.parsed)


def build_facts(snap: ClusterSnapshot) -> ClusterFacts:
    """Every fact of the run, from the snapshot as read: called once by the session (check_input.check_input)."""
    operands = operand_index(snap)
    model = resource_model(snap)
    modes = {n: driver_mode(snap, n, operands, model) for n in snap.gpu_node_names}
    operator = detect_operator_version(snap, operands)
    env = device_plugin_env(snap)
    return ClusterFacts(operator, model, both_models(snap), operands, env, effective_cdi(snap, operator.parsed, env),
                        DraView(snap), modes)
