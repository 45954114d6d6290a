"""The driver-gone fault on both sides, recorded as a fault trace (sim/services/fault_trace.py): one GPU worker's
driver disappears and its validator and device plugin pods restart, as after a reboot.

On the kind tier (break_on_kind, mend_on_kind; tests/test_kind.py's driver-gone test plays the same) the fake
GPU table is moved away under the node's driver root, so the host's nvidia-smi fails; on the simulated cluster the
operand side is told the host's driver does not load (operand_loop.DRIVER_UNLOADABLE), which holds
driver-validation the same way (the validator's WITH_WAIT loop: its init container keeps running). The pods are
deleted on both alike. `record_kind` records one kind run (polls from a little before the fault until it is steady,
then the mend until the ClusterPolicy is ready again); `sim_driver_gone` plays it (and its mend) on the simulated
cluster with the real operator v25.3.4 and the kind tier's ClusterPolicy (as sim_bringup does) and returns its
polls. tests/test_fault_trace.py holds the simulated one to the kind traces in tests/data/faults/.

    python -m gpu_conformance.sim.kind.driver_gone record OUT.jsonl   # one kind run (~4 min, the kind tier)
    python -m gpu_conformance.sim.services.fault_trace derive OUT.json OUT.jsonl

ALLOWED_DIFFERENCES: the differences the comparison accepts, each with its reason.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gpu_conformance.errors import ConformanceError
from gpu_conformance.sim.kind import operator as kindop
from gpu_conformance.sim.kind.bringup import ALLOWED_DIFFERENCES as BRINGUP_ALLOWED
from gpu_conformance.sim.kind.bringup import PROFILE, SIM_POLL_INTERVAL
from gpu_conformance.sim.services.bringup_order import Allowed
from gpu_conformance.sim.services.bringup_trace import Obj, Poller, kube_lister, kubectl_lister
from gpu_conformance.sim.services.fault_trace import FAULT, MEND, settled

# The pods a reboot restarts on the broken node (the toolkit's keeps running: it is not restarted on kind either).
RESTARTED = ("nvidia-operator-validator", "nvidia-device-plugin-daemonset")
# A fault is steady when nothing changed for this long (the validator retries driver-validation every 5 s and the
# operator requeues a notReady ClusterPolicy every 5 s: neither shows as a change).
KIND_QUIET = 45.0
SIM_QUIET = 6.0

ALLOWED_DIFFERENCES: tuple[Allowed, ...] = (*BRINGUP_ALLOWED,)
# The mend's, beyond the fault's.
MEND_ALLOWED_DIFFERENCES: tuple[Allowed, ...] = (
    *ALLOWED_DIFFERENCES,
    Allowed(r"^milestone (missing|not in the reference) on \S+: (lost|back|kept) nvidia-cuda-validator/"
            r"(cuda-validation|succeeded)$",
            "the mended validator's cuda-validation deletes the node's old nvidia-cuda-validator pod and creates a "
            "new one (validator/main.go at v25.3.4); on kind the new pod takes 2-4 s to complete (its sandbox, "
            "vectorAdd), so the 2 s polls see the node without a completed one (lost, then back); the operand loop "
            "completes it within a round or two, well under the sim's 0.5 s poll, which may or may not catch the "
            "gap (kept). The replacement itself is still held to kind by the new pod's required events"),
)


def _steady(polls: list[Obj], since: float, quiet: float, state: str) -> bool:
    after = [p for p in polls if float(p["t"]) >= since]
    cps = [s or {} for s in (after[-1].get("clusterpolicy") or [])] if after else []
    return bool(cps) and cps[0].get("state") == state and settled(after, quiet)


def wait_steady(poller: Poller, since: float, quiet: float, state: str, timeout: float, period: float = 1.0) -> bool:
    """Until the polls since `since` show the ClusterPolicy in `state` and nothing new for `quiet` s (looked at
    every `period` s); False when `timeout` s passed first."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if _steady(list(poller.polls), since, quiet, state):
            return True
        time.sleep(period)
    return False


# ---- the kind tier --------------------------------------------------------------------------------------------------
def _gpu_table() -> str:
    from gpu_conformance.sim.fakegpu import stack as fakegpu

    return f"{kindop.DRIVER_ROOT}/{fakegpu.TABLE_FILE}"


def restart_operands_on_kind(cluster: Any, node: str) -> None:
    """The node's RESTARTED pods deleted, waiting until they are gone (as a reboot leaves the DaemonSets to
    create them again)."""
    for app in RESTARTED:
        cluster.kubectl("delete", "pods", "-n", kindop.NAMESPACE, "-l", f"app={app}", "--field-selector",
                        f"spec.nodeName={node}", "--wait")


def break_on_kind(cluster: Any, node: str) -> None:
    """The fault on a kind worker: its GPU table moved away under the driver root (nvidia-smi fails), its
    operands restarted."""
    cluster.docker.docker("exec", node, "mv", _gpu_table(), f"{_gpu_table()}.gone")
    restart_operands_on_kind(cluster, node)


def mend_on_kind(cluster: Any, node: str) -> None:
    """The table back (quietly, if it was never moved), the operands restarted."""
    cluster.docker.docker("exec", node, "mv", f"{_gpu_table()}.gone", _gpu_table(), check=False)
    restart_operands_on_kind(cluster, node)


