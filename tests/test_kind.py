"""The kind tier: a kind cluster from the node image built here, fake GPUs through CDI, the probe on real containers.

The cluster is shared by the module (measured with `pytest -m kind tests/test_kind.py`: 10.7 min with empty tier
caches and a warm Go build cache, 3.9 min warm: cluster 50 s, suite image 61 s + load 56 s); the last test stops it and
checks that nothing is left. The fault tests break one thing on that cluster, run the whole suite and undo the
fault (88 s for the CDI-spec, envvar-plugin, nvidia-handler and annotation-passthrough ones together). The probe's own
cases (two GPUs, an image that cannot be pulled, every GPU in use, an untolerated taint, the probe namespace deleted
mid-run, the kubelet API's authentication) run the suite's Probe on one worker, each undone at its end (33 s together).
Marked `kind`: skipped with the reason only where Docker or root is impossible.
The first tests need neither (the config writer and the runc wrapper).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpu_conformance.model import Status
from gpu_conformance.session import ConformanceRun
from gpu_conformance.settings import DEFAULT_PROBE_IMAGE, Settings
from gpu_conformance.sim.fakegpu import stack as fakegpu
from gpu_conformance.sim.kind import docker as kdocker
from gpu_conformance.sim.kind import nvidia_cdi, suiteimage
from gpu_conformance.sim.kind import operator as kindop
from gpu_conformance.sim.kind.cluster import (
    CLUSTER_NAME,
    GPU_LABEL,
    RUNTIME_BINARY,
    KindCluster,
    read_sysctls,
)
from gpu_conformance.sim.profiles.nvidia_smi import gpu_uuid
from gpu_conformance.targets import TARGETS


def test_kind_is_a_target() -> None:
    assert "kind" in TARGETS


def test_config_has_image_per_node_and_requested_workers(tmp_path: Path) -> None:
    c = KindCluster(work=tmp_path, workers=3)
    c.image = "example.local/node:1"
    config = yaml.safe_load(c._write_config().read_text())
    assert config["name"] == CLUSTER_NAME
    assert [n["role"] for n in config["nodes"]] == ["control-plane", "worker", "worker", "worker"]
    assert {n["image"] for n in config["nodes"]} == {"example.local/node:1"}
    assert config["networking"]["disableDefaultCNI"] is True
    assert all(n["labels"][GPU_LABEL] == "true" for n in config["nodes"] if n["role"] == "worker")
    # The toolkit's containerd-restart race is retried every 10 s at most, not after a back-off of minutes.
    kubelet = [yaml.safe_load(p) for p in config["kubeadmConfigPatches"] if "KubeletConfiguration" in p]
    assert [k["crashLoopBackOff"]["maxContainerRestartPeriod"] for k in kubelet] == ["10s"]


def test_gpu_path_leaves_the_runtime_to_the_toolkit_for_cdi_and_mounts_the_fake_for_legacy(tmp_path: Path) -> None:
    """The CDI path (the default) writes no containerd runtime of its own: the operator's toolkit installs NVIDIA's
    and configures containerd (toolkit.enabled=true); the nodes get NVIDIA's CDI generator and the fake NVML for the
    host driver. The legacy path keeps the fake legacy-mode runtime as containerd's default, toolkit off."""
    bins = tmp_path / "bins"
    ctk, nvml = tmp_path / "nvidia-ctk", tmp_path / "libnvidia-ml.so.1"
    cdi = KindCluster(work=tmp_path / "cdi", gpu_path="cdi", nvidia_ctk=ctk, fake_nvml=nvml)
    legacy = KindCluster(work=tmp_path / "legacy", gpu_path="legacy")
    mounts, configs = {}, {}
    for c in (cdi, legacy):
        c.image = "example.local/node:1"
        configs[c.gpu_path] = yaml.safe_load(c._write_config(bins).read_text())
        mounts[c.gpu_path] = {m["containerPath"]: m["hostPath"] for m in configs[c.gpu_path]["nodes"][1]["extraMounts"]}
    assert RUNTIME_BINARY not in mounts["cdi"] and "containerdConfigPatches" not in configs["cdi"]
    assert {k: mounts["cdi"][k] for k in (nvidia_cdi.NVIDIA_CTK, nvidia_cdi.NVML_LIBRARY)} == \
        {nvidia_cdi.NVIDIA_CTK: str(ctk), nvidia_cdi.NVML_LIBRARY: str(nvml)}
    assert nvidia_cdi.NVIDIA_CTK not in mounts["legacy"]
    assert mounts["legacy"][RUNTIME_BINARY] == str(bins / "fake-nvidia-container-runtime")
    assert configs["legacy"]["containerdConfigPatches"] == [kindop.legacy_runtime_patch()]
    assert f"BinaryName = '{RUNTIME_BINARY}'" in kindop.legacy_runtime_patch()
    assert kindop.clusterpolicy("cdi")["spec"]["cdi"] == {"enabled": True, "default": True}
    assert kindop.clusterpolicy("legacy")["spec"]["cdi"] == {"enabled": False, "default": False}
    assert (kindop.clusterpolicy("cdi")["spec"]["toolkit"]["enabled"],
            kindop.clusterpolicy("legacy")["spec"]["toolkit"]["enabled"]) == (True, False)


def test_gpu_path_comes_from_the_environment_and_a_bad_one_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(kindop.GPU_PATH_ENV, raising=False)
    assert KindCluster().gpu_path == "cdi"
    monkeypatch.setenv(kindop.GPU_PATH_ENV, "Legacy")
    assert KindCluster().gpu_path == "legacy"
    monkeypatch.setenv(kindop.GPU_PATH_ENV, "nri")
    with pytest.raises(kindop.GPUPathError, match=r"^GPU_CONFORMANCE_KIND_GPU_PATH='nri': want one of cdi, legacy$"):
        KindCluster()


def test_runc_wrapper_drops_only_caps_outside_the_bounding_set(tmp_path: Path) -> None:
    """Docker 20.10's --privileged asks for every capability; the wrapper removes the ones this machine lacks."""
    wrapper = tmp_path / "runc-bounded"
    wrapper.write_text(kdocker._RUNC_WRAPPER % (kdocker._CAPS,))
    wrapper.chmod(0o755)
    fake_runc = tmp_path / "bin" / "runc"
    fake_runc.parent.mkdir()
    fake_runc.write_text("#!/bin/sh\necho \"runc $*\"\n")
    fake_runc.chmod(0o755)
    every = [f"CAP_{n}" for n in kdocker._CAPS]
    bundle = tmp_path / "bundle"
    bundle.mkdir()
    (bundle / "config.json").write_text(json.dumps({"process": {"capabilities": {"bounding": every,
                                                                                 "effective": every}}}))
    env = {**os.environ, "PATH": f"{fake_runc.parent}:{os.environ['PATH']}"}
    out = subprocess.run([str(wrapper), "--root", "/x", "create", "--bundle", str(bundle), "id1"], env=env,
                         capture_output=True, text=True, check=True).stdout
    assert out.strip() == f"runc --root /x create --bundle {bundle} id1"
    bnd = next(int(ln.split()[1], 16) for ln in Path("/proc/self/status").read_text().splitlines()
               if ln.startswith("CapBnd:"))
    have = [c for i, c in enumerate(every) if bnd >> i & 1]
    caps = json.loads((bundle / "config.json").read_text())["process"]["capabilities"]
    assert caps == {"bounding": have, "effective": have}


