"""The probe in the DRA models (issue #22 item 2): a ResourceClaimTemplate and claim pods, an extended-resource pod
where a DeviceClass maps nvidia.com/gpu, the path recorded per pod, everything deleted, an unallocatable claim explained
in kube-scheduler v1.36's words, every device claimed by others busy (not broken), a device-plugin cluster unchanged.

The probe's real I/O runs against `DraCluster`: test_probe_world's in-memory API server plus what
kube-controller-manager's resource-claim controller and kube-scheduler's DynamicResources plugin do with a claim pod
(names and messages as in Kubernetes v1.36.3: pkg/controller/resourceclaim,
pkg/scheduler/framework/plugins/dynamicresources).
"""

from __future__ import annotations

import copy
import json
import time
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import yaml
from factory import (
    healthy_dra_driver_snapshot,
    healthy_gpucluster_snapshot,
    healthy_snapshot,
    resource_claim,
    resource_slice,
)
from report_data import healthy_cluster
from test_probe_world import NS, RUN, FakeCluster, judged, succeed

import gpu_conformance.probe.run as probe_mod
from gpu_conformance import catalogue
from gpu_conformance.check_input import check_input
from gpu_conformance.cluster.snapshot import ClusterSnapshot
from gpu_conformance.model import Finding, Status
from gpu_conformance.probe import api as probe_api
from gpu_conformance.probe import manifests as probe_manifests
from gpu_conformance.probe.claims import template_name
from gpu_conformance.report.html import render_html
from gpu_conformance.settings import Settings

RESOURCE = "/apis/resource.k8s.io/v1/namespaces/" + NS
TEMPLATE = template_name(RUN)
# kube-scheduler v1.36.3's words for a probe pod pinned to one node of four whose claim found no device there, as
# the real scheduler said them to this probe's pods (kwok nodes, one without a ResourceSlice).
CANNOT_ALLOCATE = ("0/4 nodes are available: 1 cannot allocate all claims, 3 node(s) didn't satisfy plugin(s) "
                   "[NodeAffinity]. still not schedulable, preemption: 0/4 nodes are available: 4 Preemption is not "
                   "helpful for scheduling.")
REPO = Path(__file__).resolve().parents[1]


def dra_snapshot(devices: dict[str, int] | None = None, claims: list[dict] | None = None,
                 extended: bool = False, gpucluster: bool = False) -> ClusterSnapshot:
    """The factory's healthy dra-driver (or gpucluster) cluster of 3 GPU nodes, each publishing `devices[node]` GPUs
    (default 1), `claims` held elsewhere, and optionally an admin's DeviceClass mapping nvidia.com/gpu."""
    snap = healthy_gpucluster_snapshot() if gpucluster else healthy_dra_driver_snapshot()
    if devices is not None:
        snap.resource_slices = [resource_slice(n, k) for n, k in devices.items() if k]
    if extended:
        snap.device_classes.append({"metadata": {"name": "gpu-extended.example.com"},
                                    "spec": {"extendedResourceName": "nvidia.com/gpu"}})
    snap.resource_claims = claims or []
    return snap


def held_claim(node: str, device: str = "gpu-0") -> dict[str, Any]:
    return resource_claim("ml", "train-0-gpu-x7k2q", node, device)


