"""`--operator=real`: the real GPU Operator v25.3.4 built from its Go module, run against the simulated cluster."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from kubernetes.client.exceptions import ApiException

from gpu_conformance.errors import UsageError
from gpu_conformance.sim.builds import operator_module
from gpu_conformance.sim.controlplane.cluster import KWOK_NODE_ANNOTATION, KWOK_NODE_ANNOTATION_VALUE
from gpu_conformance.sim.operator import real_operator
from gpu_conformance.sim.operator.operand_loop import OperandSim
from gpu_conformance.sim.profiles.catalogue import get_profile

Obj = dict[str, Any]


# ---- one-line errors ------------------------------------------------------------------------------
def test_missing_module_without_go_is_one_clear_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("GOMODCACHE", str(tmp_path))
    monkeypatch.setenv("PATH", str(tmp_path))
    operator_module.module_dir.cache_clear()
    try:
        with pytest.raises(operator_module.OperatorModuleError) as err:
            operator_module.module_dir()
    finally:
        operator_module.module_dir.cache_clear()
    msg = str(err.value)
    assert "\n" not in msg and operator_module.MODULE_VERSION in msg and "go" in msg


def test_unbuildable_binary_is_one_clear_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(operator_module.OperatorModuleError) as err:
        operator_module.ensure_binary()
    assert "\n" not in str(err.value) and "v25.3.4" in str(err.value)


def test_binary_env_must_be_the_operator(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    fake = tmp_path / "gpu-operator"
    fake.write_text("#!/bin/sh\necho version: unknown\n")
    fake.chmod(0o755)
    monkeypatch.setenv(operator_module.BINARY_ENV, str(fake))
    with pytest.raises(operator_module.OperatorModuleError, match="version: v25.3.4"):
        operator_module.ensure_binary()


def test_real_operator_needs_root(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("os.geteuid", lambda: 1000)
    with pytest.raises(real_operator.RealOperatorError, match="root"):
        real_operator.launch(object(), get_profile("v25.3"))


def test_real_operator_runs_only_its_own_version() -> None:
    with pytest.raises(UsageError, match="v25.3"):
        real_operator.install_real(object(), "default")


def test_os_release_for_the_operator() -> None:
    text = real_operator.os_release(get_profile("v25.3"))
    assert "ID=ubuntu\n" in text and 'VERSION_ID="22.04"' in text


# ---- the operand programs, on pod changes ----------------------------------------------------------
class FakeKube:
    def __init__(self, nodes: list[Obj], pods: list[Obj]) -> None:
        self.nodes = {n["metadata"]["name"]: n for n in nodes}
        self.pods = pods
        self.patches: list[tuple[str, str, Obj]] = []
        self.created: list[Obj] = []

    def list(self, kind: str, namespace: str | None = None, label_selector: str = "") -> list[Obj]:
        if kind == "Node":
            return list(self.nodes.values())
        if kind == "ClusterPolicy":
            return [{"metadata": {"uid": "cp-uid", "creationTimestamp": "t"}}]
        pods = self.pods
        if label_selector:
            k, v = label_selector.split("=")
            pods = [p for p in pods if p["metadata"]["labels"].get(k) == v]
        return pods

    def get(self, kind: str, name: str, namespace: str | None = None) -> Obj:
        raise ApiException(status=404)  # no host faults recorded (the ConfigMap the operand loop reads)

    def patch(self, kind: str, name: str, patch: Obj, namespace: str | None = None, status: bool = False) -> Obj:
        self.patches.append((kind, name, patch))
        if kind == "Node" and status:  # the loop reads the capacity it wrote (kubelet zeroes only what is there)
            node_status = self.nodes[name].setdefault("status", {})
            for key, value in patch["status"].items():
                node_status.setdefault(key, {}).update(value)
        return {}

    def create(self, obj: Obj) -> Obj:
        self.created.append(obj)
        return obj


def _node(name: str) -> Obj:
    # A kwok node: the operand loop plays only those (a real node has its own kubelet and device plugin).
    return {"metadata": {"name": name, "labels": {"feature.node.kubernetes.io/pci-10de.present": "true"},
                         "annotations": {KWOK_NODE_ANNOTATION: KWOK_NODE_ANNOTATION_VALUE}}}


def _pod(app: str, node: str, uid: str) -> Obj:
    return {"metadata": {"name": f"{app}-{uid}", "uid": uid, "labels": {"app": app}},
            "spec": {"nodeName": node}, "status": {"phase": "Running"}}


def test_device_plugin_advertises_only_while_its_pod_runs() -> None:
    kube = FakeKube([_node("gpu-node-0")], [_pod("nvidia-device-plugin-daemonset", "gpu-node-0", "a")])
    sim = OperandSim(kube, get_profile("v25.3"), "gpu-operator")
    sim.step()
    assert ("Node", "gpu-node-0", {"status": {"capacity": {"nvidia.com/gpu": "8"},
                                              "allocatable": {"nvidia.com/gpu": "8"}}}) in kube.patches
    kube.patches.clear()
    sim.step()
    assert not kube.patches  # on changes only: a fault that edits the resources afterwards stays
    kube.pods = []
    sim.step()
    assert kube.patches == [("Node", "gpu-node-0", {"status": {"allocatable": {"nvidia.com/gpu": "0"}}})]


def test_gfd_labels_while_its_pod_runs() -> None:
    # The cuda validator pod is created by the validator's cuda-validation stage: tests/test_operand_loop.py and
    # tests/test_operand_stages.py hold it.
    kube = FakeKube([_node("gpu-node-0")], [_pod("gpu-feature-discovery", "gpu-node-0", "g")])
    sim = OperandSim(kube, get_profile("v25.3"), "gpu-operator")
    sim.step()
    sim.step()
    labels = [p[2]["metadata"]["labels"] for p in kube.patches if "metadata" in p[2]]
    assert labels and labels[0]["nvidia.com/gpu.product"] == "NVIDIA-H100-80GB-HBM3"


# ---- against the simulated cluster -------------------------------------------------------------------
@pytest.mark.sim
@pytest.mark.realop
def test_real_operator_cluster_is_conformant_and_leaves_nothing_behind(tmp_path: Path) -> None:
    from gpu_conformance.sim.session import start_sim

    booted = start_sim(operator="real", gpu_nodes=2, cpu_nodes=1, quiet=True, state_dir=tmp_path / "state")
    try:
        pids = json.loads((tmp_path / "state" / "pids.json").read_text())["processes"]
        op_pid = pids[real_operator.PROCESS]["pid"]
        cmdline = Path(f"/proc/{op_pid}/cmdline").read_bytes().split(b"\0")
        assert cmdline[0].endswith(b"/gpu-operator") and b"--metrics-bind-address=0" in cmdline
        # Its /opt/gpu-operator and /host-etc exist in its own mount namespace only.
        own = Path(f"/proc/{op_pid}/mounts").read_text()
        assert " /opt/gpu-operator " in own and " /host-etc " in own
        assert "gpu-sim-root" not in Path("/proc/self/mounts").read_text()
        from test_fault_matrix import failing_checks

        from gpu_conformance.session import ConformanceRun
        from gpu_conformance.settings import Settings

        s = Settings(kubeconfig=str(booted.kubeconfig), report_dir=str(tmp_path / "report"), probe_timeout=60)
        run = ConformanceRun(s.validate(), "current")
        try:
            run.start()
            run.run_probe()
            run.write_reports()
        finally:
            run.close()
        data = json.loads((tmp_path / "report" / "conformance.json").read_text())
        assert data["verdict"] == "CONFORMANT", failing_checks(data)
        assert data["operator"]["version"] == "v25.3.4"
    finally:
        booted.stop()
    assert not Path(f"/proc/{op_pid}").exists()
    assert "gpu-sim-root" not in Path("/proc/mounts").read_text()


def test_operator_process_pauses_with_its_pod() -> None:
    import subprocess

    from gpu_conformance.sim.operator.operand_loop import OperatorPause

    def state(pid: int, want: str = "T") -> str:
        # Signals are delivered asynchronously: give the kernel a moment to reach the wanted state.
        for _ in range(50):
            stat = Path(f"/proc/{pid}/stat").read_text()
            got = stat[stat.rindex(")") + 2:].split()[0]
            if got in want:
                break
            time.sleep(0.05)
        return got

    proc = subprocess.Popen(["sleep", "60"])
    try:
        stat = Path(f"/proc/{proc.pid}/stat").read_text()
        start = int(stat[stat.rindex(")") + 2:].split()[19])
        kube = FakeKube([], [])
        deployment = {"metadata": {"name": "gpu-operator"}, "status": {"availableReplicas": 0}}
        kube.list = lambda kind, *a, **k: [deployment] if kind == "Deployment" else []  # type: ignore[method-assign]
        pause = OperatorPause(kube, "gpu-operator", proc.pid, start)
        pause.step()
        assert pause.paused and state(proc.pid) == "T"
        deployment["status"] = {"availableReplicas": 1}
        pause.step()
        assert not pause.paused and state(proc.pid, "SR") in ("S", "R")
        wrong = OperatorPause(kube, "gpu-operator", proc.pid, start + 1)  # a recycled pid is never signalled
        deployment["status"] = {}
        wrong.step()
        assert not wrong.paused and state(proc.pid, "SR") in ("S", "R")
    finally:
        proc.kill()
        proc.wait()