def test_nightly_overlay_sets_the_image_and_suspends_the_schedule(tmp_path: Path) -> None:
    from gpu_conformance.sim.kind import nightly as kn

    assert kn.split_image("gpu-conformance.local/suite:dev") == ("gpu-conformance.local/suite", "dev")
    assert kn.split_image("registry:5000/suite") == ("registry:5000/suite", "latest")
    assert kn.split_image("registry:5000/suite:1.2") == ("registry:5000/suite", "1.2")
    at = kn.overlay("registry:5000/suite:1.2", tmp_path / "a" / "b")
    doc = yaml.safe_load((at / "kustomization.yaml").read_text())
    [base] = doc["resources"]
    assert not Path(base).is_absolute() and (at / base).resolve() == kn.DEPLOY_DIR.resolve()
    assert doc["images"] == [{"name": "gpu-operator-conformance", "newName": "registry:5000/suite", "newTag": "1.2"}]
    # The name the overlay rewrites is the one deploy/ uses.
    cronjob = next(d for d in yaml.safe_load_all((kn.DEPLOY_DIR / "nightly.yaml").read_text())
                   if d["kind"] == "CronJob")
    assert cronjob["metadata"]["name"] == kn.CRONJOB
    assert cronjob["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]["image"] == kn.IMAGE_NAME
    [patch] = doc["patches"]
    assert yaml.safe_load(patch["patch"]) == [{"op": "add", "path": "/spec/suspend", "value": True}]
    claim = next(d for d in yaml.safe_load_all((kn.DEPLOY_DIR / "nightly.yaml").read_text())
                 if d["kind"] == "PersistentVolumeClaim")
    pv = kn.volume("node-a", "standard")
    assert pv["spec"]["claimRef"] == {"namespace": kn.NAMESPACE, "name": claim["metadata"]["name"]}  # type: ignore[index]


def test_validator_image_is_nvidias_layout_on_the_cdi_path_and_the_stand_in_elsewhere(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """NVIDIA's validator image as validator/Dockerfile (v25.3.4) lays it out: nvidia-validator and the CUDA sample
    (our vectorAdd) in /usr/bin, the workload pod manifests in /var/nvidia/manifests, NVIDIA_VISIBLE_DEVICES=void;
    and the ClusterPolicy switches off its /dev/char symlinks (the fake GPUs have no kernel module)."""
    from gpu_conformance.sim.builds import operator_module

    validator = tmp_path / "nvidia-validator"
    validator.write_text("")
    monkeypatch.setattr(operator_module, "ensure_validator", lambda: validator)
    manifests = ["cuda-workload-validation.yaml", "plugin-workload-validation.yaml"]
    monkeypatch.setattr(operator_module, "validator_manifests", lambda: [tmp_path / m for m in manifests])
    busybox = tmp_path / "busybox"
    busybox.write_text("")
    monkeypatch.setattr(kindop, "busybox_applets", lambda _b: ["sh", "chroot", "sleep"])
    image = kindop.validator_image("v:1", tmp_path, busybox, nvidias=True)
    paths = {e.path: e for e in image.entries}
    assert paths["/usr/bin/nvidia-validator"].source == validator
    assert paths["/usr/bin/vectorAdd"].source == tmp_path / "vectorAdd"
    assert {*(f"/var/nvidia/manifests/{m}" for m in manifests), "/bin/chroot"} <= set(paths)
    assert "NVIDIA_VISIBLE_DEVICES=void" in image.env
    stand_in = kindop.validator_image("v:1", tmp_path, busybox, nvidias=False)
    stand_in_paths = {e.path: e.source for e in stand_in.entries}
    assert stand_in_paths["/usr/bin/nvidia-validator"] == tmp_path / "fake-nvidia-validator"
    assert kindop.clusterpolicy()["spec"]["validator"]["driver"]["env"] == [
        {"name": "DISABLE_DEV_CHAR_SYMLINK_CREATION", "value": "true"}]


@pytest.mark.kind
def test_public_node_image_gets_the_operator_fake_gpu_and_probe_images_loaded(tmp_path: Path) -> None:
    """The operator's image and its operands' stand-ins are loaded as OCI archives (`kind load image-archive`)
    under the names the ClusterPolicy gives them (on the CDI path the container toolkit's too); with
    GPU_CONFORMANCE_KIND_IMAGE (kindest/node in a user's
    CI) the probe image too, which is not in a public node image."""
    import tarfile

    from gpu_conformance.sim.kind import binaries as kindbin
    from gpu_conformance.sim.kind.nodeimage import FAKE_GPU_IMAGE

    loaded: list[str] = []

    class Manager:
        def _exec(self, args: list[str]) -> None:
            assert args[:2] == ["load", "image-archive"] and args[-2:] == ["--name", CLUSTER_NAME]
            with tarfile.open(args[2]) as tar:
                index = json.load(tar.extractfile("index.json"))  # type: ignore[arg-type]
            loaded.extend(m["annotations"]["io.containerd.image.name"] for m in index["manifests"])

    c = KindCluster(work=tmp_path)
    c.manager = Manager()  # type: ignore[assignment]
    from gpu_conformance.sim.kind import operator as kindop

    spec = kindop.clusterpolicy()["spec"]
    # The CDI path (the default): the operator's toolkit too, built here (toolkit_image.py).
    operator = [kindop.operator_image(), kindop.image_name(spec["validator"]), kindop.image_name(spec["devicePlugin"]),
                kindop.image_name(spec["toolkit"])]
    c._load_images(kindbin.ensure_binaries(), public=True)
    assert sorted(loaded) == sorted([*operator, FAKE_GPU_IMAGE, DEFAULT_PROBE_IMAGE])
    loaded.clear()
    c._load_images(kindbin.ensure_binaries(), public=False)
    assert sorted(loaded) == sorted(operator)


# ------------------------------------------------------------------------------------ the live cluster

def _host_state() -> dict[str, object]:
    # Only links Docker can make (other jobs on the machine add and remove their own meanwhile).
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True, check=True).stdout
    names = (ln.split(":")[1].strip().split("@")[0] for ln in links.splitlines())
    state: dict[str, object] = {"links": sorted(n for n in names if n.startswith(("br-", "veth", "docker"))),
                                "ip_forward": Path("/proc/sys/net/ipv4/ip_forward").read_text()}
    if os.geteuid() == 0:
        # The kind nodes' kubelets write these on the host; stop() puts them back (which needs root: a user's
        # CI runs as non-root on a throw-away runner, where they are left as the kubelets set them).
        state["sysctls"] = read_sysctls()
    return state


@pytest.fixture(scope="module")
def kind_cluster() -> Iterator[KindCluster]:
    before = _host_state()
    t0 = time.monotonic()
    cluster = KindCluster(gpu_path="cdi").start()
    cluster.up_seconds = time.monotonic() - t0  # type: ignore[attr-defined]
    cluster.host_before = before  # type: ignore[attr-defined]
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.mark.kind
def test_nodes_ready_and_gpu_workers_advertise_fake_gpus(kind_cluster: KindCluster) -> None:
    nodes = {n["metadata"]["name"]: n for n in kind_cluster.nodes()}
    assert len(nodes) == 3
    for n in nodes.values():
        assert any(c["type"] == "Ready" and c["status"] == "True" for c in n["status"]["conditions"])
        assert n["status"]["nodeInfo"]["kubeletVersion"] == "v1.36.3"
        assert n["status"]["nodeInfo"]["containerRuntimeVersion"].startswith("containerd://")
    gpu = kind_cluster.gpu_nodes()
    assert len(gpu) == 2
    assert all(nodes[g]["status"]["allocatable"]["nvidia.com/gpu"] == "2" for g in gpu)


@pytest.mark.kind
def test_every_kube_system_pod_runs_coredns_included(kind_cluster: KindCluster) -> None:
    """Every image kubeadm runs is in the node image (CoreDNS built from its module): nothing waits on a pull."""
    deadline = time.monotonic() + 90
    while True:
        pods = json.loads(kind_cluster.kubectl("get", "pods", "-n", "kube-system", "-o", "json"))["items"]
        not_ready = {p["metadata"]["name"]: p["status"].get("phase") for p in pods
                     if not any(c["type"] == "Ready" and c["status"] == "True"
                                for c in p["status"].get("conditions", []))}
        if not not_ready or time.monotonic() > deadline:
            break
        time.sleep(3)
    assert not not_ready, not_ready
    assert any(p["metadata"]["name"].startswith("coredns-") for p in pods)


def _probe(cluster: KindCluster, node: str, **options: Any) -> ConformanceRun:
    """The suite's own probe on `node` alone (the whole suite runs in the Job test below); `options` are Settings
    fields as the command line sets them (probe_gpus, probe_image, probe_namespace...)."""
    settings = Settings(kubeconfig=str(cluster.kubeconfig), **{"probe_timeout": 120, **options}).validate()
    run = ConformanceRun(settings, "current")
    try:
        run.start()
        run.run_probe(nodes=[node])
    finally:
        run.close()
    return run


@pytest.mark.kind
def test_probe_gets_a_fake_gpu_on_a_real_container(kind_cluster: KindCluster) -> None:
    node = kind_cluster.gpu_nodes()[0]
    run = _probe(kind_cluster, node)
    probe_findings = [f for f in run.findings if f.check_id.startswith("PRB-")]
    by_id = {f.check_id: f for f in probe_findings}
    assert {k: by_id[k].status for k in ("PRB-001", "PRB-002", "PRB-003", "PRB-004")} == \
        dict.fromkeys(("PRB-001", "PRB-002", "PRB-003", "PRB-004"), Status.PASS), \
        {k: f.message for k, f in by_id.items()}
    # Operator v25.3.4 with cdi.enabled and cdi.default: the device plugin annotates the container with its CDI
    # names (nvidia.cdi.k8s.io/) and NVIDIA's runtime in CDI mode injects them from the plugin kind's spec
    # (written by nvidia-ctk at node setup), which leaves NVIDIA_VISIBLE_DEVICES=void; no runtimeClassName.
    assert "injected by CDI (NVIDIA_VISIBLE_DEVICES=void" in by_id["PRB-004"].message, by_id["PRB-004"].message
    assert by_id["PRB-004"].evidence["cdi_expected"] is True
    # By the annotation and the plugin's own spec, not by the variable (which names nvidia.com/gpu devices).
    assert kind_cluster.docker is not None
    log = kind_cluster.docker.docker("exec", node, "cat", "/var/log/nvidia-container-runtime.log").stdout.decode()
    assert f"{fakegpu.PLUGIN_CDI_KIND}=GPU-" in log, log[-2000:]
    # The UUID comes from the fake nvidia-smi the runtime mounted, i.e. from the node the pod ran on (the
    # message shortens it to its tail).
    text = " ".join(f.message for f in probe_findings)
    assert any(gpu_uuid(node, i)[-12:] in text for i in range(kind_cluster.gpus)), text


def _node_spec(cluster: KindCluster, node: str, name: str) -> dict[str, Any]:
    assert cluster.docker is not None
    # JSON (the tier's nvidia-ctk --format=json) or YAML (the toolkit's management spec): YAML reads both.
    return yaml.safe_load(cluster.docker.docker("exec", node, "cat", f"{nvidia_cdi.CDI_DIR}/{name}").stdout)


def _spec_edits(spec: dict[str, Any], device: str) -> dict[str, Any]:
    return next(d["containerEdits"] for d in spec["devices"] if d["name"] == device)


def _containerd_config(cluster: KindCluster, node: str) -> dict[str, Any]:
    """The config the node's containerd runs with (`containerd config dump`: config.toml and its imports merged)."""
    assert cluster.docker is not None
    return tomllib.loads(cluster.docker.docker("exec", node, "containerd", "config", "dump").stdout.decode())


@pytest.mark.kind
def test_the_operators_toolkit_set_up_each_gpu_node_as_on_a_real_one(kind_cluster: KindCluster) -> None:
    """NVIDIA's installer v1.17.8, run by the operator's own toolkit DaemonSet, did on every GPU node what it does on
    a real one: its pod is Ready; the runtime is under /usr/local/nvidia/toolkit; containerd runs with the `nvidia`
    runtime it wrote (the default, the plugin's annotation prefix passed through); and containerd was restarted
    its way, SIGHUP (containerd v2 has no handler for it and dies of it; systemd restarts it)."""
    assert kind_cluster.docker is not None
    pods = json.loads(kind_cluster.kubectl("get", "pods", "-n", kindop.NAMESPACE, "-l", f"app={kindop.TOOLKIT_DS}",
                                           "-o", "json"))["items"]
    assert sorted(p["spec"]["nodeName"] for p in pods) == sorted(kind_cluster.gpu_nodes())
    for node in kind_cluster.gpu_nodes():
        cri = _containerd_config(kind_cluster, node)["plugins"]["io.containerd.cri.v1.runtime"]["containerd"]
        assert cri["default_runtime_name"] == "nvidia"
        nvidia = cri["runtimes"]["nvidia"]
        assert nvidia["options"]["BinaryName"] == f"{nvidia_cdi.TOOLKIT_DIR}/nvidia-container-runtime", nvidia
        assert nvidia["container_annotations"] == [f"{kindop.CDI_ANNOTATION_PREFIX}*"], nvidia
        out = kind_cluster.docker.docker("exec", node, "sh", "-c",
                                         f"{nvidia_cdi.TOOLKIT_DIR}/nvidia-container-runtime.real --version; "
                                         "systemctl show containerd -p NRestarts").stdout.decode()
        assert "version 1.17.8" in out, out
        assert int(out.rsplit("NRestarts=", 1)[1]) >= 1, out
    logs = kind_cluster.kubectl("logs", "-n", kindop.NAMESPACE, "-l", f"app={kindop.TOOLKIT_DS}", "--tail=-1")
    assert "Sending SIGHUP signal to containerd" in logs and "Successfully signaled containerd" in logs, logs[-2000:]


@pytest.mark.kind
def test_gpu_nodes_cdi_specs_are_nvidias_and_the_probe_sees_the_devices_they_list(
        kind_cluster: KindCluster) -> None:
    """The CDI specs on a GPU node are NVIDIA's, not ours: the device plugin's kind by UUID, written at node setup
    by `nvidia-ctk cdi generate` v1.17.8 (the CDI library device plugin v0.17.4 vendors) on the fake NVML, and the
    management spec the operator's toolkit wrote (`management.nvidia.com/gpu=all`, every device node), each with
    NVIDIA's hooks at the toolkit's nvidia-cdi-hook and the driver's files; the plugin kept the spec it found. A
    probe asking for both GPUs sees exactly the device nodes the spec lists for the names it got."""
    assert kind_cluster.docker is not None
    node = sorted(kind_cluster.gpu_nodes())[0]
    uuids = fakegpu.uuids(node, kind_cluster.gpus)
    plugin_spec = _node_spec(kind_cluster, node, nvidia_cdi.PLUGIN_SPEC)
    management = _node_spec(kind_cluster, node, nvidia_cdi.MANAGEMENT_KIND.replace("/", "-") + ".yaml")
    assert (plugin_spec["kind"], management["kind"]) == (nvidia_cdi.PLUGIN_KIND, nvidia_cdi.MANAGEMENT_KIND)
    assert [d["name"] for d in plugin_spec["devices"]] == [*uuids, "all"], plugin_spec["devices"]
    assert [d["name"] for d in management["devices"]] == ["all"], management["devices"]
    assert {n["path"] for n in _spec_edits(management, "all")["deviceNodes"]} >= {
        *(f"/dev/nvidia{i}" for i in range(kind_cluster.gpus)), "/dev/nvidiactl", "/dev/nvidia-uvm"}
    # What only NVIDIA's generator writes: its hooks at the toolkit's nvidia-cdi-hook, the host driver's versioned
    # library mounted, the device nodes by their path on the node.
    for spec in (plugin_spec, management):
        edits = spec["containerEdits"]
        hooks = [h["args"][1] for h in edits["hooks"]]
        assert {h["path"] for h in edits["hooks"]} == {nvidia_cdi.HOOK_PATH}
        assert {"create-symlinks", "update-ldcache"} <= set(hooks), hooks
        assert f"libnvidia-ml.so.{nvidia_cdi.DRIVER_VERSION}" in " ".join(m["containerPath"] for m in edits["mounts"])
        assert "NVIDIA_VISIBLE_DEVICES=void" in edits["env"]
    # The node's own /dev (--dev-root=/): the host path is the container path, which nvidia-ctk then leaves out.
    assert [(n["path"], n.get("hostPath", n["path"]))
            for n in _spec_edits(plugin_spec, uuids[1])["deviceNodes"]] == [("/dev/nvidia1", "/dev/nvidia1")]
    logs = kind_cluster.kubectl("logs", "-n", kindop.NAMESPACE, "-l", f"app={kindop.DEVICE_PLUGIN_DS}",
                                "--all-containers", "--tail=-1", "--prefix")
    assert f"kept the node's CDI spec \"{nvidia_cdi.CDI_DIR}/{nvidia_cdi.PLUGIN_SPEC}\"" in logs, logs[-2000:]
    assert "wrote CDI spec" not in logs, logs[-2000:]
    run = _probe(kind_cluster, node, probe_gpus=2)
    fs = {f.check_id: f for f in run.findings if f.check_id.startswith("PRB-")}
    assert all(f.status == Status.PASS for f in fs.values()), {k: f.message for k, f in fs.items()}
    obs = run.probe_run
    assert obs is not None
    (pod,) = [p.to_dict(obs.image) for p in obs.pods.values()]
    seen = [s.split("(")[1].rstrip(")") for s in pod["gpus_seen"]]
    # nvidia-smi lists a GPU only where its /dev/nvidiaN is in the container: the spec's nodes for those names.
    listed = [n["path"] for u in seen for n in _spec_edits(plugin_spec, u)["deviceNodes"]]
    assert sorted(seen) == sorted(uuids) and sorted(listed) == [f"/dev/nvidia{i}" for i in range(kind_cluster.gpus)]


# The probe's own cases on the live cluster (the former real-node tier's): each through the suite's Probe on one
# worker, each fault undone before the test ends so the next test meets a healthy cluster.

def _probe_findings(run: ConformanceRun) -> dict[str, Any]:
    """The probe checks' findings by check id (the last of each), as the run judged them."""
    return {f.check_id: f for f in run.findings if f.check_id.startswith("PRB-")}


def _probe_pods(run: ConformanceRun) -> list[dict[str, Any]]:
    """The probe pods as the report records them."""
    obs = run.probe_run
    assert obs is not None
    return [p.to_dict(obs.image) for p in obs.pods.values()]


@pytest.mark.kind
def test_probe_with_two_gpus_lists_both(kind_cluster: KindCluster) -> None:
    """--probe-gpus=2 on a worker with two GPUs: the container sees exactly the node's two, by UUID."""
    node = sorted(kind_cluster.gpu_nodes())[0]
    run = _probe(kind_cluster, node, probe_gpus=2)
    fs = _probe_findings(run)
    assert fs["PRB-003"].status == Status.PASS, fs["PRB-003"].message
    (pod,) = _probe_pods(run)
    assert {seen.split("(")[1].rstrip(")") for seen in pod["gpus_seen"]} == set(fakegpu.uuids(node, kind_cluster.gpus))


@pytest.mark.kind
def test_missing_probe_image_fails_at_the_pull(kind_cluster: KindCluster) -> None:
    """A probe image no registry serves: the kubelet's pull fails and the probe stops at that answer (PRB-002),
    not at --probe-timeout. `.invalid` never resolves (RFC 2606), so the pull fails without the internet."""
    node = sorted(kind_cluster.gpu_nodes())[0]
    t0 = time.monotonic()
    fs = _probe_findings(_probe(kind_cluster, node, probe_image="gpu-conformance.invalid/not-imported:1"))
    elapsed = time.monotonic() - t0
    msg = fs["PRB-002"].message
    assert fs["PRB-002"].status == Status.FAIL and "cannot be pulled (ErrImagePull" in msg, msg
    assert elapsed < 60, f"the probe waited {elapsed:.0f} s for a pull that had already failed"


_HOG = "gpu-hog"


def _gpu_hog(node: str, gpus: int) -> dict[str, Any]:
    """A workload holding `gpus` GPUs of `node` through the scheduler, as any user pod does; it exits on SIGTERM so
    its deletion is over as soon as the kubelet has stopped it."""
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": _HOG, "namespace": "default"},
            "spec": {"nodeSelector": {"kubernetes.io/hostname": node}, "restartPolicy": "Never",
                     "automountServiceAccountToken": False,
                     "containers": [{"name": "hog", "image": DEFAULT_PROBE_IMAGE,
                                     "command": ["sh", "-c", "trap 'exit 0' TERM; sleep 3600 & wait"],
                                     "resources": {"limits": {"nvidia.com/gpu": str(gpus)}}}]}}


