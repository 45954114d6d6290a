"""The real-node tier: the probe on a real kubelet + containerd node whose fake GPU arrives through CDI.

One simulated control plane (1 kwok GPU node + the simulated operator) with one real node joined, shared
by the module; each fault is put back by its test. The last test stops everything and checks the host.
Marked `realnode`: skipped with the reason where the machine cannot run it (not root, no namespaces...).
"""

from __future__ import annotations

import ipaddress
import json
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gpu_conformance.cluster.connect import connect, raw_request
from gpu_conformance.model import Status
from gpu_conformance.probe.manifests import own_namespace
from gpu_conformance.session import ConformanceRun
from gpu_conformance.settings import Settings
from gpu_conformance.sim import fakegpu
from gpu_conformance.sim.nvidia_smi import gpu_uuid
from gpu_conformance.sim.realnode.cluster import RealCluster
from gpu_conformance.sim.realnode.node import (
    BUSYBOX_IMAGE,
    KUBELET_SYSCTLS,
    REAL_NODE_LABEL,
    REALNODE_CIDR,
    RealNode,
    client_certificate,
)
from gpu_conformance.sim.session import sim_with_real_nodes

pytestmark = [pytest.mark.realnode, pytest.mark.sim]


def probe_real_node(kubeconfig: Path, node: str, probe_timeout: float = 60.0, probe_gpus: int = 1,
                    probe_image: str | None = None) -> ConformanceRun:
    """The suite's checks through ConformanceRun, then the suite's own Probe on `node`.

    The real node has no operand pods (opted out), so the layer gate would never probe it: the probe is
    what this tier proves, so it is called on the node directly. The run keeps the full verdict too.
    """
    settings = Settings(kubeconfig=str(kubeconfig), probe_timeout=probe_timeout, probe_gpus=probe_gpus,
                        gpu_node_selector=f"kubernetes.io/hostname={node}")
    if probe_image:
        settings.probe_image = probe_image
    run = ConformanceRun(settings.validate(), "current")
    try:
        run.start()
        assert run.conn is not None and run.snapshot is not None
        run.run_probe(nodes=[node])
    finally:
        run.close()
    return run


def probe_findings(run: ConformanceRun) -> dict:
    """The probe checks' findings (the last per check), judged in checks/ like every layer."""
    return {f.check_id: f for f in run.findings if f.check_id.startswith("PRB-")}


def probe_pods(run: ConformanceRun) -> list[dict]:
    """The probe pods as the report records them."""
    obs = run.probe_run
    assert obs is not None
    return [p.to_dict(obs.image) for p in obs.pods.values()]


def _ours(entries: set[str]) -> set[str]:
    """The tier's mounts (their sources are in its gpu-rn-* work dirs) and veth ends (grn*) among entries.

    Other jobs share the machine and may add mounts or links meanwhile: only ours count.
    """
    return {e for e in entries if "gpu-rn-" in e or e.startswith("grn")}


def _host_state() -> dict[str, Any]:
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True, check=True).stdout
    mounts = subprocess.run(["findmnt", "-rn", "-o", "TARGET,SOURCE"], capture_output=True, text=True,
                            check=True).stdout
    return {"links": sorted(ln.split(":")[1].strip().split("@")[0] for ln in links.splitlines()),
            "mounts": sorted(mounts.splitlines()),
            "sysctls": {k: (Path("/proc/sys") / k).read_text() for k in KUBELET_SYSCTLS}}


class _Tier:
    def __init__(self) -> None:
        self.before = _host_state()
        self._cm = sim_with_real_nodes(real_nodes=1, gpu_nodes=1, cpu_nodes=0)
        self.rc: RealCluster = self._cm.__enter__()
        self.node: RealNode = self.rc.nodes[0]
        self.stopped = False

    def stop(self) -> None:
        if not self.stopped:
            self.stopped = True
            self._cm.__exit__(None, None, None)


@pytest.fixture(scope="module")
def tier() -> Iterator[_Tier]:
    t = _Tier()
    print(f"\nreal-node tier up: {t.rc.seconds}, node steps (s since start): {t.node.timings}")
    try:
        yield t
    finally:
        t.stop()