class DraCluster(FakeCluster):
    """FakeCluster plus ResourceClaimTemplates and ResourceClaims: the claim controller creates a pod's claim from
    its template when the pod is created (unless `controller` is off); the scheduler allocates a free device of the
    node's slice and binds the pod, or leaves it Pending with its FailedScheduling event."""

    def __init__(self, snap: ClusterSnapshot, controller: bool = True) -> None:
        super().__init__(snap.gpu_node_names)
        self.snap = snap
        self.controller = controller
        self.templates: dict[str, dict] = {}
        self.claims: dict[str, dict] = {}
        self.events: list[dict] = []
        self.created: list[dict] = []  # every pod body as posted
        self.template_bodies: list[dict] = []
        held = {(r["pool"], r["device"]) for c in snap.resource_claims
                for r in c["status"]["allocation"]["devices"]["results"] if not r.get("adminAccess")}
        self.free = {s["spec"]["nodeName"]: [d["name"] for d in s["spec"]["devices"]
                                             if (s["spec"]["pool"]["name"], d["name"]) not in held]
                     for s in snap.resource_slices}

    def request(self, api: object, method: str, path: str, query: list | None = None, body: Any = None,
                *a: object, **kw: object) -> bytes:
        if path.startswith(RESOURCE):
            self.requests.append((method, path))
            rest = path.removeprefix(RESOURCE + "/").split("/")
            if rest[0] == "resourceclaimtemplates":
                if method == "POST":
                    self.template_bodies.append(body)
                    self.templates[body["metadata"]["name"]] = body
                    return json.dumps(body).encode()
                if method == "DELETE":
                    self.templates.pop(rest[1], None)
                    return b"{}"
            if rest == ["resourceclaims"] and method == "GET":
                return json.dumps({"items": list(self.claims.values())}).encode()
            raise AssertionError(f"unexpected request {method} {path}")
        if path.endswith("/events"):
            self.requests.append((method, path))
            return json.dumps({"items": self.events}).encode()
        if method == "DELETE" and path.endswith("/pods"):
            # The garbage collector: generated claims are owned by their pods.
            self.claims.clear()
        return super().request(api, method, path, query, body, *a, **kw)

    def _create(self, body: dict[str, Any]) -> bytes:
        self.created.append(copy.deepcopy(body))
        pod = json.loads(json.dumps(body))
        name = pod["metadata"]["name"]
        node = pod["metadata"]["annotations"]["gpu-conformance.nvidia.com/target-node"]
        pod["metadata"].update(namespace=NS, uid=f"uid-{name}")
        pod["status"] = {"phase": "Pending"}
        claims = pod["spec"].get("resourceClaims") or []
        wants_device = bool(claims) or "nvidia.com/gpu" in json.dumps(pod["spec"]["containers"])
        if claims and self.controller:
            template = self.templates[claims[0]["resourceClaimTemplateName"]]
            claim_name = f"{name}-gpu-q8z4m"
            self.claims[claim_name] = {
                "metadata": {"name": claim_name, "namespace": NS, "labels": template["spec"]["metadata"]["labels"],
                             "ownerReferences": [{"kind": "Pod", "name": name, "uid": pod["metadata"]["uid"]}]},
                "spec": template["spec"]["spec"], "status": {}}
            pod["status"]["resourceClaimStatuses"] = [{"name": "gpu", "resourceClaimName": claim_name}]
        if claims and not self.controller:
            pass  # kube-scheduler's PreEnqueue waits for the claim: no event, no condition
        elif wants_device and self.free.get(node):
            device = self.free[node].pop(0)
            claim_name = (pod["status"].get("resourceClaimStatuses") or [{}])[0].get("resourceClaimName")
            if claim_name is None:  # the scheduler's own claim for a DRA-backed extended resource
                claim_name = f"{name}-extended-resources-2xv9c"
                self.claims[claim_name] = {"metadata": {"name": claim_name, "namespace": NS, "ownerReferences": [
                    {"kind": "Pod", "name": name, "uid": pod["metadata"]["uid"]}]}, "status": {}}
                pod["status"]["extendedResourceClaimStatus"] = {"resourceClaimName": claim_name}
            self.claims[claim_name]["status"] = {
                "allocation": {"devices": {"results": [{"request": "gpu", "driver": "gpu.nvidia.com", "pool": node,
                                                         "device": device}]}},
                "reservedFor": [{"resource": "pods", "name": name, "uid": pod["metadata"]["uid"]}]}
            pod["spec"]["nodeName"] = node
        else:
            pod["status"]["conditions"] = [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                                            "message": CANNOT_ALLOCATE}]
            self.events.append({"type": "Warning", "reason": "FailedScheduling", "message": CANNOT_ALLOCATE,
                                "involvedObject": {"kind": "Pod", "name": name}})
        self.pods[name] = pod
        return json.dumps(pod).encode()


