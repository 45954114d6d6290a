"""The probe on a real (simulated) control plane, when the world does not hold still.

One simulated cluster for the module; each test undoes what it changes. To catch the probe mid-flight the
tests pause kwok (SIGSTOP): the scheduler still binds the probe pods, but nothing runs them until SIGCONT.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes.client.exceptions import ApiException
from polling import wait_for
from tcp_proxy import TcpProxy

from gpu_conformance.cluster.connect import connect
from gpu_conformance.cluster.snapshot import ClusterSnapshot
from gpu_conformance.errors import ClusterAccessError
from gpu_conformance.probe import api as probe_api
from gpu_conformance.probe import run as probe_module
from gpu_conformance.probe.manifests import RUN_LABEL
from gpu_conformance.probe.run import LOG_LIMIT_BYTES
from gpu_conformance.settings import Settings
from gpu_conformance.sim.services.kube_client import Kube

pytestmark = pytest.mark.sim
REPO = Path(__file__).resolve().parents[1]
NODES = ("gpu-node-0", "gpu-node-1", "gpu-node-2")
CDI_ERROR = ("failed to generate container spec: failed to apply OCI options: failed to inject CDI devices: "
             "unresolvable CDI devices nvidia.com/gpu=GPU-0")


@pytest.fixture(scope="module")
def sim() -> Iterator[Any]:
    from gpu_conformance.sim.session import start_sim

    with start_sim(quiet=True) as booted:
        yield booted


@pytest.fixture
def admin(sim: Any) -> Kube:
    return Kube(sim.cluster.api_client())


@contextlib.contextmanager
def kwok_paused(sim: Any) -> Iterator[None]:
    """Pods get bound but never started. Keep it short: node heartbeats stop too (kcm's grace is 10 min)."""
    pid = json.loads((sim.cluster.state_dir / "pids.json").read_text())["processes"]["kwok"]["pid"]
    os.kill(pid, signal.SIGSTOP)
    try:
        yield
    finally:
        os.kill(pid, signal.SIGCONT)


def probe_pods(admin: Kube, run_id: str = "", bound: bool = True) -> list[dict]:
    """Live probe pods (of one run, or of any run)."""
    sel = f"{RUN_LABEL}={run_id}" if run_id else RUN_LABEL
    pods = [p for p in admin.list("Pod", label_selector=sel) if not p["metadata"].get("deletionTimestamp")]
    return [p for p in pods if not bound or p["spec"].get("nodeName")]


def bound_pods(admin: Kube, bg: Background, count: int = 3) -> list[dict]:
    """The run's probe pods once the scheduler bound them all; a run that ended first is said with its reason."""
    rid = bg.run.settings.run_id

    def bound() -> list[dict]:
        pods = probe_pods(admin, rid)
        if len(pods) != count and not bg.thread.is_alive():
            obs = bg.run.probe_run
            raise AssertionError(f"the run ended before its {count} probe pods were bound: error={bg.error!r}, "
                                 f"probe aborted={getattr(obs, 'aborted', None)!r}, "
                                 f"refused={[o.refused for o in getattr(obs, 'pods', {}).values()]!r}")
        return pods if len(pods) == count else []

    return wait_for(bound, "probe pods bound", 60)


def wait_until_admitted(admin: Kube) -> None:
    """Until the admission plugin has dropped a deleted policy: a dry-run probe-like pod in a namespace labelled
    like the probe's is accepted. The plugin sees policies through an informer, so the DELETE alone does not say
    when a next test's probe pods are admitted again (a loaded CI machine took long enough to fail the next test).
    """
    ns = "gpu-conformance-admission-check"
    admin.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns, "labels": {RUN_LABEL: "check"}}})
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "check", "namespace": ns},
           "spec": {"containers": [{"name": "c", "image": "example.com/check:1"}]}}

    def admitted() -> bool:
        try:
            admin.request("POST", f"/api/v1/namespaces/{ns}/pods", pod, query=[("dryRun", "All")])
        except ApiException as e:  # the refusal is what is waited out; anything else is the test's failure
            if "registry.corp.example" not in str(e.body):
                raise
            return False
        return True

    try:
        wait_for(admitted, "the deleted admission policy to stop applying", 60)
    finally:
        admin.request("DELETE", f"/api/v1/namespaces/{ns}")
        wait_for(lambda: not admin.list("Namespace", label_selector=f"{RUN_LABEL}=check"), "check namespace gone", 60)


