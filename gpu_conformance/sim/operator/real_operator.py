"""`--operator=real`: the unmodified NVIDIA GPU Operator v25.3.4 reconciles the simulated cluster.

The binary (sim/builds/operator_module.py) reads its operand manifests from the hard-coded /opt/gpu-operator and
the node's OS from /host-etc/os-release. It runs in a private mount namespace (`unshare --mount`) whose
root is a tmpfs holding bind mounts of the host's top-level directories, plus /opt/gpu-operator and
/host-etc bind-mounted from private directories in the sim's state dir: nothing is written to the host's
/opt or /etc. It talks to the sim's API server only (its metrics are off, its health probe is on
127.0.0.1), and is one of the cluster's processes, stopped by PID with the cluster.

What the operator does not do, the sim still plays: NFD (nodes carry the NFD labels), the Helm-side
objects (operator Deployment as a stand-in pod, NFD), and the operand programs (sim/operator/operand_loop.py).
"""

from __future__ import annotations

import os
import shutil
import socket
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from gpu_conformance import operands as op
from gpu_conformance.errors import ConformanceError, UsageError
from gpu_conformance.sim.builds import operator_module
from gpu_conformance.sim.operator import install as inst
from gpu_conformance.sim.operator.chart import clusterpolicy_from_module
from gpu_conformance.sim.profiles.catalogue import Profile, get_profile
from gpu_conformance.sim.services.processes import last_line

Obj = dict[str, Any]
PROCESS = "gpu-operator"
OPERAND_LOOP = "sim-operands"
NAMESPACE = "gpu-operator"

# Runs as PID 1 of nothing: unshare execs sh in a new mount namespace, sh execs chroot, env, the operator;
# the operator keeps the PID the cluster recorded.
_SCRIPT = r"""
set -eu
root=$1 opt=$2 hostetc=$3
shift 3
mount -t tmpfs -o mode=0755 gpu-sim-root "$root"
for e in /*; do
  n=${e#/}
  case "$n" in opt|host-etc) continue ;; esac
  if [ -L "$e" ]; then cp -P "$e" "$root/$n"
  elif [ -d "$e" ]; then mkdir "$root/$n" && mount --rbind "$e" "$root/$n"; fi
done
mkdir -p "$root/opt/gpu-operator" "$root/host-etc"
mount --bind "$opt" "$root/opt/gpu-operator"
mount --bind "$hostetc" "$root/host-etc"
exec chroot "$root" "$@"
"""


class RealOperatorError(ConformanceError):
    """The real operator could not be started against the simulated cluster."""


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def os_release(profile: Profile) -> str:
    """What the operator reads from the node's /etc/os-release (Helm mounts it at /host-etc)."""
    pretty = {"ubuntu": "Ubuntu"}.get(profile.os_id, profile.os_id)
    return (f'NAME="{pretty}"\nVERSION_ID="{profile.os_version_id}"\nID={profile.os_id}\n'
            f'PRETTY_NAME="{pretty} {profile.os_version_id}"\n')


def _private_dirs(state_dir: Path, profile: Profile) -> tuple[Path, Path, Path]:
    base = state_dir / "gpu-operator"
    opt, hostetc, root = base / "opt", base / "host-etc", base / "root"
    if base.exists():
        shutil.rmtree(base)
    shutil.copytree(operator_module.assets_dir(), opt, copy_function=shutil.copyfile)
    shutil.copytree(operator_module.manifests_dir(), opt / "manifests", copy_function=shutil.copyfile)
    # The module cache is read-only; the copy must be removable with the state dir.
    for d, _, _ in os.walk(opt):
        os.chmod(d, 0o755)
    hostetc.mkdir(parents=True)
    (hostetc / "os-release").write_text(os_release(profile))
    root.mkdir()
    return root, opt, hostetc


