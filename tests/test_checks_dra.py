"""The DRA models (issue #22): OPR-008, OPR-009, DPL-010..013 on their faults and healthy clusters, the checks that
are n/a there, and a device-plugin cluster left as it was."""

from __future__ import annotations

import copy

import factory as F
import pytest
from check_runner import N1, cluster, on, only_node, run

from gpu_conformance import catalogue
from gpu_conformance.check_input import check_input
from gpu_conformance.cluster.snapshot import ClusterSnapshot
from gpu_conformance.model import Finding, Layer, Status
from gpu_conformance.resource_model import ResourceModel, resource_model
from gpu_conformance.resource_slices import quantity_bytes
from gpu_conformance.settings import Settings
from gpu_conformance.verdict import NOT_CONFORMANT, Verdict, decide

NEW = ("OPR-008", "OPR-009", "DPL-010", "DPL-011", "DPL-012", "DPL-013", "DPL-014")
DEVICE_PLUGIN_CHECKS = tuple(f"DPL-00{i}" for i in range(1, 9))
BUILDERS = {"dra-driver": F.healthy_dra_driver_snapshot, "gpucluster": F.healthy_gpucluster_snapshot}


def judge(snap) -> tuple[list[Finding], Verdict]:
    checks = catalogue.all_checks()
    inp = check_input(snap, Settings())
    findings = [f for c in checks if c.func for f in c.run(inp)]
    return findings, decide(checks, findings, snap.gpu_node_names)


def root_cause(snap, node: str = N1) -> str:
    _, v = judge(snap)
    nv = next(n for n in v.nodes if n.node == node)
    return nv.root_cause.check_id if nv.root_cause else ""


def plugin_pod(snap, node: str = N1) -> dict:
    return F.dra_plugin_pod(snap, node)


# ---- healthy clusters ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("model", BUILDERS)
def test_healthy_dra_cluster_is_conformant(model: str) -> None:
    snap = BUILDERS[model]()
    assert resource_model(snap) == ResourceModel(model)
    findings, v = judge(snap)
    assert not [(f.check_id, f.node, f.message) for f in findings if f.status in (Status.FAIL, Status.WARN)]
    assert v.overall != NOT_CONFORMANT and not any(n.root_cause for n in v.nodes)
    for cid in ("OPR-009", "DPL-011"):
        assert cluster(cid, snap).status == Status.PASS
    for cid in ("DPL-010", "DPL-012", "DPL-013", "DPL-014"):
        assert {f.status for f in run(cid, snap)} == {Status.PASS}, cid
    assert cluster("OPR-008", snap).status == (Status.PASS if model == "gpucluster" else Status.NA)


@pytest.mark.parametrize("model", BUILDERS)
def test_device_plugin_checks_are_na_in_dra_models(model: str) -> None:
    snap = BUILDERS[model]()
    for cid in DEVICE_PLUGIN_CHECKS:
        f = cluster(cid, snap)
        assert f.status == Status.NA and f"n/a in the {model} model" in f.message and "ResourceSlices" in f.message


def test_clusterpolicy_checks_in_the_gpucluster_model() -> None:
    snap = F.healthy_gpucluster_snapshot()
    # The chart still installs the ClusterPolicy CRD and the GPUCluster controller lists ClusterPolicies.
    assert cluster("OPR-001", snap).status == Status.PASS
    for cid in ("OPR-002", "OPR-003", "OPR-006", "LBL-001", "DRV-002", "DRV-003", "DRV-004"):
        assert cluster(cid, snap).status == Status.NA, cid


def test_gpucluster_driver_is_the_hosts_or_an_nvidiadriver_crs() -> None:
    from gpu_conformance.facts import build_facts
    from gpu_conformance.session import driver_config

    snap = F.healthy_gpucluster_snapshot()
    assert set(driver_config(build_facts(snap)).values()) == {"host"}
    assert {f.status for f in run("DRV-001", snap)} == {Status.PASS}