def _wait_previous_probes_gone(t: _Tier, timeout: float = 60) -> None:
    # The kubelet hands a GPU out again only once the previous probe's pod is gone from the node; a pod
    # scheduled earlier is rejected at admission (UnexpectedAdmissionError, reported by PRB-002).
    deadline = time.monotonic() + timeout
    while t.node.containers_of(own_namespace("")):
        assert time.monotonic() < deadline, "a previous probe pod's containers never went away"
        time.sleep(0.5)


def _probe(t: _Tier, **kw: Any) -> tuple[Any, dict[str, Any], float]:
    _wait_previous_probes_gone(t)
    t0 = time.monotonic()
    run = probe_real_node(t.rc.kubeconfig, t.node.name, **kw)
    elapsed = time.monotonic() - t0
    return run, probe_findings(run), elapsed


def _wait_gpus(t: _Tier, want: str, timeout: float = 60) -> None:
    conn = connect(str(t.rc.kubeconfig), None)
    try:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            node = t.node.get_node(conn) or {}
            if (node.get("status", {}).get("allocatable") or {}).get("nvidia.com/gpu") == want:
                return
            time.sleep(0.5)
    finally:
        conn.close()
    raise AssertionError(f"{t.node.name} never advertised nvidia.com/gpu={want}")


def test_real_node_joins_with_fake_gpus(tier: _Tier) -> None:
    conn = connect(str(tier.rc.kubeconfig), None)
    try:
        node = tier.node.get_node(conn)
    finally:
        conn.close()
    assert node is not None
    labels = node["metadata"]["labels"]
    assert labels[REAL_NODE_LABEL] == "true" and labels["nvidia.com/gpu.present"] == "true"
    assert labels["nvidia.com/gpu.deploy.operands"] == "false"
    assert node["status"]["allocatable"]["nvidia.com/gpu"] == "2"
    assert "kwok.x-k8s.io/node" not in node["metadata"].get("annotations", {})
    info = node["status"]["nodeInfo"]
    assert info["kubeletVersion"] == "v1.36.3" and info["containerRuntimeVersion"] == "containerd://2.4.2"
    ip = next(a["address"] for a in node["status"]["addresses"] if a["type"] == "InternalIP")
    assert ipaddress.ip_address(ip) in ipaddress.ip_network(REALNODE_CIDR)


def test_kubelet_api_admits_no_anonymous_or_unauthorized_caller(tier: _Tier, tmp_path: Path) -> None:
    """The kubelet's port is reachable from the host (veth): anonymous requests get 401, a CA-signed identity
    without RBAC 403 (webhook authorization), the admin 200; the API server's own calls (logs, proxy) pass."""
    node = tier.node
    admin = (node.cp.ca_cert.parent / "admin.crt", node.cp.ca_cert.parent / "admin.key")
    nobody = client_certificate(node.cp, "/CN=gpu-conformance-nobody", tmp_path, "nobody")
    for path in ("/pods", "/configz", "/metrics", "/healthz"):
        assert node.kubelet_status(path) == 401, path
        assert node.kubelet_status(path, nobody) == 403, path
        assert node.kubelet_status(path, admin) == 200, path
    conn = connect(str(tier.rc.kubeconfig), None)
    try:
        # Through the API server, which presents its kubelet client certificate.
        assert raw_request(conn.api, "GET", f"/api/v1/nodes/{node.name}/proxy/healthz", []).strip() == b"ok"
    finally:
        conn.close()


def test_probe_gets_the_gpu_through_cdi_without_runtime_class(tier: _Tier) -> None:
    run, fs, elapsed = _probe(tier, probe_timeout=90)
    print(f"\nprobe on {tier.node.name}: {elapsed:.1f}s")
    assert {k: f.status for k, f in fs.items()} == {f"PRB-00{i}": Status.PASS for i in range(1, 5)}, fs
    assert "CDI" in fs["PRB-004"].message
    (pod,) = probe_pods(run)
    # The evidence is what the container itself printed, through the kubelet's log endpoint.
    # The kubelet picks either GPU: the UUID listed must be the one of the device node injected.
    (index,) = [i for i in range(tier.node.gpus) if f"/dev/nvidia{i}\n" in pod["logs"]]
    name = fakegpu.gpu_name(fakegpu.default_product())
    assert f"GPU 0: {name} (UUID: {gpu_uuid(tier.node.name, index)})" in pod["logs"]
    assert "NVIDIA_VISIBLE_DEVICES=void" in pod["logs"] and "/dev/nvidiactl" in pod["logs"]
    assert pod["phase"] == "Succeeded" and run.probe_run.deleted


