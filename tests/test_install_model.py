"""One install model (gpu_conformance/gpu_operator/): the simulated operator and tests/factory.py build from it, so
a healthy install means the same in the unit tests and in the simulated cluster.

The release table and the facts the source corrected are pinned against the chart and the operator at a few tags
(literal values, facts §0); the rest checks that the factory and the simulator render the same ClusterPolicy spec,
operator Deployment, NFD sub-chart, operand DaemonSets (images, commands, env, volumes), cuda-validator pod,
RuntimeClasses, node labels and DRA objects for each simulated release.
"""

from __future__ import annotations

from dataclasses import replace

import factory as F
import pytest
from factory import healthy_snapshot

from gpu_conformance import operands as ops
from gpu_conformance.cluster.snapshot import name_of
from gpu_conformance.gpu_operator import nvidiadriver
from gpu_conformance.gpu_operator import operand_specs as specs
from gpu_conformance.gpu_operator.releases import COMPONENTS, components_for, images
from gpu_conformance.operands import GFD
from gpu_conformance.sim.operator import dra, install
from gpu_conformance.sim.profiles.catalogue import PROFILES

SIMULATED = ["v25.3.4", "v25.10.0", "v25.10.1", "v26.3.0", "v26.3.3", "v26.7.0"]


def test_the_release_table_holds_each_tags_chart_defaults() -> None:
    assert list(COMPONENTS) == sorted(COMPONENTS, key=lambda t: COMPONENTS[t].version)
    old, new = COMPONENTS["v23.9.2"], COMPONENTS["v26.3.3"]
    assert (old.driver, old.device_plugin, old.gfd, old.dcgm) == ("550.54.14", "v0.14.5-ubi8", "v0.8.2-ubi8",
                                                                  "3.3.0-1-ubuntu22.04")
    assert (new.driver, new.driver_manager, new.device_plugin, new.gfd) == ("580.126.20", "v0.11.0", "v0.19.3", "")
    assert images(old, "ubuntu22.04").gfd == "nvcr.io/nvidia/gpu-feature-discovery:v0.8.2-ubi8"
    assert images(old, "ubuntu22.04").validator == "nvcr.io/nvidia/cloud-native/gpu-operator-validator:v23.9.2"
    assert images(new, "ubuntu22.04").validator == "nvcr.io/nvidia/gpu-operator:v26.3.3"


@pytest.mark.parametrize(("tag", "row"), [
    ("v26.3.1", "v26.3.0"),      # the same minor's latest release not newer than the tag
    ("v23.9.1", "v23.9.2"),      # else that minor's first release
    ("v26.5.0", "v26.3.3"),      # else the nearest older release
    ("main-latest", "v26.7.0"),  # no release at all: the newest behaviour
])
def test_a_tag_without_a_row_takes_its_nearest_releases_defaults(tag: str, row: str) -> None:
    got = components_for(tag)
    assert got == replace(COMPONENTS[row], operator=tag)


def _containers(daemonsets: list[dict]) -> dict[tuple[str, str], dict]:
    return {(name_of(ds), c["name"]): c for ds in daemonsets
            for c in ds["spec"]["template"]["spec"].get("initContainers", []) + ds["spec"]["template"]["spec"][
                "containers"]}


@pytest.mark.parametrize("version", SIMULATED)
def test_the_factory_and_the_simulator_render_the_same_operands(version: str) -> None:
    profile = replace(PROFILES["default"], operator_version=version)
    sim = _containers(install.build(profile, gpu_nodes=["gpu-node-0"]).daemonsets)
    snap = healthy_snapshot(version)
    factory = _containers(snap.daemonsets)
    shared = sorted(set(sim) & set(factory))
    assert ("nvidia-device-plugin-daemonset", "nvidia-device-plugin") in shared
    assert {k: factory[k]["image"] for k in shared} == {k: sim[k]["image"] for k in shared}
    for key in [("nvidia-device-plugin-daemonset", "nvidia-device-plugin"),
                ("nvidia-container-toolkit-daemonset", "nvidia-container-toolkit-ctr")]:
        assert factory[key]["env"] == sim[key]["env"], key
    main = ("nvidia-operator-validator", "nvidia-operator-validator")
    assert factory[main]["args"] == sim[main]["args"]
    assert [name_of(rc) for rc in snap.runtimeclasses] == [name_of(rc) for rc in install.runtime_classes(profile)]
    assert snap.clusterpolicies[0]["spec"] == install.clusterpolicy_spec(profile)
    assert snap.clusterpolicies[0]["metadata"]["labels"] == install.clusterpolicy(profile)["metadata"]["labels"]