@pytest.mark.kind
def test_all_gpus_in_use_leaves_the_probe_unschedulable(kind_cluster: KindCluster) -> None:
    """Every GPU of the worker held by a running pod: busy is not broken. The probe says the GPUs are in use
    (PRB-001 warns) and does not call the node faulty."""
    node = sorted(kind_cluster.gpu_nodes())[0]
    kind_cluster.kubectl("apply", "-f", "-", input=json.dumps(_gpu_hog(node, kind_cluster.gpus)))
    try:
        kind_cluster.kubectl("wait", "--for=condition=Ready", f"pod/{_HOG}", "-n", "default", "--timeout=120s")
        fs = _probe_findings(_probe(kind_cluster, node))
    finally:
        # --wait: until the kubelet has stopped it and given the GPUs back.
        kind_cluster.kubectl("delete", "pod", _HOG, "-n", "default", "--ignore-not-found", "--wait",
                             "--timeout=120s")
    prb1 = fs["PRB-001"]
    assert prb1.status == Status.WARN and "in use" in prb1.message, prb1.message
    assert Status.FAIL not in {f.status for f in fs.values()}, {k: f.message for k, f in fs.items()}


@pytest.mark.kind
def test_untolerated_taint_leaves_the_probe_unschedulable(kind_cluster: KindCluster) -> None:
    """A NoSchedule taint ordinary GPU workloads do not tolerate: the scheduler refuses the probe pod and PRB-001
    fails naming the taint."""
    node = sorted(kind_cluster.gpu_nodes())[0]
    taint = "gpu-conformance.test/dedicated=ml:NoSchedule"
    kind_cluster.kubectl("taint", "nodes", node, taint)
    try:
        fs = _probe_findings(_probe(kind_cluster, node))
    finally:
        kind_cluster.kubectl("taint", "nodes", node, f"{taint}-")
    prb1 = fs["PRB-001"]
    assert prb1.status == Status.FAIL and "taint" in prb1.message, prb1.message