def record_kind(out: Path, timeout: float = 300.0, log: Callable[[str], None] = print) -> None:
    """One kind CDI cluster: ready, the fault on its first GPU worker, steady, mended, ready again; every poll
    into `out` (one JSON line each) as it is taken. The cluster is stopped whatever happens."""
    from gpu_conformance.sim.kind.cluster import KindCluster

    cluster = KindCluster(gpu_path="cdi")
    with out.open("w") as f:
        def write(poll: Obj) -> None:
            f.write(json.dumps(poll) + "\n")
            f.flush()

        try:
            t0 = time.monotonic()
            cluster.start()
            assert cluster.docker is not None
            broken = sorted(cluster.gpu_nodes())[0]
            log(f"cluster ready in {time.monotonic() - t0:.0f} s; breaking {broken}")
            poller = Poller(kubectl_lister("kubectl", str(cluster.kubeconfig), kindop.NAMESPACE), sink=write).start()
            try:
                time.sleep(6.0)  # the ready state the fault breaks
                at = poller.mark(FAULT, node=broken)
                break_on_kind(cluster, broken)
                ok = wait_steady(poller, at, KIND_QUIET, "notReady", timeout)
                log(f"fault {'steady' if ok else 'NOT steady'} {poller.polls[-1]['t'] - at:.0f} s after it")
                at = poller.mark(MEND, node=broken)
                mend_on_kind(cluster, broken)
                ok = wait_steady(poller, at, 20.0, "ready", timeout)
                log(f"mend {'steady' if ok else 'NOT steady'} {poller.polls[-1]['t'] - at:.0f} s after it")
            finally:
                poller.stop()
        finally:
            cluster.stop()


# ---- the simulated cluster ------------------------------------------------------------------------------------------
def _sim_restart_operands(kube: Any, namespace: str, node: str, timeout: float = 30.0) -> None:
    """Delete the node's RESTARTED pods and wait until they are gone (kubectl delete --wait)."""
    uids = set()
    for app in RESTARTED:
        for p in kube.list("Pod", namespace, label_selector=f"app={app}"):
            if (p.get("spec") or {}).get("nodeName") == node:
                uids.add(p["metadata"]["uid"])
                kube.delete("Pod", p["metadata"]["name"], namespace)
    end = time.monotonic() + timeout
    while any(p["metadata"]["uid"] in uids for p in kube.list("Pod", namespace)):
        if time.monotonic() > end:
            raise RuntimeError(f"the restarted pods on {node} were not gone within {timeout:.0f} s")
        time.sleep(0.2)


def sim_driver_gone(gpu_nodes: int = 2, cpu_nodes: int = 1, timeout: float = 120.0, state_dir: Path | None = None,
                    mend: bool = True) -> list[Obj]:
    """Boot, install the real operator with the kind tier's ClusterPolicy until converged, break the first GPU
    node's driver as the kind recording does until steady, then (`mend`) mend it until ready and steady again;
    the polls, with the FAULT and MEND marks (fault_trace.fault_trace_of derives each part)."""
    from gpu_conformance.sim.builds.binaries import ensure_binaries
    from gpu_conformance.sim.controlplane.cluster import SimCluster
    from gpu_conformance.sim.operator import operand_loop as hosts
    from gpu_conformance.sim.operator.real_operator import NAMESPACE, install_real
    from gpu_conformance.sim.operator.reconcile import LOG_CONTAINERS
    from gpu_conformance.sim.services.kube_client import Kube

    cp = kindop.clusterpolicy("cdi")
    with SimCluster(state_dir=state_dir, bin_dir=ensure_binaries(), log_containers=LOG_CONTAINERS) as cluster:
        kube = Kube(cluster.api_client())
        sim = install_real(cluster, PROFILE, gpu_nodes=gpu_nodes, cpu_nodes=cpu_nodes, timeout=timeout,
                           clusterpolicy=cp, kubelet_events=True)
        broken = sim.gpu_nodes[0]
        poller = Poller(kube_lister(kube, NAMESPACE), interval=SIM_POLL_INTERVAL).start()
        try:
            time.sleep(2 * SIM_POLL_INTERVAL)  # the ready state the fault breaks
            at = poller.mark(FAULT, node=broken)
            hosts.set_host_fault(kube, broken, hosts.DRIVER_UNLOADABLE)
            _sim_restart_operands(kube, NAMESPACE, broken)
            if not wait_steady(poller, at, SIM_QUIET, "notReady", timeout):
                raise RuntimeError(f"the simulated driver-gone fault was not steady within {timeout:.0f} s")
            if mend:
                at = poller.mark(MEND, node=broken)
                hosts.set_host_fault(kube, broken, hosts.DRIVER_UNLOADABLE, present=False)
                _sim_restart_operands(kube, NAMESPACE, broken)
                if not wait_steady(poller, at, SIM_QUIET, "ready", timeout):
                    raise RuntimeError(f"the simulated driver-gone fault's mend was not steady within {timeout:.0f} s")
        finally:
            polls = poller.stop()
    return polls


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m gpu_conformance.sim.kind.driver_gone",
                                 description="Record the driver-gone fault on a kind CDI cluster (the kind tier).")
    sub = ap.add_subparsers(dest="cmd", required=True)
    rec = sub.add_parser("record", help="one kind run's polls, from before the fault to after its mend")
    rec.add_argument("out")
    a = ap.parse_args(argv)
    try:
        record_kind(Path(a.out), log=lambda s: print(f"driver_gone: {s}", flush=True))
    except (ConformanceError, OSError) as e:
        print(f"driver_gone: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