def launch(cluster: Any, profile: Profile, namespace: str = NAMESPACE, timeout: float = 60.0) -> int:
    """Start the operator as one of the cluster's processes; return its health port once it is ready."""
    if shutil.which("unshare") is None or shutil.which("chroot") is None:
        raise RealOperatorError("the real operator needs `unshare` and `chroot` (util-linux, coreutils)")
    if os.geteuid() != 0:
        raise RealOperatorError("the real operator needs root for its private mount namespace "
                                "(/opt/gpu-operator and /host-etc are hard-coded in the binary)")
    binary = operator_module.ensure_binary()
    root, opt, hostetc = _private_dirs(cluster.state_dir, profile)
    port = _free_port()
    env = ["env", "-i", "PATH=/usr/sbin:/usr/bin:/sbin:/bin", f"HOME={cluster.state_dir}",
           f"KUBECONFIG={cluster.kubeconfig}", f"OPERATOR_NAMESPACE={namespace}", "WATCH_NAMESPACE=",
           f"DRIVER_MANAGER_IMAGE={inst.images(profile).driver_manager}",
           # Anything not on loopback goes to a dead proxy, like the cluster's own components.
           "HTTP_PROXY=http://127.0.0.1:1", "HTTPS_PROXY=http://127.0.0.1:1", "http_proxy=http://127.0.0.1:1",
           "https_proxy=http://127.0.0.1:1", "NO_PROXY=127.0.0.1,localhost", "no_proxy=127.0.0.1,localhost"]
    cmd = ["unshare", "--mount", "--propagation", "private", "sh", "-c", _SCRIPT, "sh", str(root), str(opt),
           str(hostetc), *env, str(binary), "--metrics-bind-address=0",
           f"--health-probe-bind-address=127.0.0.1:{port}", "--zap-time-encoding=rfc3339"]
    cluster.spawn(PROCESS, cmd)
    deadline = time.monotonic() + timeout
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    log = cluster.state_dir / f"{PROCESS}.log"
    while True:
        proc = cluster.process(PROCESS)
        if proc is not None and proc.popen is not None and proc.popen.poll() is not None:
            raise RealOperatorError(f"the real operator exited with code {proc.popen.returncode} at start: "
                                    f"{last_line(log)} (log: {log})")
        try:
            with opener.open(f"http://127.0.0.1:{port}/readyz", timeout=2) as resp:
                if resp.status == 200:
                    return port
        except (urllib.error.URLError, OSError):
            pass
        if time.monotonic() > deadline:
            raise RealOperatorError(f"the real operator was not ready within {timeout:.0f} s: {last_line(log)} "
                                    f"(log: {log})")
        time.sleep(0.2)


def start_operand_loop(cluster: Any, profile: Profile, namespace: str = NAMESPACE,
                       kubelet_events: bool = False) -> None:
    cmd = [sys.executable, "-m", "gpu_conformance.sim.operator.operand_loop", f"--kubeconfig={cluster.kubeconfig}",
           f"--namespace={namespace}", f"--profile={profile.name}", f"--logs-dir={cluster.logs_dir / 'pods'}",
           *(["--kubelet-events"] if kubelet_events else [])]
    proc = cluster.process(PROCESS)
    if proc is not None:
        cmd += [f"--operator-pid={proc.pid}", f"--operator-start-time={proc.start_time}"]
    cluster.spawn(OPERAND_LOOP, cmd)


def install_real(cluster: Any, profile: str | Profile = "v25.3", gpu_nodes: int = 3, cpu_nodes: int = 1,
                 namespace: str = NAMESPACE, timeout: float = 120.0, clusterpolicy: Obj | None = None,
                 kubelet_events: bool = False) -> Any:
    """Nodes, Helm-side objects, the real operator and a ClusterPolicy (`clusterpolicy`, else the chart's
    defaults); waits until the operator reports ready with every operand it enabled rolled out. Returns a
    SimInstall for faults. A given ClusterPolicy must switch the operands as the profile does (the operand side
    plays the node by the profile). kubelet_events: the operand side records kubelet's container events."""
    from gpu_conformance.sim.operator.reconcile import (
        Kube,
        SimInstall,
        container_logs,
        create_all,
        create_clusterpolicy,
        create_namespace_and_crds,
        node_object,
        wait_established,
    )

    p = get_profile(profile)
    if p.operator_version != operator_module.OPERATOR_VERSION:
        raise UsageError(f"--operator=real runs the real operator {operator_module.OPERATOR_VERSION} (the only one "
                         f"the Go module proxy serves); profile {p.name!r} is {p.operator_version}: use profile "
                         "'v25.3'")
    start = time.monotonic()
    deadline = start + timeout
    timings: dict[str, float] = {}
    kube = Kube(cluster.api_client())
    gpu_names = [f"gpu-node-{i}" for i in range(gpu_nodes)]
    cpu_names = [f"cpu-node-{i}" for i in range(cpu_nodes)]
    preview = inst.build(p, namespace, gpu_names, cpu_names)
    for container, text in container_logs(p, preview).items():
        cluster.write_container_log(container, text)
    version = create_namespace_and_crds(kube, preview)
    nodes = []
    for plan in preview.nodes:
        # Only NFD's labels: gpu.present, the deploy labels and mig.config are the operator's to write.
        bare = inst.NodePlan(name=plan.name, gpu=plan.gpu, hardware=plan.hardware,
                             labels=inst.nfd_labels(p, plan.gpu), annotations={})
        nodes.append(node_object(bare, p, version))
    create_all(kube, nodes)
    create_all(kube, [o for o in preview.helm_objects if o["kind"] in ("ServiceAccount", "ConfigMap")])
    create_all(kube, [o for o in preview.helm_objects if o["kind"] not in ("ServiceAccount", "ConfigMap")])
    wait_established(kube, preview.crds, deadline)
    timings["objects"] = round(time.monotonic() - start, 2)
    launch(cluster, p, namespace)
    timings["operator-ready"] = round(time.monotonic() - start, 2)
    start_operand_loop(cluster, p, namespace, kubelet_events=kubelet_events)
    cp_obj = clusterpolicy if clusterpolicy is not None else clusterpolicy_from_module(p.operator_version)
    cp = create_clusterpolicy(kube, cp_obj, deadline)
    timings["clusterpolicy"] = round(time.monotonic() - start, 2)
    _wait_converged(kube, namespace, gpu_names, deadline, cp_obj.get("spec") or {})
    timings["ready"] = round(time.monotonic() - start, 2)
    manifests = inst.build(p, namespace, gpu_names, cpu_names, clusterpolicy_uid=cp["metadata"]["uid"])
    return SimInstall(client=kube.client, profile=p, namespace=namespace, gpu_nodes=gpu_names, cpu_nodes=cpu_names,
                      manifests=manifests, clusterpolicy_uid=cp["metadata"]["uid"],
                      log_writer=cluster.write_container_log, seconds=timings["ready"], timings=timings)


