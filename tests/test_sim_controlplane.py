"""The simulated cluster's control plane, tested for real: etcd, kube-apiserver, kcm, scheduler and kwok
on 127.0.0.1, driven through the real API and the real kubectl."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import textwrap
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest
from tenacity import Retrying, retry_if_exception_type, stop_after_delay, wait_fixed

from gpu_conformance.sim.builds import binaries
from gpu_conformance.sim.controlplane.cluster import (
    CONTEXT_NAME,
    KWOK_NODE_ANNOTATION,
    PIDS_FILE,
    SimCluster,
    stop_state_dir,
)
from gpu_conformance.sim.services.processes import STOP_GRACE

pytestmark = pytest.mark.sim

T = TypeVar("T")
REPO = Path(__file__).resolve().parents[1]
NODE = "gpu-node-0"
LOG_CONTAINER = "cuda-vectoradd"
LOG_TEXT = "[Vector addition of 50000 elements]\nCopy input data from the host memory to the CUDA device\nTest PASSED"


class _NotYet(AssertionError):
    pass


def wait_for(fn: Callable[[], T | None], what: str, timeout: float = 30.0) -> T:
    """Poll fn until it returns a truthy value (or raises anything but _NotYet)."""
    def attempt() -> T:
        value = fn()
        if not value:
            raise _NotYet(f"timed out after {timeout:.0f}s waiting for {what}")
        return value

    for ctx in Retrying(stop=stop_after_delay(timeout), wait=wait_fixed(0.25),
                        retry=retry_if_exception_type(_NotYet), reraise=True):
        with ctx:
            return attempt()
    raise AssertionError("unreachable")


# ---------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def bin_dir() -> Path:
    try:
        return binaries.ensure_binaries()
    except binaries.GoNotFoundError as exc:
        pytest.skip(f"simulated cluster binaries not available: {exc}")


@pytest.fixture(scope="module")
def sim(bin_dir: Path) -> Iterator[SimCluster]:
    with SimCluster(bin_dir=bin_dir, log_containers=[LOG_CONTAINER]) as cluster:
        yield cluster


@pytest.fixture(scope="module")
def core(sim: SimCluster) -> Any:
    from kubernetes import client

    return client.CoreV1Api(sim.api_client())


@pytest.fixture(scope="module")
def namespace(sim: SimCluster, core: Any) -> str:
    name = "sim-test"
    core.create_namespace({"metadata": {"name": name}})
    # Pod creation is refused until kcm's serviceaccount controller made the namespace's default SA.
    wait_for(lambda: [sa for sa in core.list_namespaced_service_account(name).items
                      if sa.metadata.name == "default"], "default ServiceAccount in the test namespace")
    return name


@pytest.fixture(scope="module")
def gpu_node(core: Any) -> Any:
    core.create_node({
        "metadata": {"name": NODE, "annotations": {KWOK_NODE_ANNOTATION: "fake"},
                     "labels": {"nvidia.com/gpu.present": "true"}},
        "status": {"capacity": {"cpu": "16", "memory": "64Gi", "pods": "110", "nvidia.com/gpu": "2"},
                   "allocatable": {"cpu": "16", "memory": "64Gi", "pods": "110", "nvidia.com/gpu": "2"}},
    })

    def ready() -> Any:
        node = core.read_node(NODE)
        conditions = {c.type: c.status for c in node.status.conditions or []}
        return node if conditions.get("Ready") == "True" else None

    return wait_for(ready, f"node {NODE} Ready")


def kubectl(sim: SimCluster, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    assert sim.bin_dir is not None
    return subprocess.run([str(sim.bin_dir / "kubectl"), f"--kubeconfig={sim.kubeconfig}", *args],
                          capture_output=True, text=True, timeout=60, check=check)


def pod(name: str, *, image: str = "nvcr.io/nvidia/cuda:12.6.0-base-ubuntu22.04", container: str = "main",
        gpus: int = 0, restart: str = "Always", **spec: Any) -> dict[str, Any]:
    resources = {"limits": {"nvidia.com/gpu": str(gpus)}} if gpus else {}
    return {"metadata": {"name": name},
            "spec": {"restartPolicy": restart, "automountServiceAccountToken": False,
                     "containers": [{"name": container, "image": image, "resources": resources}], **spec}}


def events_for(core: Any, namespace: str, name: str) -> list[Any]:
    return core.list_namespaced_event(namespace, field_selector=f"involvedObject.name={name}").items


# ---------------------------------------------------------------- the running cluster


def test_kubectl_reports_server_version(sim: SimCluster) -> None:
    out = kubectl(sim, "version", "-o", "json")
    versions = json.loads(out.stdout)
    assert versions["serverVersion"]["gitVersion"] == binaries.K8S_VERSION
    assert versions["clientVersion"]["gitVersion"] == binaries.K8S_VERSION
    config = kubectl(sim, "config", "view", "--minify", "-o", "json").stdout
    view = json.loads(config)
    assert view["current-context"] == CONTEXT_NAME
    assert re.fullmatch(r"https://127\.0\.0\.1:\d+", view["clusters"][0]["cluster"]["server"])


def test_kwok_node_becomes_ready_with_gpus(core: Any, gpu_node: Any) -> None:
    # kcm's node-lifecycle taints a node until it reports Ready; a live kwok node ends up untainted.
    wait_for(lambda: not core.read_node(NODE).spec.taints, "no taints on the kwok node")
    status = gpu_node.status
    assert status.capacity["nvidia.com/gpu"] == "2"
    assert status.allocatable["nvidia.com/gpu"] == "2"
    assert {a.type: a.address for a in status.addresses}["InternalIP"] == "127.0.0.1"
    assert status.node_info.kubelet_version == binaries.K8S_VERSION


def test_daemonset_pod_runs_on_kwok_node(sim: SimCluster, namespace: str, gpu_node: Any) -> None:
    from kubernetes import client

    apps = client.AppsV1Api(sim.api_client())
    labels = {"app": "sim-ds"}
    apps.create_namespaced_daemon_set(namespace, {
        "metadata": {"name": "sim-ds"},
        "spec": {"selector": {"matchLabels": labels}, "template": {
            "metadata": {"labels": labels},
            "spec": {"automountServiceAccountToken": False,
                     "initContainers": [{"name": "init", "image": "busybox:1.36"}],
                     "containers": [{"name": "main", "image": "busybox:1.36"}]}}},
    })
    ds = wait_for(lambda: (d := apps.read_namespaced_daemon_set("sim-ds", namespace)).status.number_ready == 1
                  and d, "DaemonSet numberReady=1")
    assert ds.status.desired_number_scheduled == 1
    core = client.CoreV1Api(sim.api_client())
    (ds_pod,) = core.list_namespaced_pod(namespace, label_selector="app=sim-ds").items
    assert ds_pod.spec.node_name == NODE
    assert ds_pod.status.phase == "Running"
    assert ds_pod.status.init_container_statuses[0].state.terminated.reason == "Completed"
    assert ds_pod.status.container_statuses[0].state.running is not None


def test_bare_gpu_pod_succeeds_and_serves_logs(sim: SimCluster, core: Any, namespace: str,
                                               gpu_node: Any) -> None:
    sim.write_container_log(LOG_CONTAINER, LOG_TEXT)
    sim.write_container_log(LOG_CONTAINER, "previous run\n", previous=True)
    core.create_namespaced_pod(namespace, pod("vectoradd", container=LOG_CONTAINER, gpus=1, restart="Never"))
    done = wait_for(lambda: (p := core.read_namespaced_pod("vectoradd", namespace)).status.phase == "Succeeded"
                    and p, "pod vectoradd Succeeded")
    assert done.spec.node_name == NODE
    terminated = done.status.container_statuses[0].state.terminated
    assert (terminated.exit_code, terminated.reason) == (0, "Completed")
    logs = kubectl(sim, "-n", namespace, "logs", "vectoradd", "-c", LOG_CONTAINER)
    assert logs.stdout == LOG_TEXT + "\n"
    previous = kubectl(sim, "-n", namespace, "logs", "vectoradd", "-c", LOG_CONTAINER, "--previous")
    assert previous.stdout == "previous run\n"


def test_pod_over_gpu_capacity_stays_pending(core: Any, namespace: str, gpu_node: Any) -> None:
    core.create_namespaced_pod(namespace, pod("too-many-gpus", gpus=3, restart="Never"))

    def failed_scheduling() -> list[Any]:
        return [e for e in events_for(core, namespace, "too-many-gpus") if e.reason == "FailedScheduling"]

    (event, *_) = wait_for(failed_scheduling, "FailedScheduling event")
    assert "Insufficient nvidia.com/gpu" in event.message
    stuck = core.read_namespaced_pod("too-many-gpus", namespace)
    assert stuck.status.phase == "Pending" and stuck.spec.node_name is None


def test_unpullable_image_backs_off(core: Any, namespace: str, gpu_node: Any) -> None:
    core.create_namespaced_pod(namespace, pod("bad-image", image="registry.invalid/x:1"))

    def waiting() -> Any:
        p = core.read_namespaced_pod("bad-image", namespace)
        return p if p.status.container_statuses else None

    bad = wait_for(waiting, "container statuses on bad-image")
    assert bad.status.phase == "Pending"
    state = bad.status.container_statuses[0].state.waiting
    assert state.reason == "ImagePullBackOff"
    assert 'Back-off pulling image "registry.invalid/x:1"' in state.message
    assert any(e.reason == "Failed" for e in wait_for(lambda: events_for(core, namespace, "bad-image"),
                                                     "events of bad-image"))


def test_patched_init_crashloop_is_left_alone(core: Any, namespace: str, gpu_node: Any) -> None:
    # A scheduling gate holds the pod until its status is patched, so kwok never sees it fresh.
    body = pod("stuck-init", schedulingGates=[{"name": "sim.test/hold"}],
               initContainers=[{"name": "driver-validation", "image": "busybox:1.36"}])
    core.create_namespaced_pod(namespace, body)
    core.patch_namespaced_pod_status("stuck-init", namespace, {"status": {
        "phase": "Pending",
        "initContainerStatuses": [{"name": "driver-validation", "image": "busybox:1.36", "imageID": "",
                                   "ready": False, "restartCount": 4,
                                   "state": {"waiting": {"reason": "CrashLoopBackOff",
                                                         "message": "back-off 40s restarting failed container"}}}],
        "containerStatuses": [{"name": "main", "image": body["spec"]["containers"][0]["image"], "imageID": "",
                               "ready": False, "restartCount": 0,
                               "state": {"waiting": {"reason": "PodInitializing"}}}],
    }})
    core.patch_namespaced_pod("stuck-init", namespace, [{"op": "remove", "path": "/spec/schedulingGates"}])
    wait_for(lambda: core.read_namespaced_pod("stuck-init", namespace).spec.node_name, "stuck-init scheduled")
    time.sleep(3)
    after = core.read_namespaced_pod("stuck-init", namespace)
    assert after.spec.node_name == NODE
    assert after.status.phase == "Pending"
    assert after.status.init_container_statuses[0].state.waiting.reason == "CrashLoopBackOff"
    assert after.status.container_statuses[0].state.waiting.reason == "PodInitializing"


def test_pod_delete_finishes_despite_finalizer(core: Any, namespace: str, gpu_node: Any) -> None:
    body = pod("finalized")
    body["metadata"]["finalizers"] = ["sim.test/keep"]
    core.create_namespaced_pod(namespace, body)
    wait_for(lambda: core.read_namespaced_pod("finalized", namespace).status.phase == "Running", "Running")
    core.delete_namespaced_pod("finalized", namespace)
    wait_for(lambda: "finalized" not in {p.metadata.name for p in core.list_namespaced_pod(namespace).items},
             "pod finalized gone")


def test_log_for_new_container_name_restarts_kwok(sim: SimCluster, core: Any, namespace: str,
                                                  gpu_node: Any) -> None:
    assert "gpu-feature-discovery" not in sim.log_containers
    sim.write_container_log("gpu-feature-discovery", "labels written\n")
    core.create_namespaced_pod(namespace, pod("gfd", container="gpu-feature-discovery"))
    wait_for(lambda: core.read_namespaced_pod("gfd", namespace).status.phase == "Running",
             "gfd Running under the restarted kwok")
    assert kubectl(sim, "-n", namespace, "logs", "gfd").stdout == "labels written\n"
    conditions = {c.type: c.status for c in core.read_node(NODE).status.conditions}
    assert conditions["Ready"] == "True"


def test_kubelet_traffic_to_off_host_node_is_blocked(sim: SimCluster, core: Any, namespace: str) -> None:
    # A node not run by kwok whose address is off-host (TEST-NET-1): the apiserver must not reach it.
    core.create_node({
        "metadata": {"name": "off-host"},
        # Custom NoSchedule taint: keeps the scheduler and the DaemonSet controller away from it.
        "spec": {"taints": [{"key": "sim.test/off-host", "effect": "NoSchedule"}]},
        "status": {"addresses": [{"type": "InternalIP", "address": "192.0.2.10"}],
                   "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}}},
    })
    try:
        core.create_namespaced_pod(namespace, pod("off-host-pod", nodeName="off-host"))
        out = kubectl(sim, "-n", namespace, "logs", "off-host-pod", check=False)
        assert out.returncode != 0
        assert "192.0.2.10:10250" in out.stderr and "proxyconnect tcp: dial tcp 127.0.0.1:1" in out.stderr
    finally:
        core.delete_node("off-host")


def _our_pids(sim: SimCluster) -> set[int]:
    data = json.loads((sim.state_dir / PIDS_FILE).read_text())
    return {int(p["pid"]) for p in data["processes"].values()}


def _sockets(flags: str) -> list[tuple[str, str, set[int]]]:
    """(local address:port, peer address:port, pids) for each socket `ss` reports."""
    out = subprocess.run(["ss", "-Hn" + flags + "p"], capture_output=True, text=True, check=True).stdout
    rows = []
    for line in out.splitlines():
        # Column layout varies with the flags (a Netid column appears with -tu); addresses do not.
        local, peer = [c for c in line.split() if re.fullmatch(r"\S+:(\d+|\*)", c)][:2]
        pids = {int(p) for p in re.findall(r"pid=(\d+)", line)}
        rows.append((local, peer, pids))
    return rows


def test_nothing_listens_or_connects_off_loopback(sim: SimCluster, gpu_node: Any) -> None:
    ours = _our_pids(sim)
    listening = [(local, pids) for local, _, pids in _sockets("ltu") if pids & ours]
    assert listening, "ss shows no listener of the sim processes"
    assert all(local.startswith("127.0.0.1:") for local, _ in listening), listening
    listening_ports = {int(local.rsplit(":", 1)[1]) for local, _ in listening}
    assert listening_ports == set(sim.ports.values()), (listening, sim.ports)
    connected = [(local, peer) for local, peer, pids in _sockets("t") if pids & ours]
    assert all(peer.startswith("127.0.0.1:") for _, peer in connected), connected


# ---------------------------------------------------------------- teardown


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2] != "Z"


def _port_open(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.5)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def _children() -> set[int]:
    me = str(os.getpid())
    kids = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if stat[stat.rindex(")") + 2:].split()[1] == me:
                kids.add(int(entry.name))
    return kids


def _assert_torn_down(pids: set[int], ports: set[int], state_dir: Path, etcd_dir: Path) -> None:
    assert not [p for p in pids if _alive(p)]
    assert not [p for p in ports if _port_open(p)]
    assert not state_dir.exists()
    assert not etcd_dir.exists()


def test_stop_leaves_no_process_port_or_dir(bin_dir: Path) -> None:
    before = _children()
    cluster = SimCluster(bin_dir=bin_dir).start()
    pids, ports = _our_pids(cluster), set(cluster.ports.values())
    etcd_dir = Path(json.loads((cluster.state_dir / PIDS_FILE).read_text())["etcd_data_dir"])
    assert all(_alive(p) for p in pids) and all(_port_open(p) for p in ports)
    cluster.stop()
    _assert_torn_down(pids, ports, cluster.state_dir, etcd_dir)
    assert _children() - before == set()
    cluster.stop()  # idempotent


_RUNNER = textwrap.dedent("""
    import faulthandler, json, signal, sys, time
    from pathlib import Path
    # Ctrl-C reaches a program in a terminal's foreground, whose SIGINT is not ignored. A test run started in the
    # background by a shell without job control (`nohup pytest ... &`, as a CI script may be) ignores SIGINT, every
    # child inherits that, and Python then installs no KeyboardInterrupt handler: the runner would sleep through
    # the signal (two clean-clone CI runs hung so). Put back what a terminal gives.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    # Every thread's stack on SIGUSR1: what a runner that does not exit was doing (see test_signal_tears_down).
    faulthandler.register(signal.SIGUSR1, all_threads=True)
    from gpu_conformance.sim.controlplane.cluster import SimCluster

    mode, bin_dir = sys.argv[1], Path(sys.argv[2])
    def report(c):
        pids = json.loads((c.state_dir / "pids.json").read_text())
        print(json.dumps({"state_dir": str(c.state_dir), "pids": pids}), flush=True)
    if mode == "detach":
        c = SimCluster(state_dir=Path(sys.argv[3]), bin_dir=bin_dir).start(detach=True)
        report(c)
    else:
        with SimCluster(bin_dir=bin_dir) as c:
            report(c)
            time.sleep(600)