def test_device_plugin_cluster_is_unchanged() -> None:
    snap = F.healthy_snapshot("v25.3.4")
    assert resource_model(snap) == ResourceModel.DEVICE_PLUGIN
    assert cluster("OPR-009", snap).status == Status.PASS
    for cid in NEW:
        if cid != "OPR-009":
            assert cluster(cid, snap).status == Status.NA, cid
    assert on("DPL-001", snap).status == Status.PASS
    findings, v = judge(snap)
    assert not [f for f in findings if f.status == Status.FAIL] and not any(n.root_cause for n in v.nodes)


# ---- OPR-009 -------------------------------------------------------------------------------------------------
def both_models():
    snap = F.healthy_gpucluster_snapshot()
    cp = copy.deepcopy(F.healthy_snapshot(F.DRA_VERSION).clusterpolicies[0])
    cp["status"] = {"state": "notReady", "namespace": "gpu-operator", "conditions": [
        {"type": "Ready", "status": "False", "reason": "Error", "message": ""},
        {"type": "Error", "status": "True", "reason": "ReconcileFailed",
         "message": 'conflicting GPUCluster resource "gpu-cluster" detected; ClusterPolicy and GPUCluster cannot '
                    "co-exist"}]}
    snap.clusterpolicies = [cp]
    snap.gpu_clusters = [F.gpucluster("notReady", "PrerequisiteNotMet", 'A ClusterPolicy CR "cluster-policy" '
                                      "exists; a ClusterPolicy CR and GPUCluster CR may not exist at the same time")]
    return F.refresh(snap)


def test_both_models_is_one_opr009_failure() -> None:
    snap = both_models()
    f = cluster("OPR-009", snap)
    assert f.status == Status.FAIL and "cluster-policy" in f.message and "gpu-cluster" in f.message
    assert "cannot co-exist" in f.message or "may not exist" in f.message
    _, v = judge(snap)
    assert v.overall == NOT_CONFORMANT
    assert v.cluster_blocker is not None and v.cluster_blocker.check_id == "OPR-009"
    assert [cid for cid, o in v.outcomes.items() if o.status == Status.FAIL] == ["OPR-009"]


# ---- OPR-008 -------------------------------------------------------------------------------------------------
def test_opr008_never_reconciled() -> None:
    snap = F.healthy_gpucluster_snapshot()
    snap.gpu_clusters[0]["status"] = {}
    f = cluster("OPR-008", snap)
    assert f.status == Status.FAIL and "never reconciled" in f.message and f.blocking


def test_opr008_reconcile_failed_quotes_the_operator() -> None:
    snap = F.healthy_gpucluster_snapshot()
    snap.gpu_clusters = [F.gpucluster("notReady", "ReconcileFailed", "Error syncing state state-dra-driver: boom")]
    f = cluster("OPR-008", snap)
    assert f.status == Status.FAIL and "ReconcileFailed" in f.message and "state-dra-driver: boom" in f.message
    assert root_cause(snap) == "OPR-008"


def test_opr008_operand_not_ready_is_the_nodes_symptom() -> None:
    snap = F.healthy_gpucluster_snapshot()
    snap.gpu_clusters = [F.gpucluster("notReady", "OperandNotReady", "Waiting for operand pods to be ready")]
    F.crash_container(plugin_pod(snap), "gpus", snapshot=snap)
    F.refresh(snap)
    f = cluster("OPR-008", snap)
    assert f.status == Status.WARN and not f.blocking and N1 in f.message
    assert root_cause(snap) == "DPL-010"
    assert root_cause(snap, "gpu-node-2") == ""


def test_opr008_operand_not_ready_no_node_explains() -> None:
    snap = F.healthy_gpucluster_snapshot()
    snap.gpu_clusters = [F.gpucluster("notReady", "OperandNotReady", "Waiting for operand pods to be ready")]
    validator = copy.deepcopy(F.daemonset(snap, F.DRA_PLUGIN))
    validator["metadata"]["name"] = "nvidia-dra-validator"
    snap.daemonsets.append(validator)
    F.refresh(snap)
    validator["status"]["numberUnavailable"] = 3
    f = cluster("OPR-008", snap)
    assert f.status == Status.FAIL and not f.blocking and "nvidia-dra-validator (3)" in f.message