def _wait_converged(kube: Any, namespace: str, gpu_nodes: list[str], deadline: float, spec: Obj) -> None:
    """ClusterPolicy ready/Reconciled with every operand DaemonSet `spec` enables on every GPU node, GPUs
    advertised and a completed cuda validator per node (the real operator's first 'ready' comes before its
    DaemonSets do)."""
    from gpu_conformance.sim.operator.status import daemonsets_settled

    def pending() -> list[str]:
        out: list[str] = []
        cp = kube.get("ClusterPolicy", inst.CLUSTERPOLICY_NAME).get("status") or {}
        ready = next((c for c in cp.get("conditions") or [] if c.get("type") == "Ready"), {})
        if cp.get("state") != "ready":
            out.append(f"ClusterPolicy {cp.get('state') or 'without status'}")
        elif ready.get("status") != "True":
            # state stays "ready" while Ready=False/OperandNotReady names a state that was still rolling
            # out at its last reconcile (e.g. mig-manager, whose pod passes toolkit-validation last): wait
            # for the operator's next reconcile, or a fault that stops it freezes that status.
            out.append(f"ClusterPolicy Ready={ready.get('status')} ({ready.get('reason', '')})")
        dss = {d["metadata"]["name"]: d for d in kube.list("DaemonSet", namespace)}
        for name in [o.daemonset for o in (op.DRIVER, op.TOOLKIT, op.VALIDATOR, op.DEVICE_PLUGIN, op.GFD)
                     if op.operand_enabled(o, spec)]:
            st = (dss.get(name) or {}).get("status") or {}
            if st.get("numberAvailable", 0) != len(gpu_nodes) or st.get("desiredNumberScheduled") != len(gpu_nodes):
                out.append(f"DaemonSet {name}")
        nodes = {n["metadata"]["name"]: n for n in kube.list("Node")}
        out += [f"GPUs on {n}" for n in gpu_nodes
                if not any(k.startswith("nvidia.com/") for k in (nodes[n]["status"].get("allocatable") or {}))]
        done = {p["spec"].get("nodeName") for p in kube.list("Pod", namespace,
                                                             label_selector=f"app={op.CUDA_VALIDATOR_APP}")
                if (p.get("status") or {}).get("phase") == "Succeeded"}
        out += [f"cuda validator on {n}" for n in gpu_nodes if n not in done]
        # MIG-capable GPUs: GFD's labels make the operator deploy mig-manager, which reports its state.
        out += [f"mig-manager on {n}" for n in gpu_nodes if nodes[n]["metadata"]["labels"].get(
            "nvidia.com/mig.capable") == "true" and "nvidia.com/mig.config.state" not in nodes[n]["metadata"]["labels"]]
        out += [f"DaemonSet {name}" for name, d in dss.items() if (d.get("status") or {}).get(
            "numberAvailable", 0) != (d.get("status") or {}).get("desiredNumberScheduled", 0)]
        if not out and not daemonsets_settled(kube, namespace):
            out.append("DaemonSet status catching up")
        return out

    while True:
        left = pending()
        if not left:
            return
        if time.monotonic() > deadline:
            raise RealOperatorError("the real operator did not converge in time; still waiting for: "
                                    + ", ".join(left[:8]))
        time.sleep(0.3)