@pytest.mark.kind
def test_kubelet_api_admits_no_anonymous_or_unauthorized_caller(kind_cluster: KindCluster) -> None:
    """kind's kubelets as kubeadm configures them (anonymous off, webhook authentication
    and authorization): an anonymous caller gets 401, a valid identity without RBAC (a ServiceAccount token) 403,
    the API server's kubelet client certificate 200; the API server's own calls (proxy) pass. Asked from the
    control-plane node, on the kind network."""
    assert kind_cluster.docker is not None
    node = sorted(kind_cluster.gpu_nodes())[0]
    nodes = {n["metadata"]["name"]: n for n in kind_cluster.nodes()}
    ip = next(a["address"] for a in nodes[node]["status"]["addresses"] if a["type"] == "InternalIP")
    (control_plane,) = [n for n, o in nodes.items()
                        if "node-role.kubernetes.io/control-plane" in o["metadata"]["labels"]]
    token = kind_cluster.kubectl("create", "token", "default", "-n", "default", "--duration=10m").strip()
    pki = "/etc/kubernetes/pki/apiserver-kubelet-client"

    def status(path: str, *auth: str) -> str:
        return kind_cluster.docker.docker(  # type: ignore[union-attr]
            "exec", control_plane, "curl", "-sk", "-o", "/dev/null", "-w", "%{http_code}", *auth,
            f"https://{ip}:10250{path}").stdout.decode()

    for path in ("/pods", "/configz", "/metrics", "/healthz"):
        assert status(path) == "401", path
        assert status(path, "-H", f"Authorization: Bearer {token}") == "403", path
        assert status(path, "--cert", f"{pki}.crt", "--key", f"{pki}.key") == "200", path
    assert kind_cluster.kubectl("get", "--raw", f"/api/v1/nodes/{node}/proxy/healthz").strip() == "ok"


def _smi_host_path(cluster: KindCluster, node: str) -> str:
    """Where on `node` the nvidia-smi the probe runs comes from: the bind mount in the device plugin's CDI spec."""
    assert cluster.docker is not None
    spec = json.loads(cluster.docker.docker("exec", node, "cat", f"{kindop.CDI_DIR}/{kindop.PLUGIN_CDI_SPEC}").stdout)
    mounts = [*spec.get("containerEdits", {}).get("mounts", []),
              *(m for d in spec.get("devices", []) for m in d.get("containerEdits", {}).get("mounts", []))]
    return next(m["hostPath"] for m in mounts if m["containerPath"].endswith("/nvidia-smi"))


@pytest.mark.kind
def test_probe_namespace_deleted_mid_run(kind_cluster: KindCluster) -> None:
    """The probe's namespace deleted while its pod runs (nvidia-smi made to hang so the pod is caught running):
    noticed at once, and the run cannot speak for the node: warnings saying what happened, not a failure."""
    assert kind_cluster.docker is not None
    node = sorted(kind_cluster.gpu_nodes())[0]
    smi = _smi_host_path(kind_cluster, node)
    saved = kind_cluster.docker.docker("exec", node, "cat", smi).stdout
    hanging = saved.replace(b"#!/bin/sh\n", b"#!/bin/sh\nsleep 60\n", 1)
    assert hanging != saved
    ns = "gpu-conformance-probe-deleted-midrun"
    kind_cluster.kubectl("create", "namespace", ns)
    kind_cluster.docker.docker("exec", "-i", node, "sh", "-c", 'cat > "$1"', "sh", smi, input=hanging)
    result: dict[str, ConformanceRun] = {}
    thread = threading.Thread(target=lambda: result.update(run=_probe(kind_cluster, node, probe_namespace=ns)))
    t0 = time.monotonic()
    thread.start()
    try:
        while not any(p["status"].get("phase") == "Running"
                      for p in json.loads(kind_cluster.kubectl("get", "pods", "-n", ns, "-o", "json"))["items"]):
            assert thread.is_alive() and time.monotonic() - t0 < 60, "the probe pod never ran"
            time.sleep(0.3)
        kind_cluster.kubectl("delete", "namespace", ns, "--wait=false")
        thread.join(timeout=120)
        elapsed = time.monotonic() - t0
    finally:
        kind_cluster.docker.docker("exec", "-i", node, "sh", "-c", 'cat > "$1"', "sh", smi, input=saved)
        kind_cluster.kubectl("delete", "namespace", ns, "--ignore-not-found", "--wait", "--timeout=120s")
    said = [f for f in result["run"].findings if f.check_id.startswith("PRB-") and "deleted" in f.message]
    assert said and all(f.status == Status.WARN for f in said), [(f.check_id, f.status, f.message) for f in said]
    assert elapsed < 60, f"the probe took {elapsed:.0f} s to notice"


def _healthy(layers: dict[str, str], *skip: str) -> bool:
    """Every layer but `skip` passes; driver-toolkit may warn: NVIDIA's toolkit kills containerd (SIGHUP) from inside
    its own pod at bring-up and, on these loaded cores, often restarts a few times before one start outlives the
    restart it causes (cluster.py); DRV-003 warns on those restarts, a true observation and no failure."""
    return all(v == "pass" or (k == "driver-toolkit" and v == "warn") for k, v in layers.items() if k not in skip)


def _summary(report_dir: Path) -> dict[str, Any]:
    """What two runs of the suite on one cluster must agree on (not messages: they name the probe's pods)."""
    data = json.loads((report_dir / "conformance.json").read_text())
    return {"verdict": data["verdict"], "cluster_blocker": data["cluster_blocker"],
            "nodes": {n["name"]: [n["layers"], n["root_cause"]] for n in data["nodes"]},
            "checks": sorted((c["id"], c["status"], sorted(c["failing_nodes"])) for c in data["checks"]),
            "probed": sorted(p["node"] for p in data["probe"]["pods"] if p["phase"] == "Succeeded")}


def _suite_outside(cluster: KindCluster, report_dir: Path) -> tuple[int, dict[str, Any]]:
    """`pytest --cluster=current` from this machine with the kind kubeconfig, as an admin runs it."""
    repo = Path(__file__).resolve().parents[1]
    proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--cluster=current",
                           f"--kubeconfig={cluster.kubeconfig}", f"--report-dir={report_dir}", "tests_conformance"],
                          cwd=repo, capture_output=True, text=True, check=False)
    assert (report_dir / "conformance.json").exists(), proc.stdout[-2000:] + proc.stderr[-2000:]
    return proc.returncode, _summary(report_dir)