@pytest.fixture
def world(monkeypatch: pytest.MonkeyPatch) -> Callable[..., tuple[DraCluster, probe_mod.Probe]]:
    monkeypatch.setattr(probe_mod, "POLL_INTERVAL", 0.05)
    monkeypatch.setattr("gpu_conformance.probe.states.UNSCHEDULABLE_GRACE", 0.2)

    def make(snap: ClusterSnapshot, probe_timeout: float = 10.0, controller: bool = True,
             ) -> tuple[DraCluster, probe_mod.Probe]:
        cluster = DraCluster(snap, controller)
        cluster.on_poll = lambda c: [succeed(p) for p in c.pods.values() if p["spec"].get("nodeName")]
        monkeypatch.setattr(probe_api, "raw_request", cluster.request)
        conn: Any = SimpleNamespace(api=None, server="https://fake", user="u")
        probe = probe_mod.Probe(conn, Settings(run_id=RUN, probe_timeout=probe_timeout), snap)
        return cluster, probe

    return make


def probe_findings(probe: probe_mod.Probe) -> list[Finding]:
    inp = check_input(probe.snap, probe.settings, probe.obs)
    return [f for c in catalogue.all_checks() if c.func is not None and c.id.startswith("PRB-")
            for f in c.run(inp)]


def run(probe: probe_mod.Probe):  # type: ignore[no-untyped-def]
    return probe.run(probe.snap.gpu_node_names, (NS, "shared"))


# ---- the objects and the paths ------------------------------------------------------------------------------------

def test_claim_path_creates_a_template_and_claim_pods_that_get_their_gpu(world) -> None:
    cluster, probe = world(dra_snapshot())
    obs = run(probe)
    (tmpl,) = cluster.template_bodies
    assert tmpl["metadata"]["name"] == TEMPLATE and tmpl["kind"] == "ResourceClaimTemplate"
    (request,) = tmpl["spec"]["spec"]["devices"]["requests"]
    assert request == {"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com", "allocationMode": "ExactCount",
                                                  "count": 1}}
    # Its claims carry the run's label (the template's spec.metadata is copied onto each).
    assert tmpl["spec"]["metadata"]["labels"][probe_manifests.RUN_LABEL] == RUN
    assert len(cluster.created) == 3
    for body in cluster.created:
        spec = body["spec"]
        assert "runtimeClassName" not in spec
        assert spec["resourceClaims"] == [{"name": "gpu", "resourceClaimTemplateName": TEMPLATE}]
        (container,) = spec["containers"]
        assert container["resources"] == {"claims": [{"name": "gpu"}]}  # no extended resource besides the claim
        node = body["metadata"]["annotations"]["gpu-conformance.nvidia.com/target-node"]
        terms = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
        assert terms == [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}]
    assert obs.model == "dra-driver" and obs.template == TEMPLATE
    assert {p.path for p in obs.pods.values()} == {"claim"}
    report = obs.to_dict()
    assert report["model"] == "dra-driver" and report["template"] == TEMPLATE
    for p in report["pods"]:
        assert p["path"] == "claim" and p["resource"] == "gpu.nvidia.com"
        assert p["claim"] == {"name": f"{p['name']}-gpu-q8z4m", "allocated": True,
                              "devices": [f"gpu.nvidia.com/{p['node']}/gpu-0"], "reserved_for": [p["name"]]}
    findings = probe_findings(probe)
    assert {f.status for f in findings} == {Status.PASS}
    # Cleanup: the pods by label, the template by name; the claims went with their pods.
    assert ("DELETE", f"{RESOURCE}/resourceclaimtemplates/{TEMPLATE}") in cluster.requests
    assert obs.deleted and not cluster.pods and not cluster.templates and not cluster.claims
    assert f"ResourceClaimTemplate {TEMPLATE} deleted" in probe.cleanup_sentence()


@pytest.mark.parametrize("gpucluster", [False, True])
def test_a_healthy_dra_cluster_is_conformant_through_its_claims(world, gpucluster: bool) -> None:
    cluster, probe = world(dra_snapshot(gpucluster=gpucluster))
    obs = run(probe)
    assert obs.model == ("gpucluster" if gpucluster else "dra-driver")
    assert {p.path for p in obs.pods.values()} == {"claim"} and len(cluster.template_bodies) == 1
    verdict, findings = judged(probe.snap, probe.settings, probe.obs)
    assert verdict == "CONFORMANT", [(f.check_id, f.node, f.message) for f in findings if f.status != Status.PASS
                                     and f.status != Status.NA]