def test_probe_with_two_gpus_lists_both(tier: _Tier) -> None:
    run, fs, _ = _probe(tier, probe_timeout=90, probe_gpus=2)
    assert fs["PRB-003"].status == Status.PASS, fs["PRB-003"].message
    (pod,) = probe_pods(run)
    assert set(pod["gpus_seen"][i].split("(")[1].rstrip(")") for i in range(2)) == {
        gpu_uuid(tier.node.name, 0), gpu_uuid(tier.node.name, 1)}


def test_missing_cdi_spec_fails_fast_with_create_container_error(tier: _Tier) -> None:
    spec = tier.node.cdi_spec
    saved = spec.read_text()
    spec.unlink()
    try:
        run, fs, elapsed = _probe(tier, probe_timeout=90)
    finally:
        spec.write_text(saved)
    print(f"\nmissing CDI spec: {fs['PRB-002'].message} ({elapsed:.1f}s)")
    assert fs["PRB-001"].status == Status.PASS
    assert fs["PRB-002"].status == Status.FAIL
    msg = fs["PRB-002"].message
    assert "CreateContainerError" in msg or "RunContainerError" in msg
    assert "unresolvable CDI devices nvidia.com/gpu=" in msg and "CDI spec" in msg
    assert elapsed < 60, "the probe must stop at the runtime's answer, not wait out --probe-timeout"


def test_device_plugin_in_env_var_mode_injects_no_gpu(tier: _Tier) -> None:
    tier.node.start_device_plugin("envvar")
    try:
        _wait_gpus(tier, "2")
        run, fs, elapsed = _probe(tier, probe_timeout=90)
    finally:
        tier.node.start_device_plugin("cdi-cri,cdi-annotations")
        _wait_gpus(tier, "2")
    print(f"\nenv-var mode: {fs['PRB-003'].message} | {fs['PRB-004'].message} ({elapsed:.1f}s)")
    assert fs["PRB-002"].status == Status.PASS
    # 127: the shell found no nvidia-smi (stdout and stderr interleave, so the message is either text).
    assert fs["PRB-003"].status == Status.FAIL and fs["PRB-003"].evidence["nvidia_smi_rc"] == 127
    assert fs["PRB-004"].status == Status.FAIL and "no GPU was injected" in fs["PRB-004"].message
    (pod,) = probe_pods(run)
    # The GPU was allocated (the legacy way: its UUID in the env), just never injected.
    assert pod["visible_devices"] in fakegpu.uuids(tier.node.name, tier.node.gpus)


def test_missing_probe_image_fails_at_the_pull(tier: _Tier) -> None:
    _, fs, elapsed = _probe(tier, probe_timeout=90, probe_image="realnode.local/not-imported:1")
    print(f"\nmissing image: {fs['PRB-002'].message} ({elapsed:.1f}s)")
    assert fs["PRB-002"].status == Status.FAIL and "cannot be pulled (ErrImagePull" in fs["PRB-002"].message
    assert elapsed < 60


def _pod_holding_gpus(node: str, gpus: int) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "gpu-hog"},
            "spec": {"nodeName": node, "restartPolicy": "Never", "terminationGracePeriodSeconds": 0,
                     "automountServiceAccountToken": False,
                     "containers": [{"name": "hog", "image": BUSYBOX_IMAGE, "command": ["sleep", "3600"],
                                     "resources": {"limits": {"nvidia.com/gpu": str(gpus)}}}]}}