def test_the_factory_keeps_every_validator_stage_of_its_release() -> None:
    # The factory's validator runs the stages the asset has (gds/gdrcopy ones included), so DRV-004 can break them.
    for version in ("v25.3.4", "v25.10.1", "v26.3.3"):
        ds = next(d for d in healthy_snapshot(version).daemonsets if name_of(d) == "nvidia-operator-validator")
        inits = tuple(c["name"] for c in ds["spec"]["template"]["spec"]["initContainers"])
        assert inits == specs.validator_init_containers(version, gds_enabled=True, gdrcopy_enabled=True)


@pytest.mark.parametrize(("profile_name", "kw"), [
    ("default", {"gpu_product": "NVIDIA-H100-80GB-HBM3", "gpus_per_node": 8}),
    ("time-slicing", {"gpu_product": "Tesla-T4", "gpus_per_node": 4, "time_slicing_replicas": 4}),
])
def test_the_factory_and_the_simulator_label_and_advertise_a_gpu_node_alike(profile_name: str, kw: dict) -> None:
    profile = PROFILES[profile_name]
    plan = install.build(profile, gpu_nodes=["gpu-node-0"], now=0).gpu_nodes[0]
    sim_gfd = plan.operand_labels[GFD.key]
    node = next(n for n in healthy_snapshot(profile.operator_version, **kw).nodes if name_of(n) == "gpu-node-1")
    labels = node["metadata"]["labels"]
    skip = {"nvidia.com/gfd.timestamp", "nvidia.com/gpu.machine"}   # the factory's nodes are other machines
    assert {k: labels.get(k) for k in sim_gfd if k not in skip} == {k: v for k, v in sim_gfd.items() if k not in skip}
    assert {k: v for k, v in node["status"]["capacity"].items() if k.startswith("nvidia.com/")} == plan.gpu_resources


# ---- the same objects, whoever builds them ---------------------------------------------------------------------
def _by_kind_name(objs: list[dict]) -> dict[tuple[str, str], dict]:
    return {(o["kind"], name_of(o)): o for o in objs}


def _rendered(obj: dict) -> dict:
    """What the install model renders of a workload: labels, selector, pod template (the factory adds what the API
    server fills in: uid, timestamps, generation, status, defaults)."""
    return {"labels": obj["metadata"].get("labels"), "selector": obj["spec"].get("selector"),
            "template": obj["spec"]["template"]}


@pytest.mark.parametrize("version", SIMULATED)
def test_the_factory_and_the_simulator_install_the_same_workloads(version: str) -> None:
    # The operator Deployment, NFD's sub-chart and every operand DaemonSet both build: the same labels, selector and
    # pod template (containers with their commands, env and volumes).
    profile = replace(PROFILES["default"], operator_version=version)
    m = install.build(profile, gpu_nodes=["gpu-node-0"], clusterpolicy_uid=F.CLUSTERPOLICY_UID)
    sim = _by_kind_name([o for o in m.helm_objects if o["kind"] in ("Deployment", "DaemonSet")] + m.daemonsets)
    snap = F.healthy_snapshot(version)
    factory = _by_kind_name(snap.deployments + snap.daemonsets)
    assert set(sim) == set(factory)
    shared = sorted(set(sim) & set(factory))
    for key in shared:
        want = _rendered(sim[key])
        got = _rendered(factory[key])
        if key == ("DaemonSet", ops.VALIDATOR.daemonset):
            # The factory keeps every stage of the asset (gds/gdrcopy ones too); the rest is the simulator's.
            stages = {c["name"] for c in want["template"]["spec"]["initContainers"]}
            got["template"]["spec"]["initContainers"] = [
                c for c in got["template"]["spec"]["initContainers"] if c["name"] in stages]
        assert got == want, key