class Background:
    """A whole run (read, checks, probe, result) in a thread, so the test can act while the probe waits."""

    def __init__(self, kubeconfig: Path, tmp_path: Path, **settings: Any) -> None:
        from gpu_conformance.session import ConformanceRun
        from gpu_conformance.settings import Settings

        s = Settings(kubeconfig=str(kubeconfig), report_dir=str(tmp_path), **{"probe_timeout": 120, **settings})
        self.run = ConformanceRun(s.validate(), "current")
        self.error: BaseException | None = None
        self.seconds = 0.0
        self.thread = threading.Thread(target=self._go, daemon=True)
        self.thread.start()

    def _go(self) -> None:
        t0 = time.monotonic()
        try:
            self.run.start()
            self.run.run_probe()
        except BaseException as e:  # noqa: BLE001 — handed to the test
            self.error = e
        finally:
            self.seconds = time.monotonic() - t0
            self.run.close()

    def result(self, timeout: float = 60) -> dict:
        self.thread.join(timeout)
        assert not self.thread.is_alive(), "the run did not end"
        self.run.write_reports()
        return self.run.result().to_json_dict()


def findings(data: dict, check_id: str) -> list[dict]:
    return next(c for c in data["checks"] if c["id"] == check_id)["findings"]


def test_namespace_deleted_by_someone_else_is_noticed_at_once(sim: Any, admin: Kube, tmp_path: Path) -> None:
    with kwok_paused(sim):
        bg = Background(sim.kubeconfig, tmp_path)
        pods = bound_pods(admin, bg)
        ns = pods[0]["metadata"]["namespace"]
        admin.request("DELETE", f"/api/v1/namespaces/{ns}")
        for p in pods:
            admin.request("DELETE", f"/api/v1/namespaces/{ns}/pods/{p['metadata']['name']}",
                          query=[("gracePeriodSeconds", "0")])
        data = bg.result()
    assert bg.error is None and bg.seconds < 40, (bg.error, bg.seconds)  # not the 120 s --probe-timeout
    assert data["verdict"] == "INCOMPLETE"
    assert not [c["id"] for c in data["checks"] if c["status"] == "fail"]
    (f,) = [f for f in findings(data, "PRB-001") if f["status"] != "pass"]
    assert f["node"] is None and f"namespace {ns} was deleted by someone else" in f["message"]


def test_pod_deleted_by_someone_else_leaves_that_node_incomplete(sim: Any, admin: Kube, tmp_path: Path) -> None:
    with kwok_paused(sim):
        bg = Background(sim.kubeconfig, tmp_path)
        pods = bound_pods(admin, bg)
        victim = next(p for p in pods if p["spec"]["nodeName"] == "gpu-node-1")
        admin.request("DELETE", f"/api/v1/namespaces/{victim['metadata']['namespace']}/pods/"
                                f"{victim['metadata']['name']}", query=[("gracePeriodSeconds", "0")])
    data = bg.result()
    assert data["verdict"] == "INCOMPLETE", data["verdict"]
    node = {n["name"]: n for n in data["nodes"]}
    assert "deleted by someone else" in node["gpu-node-1"]["transient"]["message"]
    assert node["gpu-node-0"]["layers"]["probe"] == "pass" and node["gpu-node-0"]["transient"] is None