""")


def _run_runner(*args: str, stderr: Any = None) -> tuple[subprocess.Popen[str], dict[str, Any]]:
    proc = subprocess.Popen([sys.executable, "-c", _RUNNER, *args], stdout=subprocess.PIPE, text=True,
                            cwd=REPO, stderr=stderr)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line, f"runner exited with {proc.wait()} before reporting"
    return proc, json.loads(line)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "Ctrl-C"])
def test_signal_tears_down(bin_dir: Path, sig: signal.Signals, tmp_path: Path) -> None:
    log = tmp_path / "runner.stderr"
    with open(log, "w") as err:
        proc, info = _run_runner("with", str(bin_dir), stderr=err)
    pids = {int(p["pid"]) for p in info["pids"]["processes"].values()}
    ports = set(info["pids"]["ports"].values())
    assert all(_alive(p) for p in pids)
    proc.send_signal(sig)
    try:
        # Bounded by the teardown's own worst case (each process: its SIGTERM grace, SIGKILL, reaping).
        code = proc.wait(timeout=len(pids) * 3 * STOP_GRACE + 30)
    except subprocess.TimeoutExpired:
        # What it was doing: every thread's stack, then everything it started is removed before the test fails.
        proc.send_signal(signal.SIGUSR1)
        time.sleep(1)
        proc.kill()
        proc.wait(timeout=30)
        for p in pids:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p, signal.SIGKILL)
        with contextlib.suppress(Exception):
            stop_state_dir(Path(info["state_dir"]))  # what the killed runner would have removed
        threads = log.read_text(errors="replace")[-6000:]
        pytest.fail(f"the runner did not exit after {sig.name}; its threads:\n{threads}")
    # SIGTERM: our handler stops the cluster, then dies by the signal. Ctrl-C unwinds through __exit__,
    # then Python itself exits by SIGINT. Either way the runner dies by the signal it got.
    assert code == -sig
    _assert_torn_down(pids, ports, Path(info["state_dir"]), Path(info["pids"]["etcd_data_dir"]))


def test_detached_cluster_outlives_starter_until_stop_state_dir(bin_dir: Path, tmp_path: Path) -> None:
    state_dir = tmp_path / f"sim-{uuid.uuid4().hex[:6]}"
    proc, info = _run_runner("detach", str(bin_dir), str(state_dir))
    assert proc.wait(timeout=30) == 0
    pids = {int(p["pid"]) for p in info["pids"]["processes"].values()}
    ports = set(info["pids"]["ports"].values())
    assert all(_alive(p) for p in pids), "a detached cluster must survive the process that started it"
    assert all(_port_open(p) for p in ports)
    kubectl_bin = bin_dir / "kubectl"
    out = subprocess.run([str(kubectl_bin), f"--kubeconfig={state_dir / 'kubeconfig'}", "get", "--raw", "/readyz"],
                         capture_output=True, text=True, timeout=30, check=True)
    assert out.stdout.strip() == "ok"
    stop_state_dir(state_dir)
    _assert_torn_down(pids, ports, state_dir, Path(info["pids"]["etcd_data_dir"]))
    stop_state_dir(state_dir)  # idempotent


def test_missing_prebuilt_binaries_fail_in_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(binaries.BIN_DIR_ENV, str(tmp_path))
    with pytest.raises(binaries.BinariesError) as err:
        binaries.ensure_binaries()
    assert "\n" not in str(err.value) and "kube-apiserver" in str(err.value)