def test_a_device_class_mapping_nvidia_gpu_gets_one_extended_resource_pod(world) -> None:
    cluster, probe = world(dra_snapshot(extended=True))
    obs = run(probe)
    last = probe.snap.gpu_node_names[-1]
    assert {n: p.path for n, p in obs.pods.items()} == {
        **{n: "claim" for n in probe.snap.gpu_node_names[:-1]}, last: "extended-resource"}
    body = next(b for b in cluster.created
                if b["metadata"]["annotations"]["gpu-conformance.nvidia.com/target-node"] == last)
    assert "resourceClaims" not in body["spec"] and "runtimeClassName" not in body["spec"]
    assert body["spec"]["containers"][0]["resources"] == {"limits": {"nvidia.com/gpu": "1"},
                                                          "requests": {"nvidia.com/gpu": "1"}}
    ext = obs.pods[last].to_dict(obs.image)
    assert ext["path"] == "extended-resource" and ext["claim"]["allocated"]
    assert {f.status for f in probe_findings(probe)} == {Status.PASS}
    # The HTML report says each pod's path and its claim.
    page = render_html(healthy_cluster(probe=obs.to_dict()).to_json_dict())
    assert "extended-resource" in page and ">claim<" in page.replace("<br>", "<")
    assert f"claim {obs.pods[last].name}-extended-resources-2xv9c: gpu.nvidia.com/{last}/gpu-0" in page


def test_a_single_node_with_an_extended_resource_class_is_probed_through_its_claim(world) -> None:
    snap = dra_snapshot(extended=True)
    _, probe = world(snap)
    obs = probe.run(snap.gpu_node_names[:1], (NS, "shared"))
    assert [p.path for p in obs.pods.values()] == ["claim"]  # one pod per node: never two GPUs asked of one node


def test_an_interrupted_probe_deletes_its_template_too(world) -> None:
    cluster, probe = world(dra_snapshot())

    def interrupt(c: FakeCluster) -> None:
        raise KeyboardInterrupt

    cluster.on_poll = interrupt
    with pytest.raises(KeyboardInterrupt):
        run(probe)
    assert probe.obs.deleted and not cluster.pods and not cluster.templates and not cluster.claims


# ---- a claim kube-scheduler cannot allocate ---------------------------------------------------------------------

def test_an_unallocatable_claim_is_quoted_with_what_the_node_publishes(world) -> None:
    snap = dra_snapshot()
    n2 = snap.gpu_node_names[1]
    snap.resource_slices = [s for s in snap.resource_slices if s["spec"]["nodeName"] != n2]
    _, probe = world(snap)
    obs = run(probe)
    findings = probe_findings(probe)
    (fail,) = [f for f in findings if f.status == Status.FAIL]
    assert fail.check_id == "PRB-001" and fail.node == n2
    claim = f"{obs.pods[n2].name}-gpu-q8z4m"
    assert fail.message == (f"probe Pending: {CANNOT_ALLOCATE}; claim {claim} not allocated — {n2} publishes no "
                            "gpu.nvidia.com device in a ResourceSlice: the DRA driver's kubelet plugin is not running "
                            "there or found no GPU")
    assert fail.evidence["path"] == "claim" and fail.evidence["claim"]["allocated"] is False
    assert f"FailedScheduling: {CANNOT_ALLOCATE}" in fail.evidence["events"]
    assert "resourceclaims" in fail.kubectl


def test_every_device_claimed_by_others_is_busy_not_broken_and_gets_no_pod(world) -> None:
    snap = dra_snapshot()
    n3 = snap.gpu_node_names[2]
    # The validator's adminAccess claim on the same device takes nothing from anyone: not named.
    snap.resource_claims = [held_claim(n3), resource_claim("gpu-operator", "validator-gpu-1", n3, "gpu-0",
                                                           admin=True)]
    cluster, probe = world(snap)
    obs = run(probe)
    assert n3 not in obs.plan.targets and obs.plan.not_probed[n3].kind == "busy"
    assert len(cluster.created) == 2  # known busy from the snapshot's claims: no pod asks the scheduler
    findings = probe_findings(probe)
    assert not [f for f in findings if f.status == Status.FAIL]
    (warn,) = [f for f in findings if f.status == Status.WARN]
    assert warn.node == n3 and warn.message == (
        f"all 1 gpu.nvidia.com device(s) of {n3} are allocated to ml/train-0-gpu-x7k2q (ResourceClaims), the probe "
        "needs 1: not probed")
    assert warn.evidence["claims"] == ["ml/train-0-gpu-x7k2q"] and warn.evidence["devices"] == ["gpu-0"]
    assert "1 with all GPUs in use" in obs.plan.scope
    assert not cluster.pods and not cluster.templates
    verdict, _ = judged(probe.snap, probe.settings, probe.obs)
    assert verdict != "NOT CONFORMANT"  # a busy node is a warning, judged like the device plugin's "all GPUs in use"