@pytest.mark.kind
def test_a_node_whose_driver_is_gone_is_named_at_its_driver_layer(kind_cluster: KindCluster, tmp_path: Path) -> None:
    """A node-level fault under the real operator: one worker's driver disappears (its GPU table removed, as
    after a failed driver upgrade) and its validator and device plugin pods restart, as after a reboot. The
    operator's own validator then waits in driver-validation and the operator marks the ClusterPolicy notReady
    (any unavailable operand pod does that); the suite must still name that one node at driver-toolkit and
    pass the other, not call the whole cluster broken. Mending the node brings the ClusterPolicy back."""
    from gpu_conformance.sim.kind.driver_gone import break_on_kind, mend_on_kind

    assert kind_cluster.docker is not None
    broken, healthy = sorted(kind_cluster.gpu_nodes())
    try:
        # The same steps as the recordings the simulated fault is held to (tests/test_fault_trace.py).
        break_on_kind(kind_cluster, broken)
        deadline = time.monotonic() + 120
        while _policy_state(kind_cluster) != "notReady" and time.monotonic() < deadline:
            time.sleep(2)
        assert _policy_state(kind_cluster) == "notReady"
        rc, summary = _suite_outside(kind_cluster, tmp_path / "report")
    finally:
        mend_on_kind(kind_cluster, broken)
        kind_cluster._wait_gpus()
        kind_cluster._wait_operator()
    assert rc == 1 and summary["verdict"] != "CONFORMANT"
    assert summary["cluster_blocker"] is None, summary["cluster_blocker"]
    layers, root = summary["nodes"][broken]
    assert root is not None and root["layer"] == "driver-toolkit", root
    # The notReady ClusterPolicy is a cluster-wide warning naming the broken node (OPR-003), not a blocker.
    assert layers["operator"] == "warn" and {layers[k] for k in ("nfd", "deploy-labels")} == {"pass"}, layers
    assert ("OPR-003", "warn", []) in summary["checks"]
    ok_layers, ok_root = summary["nodes"][healthy]
    assert ok_root is None and _healthy(ok_layers, "operator"), ok_layers
    assert summary["probed"] == [healthy]


@pytest.mark.kind
def test_a_node_whose_default_runtime_is_not_nvidia_fails_only_at_the_probe(kind_cluster: KindCluster,
                                                                             tmp_path: Path) -> None:
    """The failure only the probe sees: one worker's containerd default runtime set back to runc (as when
    something rewrites containerd's config after the toolkit set it up). The operator's pods name their
    RuntimeClass and keep running, its validation already passed, the ClusterPolicy stays ready; but an
    ordinary pod (no runtimeClassName) on that node gets no GPU. The suite must pass that node's status layers
    and fail it at the probe, and pass the other node."""
    assert kind_cluster.docker is not None
    broken, healthy = sorted(kind_cluster.gpu_nodes())

    def default_runtime(name: str) -> None:
        kind_cluster.docker.docker(  # type: ignore[union-attr]
            "exec", broken, "sh", "-ec",
            f"sed -i 's/default_runtime_name = \"[a-z]*\"/default_runtime_name = \"{name}\"/' "
            "/etc/containerd/config.toml && systemctl restart containerd")
        kind_cluster.kubectl("wait", "--for=condition=Ready", f"node/{broken}", "--timeout=120s")

    default_runtime("runc")
    try:
        assert _policy_state(kind_cluster) == "ready"
        rc, summary = _suite_outside(kind_cluster, tmp_path / "report")
    finally:
        default_runtime("nvidia")
    assert rc == 1 and summary["cluster_blocker"] is None
    layers, root = summary["nodes"][broken]
    assert root is not None and root["layer"] == "probe", root
    assert _healthy(layers, "probe"), layers
    assert root["check"] in ("PRB-003", "PRB-004"), root
    assert _healthy(summary["nodes"][healthy][0]) and summary["nodes"][healthy][1] is None


def _root_of(summary: dict[str, Any], node: str) -> dict[str, Any]:
    layers, root = summary["nodes"][node]
    assert root is not None, layers
    return root


def _passes_everywhere(summary: dict[str, Any], node: str) -> None:
    layers, root = summary["nodes"][node]
    assert root is None and _healthy(layers), (layers, root)


@pytest.mark.kind
def test_a_node_whose_plugin_cdi_spec_is_gone_fails_at_the_probe_in_the_runtimes_words(kind_cluster: KindCluster,
                                                                                         tmp_path: Path) -> None:
    """The CDI spec of the device plugin's kind (k8s.device-plugin.nvidia.com-gpu.json in /var/run/cdi, written by
    NVIDIA's nvidia-ctk at node setup) removed on one worker, as by a cleanup of /var/run or a node reboot that
    outlived the plugin. Everything the API shows
    stays healthy (the plugin keeps advertising, the ClusterPolicy stays ready); the plugin still annotates the
    probe with its CDI names and NVIDIA's runtime, which resolves them from the spec, refuses the container. The
    suite must name that node at the probe with the runtime's own words and pass the other node."""
    assert kind_cluster.docker is not None
    broken, healthy = sorted(kind_cluster.gpu_nodes())
    spec = f"{kindop.CDI_DIR}/{kindop.PLUGIN_CDI_SPEC}"
    kind_cluster.docker.docker("exec", broken, "mv", spec, f"/root/{kindop.PLUGIN_CDI_SPEC}.gone")
    try:
        assert _policy_state(kind_cluster) == "ready"
        rc, summary = _suite_outside(kind_cluster, tmp_path / "report")
    finally:
        kind_cluster.docker.docker("exec", broken, "mv", f"/root/{kindop.PLUGIN_CDI_SPEC}.gone", spec, check=False)
    assert rc == 1 and summary["cluster_blocker"] is None, summary["cluster_blocker"]
    layers, root = summary["nodes"][broken]
    assert root is not None and root["layer"] == "probe" and root["check"] == "PRB-002", root
    assert _healthy(layers, "probe"), layers
    # NVIDIA's runtime (the CDI library it vendors) in its own words, and what the suite makes of them.
    assert "unresolvable CDI devices" in root["message"] and "CDI spec is missing or stale" in root["message"], root
    _passes_everywhere(summary, healthy)
    assert summary["probed"] == [healthy]


def _plugin_env(cluster: KindCluster) -> dict[str, str]:
    ds = json.loads(cluster.kubectl("get", "ds", "-n", kindop.NAMESPACE, kindop.DEVICE_PLUGIN_DS, "-o", "json"))
    return {e["name"]: e.get("value", "") for e in ds["spec"]["template"]["spec"]["containers"][0].get("env", [])}


def _set_plugin_env(cluster: KindCluster, env: list[dict[str, str]] | None, strategy: str) -> None:
    """spec.devicePlugin.env of the ClusterPolicy as a user edits it (None removes it); then until the operator
    has rendered DEVICE_LIST_STRATEGY=`strategy` into the plugin's DaemonSet and rolled it out to every node."""
    name = json.loads(cluster.kubectl("get", "clusterpolicies.nvidia.com", "-o", "json"))["items"][0]
    cluster.kubectl("patch", "clusterpolicies.nvidia.com", name["metadata"]["name"], "--type=merge", "-p",
                    json.dumps({"spec": {"devicePlugin": {"env": env}}}))
    deadline = time.monotonic() + 120
    while _plugin_env(cluster).get("DEVICE_LIST_STRATEGY") != strategy:
        assert time.monotonic() < deadline, _plugin_env(cluster)
        time.sleep(2)
    cluster.kubectl("rollout", "status", "-n", kindop.NAMESPACE, f"ds/{kindop.DEVICE_PLUGIN_DS}", "--timeout=180s")
    cluster._wait_gpus()
    cluster._wait_operator()


@pytest.mark.kind
def test_device_plugin_on_envvar_while_cdi_is_on_fails_every_probe_at_the_runtime(kind_cluster: KindCluster,
                                                                                   tmp_path: Path) -> None:
    """The device plugin switched to envvar-only the way a user does it: ClusterPolicy devicePlugin.env
    DEVICE_LIST_STRATEGY=envvar, which operator v25.3.4 applies after its own CDI settings (TransformDevicePlugin
    sets the user's env last) and rolls out. CDI stays on in the ClusterPolicy, but the plugin no longer hands out
    its CDI devices (no nvidia.cdi.k8s.io/ annotation), only NVIDIA_VISIBLE_DEVICES=GPU-....

    What NVIDIA's runtime makes of it decides the verdict: in CDI mode it reads the variable's IDs as CDI devices of
    its default kind (internal/modifier/cdi.go getDevicesFromSpec), and the operator's toolkit sets that kind to
    management.nvidia.com/gpu, whose only spec (the toolkit's management spec) lists `all`. So every GPU container
    is refused ("unresolvable CDI devices management.nvidia.com/gpu=GPU-..."). The suite must say so: DPL-007 fails
    naming the toolkit's default kind, a cluster-wide cause that stops every node (no probe is sent into it); the
    suite's own probe, sent anyway, fails at PRB-002 in the runtime's words. (A toolkit on the host, default kind
    nvidia.com/gpu with `nvidia-ctk cdi generate`'s node spec, would still inject the GPU: DPL-007 warns there,
    tests/test_checks_device_plugin.py.)"""
    assert kind_cluster.docker is not None
    before = json.loads(kind_cluster.kubectl("get", "clusterpolicies.nvidia.com", "-o", "json"))["items"][0]
    original = before["spec"].get("devicePlugin", {}).get("env")
    node = sorted(kind_cluster.gpu_nodes())[0]
    _set_plugin_env(kind_cluster, [{"name": "DEVICE_LIST_STRATEGY", "value": "envvar"}], "envvar")
    try:
        rc, summary = _suite_outside(kind_cluster, tmp_path / "report")
        seen = len(kind_cluster.docker.docker("exec", node, "cat", kindop.RUNTIME_LOG).stdout)
        probe = _probe(kind_cluster, node)
        log = kind_cluster.docker.docker("exec", node, "cat", kindop.RUNTIME_LOG).stdout[seen:].decode()
    finally:
        _set_plugin_env(kind_cluster, original, "envvar,cdi-annotations")
    assert rc == 1 and summary["verdict"] == "NOT CONFORMANT", summary
    blocker = summary["cluster_blocker"]
    assert blocker is not None and (blocker["layer"], blocker["check"]) == ("device-plugin", "DPL-007"), blocker
    assert "unresolvable CDI devices management.nvidia.com/gpu=GPU-" in blocker["message"], blocker
    assert summary["probed"] == []
    prb2 = next(f for f in probe.findings if f.check_id == "PRB-002")
    assert prb2.status == Status.FAIL, prb2.message
    assert "unresolvable CDI devices management.nvidia.com/gpu=GPU-" in prb2.message, prb2.message
    assert "default kind management.nvidia.com/gpu" in prb2.message, prb2.message
    assert f"{nvidia_cdi.MANAGEMENT_KIND}=GPU-" in log and f"{fakegpu.PLUGIN_CDI_KIND}=" not in log, log[-2000:]