def _run_gpu_hog(conn: Any, node: str, gpus: int, path: str) -> None:
    """Run a pod holding every GPU; retried while the kubelet still frees a previous probe's GPU
    (admission then fails with UnexpectedAdmissionError, since the pod is bound without the scheduler)."""
    deadline = time.monotonic() + 90
    while True:
        raw_request(conn.api, "POST", path, [], body=_pod_holding_gpus(node, gpus))
        while (status := json.loads(raw_request(conn.api, "GET", f"{path}/gpu-hog", []))["status"]).get(
                "phase") not in ("Running", "Failed"):
            assert time.monotonic() < deadline, f"the pod holding every GPU never ran: {status}"
            time.sleep(0.5)
        if status["phase"] == "Running":
            return
        assert time.monotonic() < deadline, f"the pod holding every GPU never ran: {status}"
        raw_request(conn.api, "DELETE", f"{path}/gpu-hog", [], body={"gracePeriodSeconds": 0})
        while json.loads(raw_request(conn.api, "GET", path, []))["items"]:
            time.sleep(0.5)
        time.sleep(2)


def test_all_gpus_in_use_leaves_the_probe_unschedulable(tier: _Tier) -> None:
    conn = connect(str(tier.rc.kubeconfig), None)
    path = "/api/v1/namespaces/default/pods"
    try:
        _run_gpu_hog(conn, tier.node.name, tier.node.gpus, path)
        _, fs, elapsed = _probe(tier, probe_timeout=90)
    finally:
        raw_request(conn.api, "DELETE", f"{path}/gpu-hog", [], body={"gracePeriodSeconds": 0})
        conn.close()
        deadline = time.monotonic() + 60
        while tier.node.containers_of("default$") and time.monotonic() < deadline:
            time.sleep(0.5)
    print(f"\nall GPUs in use: {fs['PRB-001'].message} ({elapsed:.1f}s)")
    # Busy is not broken: the probe says the GPUs are in use and does not call the node faulty.
    assert fs["PRB-001"].status == Status.WARN and "in use" in fs["PRB-001"].message, fs["PRB-001"].message


def test_untolerated_taint_leaves_the_probe_unschedulable(tier: _Tier) -> None:
    conn = connect(str(tier.rc.kubeconfig), None)
    node_path = f"/api/v1/nodes/{tier.node.name}"
    taint = {"key": "dedicated", "value": "ml", "effect": "NoSchedule"}
    try:
        raw_request(conn.api, "PATCH", node_path, [], body={"spec": {"taints": [taint]}},
                    content_type="application/merge-patch+json")
        _, fs, elapsed = _probe(tier, probe_timeout=90)
    finally:
        raw_request(conn.api, "PATCH", node_path, [], body={"spec": {"taints": None}},
                    content_type="application/merge-patch+json")
        conn.close()
    print(f"\nuntolerated taint: {fs['PRB-001'].message} ({elapsed:.1f}s)")
    assert fs["PRB-001"].status == Status.FAIL and "taint" in fs["PRB-001"].message


def test_probe_namespace_deleted_mid_run(tier: _Tier) -> None:
    smi = tier.node.work / "gpu" / "nvidia-smi"
    saved = smi.read_text()
    # A hanging nvidia-smi keeps the probe container running long enough to delete its namespace under it.
    # Written in place: the container sees the host file through a bind mount of this inode.
    with open(smi, "r+") as f:
        f.write(saved.replace("#!/bin/sh\n", "#!/bin/sh\nsleep 60\n", 1))
    result: dict[str, Any] = {}

    def probe() -> None:
        result["run"] = probe_real_node(tier.rc.kubeconfig, tier.node.name, probe_timeout=90)

    conn = connect(str(tier.rc.kubeconfig), None)
    thread = threading.Thread(target=probe)
    t0 = time.monotonic()
    thread.start()
    try:
        ns = None
        while time.monotonic() - t0 < 60 and ns is None:
            namespaces = json.loads(raw_request(conn.api, "GET", "/api/v1/namespaces", []))["items"]
            for n in namespaces:
                name = n["metadata"]["name"]
                if name.startswith(own_namespace("")):
                    pods = json.loads(raw_request(conn.api, "GET", f"/api/v1/namespaces/{name}/pods", []))["items"]
                    if pods and pods[0]["status"].get("phase") == "Running":
                        ns = name
            time.sleep(0.3)
        assert ns is not None, "the probe pod never ran"
        raw_request(conn.api, "DELETE", f"/api/v1/namespaces/{ns}", [])
        thread.join(timeout=120)
    finally:
        conn.close()
        smi.write_text(saved)
    elapsed = time.monotonic() - t0
    said = [f for f in result["run"].findings if f.check_id.startswith("PRB-") and "deleted" in f.message]
    print(f"\nnamespace deleted: {[f.message for f in said]} ({elapsed:.1f}s)")
    # Noticed at once, and the run cannot speak for the node: INCOMPLETE with what happened, not a failure.
    assert said and all(f.status == Status.WARN for f in said)
    assert elapsed < 60