@pytest.mark.parametrize("profile_name", ["default", "cdi-nri", "v25.3"])
def test_the_factory_and_the_simulator_run_the_same_cuda_validator_pod(profile_name: str) -> None:
    profile = PROFILES[profile_name]
    sim = install.cuda_validator_pod(profile, "gpu-operator", "gpu-node-1", F.CLUSTERPOLICY_UID)
    snap = F.healthy_snapshot(profile.operator_version, nri=profile.nri)
    pod = next(p for p in snap.pods if name_of(p).startswith(ops.CUDA_VALIDATOR_APP) and
               p["spec"]["nodeName"] == "gpu-node-1")
    assert {k: pod["spec"].get(k) for k in sim["spec"]} == sim["spec"]
    for key in ("labels", "annotations", "ownerReferences"):
        assert pod["metadata"][key] == sim["metadata"][key], key


def test_the_factory_and_the_simulator_publish_the_same_nfd_labels() -> None:
    profile = PROFILES["default"]
    snap = F.healthy_snapshot(profile.operator_version)
    for node, gpu in (("gpu-node-1", True), ("cpu-node-1", False)):
        labels = F.node(snap, node)["metadata"]["labels"]
        # The factory's nodes run another kernel; which labels NFD publishes is the same.
        nfd_keys = {k for k in labels if k.startswith("feature.node.kubernetes.io/")}
        assert nfd_keys - {"feature.node.kubernetes.io/cpu-model.vendor_id"} == set(install.nfd_labels(profile, gpu))


def test_the_nvidiadriver_daemonset_runs_the_clusterpolicys_driver_template() -> None:
    crd = F.healthy_snapshot(driver="crd")
    cp_driver = F.daemonset(F.healthy_snapshot(), ops.DRIVER.daemonset)["spec"]["template"]["spec"]
    ds = F.daemonset(crd, F.DRIVER_CRD_DS)
    assert ds["spec"]["template"]["spec"] == cp_driver
    assert ds["metadata"]["ownerReferences"][0]["kind"] == "NVIDIADriver"
    # internal/state/driver.go getDriverAppName: nvidia-<type>-driver-<os>-<SafeEncodeString(fnv32a(uid))>.
    assert nvidiadriver.app_name("gpu", "ubuntu22.04", crd.nvidiadrivers[0]["metadata"]["uid"]) == F.DRIVER_CRD_DS
    prefix, digest = F.DRIVER_CRD_DS.rsplit("-", 1)
    assert prefix == "nvidia-gpu-driver-ubuntu22.04" and set(digest) <= set("bcdfghjklmnpqrstvwxz2456789")


def test_the_factory_and_the_simulator_deploy_the_same_dra_objects() -> None:
    chart = PROFILES["dra-driver"]
    sim = next(o for o in install.build(chart).dra_chart_objects if o["kind"] == "DaemonSet")
    snap = F.healthy_dra_driver_snapshot()
    pod = snap.dra_plugin_pods[0]
    assert pod["spec"]["containers"] == sim["spec"]["template"]["spec"]["containers"]
    assert [d["spec"] for d in snap.device_classes] == [d["spec"] for d in install.build(chart).device_classes]
    # The gpucluster model without compute domains, as the factory builds it.
    gc = replace(PROFILES["gpucluster"], compute_domains=False)
    m = install.build(gc, gpu_nodes=["gpu-node-0"])
    snap = F.healthy_gpucluster_snapshot()
    assert _rendered(F.daemonset(snap, F.DRA_PLUGIN)) == _rendered(m.daemonset(F.DRA_PLUGIN))
    assert snap.gpu_clusters[0]["spec"] == m.gpucluster["spec"]
    assert [d["spec"] for d in snap.device_classes] == [d["spec"] for d in m.device_classes]
    t4 = PROFILES["host-driver"].gpu_hardware[0]
    sim_device = dra.gpu_device("gpu-node-1", 0, t4, F.HOST_DRIVER_VERSION, "13.0")
    factory_device = F.resource_slice("gpu-node-1", 1)["spec"]["devices"][0]
    assert factory_device["attributes"].keys() == sim_device["attributes"].keys()
    assert factory_device["capacity"] == sim_device["capacity"]