# ---- DPL-010 -------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("model", BUILDERS)
def test_dpl010_missing_plugin_is_the_root_cause_and_explains_dpl012(model: str) -> None:
    snap = BUILDERS[model]()
    F.remove_dra_plugin_pod(snap, N1)
    snap.resource_slices = [s for s in snap.resource_slices if s["spec"]["nodeName"] != N1]
    F.refresh(snap)
    f = only_node("DPL-010", snap)
    assert "no DRA kubelet plugin pod" in f.message
    assert only_node("DPL-012", snap).explained_by == ("DPL-010",)
    _, v = judge(snap)
    assert root_cause(snap) == "DPL-010"
    assert v.outcomes["DPL-012"].status == Status.BLOCKED and "DPL-010" in v.outcomes["DPL-012"].reason


def test_dpl010_crashloop() -> None:
    snap = F.healthy_gpucluster_snapshot()
    F.crash_container(plugin_pod(snap), "gpus", snapshot=snap, log="failed to initialize NVML: Driver Not Loaded")
    F.refresh(snap)
    f = only_node("DPL-010", snap)
    assert "CrashLoopBackOff" in f.message and "NVML" in f.message


def test_dpl010_waits_for_the_driver() -> None:
    snap = F.healthy_gpucluster_snapshot()
    F.stuck_init(plugin_pod(snap), "driver-validation", reason="", restarts=0, snapshot=snap)
    F.refresh(snap)
    f = only_node("DPL-010", snap)
    assert "driver" in f.message


def _plugin_gone_with_deploy_label(value: str) -> ClusterSnapshot:
    """gpu-node-1 without its DRA kubelet plugin pod or slices, its deploy label set to `value`."""
    snap = F.healthy_gpucluster_snapshot()
    F.remove_pods(snap, F.DRA_PLUGIN, N1)
    F.set_label(snap, N1, "nvidia.com/gpu.deploy.dra-driver", value)
    snap.resource_slices = [s for s in snap.resource_slices if s["spec"]["nodeName"] != N1]
    return F.refresh(snap)


def test_dpl010_paused_for_a_driver_reload_is_a_pause() -> None:
    snap = _plugin_gone_with_deploy_label("paused-for-driver-upgrade")
    assert only_node("DPL-010", snap, status=Status.WARN).evidence["transient"]
    assert "explained by the pause" in only_node("DPL-012", snap, status=Status.WARN).message
    _, v = judge(snap)
    nv = next(n for n in v.nodes if n.node == N1)
    assert nv.root_cause is None and nv.transient is not None and nv.transient.check_id == "DPL-010"


def test_dpl010_opted_out_node_is_na() -> None:
    snap = _plugin_gone_with_deploy_label("false")
    for cid in ("DPL-010", "DPL-012", "DPL-013"):
        assert on(cid, snap).status == Status.NA, cid


# ---- DPL-011 -------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("model", BUILDERS)
def test_dpl011_deviceclass_missing(model: str) -> None:
    snap = BUILDERS[model]()
    snap.device_classes = [d for d in snap.device_classes if d["metadata"]["name"] != "gpu.nvidia.com"]
    f = cluster("DPL-011", snap)
    assert f.status == Status.FAIL and "gpu.nvidia.com does not exist" in f.message
    assert root_cause(snap) == "DPL-011"


def test_dpl011_no_resource_api() -> None:
    snap = F.healthy_gpucluster_snapshot()
    snap.device_classes = []
    assert "resource.k8s.io/v1" in cluster("DPL-011", snap).message


def test_dpl011_selects_another_driver() -> None:
    snap = F.healthy_gpucluster_snapshot()
    gpu_dc = next(d for d in snap.device_classes if d["metadata"]["name"] == "gpu.nvidia.com")
    gpu_dc["spec"]["selectors"] = [{"cel": {"expression": "device.driver == 'example.com'"}}]
    assert cluster("DPL-011", snap).status == Status.FAIL