_RESTORE_CONTAINERD = ("mv /root/containerd-config.toml.orig /etc/containerd/config.toml && "
                       "systemctl restart containerd")
# A later drop-in with a CRI runtime section of its own (runc only, default runc), as another tool would leave it.
_OTHER_DROP_IN = """version = 3
[plugins.'io.containerd.cri.v1.runtime'.containerd]
  default_runtime_name = 'runc'
  [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
    runtime_type = 'io.containerd.runc.v2'
"""


def _provisioned_containerd_config(cluster: KindCluster, node: str) -> str:
    """The containerd config the node had before the toolkit came: the node image's (kind/node), with the pause
    image the running config pins."""
    pause = _containerd_config(cluster, node)["plugins"]["io.containerd.cri.v1.images"]["pinned_images"]["sandbox"]
    return (Path(__file__).resolve().parents[1] / "kind/node/containerd-config.toml").read_text() \
        .replace("@PAUSE_IMAGE@", pause)


@pytest.mark.kind
def test_a_node_whose_containerd_config_was_rewritten_without_the_toolkits_runtime_is_named_at_driver_toolkit(
        kind_cluster: KindCluster, tmp_path: Path) -> None:
    """The field note's story ("another containerd config replaces the CRI section the toolkit wrote") as it
    happens on containerd v2.4.2 with the operator's toolkit v1.17.8, which writes its runtime into config.toml
    itself (from `containerd config dump`; no drop-in at that release):

    * a later drop-in (containerd v2 imports /etc/containerd/conf.d/*.toml by default) cannot take the `nvidia`
      runtime away: containerd v2 merges plugin sections key by key, so only the keys it sets (default_runtime_name)
      change. Checked here with `containerd config dump`, then the drop-in removed;
    * what does take it away is config.toml rewritten by another tool, here back to the node's provisioned config,
      and containerd restarted. The pods already running keep running; once the operator's pods on that node are
      recreated (as after a reboot or an upgrade), every pod naming RuntimeClass nvidia (the validator, the device
      plugin) gets no sandbox: "no runtime for \"nvidia\" is configured".

    The suite must name that node at driver-toolkit (DRV-006) and pass the other; putting the config back heals it."""
    assert kind_cluster.docker is not None
    broken, healthy = sorted(kind_cluster.gpu_nodes())
    drop_in = "/etc/containerd/conf.d/99-other.toml"
    kind_cluster.docker.docker("exec", "-i", broken, "sh", "-ec", f"mkdir -p /etc/containerd/conf.d && cat > {drop_in}",
                               input=_OTHER_DROP_IN.encode())
    try:
        merged = _containerd_config(kind_cluster, broken)["plugins"]["io.containerd.cri.v1.runtime"]["containerd"]
    finally:
        kind_cluster.docker.docker("exec", broken, "rm", "-f", drop_in)
    assert merged["default_runtime_name"] == "runc" and "nvidia" in merged["runtimes"], merged

    def restart_operands() -> None:
        for app in ("nvidia-operator-validator", kindop.DEVICE_PLUGIN_DS):
            kind_cluster.kubectl("delete", "pods", "-n", kindop.NAMESPACE, "-l", f"app={app}",
                                 "--field-selector", f"spec.nodeName={broken}", "--wait")

    provisioned = _provisioned_containerd_config(kind_cluster, broken)
    kind_cluster.docker.docker("exec", "-i", broken, "sh", "-ec",
                               "cp /etc/containerd/config.toml /root/containerd-config.toml.orig && "
                               "cat > /etc/containerd/config.toml && systemctl restart containerd",
                               input=provisioned.encode())
    try:
        kind_cluster.kubectl("wait", "--for=condition=Ready", f"node/{broken}", "--timeout=120s")
        assert "nvidia" not in _containerd_config(kind_cluster, broken)["plugins"]["io.containerd.cri.v1.runtime"][
            "containerd"]["runtimes"]
        restart_operands()
        deadline = time.monotonic() + 120
        while _policy_state(kind_cluster) != "notReady" and time.monotonic() < deadline:
            time.sleep(2)
        rc, summary = _suite_outside(kind_cluster, tmp_path / "report")
    finally:
        kind_cluster.docker.docker("exec", broken, "sh", "-ec", _RESTORE_CONTAINERD, check=False)
        kind_cluster.kubectl("wait", "--for=condition=Ready", f"node/{broken}", "--timeout=120s")
        restart_operands()
        kind_cluster._wait_gpus()
        kind_cluster._wait_operator()
    assert rc == 1 and summary["cluster_blocker"] is None, summary["cluster_blocker"]
    root = _root_of(summary, broken)
    assert root["layer"] == "driver-toolkit" and root["check"] == "DRV-006", root
    assert 'no runtime for "nvidia" is configured' in root["message"], root
    ok_layers, ok_root = summary["nodes"][healthy]
    assert ok_root is None and _healthy(ok_layers, "operator"), ok_layers
    assert summary["probed"] == [healthy]


# The other override of the field note's story: containerd's config keeps the `nvidia` runtime but loses the line
# the toolkit adds to it (container_annotations), so containerd stops passing the plugin's annotation.
_DROP_ANNOTATION_PASSTHROUGH = (
    "cp /etc/containerd/config.toml /root/containerd-config.toml.orig && "
    "grep -v container_annotations /root/containerd-config.toml.orig > /etc/containerd/config.toml && "
    "systemctl restart containerd")


@pytest.mark.kind
def test_containerd_without_the_annotation_passthrough_fails_the_probe_at_the_runtime(kind_cluster: KindCluster,
                                                                                      tmp_path: Path) -> None:
    """containerd's `nvidia` runtime entry without `container_annotations` on one worker: containerd hands the
    runtime no nvidia.cdi.k8s.io/ annotation. NVIDIA's runtime in CDI mode then falls back to NVIDIA_VISIBLE_DEVICES
    (which the plugin sets beside its annotation, DEVICE_LIST_STRATEGY=envvar,cdi-annotations) under its default
    kind, management.nvidia.com/gpu as the operator's toolkit sets it, which no spec lists by GPU: the probe
    container is refused there. Everything the API shows stays healthy. The suite must name that node at the probe
    (PRB-002, the runtime's words and the default kind) and pass the other; restored, the probe gets the plugin's
    CDI devices again."""
    assert kind_cluster.docker is not None
    broken, healthy = sorted(kind_cluster.gpu_nodes())

    def log_since(seen: int) -> str:
        return kind_cluster.docker.docker("exec", broken, "cat", kindop.RUNTIME_LOG).stdout[seen:].decode()  # type: ignore[union-attr]

    kind_cluster.docker.docker("exec", broken, "sh", "-ec", _DROP_ANNOTATION_PASSTHROUGH)
    try:
        kind_cluster.kubectl("wait", "--for=condition=Ready", f"node/{broken}", "--timeout=120s")
        seen = len(log_since(0))
        rc, summary = _suite_outside(kind_cluster, tmp_path / "report")
        during = log_since(seen)
    finally:
        kind_cluster.docker.docker("exec", broken, "sh", "-ec", _RESTORE_CONTAINERD, check=False)
        kind_cluster.kubectl("wait", "--for=condition=Ready", f"node/{broken}", "--timeout=120s")
    assert rc == 1 and summary["cluster_blocker"] is None, summary
    root = _root_of(summary, broken)
    assert root["layer"] == "probe" and root["check"] == "PRB-002", root
    assert "unresolvable CDI devices management.nvidia.com/gpu=GPU-" in root["message"], root
    assert "did not reach the runtime" in root["message"], root
    _passes_everywhere(summary, healthy)
    assert summary["probed"] == [healthy]
    assert f"{nvidia_cdi.MANAGEMENT_KIND}=GPU-" in during, during[-2000:]
    assert f"{fakegpu.PLUGIN_CDI_KIND}=" not in during, during[-2000:]
    seen = len(log_since(0))
    run = _probe(kind_cluster, broken)
    prb4 = next(f for f in run.findings if f.check_id == "PRB-004")
    assert prb4.status == Status.PASS, prb4.message
    assert f"{fakegpu.PLUGIN_CDI_KIND}=GPU-" in log_since(seen)


def _policy_state(cluster: KindCluster) -> str | None:
    return cluster.clusterpolicy_status().get("state")