@pytest.mark.parametrize("held_in_snapshot", [False, True])
def test_devices_taken_after_the_read_are_busy_in_the_schedulers_words(world, held_in_snapshot: bool) -> None:
    # A workload claims the node's devices between the snapshot and the probe: the scheduler's 'cannot allocate all
    # claims' on a node that publishes devices (and passed DPL-011/012) is busy, never a failure.
    nodes = healthy_dra_driver_snapshot().gpu_node_names
    snap = dra_snapshot({n: 2 for n in nodes})
    if held_in_snapshot:
        snap.resource_claims = [held_claim(nodes[0])]  # gpu-1 still free when the cluster was read
    cluster, probe = world(snap)
    cluster.free[nodes[0]] = []
    obs = run(probe)
    findings = probe_findings(probe)
    assert not [f for f in findings if f.status == Status.FAIL]
    (warn,) = [f for f in findings if f.status == Status.WARN]
    head = (f"the 2 gpu.nvidia.com device(s) of {nodes[0]} are allocated (1 free when the cluster was read, claimed "
            "since; ml/train-0-gpu-x7k2q held the others)" if held_in_snapshot else
            f"the 2 gpu.nvidia.com device(s) of {nodes[0]} are allocated (2 free when the cluster was read, claimed "
            "since)")
    assert warn.node == nodes[0] and warn.message == (f"{head} (the scheduler: {CANNOT_ALLOCATE}), the probe needs "
                                                      "1: not probed")
    assert obs.plan.not_probed[nodes[0]].evidence["probe_pod"] == probe_manifests.pod_name(RUN, nodes[0])


def test_a_claim_never_created_is_named_not_a_silent_timeout(world) -> None:
    _, probe = world(dra_snapshot(), probe_timeout=0.5, controller=False)
    run(probe)
    fails = [f for f in probe_findings(probe) if f.status == Status.FAIL]
    assert len(fails) == 3 and all(f.check_id == "PRB-001" for f in fails)
    assert f"its ResourceClaim was never created from template {TEMPLATE}" in fails[0].message
    assert "resource-claim controller of kube-controller-manager" in fails[0].message


@pytest.mark.parametrize(("event", "said"), [
    ("0/4 nodes are available: request gpu: device class gpu.nvidia.com does not exist. no new claims to deallocate, "
     "preemption: 0/4 nodes are available: 4 Preemption is not helpful for scheduling.",
     "the DeviceClass gpu.nvidia.com is missing"),
    ("FailedResourceClaimCreation", "kube-controller-manager's resource-claim controller"),
])
def test_the_schedulers_and_controllers_other_words_are_explained(world, event: str, said: str) -> None:
    # Real wording (v1.36.3 scheduler and resource-claim controller); a failed claim creation ends the wait at once.
    cluster, probe = world(dra_snapshot(), probe_timeout=30 if event == "FailedResourceClaimCreation" else 0.5,
                           controller=False)
    reason = "FailedResourceClaimCreation" if event == "FailedResourceClaimCreation" else "FailedScheduling"
    message = (f'PodResourceClaim gpu: resource claim template "{TEMPLATE}": resourceclaimtemplate.resource.k8s.io '
               f'"{TEMPLATE}" not found') if reason != "FailedScheduling" else event
    cluster.events = [{"type": "Warning", "reason": reason, "message": message,
                       "involvedObject": {"kind": "Pod", "name": probe_manifests.pod_name(RUN, n)}}
                      for n in probe.snap.gpu_node_names]
    t0 = time.monotonic()
    run(probe)
    assert time.monotonic() - t0 < 10
    fails = [f for f in probe_findings(probe) if f.status == Status.FAIL]
    assert len(fails) == 3 and said in fails[0].message and message in fails[0].message


# ---- the device-plugin model unchanged, permissions ---------------------------------------------------------------