# ---- DPL-012 -------------------------------------------------------------------------------------------------
def test_dpl012_fewer_devices_than_gfd_counts() -> None:
    snap = F.healthy_dra_driver_snapshot(gpus_per_node=2)
    assert {f.status for f in run("DPL-012", snap)} == {Status.PASS}
    devices = next(s for s in snap.resource_slices if s["spec"]["nodeName"] == N1)["spec"]["devices"]
    del devices[1]
    F.refresh(snap)
    f = only_node("DPL-012", snap)
    assert "1 GPU device(s) published but GFD counts nvidia.com/gpu.count=2" in f.message
    assert root_cause(snap) == "DPL-012"


def test_dpl012_no_slice() -> None:
    snap = F.healthy_gpucluster_snapshot()
    snap.resource_slices = [s for s in snap.resource_slices if s["spec"]["nodeName"] != N1]
    f = only_node("DPL-012", snap)
    assert "no ResourceSlice" in f.message
    assert root_cause(snap) == "DPL-012"   # the kubelet plugin is Ready: nothing explains it


def test_dpl012_incomplete_pool() -> None:
    snap = F.healthy_gpucluster_snapshot()
    s = next(s for s in snap.resource_slices if s["spec"]["nodeName"] == N1)
    s["spec"]["pool"]["resourceSliceCount"] = 2
    assert "incomplete pool" in only_node("DPL-012", snap).message


def test_dpl012_older_generation_is_ignored() -> None:
    snap = F.healthy_gpucluster_snapshot()
    old = copy.deepcopy(next(s for s in snap.resource_slices if s["spec"]["nodeName"] == N1))
    old["metadata"]["name"] += "-old"
    old["spec"]["devices"] = []
    old["spec"]["pool"]["generation"] = 0
    snap.resource_slices.append(old)
    assert on("DPL-012", snap).status == Status.PASS


def test_dpl012_device_without_uuid_or_memory() -> None:
    snap = F.healthy_gpucluster_snapshot()
    dev = next(s for s in snap.resource_slices if s["spec"]["nodeName"] == N1)["spec"]["devices"][0]
    del dev["attributes"]["uuid"]
    del dev["capacity"]["memory"]
    f = only_node("DPL-012", snap)
    assert "without uuid" in f.message and "without capacity memory" in f.message


def test_dpl012_product_disagrees_with_gfd_warns() -> None:
    snap = F.healthy_dra_driver_snapshot()
    dev = next(s for s in snap.resource_slices if s["spec"]["nodeName"] == N1)["spec"]["devices"][0]
    dev["attributes"]["productName"] = {"string": "NVIDIA A100-SXM4-40GB"}
    assert "GFD says nvidia.com/gpu.product=Tesla-T4" in only_node("DPL-012", snap, status=Status.WARN).message


def test_dpl012_other_drivers_slices_do_not_count() -> None:
    snap = F.healthy_gpucluster_snapshot()
    s = next(s for s in snap.resource_slices if s["spec"]["nodeName"] == N1)
    s["spec"]["driver"] = "compute-domain.nvidia.com"
    assert "no ResourceSlice" in only_node("DPL-012", snap).message


# ---- DPL-013 -------------------------------------------------------------------------------------------------
def test_dpl013_every_device_claimed_is_busy_not_broken() -> None:
    snap = F.healthy_gpucluster_snapshot()
    snap.resource_claims = [F.resource_claim("ml", "train-0-gpu", N1, "gpu-0")]
    f = only_node("DPL-013", snap, status=Status.WARN)
    assert "ml/train-0-gpu" in f.message and "busy, not broken" in f.message
    assert root_cause(snap) == ""


def test_dpl013_admin_access_claim_takes_no_device() -> None:
    snap = F.healthy_gpucluster_snapshot()
    snap.resource_claims = [F.resource_claim("gpu-operator", "nvidia-dra-validator-x", N1, "gpu-0", admin=True)]
    assert on("DPL-013", snap).status == Status.PASS


def test_dpl013_some_device_free() -> None:
    snap = F.healthy_gpucluster_snapshot(gpus_per_node=2)
    snap.resource_claims = [F.resource_claim("ml", "a", N1, "gpu-0")]
    assert "1 of 2" in on("DPL-013", snap).message