def _operand_pods(cluster: KindCluster, app: str, node: str) -> list[dict[str, Any]]:
    return json.loads(cluster.kubectl("get", "pods", "-n", kindop.NAMESPACE, "-l", f"app={app}", "--field-selector",
                                      f"spec.nodeName={node}", "-o", "json"))["items"]


def _init_status(pod: dict[str, Any], name: str) -> dict[str, Any]:
    return next((cs for cs in pod["status"].get("initContainerStatuses") or [] if cs["name"] == name), {})


@pytest.mark.kind
def test_nvidias_validator_runs_every_stage_and_its_cuda_pod_succeeds(kind_cluster: KindCluster) -> None:
    """On the CDI path the validator is NVIDIA's nvidia-validator v25.3.4: its driver stage found the host driver
    (`chroot /host nvidia-smi`), its cuda stage created the workload pod from its own manifest, whose vectorAdd
    (the stand-in for the CUDA sample) ran with the GPUs and driver library CDI gave it."""
    for node in kind_cluster.gpu_nodes():
        [validator] = _operand_pods(kind_cluster, "nvidia-operator-validator", node)
        stages = [c["name"] for c in validator["spec"]["initContainers"]]
        assert stages == ["driver-validation", "toolkit-validation", "cuda-validation", "plugin-validation"]
        assert all(_init_status(validator, s)["state"]["terminated"]["exitCode"] == 0 for s in stages)
        name = validator["metadata"]["name"]
        driver = kind_cluster.kubectl("logs", "-n", kindop.NAMESPACE, name, "-c", "driver-validation")
        assert "version: v25.3.4" in driver and "Detected a pre-installed driver on the host" in driver, driver
        [cuda] = _operand_pods(kind_cluster, "nvidia-cuda-validator", node)
        assert cuda["status"]["phase"] == "Succeeded" and cuda["spec"]["runtimeClassName"] == "nvidia"
        log = kind_cluster.kubectl("logs", "-n", kindop.NAMESPACE, cuda["metadata"]["name"], "-c", "cuda-validation")
        assert "Test PASSED" in log, log


# R418 (CUDA 10.1): older than the CUDA 11 runtime of the validator's vectorAdd accepts.
OLD_DRIVER = "418.226.00"


@pytest.mark.kind
def test_a_node_whose_driver_is_too_old_for_cuda_fails_at_the_cuda_validation(kind_cluster: KindCluster,
                                                                             tmp_path: Path) -> None:
    """The validator's CUDA stage failing on one worker: its driver replaced by one older than the CUDA runtime of
    the validator's vectorAdd accepts (the host driver's libraries and the plugin's CDI spec for 418.226.00, the
    toolkit restarted to regenerate its management spec), and the validator restarted, as after the driver change.
    nvidia-smi still works, so the driver and toolkit stages pass; the CUDA workload pod's vectorAdd fails as CUDA's
    sample does. NVIDIA's validator then polls that pod for phase
    Succeeded; its restartPolicy OnFailure keeps it Pending with the init container restarting. The suite must name
    the node at driver-toolkit by DRV-005, quoting vectorAdd, and pass the other node."""
    assert kind_cluster.docker is not None
    broken, healthy = sorted(kind_cluster.gpu_nodes())
    table = fakegpu.gpu_table(broken, kind_cluster.gpus, fakegpu.default_product())

    def install_driver(version: str) -> None:
        # The host driver replaced (its libraries under the new version, the plugin's spec regenerated), then the
        # operator's toolkit restarted there, as after a driver change: its management spec names the driver's
        # files by version, and only the toolkit writes it.
        script = nvidia_cdi.node_setup_script(table, kindop.DRIVER_ROOT, driver_version=version)
        kind_cluster.docker.docker("exec", broken, "sh", "-ec", script)  # type: ignore[union-attr]
        kind_cluster.kubectl("delete", "pods", "-n", kindop.NAMESPACE, "-l", f"app={kindop.TOOLKIT_DS}",
                             "--field-selector", f"spec.nodeName={broken}", "--wait")
        kind_cluster.kubectl("rollout", "status", "-n", kindop.NAMESPACE, f"daemonset/{kindop.TOOLKIT_DS}",
                             "--timeout=400s")

    def restart_validator() -> None:
        kind_cluster.kubectl("delete", "pods", "-n", kindop.NAMESPACE, "-l", "app=nvidia-operator-validator",
                             "--field-selector", f"spec.nodeName={broken}", "--wait")

    def failing_cuda_pod() -> dict[str, Any] | None:
        return next((p for p in _operand_pods(kind_cluster, "nvidia-cuda-validator", broken)
                     if _init_status(p, "cuda-validation").get("restartCount", 0) > 0), None)

    install_driver(OLD_DRIVER)
    try:
        restart_validator()
        deadline = time.monotonic() + 120
        while (cuda := failing_cuda_pod()) is None:
            assert time.monotonic() < deadline, _operand_pods(kind_cluster, "nvidia-cuda-validator", broken)
            time.sleep(2)
        log = kind_cluster.kubectl("logs", "-n", kindop.NAMESPACE, cuda["metadata"]["name"], "-c", "cuda-validation")
        [validator] = _operand_pods(kind_cluster, "nvidia-operator-validator", broken)
        waiting = kind_cluster.kubectl("logs", "-n", kindop.NAMESPACE, validator["metadata"]["name"], "-c",
                                       "cuda-validation")
        rc, summary = _suite_outside(kind_cluster, tmp_path / "report")
    finally:
        install_driver(nvidia_cdi.DRIVER_VERSION)
        restart_validator()
        kind_cluster._wait_operator()
    # What NVIDIA's validator and kubelet made of it (the simulated fault cuda-validation-failing is held to this).
    assert cuda["status"]["phase"] == "Pending", cuda["status"]
    assert "Failed to allocate device vector A (error code CUDA driver version is insufficient for CUDA runtime " \
           "version)!" in log, log
    # The validator still polls the pod (60 tries 5 s apart before it gives up and restarts).
    state = _init_status(validator, "cuda-validation").get("state", {})
    assert "running" in state and "is curently in Pending phase" in waiting, (state, waiting)
    assert rc == 1 and summary["cluster_blocker"] is None, summary
    root = _root_of(summary, broken)
    assert (root["layer"], root["check"]) == ("driver-toolkit", "DRV-005"), root
    assert "CUDA driver version is insufficient" in root["message"], root
    ok_layers, ok_root = summary["nodes"][healthy]
    assert ok_root is None and _healthy(ok_layers, "operator"), (ok_layers, summary["checks"])
    assert summary["probed"] == [healthy]


@pytest.fixture(scope="module")
def suite_image(kind_cluster: KindCluster) -> str:
    """The Dockerfile's image, built offline once and loaded into the nodes."""
    assert kind_cluster.docker is not None
    image = suiteimage.build(kind_cluster.docker)
    if not kind_cluster.docker.external:
        assert kind_cluster.docker.docker("images", "-q", "-f", "dangling=true").stdout.strip() == b""
    kind_cluster.load_image(image)
    return image


@pytest.mark.kind
def test_suite_image_as_a_job_equals_a_run_from_outside(kind_cluster: KindCluster, suite_image: str,
                                                        tmp_path: Path) -> None:
    """The Dockerfile's image, run in the cluster under rbac.yaml's ServiceAccount (in-cluster config), gives the
    exit code and verdict of `pytest --cluster` run from this machine with the kind kubeconfig."""
    inside = kind_cluster.run_suite_job(suite_image, tmp_path / "inside")
    rc, summary = _suite_outside(kind_cluster, tmp_path / "outside")
    assert inside == rc
    assert inside not in (3, 4), "the suite could not run (usage or internal error)"
    assert _summary(tmp_path / "inside") == summary
    # The real operator reconciled every layer and the probe got a GPU on each worker: the whole suite passes.
    assert rc == 0 and summary["verdict"] == "CONFORMANT", \
        (summary["verdict"], [c for c in summary["checks"] if c[1] == "fail"])
    gpu = kind_cluster.gpu_nodes()
    assert summary["probed"] == sorted(gpu)
    assert all(_healthy(summary["nodes"][n][0]) for n in gpu), summary["nodes"]


@pytest.mark.kind
def test_pods_get_no_route_out_of_the_machine(kind_cluster: KindCluster) -> None:
    """The host does not forward, so a node's packets to outside addresses never leave this machine."""
    assert Path("/proc/sys/net/ipv4/ip_forward").read_text().strip() == \
        kind_cluster.host_before["ip_forward"].strip()  # type: ignore[attr-defined]
    assert kind_cluster.docker is not None
    info = json.loads(kind_cluster.docker.docker("network", "inspect", "kind").stdout)
    assert info and info[0]["Driver"] == "bridge"