def test_a_device_plugin_cluster_is_probed_as_before(world) -> None:
    snap = healthy_snapshot("v25.3.4")
    cluster, probe = world(snap)
    obs = run(probe)
    assert obs.model == "device-plugin" and not obs.template
    assert not [r for r in cluster.requests if "resource.k8s.io" in r[1]]
    for body in cluster.created:
        assert "resourceClaims" not in body["spec"]
        assert body["spec"]["containers"][0]["resources"] == {"limits": {"nvidia.com/gpu": "1"},
                                                              "requests": {"nvidia.com/gpu": "1"}}
    assert [p["path"] for p in obs.to_dict()["pods"]] == ["device-plugin"] * 3
    assert all(p["claim"] == {} for p in obs.to_dict()["pods"])


def test_the_probe_asks_for_template_and_claim_permissions_only_in_dra_models() -> None:
    plain = probe_mod.required_permissions(NS, "shared")
    dra = probe_mod.required_permissions(NS, "shared", dra=True)
    extra = set(dra) - set(plain)
    assert extra == {("create", "resource.k8s.io", "resourceclaimtemplates", NS),
                     ("delete", "resource.k8s.io", "resourceclaimtemplates", NS),
                     ("list", "resource.k8s.io", "resourceclaims", NS)}
    own = set(probe_mod.required_permissions("own-ns", "own", dra=True))
    assert ("delete", "resource.k8s.io", "resourceclaimtemplates", "own-ns") not in own  # the namespace goes


def test_rbac_yaml_grants_the_probe_its_template_and_claims_in_its_namespace_only() -> None:
    docs = [d for d in yaml.safe_load_all((REPO / "rbac.yaml").read_text()) if d]
    (role,) = [d for d in docs if d["kind"] == "Role"]
    assert role["metadata"]["namespace"] == "gpu-conformance-probe"
    rules = {(g, r): set(rule["verbs"]) for rule in role["rules"] for g in rule["apiGroups"] for r in rule["resources"]}
    assert rules[("resource.k8s.io", "resourceclaimtemplates")] >= {"create", "delete"}
    assert rules[("resource.k8s.io", "resourceclaims")] == {"get", "list"}
    for d in docs:
        if d["kind"] == "ClusterRole":
            assert not any(v in {"create", "delete"} for rule in d["rules"] for v in rule["verbs"])


def test_a_claim_pod_without_cdi_injection_fails_prb_004_whatever_the_clusterpolicy_says(world) -> None:
    snap = dra_snapshot()
    snap.clusterpolicies[0]["spec"]["cdi"] = {"enabled": False}
    cluster, probe = world(snap)
    obs = run(probe)
    n1 = snap.gpu_node_names[0]
    obs.pods[n1].logs = obs.pods[n1].logs.replace("NVIDIA_VISIBLE_DEVICES=void", "NVIDIA_VISIBLE_DEVICES=all")
    (fail,) = [f for f in probe_findings(probe) if f.status == Status.FAIL]
    assert (fail.check_id, fail.node, fail.evidence["cdi_expected"]) == ("PRB-004", n1, True)


def test_fewer_free_devices_than_the_probe_asks_for_is_busy(world) -> None:
    nodes = healthy_dra_driver_snapshot().gpu_node_names
    snap = dra_snapshot({n: 2 for n in nodes})
    snap.resource_claims = [held_claim(nodes[0])]
    cluster, probe = world(snap)
    probe.settings.probe_gpus = 2
    obs = run(probe)
    assert obs.plan.not_probed[nodes[0]].message == (
        f"only 1 of 2 gpu.nvidia.com device(s) of {nodes[0]} free, the others allocated to ml/train-0-gpu-x7k2q "
        "(ResourceClaims), the probe needs 2: not probed")
    assert cluster.template_bodies[0]["spec"]["spec"]["devices"]["requests"][0]["exactly"]["count"] == 2


def test_the_probes_driver_and_class_names_are_the_checks_names() -> None:
    from gpu_conformance import resource_model
    from gpu_conformance.probe import claims as probe_claims

    assert (probe_claims.DRA_DRIVER, probe_claims.DEVICE_CLASS) == (resource_model.DRA_DRIVER_NAME,
                                                                    resource_model.GPU_DEVICE_CLASS)