# ---- bad input: one clear line, never a traceback -------------------------------------------------------------
def test_malformed_dra_objects_do_not_crash() -> None:
    snap = F.healthy_gpucluster_snapshot()
    snap.resource_slices.append({"spec": {"driver": "gpu.nvidia.com", "nodeName": N1, "pool": None,
                                          "devices": ["x", {"attributes": {"uuid": "flat"}, "capacity": None}]}})
    snap.resource_slices.append({"spec": {"driver": "gpu.nvidia.com", "nodeName": N1, "pool": "p", "devices": {}}})
    snap.resource_slices.append({"spec": "nonsense"})
    snap.resource_claims.append({"metadata": {}, "status": {"allocation": {"devices": {"results": [None]}}}})
    snap.resource_claims.append({"metadata": "x", "status": {"allocation": "x"}})
    snap.gpu_clusters[0]["status"] = {"state": "weird", "conditions": [{"type": "Error", "reason": "X"}]}
    F.refresh(snap)
    findings, _ = judge(snap)
    assert any(f.check_id == "OPR-008" and f.status == Status.FAIL for f in findings)


def test_quantity_bytes() -> None:
    assert quantity_bytes("40Gi") == 40 * 2**30
    assert quantity_bytes("15360Mi") == 15360 * 2**20
    assert quantity_bytes("1000") == 1000
    assert quantity_bytes("lots") is None and quantity_bytes(None) is None


def test_dra_checks_sit_on_the_gpu_path_of_their_layers() -> None:
    for cid in NEW:
        c = catalogue.get(cid)
        assert c.gpu_path
        assert c.layer == (Layer.OPERATOR if cid.startswith("OPR") else Layer.DEVICE_PLUGIN)


# ---- the report header names the model --------------------------------------------------------------------------
def test_report_header_names_the_model() -> None:
    from report_data import healthy_cluster, operator_info

    from gpu_conformance.report.html import render_html
    from gpu_conformance.report.json_report import result_dict
    from gpu_conformance.report.terminal import summary_lines

    result = healthy_cluster(operator={**operator_info(), "resource_model": "gpucluster"})
    assert result_dict(result)["operator"]["resource_model"] == "gpucluster"
    assert "GPU resource model gpucluster" in summary_lines(result)[0]
    html = render_html(result_dict(result))
    assert "GPU resource model" in html and "gpucluster" in html
    # A report of a run before the DRA models: the device-plugin model, said so.
    assert "GPU resource model device-plugin" in summary_lines(healthy_cluster())[0]


def test_the_reader_keeps_what_the_dra_checks_read() -> None:
    from gpu_conformance.cluster.trim import RESOURCE_CLAIM, RESOURCE_SLICE, trim

    claim = F.resource_claim("ml", "a", N1, "gpu-0")
    claim["metadata"]["managedFields"] = [{"manager": "kube-scheduler", "fieldsV1": {"f:status": {}}}]
    kept = trim(claim, RESOURCE_CLAIM)
    assert "managedFields" not in kept["metadata"] and kept["status"] == claim["status"]
    sl = F.resource_slice(N1, 2)
    assert trim(sl, RESOURCE_SLICE)["spec"] == sl["spec"]


@pytest.mark.parametrize("status", ["ready", {"state": "ready", "conditions": {"Ready": "True"}}, None])
def test_opr008_malformed_status_is_one_finding(status) -> None:
    snap = F.healthy_gpucluster_snapshot()
    snap.gpu_clusters[0]["status"] = status
    f = cluster("OPR-008", snap)
    assert f.status == Status.FAIL and "gpu-cluster" in f.message


# ---- recognising the model from the API (never from a ClusterPolicy field: v26.7.0 has no draDriver) -------------
def _evidence_only(kind: str):
    """A device-plugin-off ClusterPolicy cluster with one kind of the DRA driver's traces left."""
    snap = F.healthy_dra_driver_snapshot()
    if kind != "deviceclass":
        snap.device_classes = []
    if kind != "slices":
        snap.resource_slices = []
    if kind != "pods":
        snap.dra_plugin_pods = []
    return F.refresh(snap)


