"""One install model (gpu_conformance/gpu_operator/): the simulated operator and tests/factory.py build from it, so
a healthy install means the same in the unit tests and in the simulated cluster.

The release table is pinned against the chart's values at a few tags (literal values, facts §0); the rest checks
that the factory and the simulator render the same ClusterPolicy spec, operand images and env, RuntimeClasses and
GPU node labels for each simulated release.
"""

from __future__ import annotations

from dataclasses import replace

import pytest
from factory import healthy_snapshot

from gpu_conformance.cluster.snapshot import name_of
from gpu_conformance.gpu_operator import operand_specs as specs
from gpu_conformance.gpu_operator.releases import COMPONENTS, components_for, images
from gpu_conformance.operands import GFD
from gpu_conformance.sim.operator import install
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