def test_container_the_runtime_cannot_create_fails_at_once(sim: Any, admin: Kube, tmp_path: Path) -> None:
    with kwok_paused(sim):
        bg = Background(sim.kubeconfig, tmp_path)
        pods = bound_pods(admin, bg)
        for p in pods:  # what the kubelet writes when containerd cannot resolve the CDI device
            admin.patch("Pod", p["metadata"]["name"], {"status": {"phase": "Pending", "containerStatuses": [{
                "name": "gpu-probe", "image": p["spec"]["containers"][0]["image"], "imageID": "", "ready": False,
                "restartCount": 0, "state": {"waiting": {"reason": "CreateContainerError", "message": CDI_ERROR}}}]}},
                p["metadata"]["namespace"], status=True)
        data = bg.result()  # while kwok is still paused: it would otherwise run what it saw before the patch
    assert bg.seconds < 40, bg.seconds  # not the 120 s --probe-timeout
    assert data["verdict"] == "NOT CONFORMANT"
    fs = findings(data, "PRB-002")
    assert len(fs) == 3 and all(f["status"] == "fail" and "CreateContainerError" in f["message"]
                                and "unresolvable CDI devices" in f["message"] for f in fs)


def test_admission_policy_refusal_is_reported_once_in_its_own_words(sim: Any, admin: Kube, tmp_path: Path) -> None:
    vap = "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies"
    binding = "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicybindings"
    message = "images must come from registry.corp.example (policy corp-images)"
    admin.request("POST", vap, {
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": "corp-images"},
        "spec": {"failurePolicy": "Fail",
                 "matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
                                                         "operations": ["CREATE"], "resources": ["pods"]}],
                                      "namespaceSelector": {"matchExpressions": [{"key": RUN_LABEL,
                                                                                  "operator": "Exists"}]}},
                 "validations": [{"expression": "object.spec.containers.all(c, "
                                                "c.image.startsWith('registry.corp.example/'))",
                                  "message": message}]}})
    admin.request("POST", binding, {
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": "corp-images"},
        "spec": {"policyName": "corp-images", "validationActions": ["Deny"]}})
    try:
        time.sleep(2)  # the policy reaches the admission plugin through an informer
        bg = Background(sim.kubeconfig, tmp_path)
        data = bg.result()
        assert bg.error is None, bg.error
        again = bg.run.run_probe()  # once per run: a second call is the first one's answer
        assert again is bg.run.probe_run
    finally:
        admin.request("DELETE", f"{binding}/corp-images")
        admin.request("DELETE", f"{vap}/corp-images")
        wait_until_admitted(admin)
    assert data["verdict"] == "INCOMPLETE"
    assert not [c["id"] for c in data["checks"] if c["status"] == "fail"]
    fs = findings(data, "PRB-001")
    assert len(fs) == 1, fs
    assert fs[0]["node"] is None and message in fs[0]["message"] and "ValidatingAdmissionPolicy" in fs[0]["message"]
    assert {p["phase"] for p in data["probe"]["pods"]} == {"Refused"} and data["probe"]["deleted"]