@pytest.mark.parametrize("kind", ["deviceclass", "slices", "pods"])
def test_clusterpolicy_with_any_trace_of_the_chart_is_the_dra_driver_model(kind: str) -> None:
    assert resource_model(_evidence_only(kind)) == ResourceModel.DRA_DRIVER


def test_recognition_of_each_model() -> None:
    assert resource_model(F.healthy_snapshot()) == ResourceModel.DEVICE_PLUGIN
    assert resource_model(F.healthy_dra_driver_snapshot()) == ResourceModel.DRA_DRIVER
    assert resource_model(F.healthy_gpucluster_snapshot()) == ResourceModel.GPUCLUSTER
    both = F.healthy_gpucluster_snapshot()
    both.clusterpolicies = F.healthy_snapshot().clusterpolicies
    assert resource_model(both) == ResourceModel.DEVICE_PLUGIN and cluster("OPR-009", both).status == Status.FAIL


def test_an_invented_clusterpolicy_field_is_not_a_model() -> None:
    snap = F.healthy_snapshot(device_plugin=False)
    F.set_policy(snap, "draDriver", {"enabled": True})
    assert resource_model(snap) == ResourceModel.DEVICE_PLUGIN


def test_chart_pods_of_another_namespace_are_found_cluster_wide() -> None:
    snap = F.healthy_dra_driver_snapshot()
    assert all(p["metadata"]["namespace"] == "nvidia-dra-driver-gpu" for p in snap.dra_plugin_pods)
    assert not [p for p in snap.pods if "dra" in p["metadata"]["name"]]
    f = run("DPL-010", snap)[0]
    assert f.status == Status.PASS and "kubectl -n nvidia-dra-driver-gpu " in (f.kubectl or "")


def test_dpl010_chart_pod_missing_names_where_the_chart_runs() -> None:
    snap = F.healthy_dra_driver_snapshot()
    F.remove_dra_plugin_pod(snap, N1)
    f = only_node("DPL-010", snap)
    assert "nvidia-dra-driver-gpu-component=kubelet-plugin" in f.message and "nvidia-dra-driver-gpu" in f.message
    snap.dra_plugin_pods = []
    assert "no pod of the chart anywhere" in on("DPL-010", snap).message


def test_dpl010_chart_pod_crashloop() -> None:
    snap = F.healthy_dra_driver_snapshot()
    F.crash_container(plugin_pod(snap), "gpus", snapshot=snap, log="failed to initialize NVML: Driver Not Loaded")
    F.refresh(snap)
    f = only_node("DPL-010", snap)
    assert "CrashLoopBackOff" in f.message and "nvidia-dra-driver-gpu" in (f.kubectl or "")


# ---- DPL-014: both allocators on one node ---------------------------------------------------------------------
def test_dpl014_device_plugin_beside_the_dra_driver_hands_gpus_out_twice() -> None:
    snap = F.healthy_snapshot(F.DRA_VERSION)  # the device plugin on, advertising nvidia.com/gpu
    F.add_chart_dra_driver(snap)
    assert resource_model(snap) == ResourceModel.DRA_DRIVER
    findings = run("DPL-014", snap)
    assert {f.status for f in findings} == {Status.FAIL}
    assert "nvidia.com/gpu=1" in findings[0].message and "two pods" in findings[0].message


def test_dpl014_device_plugin_enabled_but_not_yet_running_warns() -> None:
    snap = F.healthy_dra_driver_snapshot()
    F.set_policy(snap, "devicePlugin.enabled", True)
    assert {f.status for f in run("DPL-014", snap)} == {Status.WARN}


def test_dpl014_node_without_dra_devices_is_na_and_device_plugin_cluster_na() -> None:
    snap = F.healthy_dra_driver_snapshot()
    snap.resource_slices = [s for s in snap.resource_slices if s["spec"]["nodeName"] != N1]
    assert on("DPL-014", F.refresh(snap)).status == Status.NA
    assert cluster("DPL-014", F.healthy_snapshot()).status == Status.NA