def test_full_run_lists_the_real_node_as_excluded_not_judged(tier: _Tier) -> None:
    """The honest verdict of a full run: the operator's operands are opted out on the real node
    (nvidia.com/gpu.deploy.operands=false), so the suite lists it as excluded and does not judge it."""
    run = probe_real_node(tier.rc.kubeconfig, tier.node.name, probe_timeout=90)
    assert tier.node.name not in [n.node for n in run.verdict().nodes]
    (warn,) = [f for f in run.findings if f.node == tier.node.name and f.check_id == "NFD-004"]
    print(f"\nfull run on {tier.node.name}: {warn.status} {warn.message}")
    assert warn.status == Status.WARN and "not judged" in warn.message


def test_stop_leaves_no_process_mount_interface_or_sysctl(tier: _Tier) -> None:
    pids = [p.pid for p in tier.node.procs.values()]
    work, cgroup_root, host_if = tier.node.work, tier.node.cgroup_root, tier.node.host_if
    tier.stop()
    after = _host_state()
    assert _ours(set(after["links"]) - set(tier.before["links"])) == set()
    assert _ours(set(after["mounts"]) - set(tier.before["mounts"])) == set()
    assert after["sysctls"] == tier.before["sysctls"]
    assert not [p for p in pids if Path(f"/proc/{p}").exists()]
    assert not Path(f"/sys/class/net/{host_if}").exists()
    assert not work.exists()
    assert not [d for d in Path("/sys/fs/cgroup").glob(f"*/{cgroup_root.lstrip('/')}")]
    leftovers = subprocess.run(["grep", "-l", str(work), *map(str, Path("/proc").glob("[0-9]*/mountinfo"))],
                               capture_output=True, text=True, check=False).stdout
    assert leftovers == ""


def test_sim_up_with_real_nodes_and_sim_down(tmp_path: Path) -> None:
    """The CLI: `sim up --real-nodes 1` leaves a detached cluster with a joined real node; `sim down` stops
    every process of both by PID and leaves nothing behind."""
    from gpu_conformance.cli import main
    from gpu_conformance.sim.realnode.cluster import REAL_NODES_FILE

    before = _host_state()
    state = tmp_path / "sim"
    assert main(["sim", "up", "--gpu-nodes", "1", "--cpu-nodes", "0", "--real-nodes", "1",
                 "--state-dir", str(state)]) == 0
    try:
        (work,) = map(Path, json.loads((state / REAL_NODES_FILE).read_text()))
        pids = [p["pid"] for p in json.loads((work / "realnode.json").read_text())["processes"].values()]
        conn = connect(str(state / "kubeconfig"), None)
        try:
            node = json.loads(raw_request(conn.api, "GET", "/api/v1/nodes/real-gpu-node-0", []))
        finally:
            conn.close()
        assert node["status"]["allocatable"]["nvidia.com/gpu"] == "2"
    finally:
        assert main(["sim", "down", "--state-dir", str(state)]) == 0
    after = _host_state()
    # (The sim's own state files are sim down's business; the real node's must all be gone.)
    assert not work.exists() and not (state / REAL_NODES_FILE).exists()
    assert not [p for p in pids if Path(f"/proc/{p}").exists()]
    assert _ours(set(after["links"]) - set(before["links"])) == set()
    assert _ours(set(after["mounts"]) - set(before["mounts"])) == set()
