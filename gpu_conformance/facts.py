"""Facts about the cluster that several checks, the probe and the report need, computed once per snapshot.

`facts(snapshot)` is cached on the snapshot, so a fact cannot be worked out twice and disagree with itself
(the report header and DRV-001 once named different driver modes for the same node).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gpu_conformance import operands as ops
from gpu_conformance import versions
from gpu_conformance.cluster.snapshot import ClusterSnapshot, labels_of, name_of

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


def _validator_image(snap: ClusterSnapshot) -> str:
    ds = snap.daemonset(ops.VALIDATOR.daemonset)
    pods = [ds] if ds else []
    pods += [p for p in snap.pods if labels_of(p).get("app") == ops.VALIDATOR.app][:1]
    for obj in pods:
        spec = obj.get("spec", {})
        spec = spec.get("template", {}).get("spec", spec)
        for c in (spec.get("containers") or []) + (spec.get("initContainers") or []):
            if "gpu-operator" in c.get("image", ""):
                return c["image"]
    return ""


def detect_operator_version(snap: ClusterSnapshot) -> OperatorVersion:
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
    vimage = _validator_image(snap)
    candidates.append((image_tag(vimage), f"validator image {vimage}"))
    for tag, source in candidates:
        parsed = versions.parse(tag)
        if parsed is not None:
            return OperatorVersion(versions.text(parsed), parsed, source)
    return OperatorVersion("", None, "")


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


def driver_pod(snap: ClusterSnapshot, node: str) -> Obj | None:
    key, value = ops.DRIVER_COMPONENT_LABEL
    return snap.labelled_pod_on_node({key: value}, node)


def driver_mode(snap: ClusterSnapshot, node: str) -> DriverMode:
    """Which driver configuration a GPU node is in, from its driver pod, deploy label and the ClusterPolicy."""
    label = labels_of(snap.node_by_name.get(node, {})).get(ops.DRIVER.deploy_label)
    pod = driver_pod(snap, node)
    use_crd = bool(snap.policy_spec("driver", "useNvidiaDriverCRD"))
    if pod is not None:
        owner = next((r for r in pod.get("metadata", {}).get("ownerReferences") or []), {})
        owned_by = f"{owner.get('kind', 'DaemonSet')} {owner.get('name', '?')}"
        return DriverMode("operator", f"operator driver container (pod {name_of(pod)} of {owned_by})", pod,
                          via_crd=use_crd)
    if label == "pre-installed":
        return DriverMode("pre-installed", f"pre-installed host driver detected by k8s-driver-manager "
                          f"({ops.DRIVER.deploy_label}=pre-installed)")
    if use_crd:
        if ops.NVIDIADRIVER_CRD not in snap.crds:
            problem = f"spec.driver.useNvidiaDriverCRD=true but the CRD {ops.NVIDIADRIVER_CRD} is not installed"
        elif not snap.nvidiadrivers:
            problem = "spec.driver.useNvidiaDriverCRD=true but no NVIDIADriver CR exists, so no driver is deployed"
        else:
            problem = ""
        names = ", ".join(name_of(d) for d in snap.nvidiadrivers) or "none"
        return DriverMode("operator", f"operator driver container via NVIDIADriver CR ({names})", problem=problem,
                          via_crd=True)
    if not snap.policy_enabled("driver", True):
        return DriverMode("host", "host driver (ClusterPolicy spec.driver.enabled=false)")
    if label == "false":
        return DriverMode("host", f"host driver (driver opted out on this node: {ops.DRIVER.deploy_label}=false)")
    return DriverMode("operator", "operator driver container (spec.driver.enabled=true)")


# ---- all of it, once -----------------------------------------------------------------------------------------
@dataclass
class ClusterFacts:
    operator: OperatorVersion
    driver_modes: dict[str, DriverMode] = field(default_factory=dict)

    def rule(self, name: str) -> bool | None:
        return versions.since(name, self.operator.parsed)


def facts(snap: ClusterSnapshot) -> ClusterFacts:
    cached = snap.__dict__.get("_facts")
    if cached is None:
        cached = ClusterFacts(detect_operator_version(snap),
                              {n: driver_mode(snap, n) for n in snap.gpu_node_names})
        snap.__dict__["_facts"] = cached
    return cached