@pytest.mark.kind
def test_nightly_cronjob_reports_a_fault_between_two_nights_as_a_regression(kind_cluster: KindCluster,
                                                                            suite_image: str,
                                                                            tmp_path: Path) -> None:
    """#12: deploy/ applied as a user would (kustomize image override), two nights run from its CronJob with the
    ClusterPolicy deleted between them. The second night's log compares it with the first (its conformance.json
    on the report volume as --baseline) and every GPU node's root cause moves; `report history` over the nights
    copied out of the volume shows both and the second as a regression.

    The real operator runs here, so night 1 passes; deleting the ClusterPolicy makes it withdraw its operands,
    and night 2 names the operator layer (OPR-002) as every GPU node's new root cause.
    """
    from gpu_conformance.report.diff import diff_runs
    from gpu_conformance.report.history import build_history, load_nights
    from gpu_conformance.report_format import load_json
    from gpu_conformance.sim.kind.nightly import KindNightly

    nightly = KindNightly(kind_cluster, suite_image).install()
    try:
        first = nightly.run("night-1")
        assert first.exit_code == 0, first.log[-3000:]
        assert "no earlier night to compare with" in first.log
        kind_cluster.kubectl("delete", "clusterpolicies.nvidia.com", "--all", "--wait")
        # The operator withdraws its operands; the toolkit's pods, stopped, take the nvidia runtime back out of
        # containerd's config and restart containerd (the installer's cleanup), which kills a container starting at
        # that moment: night 2 starts once they are gone and the nodes are Ready again.
        deadline = time.monotonic() + 180
        while kind_cluster.kubectl("get", "pods", "-n", kindop.NAMESPACE, "-l", f"app={kindop.TOOLKIT_DS}",
                                   "-o", "name").strip():
            assert time.monotonic() < deadline, "the toolkit's pods did not go"
            time.sleep(2)
        kind_cluster.kubectl("wait", "--for=condition=Ready", "nodes", "--all", "--timeout=120s")
        second = nightly.run("night-2")
        out = nightly.copy_reports(tmp_path / "reports")
    finally:
        # The withdrawn operands' pods gone first: an old validator pod still terminating runs its preStop
        # (`rm -f /run/nvidia/validations/*-ready`, assets/state-operator-validation at v25.3.4) after the new
        # validator on that node has validated, and the new device plugin then waits for toolkit-ready for good.
        apps = ",".join(("nvidia-operator-validator", kindop.DEVICE_PLUGIN_DS, kindop.TOOLKIT_DS))
        deadline = time.monotonic() + 180
        while kind_cluster.kubectl("get", "pods", "-n", kindop.NAMESPACE, "-l", f"app in ({apps})",
                                   "-o", "name").strip() and time.monotonic() < deadline:
            time.sleep(2)
        # The operator objects as the tier installed them (server-side apply recreates the ClusterPolicy),
        # and the operands back before the next test.
        kind_cluster._install_operator_objects()
        kind_cluster._wait_operator()
        nightly.uninstall()

    night1, night2 = sorted(p for p in out.iterdir() if p.is_dir())
    assert second.exit_code == 1, second.log[-3000:]
    assert f"changes since /reports/{night1.name}/conformance.json:" in second.log, second.log[-3000:]
    assert "newly failing: OPR-002 [operator] exactly one active ClusterPolicy" in second.log, second.log[-3000:]
    gpu = kind_cluster.gpu_nodes()
    diff = diff_runs(load_json(night1 / "conformance.json"), load_json(night2 / "conformance.json"))
    assert diff.regressed
    assert {n.node: n.new["check"] for n in diff.nodes if n.new} == dict.fromkeys(gpu, "OPR-002")
    # The entrypoint's own history after the second night, in the Job's log.
    assert "REGRESSION since" in second.log

    page = tmp_path / "history.html"
    proc = subprocess.run([sys.executable, "-m", "gpu_conformance.cli", "report", "history", str(out),
                           f"--output={page}", "--fail-on-regression"], capture_output=True, text=True,
                          timeout=120, check=False)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "(2 nights in the history)" in proc.stdout and "REGRESSION since" in proc.stdout, proc.stdout
    h = build_history(load_nights(out))
    assert h.latest_regressed and h.latest.previous is not None and h.latest.previous.path.parent == night1
    assert h.first_regression is not None and h.first_regression.path.parent == night2
    html = page.read_text()
    assert html.count("<tr data-run=") == 2 and html.count('data-regressed="yes"') == 1
    assert f'data-since="{h.first_regression.run_id}"' in html
    # The page the CronJob keeps on the volume says the same.
    assert (out / "history.html").read_text().count("<tr data-run=") == 2


# What a kubelet writes (setupKernelTunables, protectKernelDefaults false as in kind) where the host differs.
KUBELET_WANTS = {"vm/overcommit_memory": "1", "vm/panic_on_oom": "0", "kernel/panic": "10",
                 "kernel/panic_on_oops": "1"}


@pytest.mark.kind
def test_stop_leaves_no_container_network_or_daemon(kind_cluster: KindCluster) -> None:
    assert kind_cluster.docker is not None
    daemon = kind_cluster.docker
    pid, external = daemon.pid, daemon.external
    # The kubelets did change the host's tunables (a privileged node shares /proc/sys), so the restore below is
    # exercised, not vacuous: on these machines kernel.panic 1 -> 10, vm.overcommit_memory 0 -> 1 and
    # kernel.panic_on_oops 0 -> 1 while the cluster runs.
    before = kind_cluster.host_before.get("sysctls", {})  # type: ignore[attr-defined]
    during = read_sysctls()
    assert {k: during[k] for k, v in KUBELET_WANTS.items() if k in before and before[k] != v} == \
        {k: v for k, v in KUBELET_WANTS.items() if k in before and before[k] != v}
    kind_cluster.stop()
    if not external:
        assert not Path(f"/proc/{pid}").exists() or Path(f"/proc/{pid}/status").read_text().find("zombie") >= 0
        assert not daemon.socket.exists()
    after = _host_state()
    assert after == kind_cluster.host_before  # type: ignore[attr-defined]
    assert not kind_cluster.kubeconfig.exists()


@pytest.mark.kind
def test_legacy_gpu_path_probes_through_the_nvidia_runtime_by_its_variable() -> None:
    """GPU_CONFORMANCE_KIND_GPU_PATH=legacy (here gpu_path="legacy"): v25.3.4's chart default cdi.enabled=false,
    the plugin's NVIDIA_VISIBLE_DEVICES=GPU-... read by the node's default runtime (the fake legacy-mode one). A
    cluster of its own, after the CDI one above stopped (one kind tier per machine)."""
    before = _host_state()
    cluster = KindCluster(gpu_path="legacy").start()
    try:
        cp = json.loads(cluster.kubectl("get", "clusterpolicies.nvidia.com", "-o", "json"))["items"][0]
        assert cp["spec"]["cdi"]["enabled"] is False
        node = cluster.gpu_nodes()[0]
        run = _probe(cluster, node)
    finally:
        cluster.stop()
    by_id = {f.check_id: f for f in run.findings if f.check_id.startswith("PRB-")}
    assert {k: by_id[k].status for k in ("PRB-001", "PRB-002", "PRB-003", "PRB-004")} == \
        dict.fromkeys(("PRB-001", "PRB-002", "PRB-003", "PRB-004"), Status.PASS), \
        {k: f.message for k, f in by_id.items()}
    assert "injected by the nvidia runtime (NVIDIA_VISIBLE_DEVICES=GPU-" in by_id["PRB-004"].message, \
        by_id["PRB-004"].message
    assert by_id["PRB-004"].evidence["cdi_expected"] is False
    assert _host_state() == before


def test_kubelet_sysctls_are_put_back(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A privileged kind node's kubelet writes vm.overcommit_memory etc. on the host; stop() restores them.
    from gpu_conformance.sim.kind import cluster as kc

    fake = tmp_path / "sys"
    (fake / "vm").mkdir(parents=True)
    (fake / "vm" / "overcommit_memory").write_text("0\n")
    real_path = kc.Path

    def fake_path(*a: object) -> Path:
        p = real_path(*a)  # type: ignore[arg-type]
        return fake if str(p) == "/proc/sys" else p

    monkeypatch.setattr(kc, "Path", fake_path)
    saved = kc.read_sysctls(("vm/overcommit_memory",))
    (fake / "vm" / "overcommit_memory").write_text("1\n")  # what the kubelet does
    kc.restore_sysctls(saved)
    assert (fake / "vm" / "overcommit_memory").read_text().strip() == "0"


def test_a_second_kind_tier_is_refused_while_one_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from gpu_conformance.sim.kind import cluster as kc

    monkeypatch.setattr(kc, "tier_root", lambda: tmp_path)
    first = kc._tier_lock()
    try:
        second = KindCluster(work=tmp_path / "w")
        monkeypatch.setattr(second, "_start", lambda: pytest.fail("the second tier started"))
        with pytest.raises(kc.KindError, match=rf"another kind tier is running on this machine \(pid {os.getpid()}"):
            second.start()
    finally:
        first.close()
    # Released: the next tier may start.
    kc._tier_lock().close()


def test_image_archives_are_cached_by_content(tmp_path: Path) -> None:
    from gpu_conformance.sim.builds import oci
    from gpu_conformance.sim.kind import nodeimage

    src = tmp_path / "bin"
    src.write_bytes(b"one")
    image = oci.Image(("example.local/x:1",), [oci.Entry("/x", source=src)])
    [first] = nodeimage.cached_archives([image], tmp_path / "cache")
    mtime = first.stat().st_mtime_ns
    assert nodeimage.cached_archives([image], tmp_path / "cache") == [first] and first.stat().st_mtime_ns == mtime
    src.write_bytes(b"two")
    [second] = nodeimage.cached_archives([image], tmp_path / "cache")
    assert second != first and not first.exists() and sorted((tmp_path / "cache").iterdir()) == [second]