# ---- facts pinned to the operator's source at its tags (literal values, so a wrong model fails) ---------------
def _container(objs: list[dict], name: str) -> dict:
    return next(o for o in objs if name_of(o) == name)["spec"]["template"]["spec"]["containers"][0]


@pytest.mark.parametrize(("version", "master", "worker"), [
    ("v25.3.4", ["-enable-leader-election", "-feature-gates=NodeFeatureGroupAPI=false", "-metrics=8081",
                 "-grpc-health=8082"],
     ["-feature-gates=NodeFeatureGroupAPI=false", "-metrics=8081", "-grpc-health=8082"]),
    ("v26.3.3", ["-enable-leader-election", "-feature-gates=NodeFeatureGroupAPI=false", "-port=8080"],
     ["-feature-gates=NodeFeatureGroupAPI=false", "-port=8080"]),
    ("v26.7.0", ["-port=8080"], ["-owner-refs=pod,ds", "-port=8080"]),
])
def test_nfd_runs_with_the_args_its_sub_chart_renders(version: str, master: list[str], worker: list[str]) -> None:
    # charts/node-feature-discovery/templates/{master,worker,nfd-gc}.yaml with the operator's values at the tag.
    objs = install.nfd_objects(replace(PROFILES["default"], operator_version=version), "gpu-operator")
    assert _container(objs, "gpu-operator-node-feature-discovery-master")["args"] == master
    assert _container(objs, "gpu-operator-node-feature-discovery-worker")["args"] == worker
    assert _container(objs, "gpu-operator-node-feature-discovery-gc")["args"] == ["-gc-interval=1h"]


@pytest.mark.parametrize(("version", "passes_validator_image"), [("v25.3.4", False), ("v26.3.3", False),
                                                                 ("v26.7.0", True)])
def test_the_chart_passes_the_validator_image_to_the_operator_from_v26_7(version: str,
                                                                        passes_validator_image: bool) -> None:
    # templates/operator.yaml: WATCH_NAMESPACE, OPERATOR_NAMESPACE, DRIVER_MANAGER_IMAGE; VALIDATOR_IMAGE from v26.7.0.
    env = _container([install.operator_deployment(replace(PROFILES["default"], operator_version=version), "ns")],
                     "gpu-operator")["env"]
    names = ["WATCH_NAMESPACE", "OPERATOR_NAMESPACE", "DRIVER_MANAGER_IMAGE"]
    assert [e["name"] for e in env] == names + (["VALIDATOR_IMAGE"] if passes_validator_image else [])


def test_the_cuda_sample_runs_privileged_on_a_read_only_root() -> None:
    # validator/manifests/cuda-workload-validation.yaml (v25.10.1..v26.7.0; validator/ at v25.3.4).
    pod = install.cuda_validator_pod(PROFILES["default"], "gpu-operator", "gpu-node-0")
    assert pod["spec"]["containers"][0]["securityContext"] == {"privileged": True, "readOnlyRootFilesystem": True}
    assert pod["spec"]["initContainers"][0]["command"] == ["sh", "-c"]


def test_nri_mode_annotates_the_one_container_the_operator_names() -> None:
    # object_controls.go setNRIPluginAnnotation: the main container; the validator's toolkit-validation.
    m = install.build(PROFILES["cdi-nri"])
    annotated = {name_of(d): sorted(d["spec"]["template"]["metadata"].get("annotations", {})) for d in m.daemonsets}
    assert annotated["nvidia-operator-validator"] == ["nvidia.cdi.k8s.io/container.toolkit-validation"]
    assert annotated["nvidia-device-plugin-daemonset"] == ["nvidia.cdi.k8s.io/container.nvidia-device-plugin"]
    assert annotated["gpu-feature-discovery"] == ["nvidia.cdi.k8s.io/container.gpu-feature-discovery"]
    assert annotated["nvidia-container-toolkit-daemonset"] == []