def test_api_server_outage_mid_probe(sim: Any, admin: Kube, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    proxy = TcpProxy(sim.cluster.ports["apiserver"])
    cfg = yaml.safe_load(sim.kubeconfig.read_text())
    for c in cfg["clusters"]:
        c["cluster"]["server"] = f"https://127.0.0.1:{proxy.port}"
    kc = tmp_path / "via-proxy"
    kc.write_text(yaml.safe_dump(cfg))
    proxy.start()
    try:
        # A few seconds of restart: retried, the run goes on as if nothing happened.
        with kwok_paused(sim):
            bg = Background(kc, tmp_path / "a")
            bound_pods(admin, bg)
            proxy.stop()
            time.sleep(4)
            proxy.start()
        data = bg.result()
        assert bg.error is None and data["verdict"] == "CONFORMANT", (bg.error, data["verdict"])

        # Longer than the bound: ClusterAccessError (exit 3, one line); cleanup once the server is back.
        monkeypatch.setattr(probe_api, "API_OUTAGE_BOUND", 3.0)
        with kwok_paused(sim):
            bg = Background(kc, tmp_path / "b")
            ns = bound_pods(admin, bg)[0]["metadata"]["namespace"]
            proxy.stop()
            time.sleep(6)
            proxy.start()
            bg.thread.join(60)
        assert isinstance(bg.error, ClusterAccessError) and "cannot reach the API server" in str(bg.error)
        obs = bg.run.probe_run
        assert obs is not None and obs.deleted and "deleted" in obs.aborted
        state = admin.list("Namespace", label_selector=RUN_LABEL)
        assert all(n["metadata"].get("deletionTimestamp") for n in state if n["metadata"]["name"] == ns)
    finally:
        proxy.stop()


def test_probe_logs_are_read_with_a_byte_bound_and_stored_once(sim: Any, tmp_path: Path) -> None:
    from gpu_conformance.sim.operator.reconcile import probe_output
    from gpu_conformance.sim.profiles.catalogue import PROFILES

    good = probe_output(PROFILES["default"])
    sim.cluster.write_container_log("gpu-probe", good + ("x" * 200 + "\n") * 1000)
    try:
        data = Background(sim.kubeconfig, tmp_path).result()
    finally:
        sim.cluster.write_container_log("gpu-probe", good)
    assert data["verdict"] == "CONFORMANT"
    for p in data["probe"]["pods"]:
        assert p["logs_truncated"] and len(p["logs"].encode()) <= LOG_LIMIT_BYTES and "output" not in p
    assert len((tmp_path / "conformance.json").read_bytes()) < 3 * 2 * LOG_LIMIT_BYTES + 200_000


def test_busy_and_cordoned_nodes_are_said_not_failed_and_sampling_is_plain(
        sim: Any, admin: Kube, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The earlier tests' probe pods hold a GPU each until their namespaces' deletion removed them (longer on a
    # loaded machine): counted here, they would be a ninth GPU in use on gpu-node-1.
    wait_for(lambda: not admin.list("Pod", label_selector=RUN_LABEL), "earlier probes' pods gone")
    admin.patch("Node", "gpu-node-0", {"spec": {"unschedulable": True}})
    alloc = admin.get("Node", "gpu-node-1")["status"]["allocatable"]["nvidia.com/gpu"]
    admin.create({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "training", "namespace": "default"},
                  "spec": {"nodeName": "gpu-node-1", "tolerations": [{"operator": "Exists"}],
                           "containers": [{"name": "t", "image": "example.com/train:1",
                                           "resources": {"limits": {"nvidia.com/gpu": alloc}}}]}})
    try:
        wait_for(lambda: admin.get("Pod", "training", "default")["status"].get("phase") == "Running", "busy pod")
        # A probe of few nodes finds the busy pod by the API server's spec.nodeName field selector.
        probe = probe_module.Probe(connect(str(sim.kubeconfig)), Settings(run_id="busy"), ClusterSnapshot())
        assert probe._gpus_in_use(["gpu-node-1", "gpu-node-2"]).get("gpu-node-1") == {"nvidia.com/gpu": int(alloc)}
        assert probe.api.requests == 2
        # A probe of many nodes reads no pods at all: the real scheduler's 'Insufficient nvidia.com/gpu' on the
        # probe pod says the node is taken.
        monkeypatch.setattr(probe_module, "PER_NODE_LISTS_MAX", 0)
        data = Background(sim.kubeconfig, tmp_path / "a").result()
    finally:
        admin.patch("Node", "gpu-node-0", {"spec": {"unschedulable": None}})
        admin.request("DELETE", "/api/v1/namespaces/default/pods/training", query=[("gracePeriodSeconds", "0")])
    by_node = {f["node"]: f for f in findings(data, "PRB-001")}
    # Cordoned: node health (NFD-004) says so and pauses the node (maintenance: INCOMPLETE); never probed.
    nodes = {n["name"]: n for n in data["nodes"]}
    assert "cordoned" in nodes["gpu-node-0"]["transient"]["message"] and "gpu-node-0" not in by_node
    assert by_node["gpu-node-1"]["status"] == "warn" and f"all {alloc} nvidia.com/gpu in use" in \
        by_node["gpu-node-1"]["message"]
    assert nodes["gpu-node-1"]["root_cause"] is None and nodes["gpu-node-1"]["transient"] is None
    assert by_node["gpu-node-2"]["status"] == "pass"
    assert data["verdict"] == "INCOMPLETE" and not [c for c in data["checks"] if c["status"] == "fail"]
    assert data["probe"]["scope"] == ("probed 1 of 2 GPU node(s) that passed the earlier layers; "
                                      "1 with all GPUs in use")

    wait_for(lambda: not admin.list("Pod", "default"), "busy pod gone")
    monkeypatch.undo()  # a 3-node probe reads GPUs in use per node (spec.nodeName field selector)
    data = Background(sim.kubeconfig, tmp_path / "b", probe_nodes="2").result()
    assert data["probe"]["scope"] == ("probed 2 of 3 GPU node(s) that passed the earlier layers; 1 not sampled "
                                      "(--probe-nodes=2)")
    assert [f["status"] for f in findings(data, "PRB-001")].count("n/a") == 1
    assert len(data["probe"]["pods"]) == 2 and data["verdict"] == "CONFORMANT"


def test_leftovers_are_listed_with_age_and_the_cleanup_command_deletes_them(sim: Any, admin: Kube,
                                                                             tmp_path: Path) -> None:
    from gpu_conformance.cli import main

    old = "20200101-000000-dead00"
    admin.create({"apiVersion": "v1", "kind": "Namespace",
                  "metadata": {"name": f"gpu-conformance-probe-{old}", "labels": {RUN_LABEL: old}}})
    admin.create({"apiVersion": "v1", "kind": "Pod",
                  "metadata": {"name": "gpu-probe-old", "namespace": "default", "labels": {RUN_LABEL: old}},
                  "spec": {"nodeSelector": {"nowhere": "x"}, "containers": [{"name": "c", "image": "x"}]}})
    data = Background(sim.kubeconfig, tmp_path, no_probe=True).result()
    left = data["probe"]["leftovers"]
    assert len(left) == 2 and all(f"run {old}, age " in lo for lo in left), left
    from gpu_conformance.plugin import probe_lines

    assert any("2 probe object(s) left by earlier runs" in line and "gpu-conformance probe cleanup" in line
               for line, warn in probe_lines(data["probe"]) if warn)
    assert main(["probe", "cleanup", f"--kubeconfig={sim.kubeconfig}"]) == 0
    assert not probe_pods(admin, old, bound=False)
    assert all(n["metadata"].get("deletionTimestamp") for n in admin.list("Namespace", label_selector=RUN_LABEL))


def test_sigterm_mid_probe_cleans_up_and_writes_an_incomplete_report(sim: Any, admin: Kube, tmp_path: Path) -> None:
    reports = tmp_path / "reports"
    wait_for(lambda: not probe_pods(admin, bound=False), "earlier runs' probe pods gone", 60)
    with kwok_paused(sim):
        proc = subprocess.Popen([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--cluster=current",
                                 f"--kubeconfig={sim.kubeconfig}", f"--report-dir={reports}", "--probe-timeout=120",
                                 "tests_conformance"], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                text=True)
        try:
            ns = wait_for(lambda: len(probe_pods(admin)) == 3 and probe_pods(admin)[0]["metadata"]["namespace"],
                          "probe pods bound", 60)
            proc.send_signal(signal.SIGTERM)
            out, _ = proc.communicate(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
        state = {n["metadata"]["name"]: n for n in admin.list("Namespace", label_selector=RUN_LABEL)}
    assert proc.returncode == 2, out[-3000:]
    assert "Traceback" not in out
    assert "probe interrupted by SIGTERM" in out and "report written as INCOMPLETE" in out, out[-3000:]
    data = json.loads((reports / "conformance.json").read_text())
    assert data["verdict"] == "INCOMPLETE" and data["probe"]["deleted"]
    assert ns not in state or state[ns]["metadata"].get("deletionTimestamp")


def test_probe_only_run_exit_code_agrees_with_the_verdict(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--cluster=sim",
                           "--sim-fault=device-plugin-down", f"--report-dir={tmp_path}", "-m", "probe",
                           "tests_conformance"], cwd=REPO, capture_output=True, text=True, timeout=300, check=False)
    data = json.loads((tmp_path / "conformance.json").read_text())
    assert data["verdict"] == "NOT CONFORMANT"
    assert proc.returncode == 1, proc.stdout[-3000:]
    node = {n["name"]: n for n in data["nodes"]}
    assert node["gpu-node-1"]["root_cause"]["layer"] == "device-plugin"
