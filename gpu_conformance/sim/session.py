"""`--cluster=sim` and `gpu-conformance sim up`: boot the control plane, install the simulated operator, faults."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

from gpu_conformance.errors import UsageError


class BootedSim:
    """A running simulated GPU cluster: its kubeconfig, and how to stop it."""

    def __init__(self, cluster: Any, install: Any, boot_seconds: float, install_seconds: float) -> None:
        self.cluster = cluster
        self.install = install
        self.boot_seconds = boot_seconds
        self.install_seconds = install_seconds

    @property
    def kubeconfig(self) -> Path:
        return self.cluster.kubeconfig

    def stop(self) -> None:
        self.cluster.stop()

    def __enter__(self) -> BootedSim:
        return self

    def __exit__(self, *exc: object) -> None:
        # Whatever ended the block (a failed test, Ctrl-C), nothing of the cluster is left running.
        self.stop()


OPERATORS = ("sim", "real")


def start_sim(profile: str = "default", gpu_nodes: int = 3, cpu_nodes: int = 1, faults: list[str] | None = None,
              state_dir: Path | None = None, detach: bool = False, quiet: bool = False,
              operator: str = "sim") -> BootedSim:
    """Boot the control plane and install an operator: the hand-written one ("sim", every profile) or the
    real v25.3.4 binary ("real", profile v25.3; "default" means that one)."""
    from gpu_conformance.sim.builds.binaries import ensure_binaries
    from gpu_conformance.sim.controlplane.cluster import SimCluster
    from gpu_conformance.sim.operator import faults as fault_catalogue
    from gpu_conformance.sim.operator.reconcile import LOG_CONTAINERS, install
    from gpu_conformance.sim.operator.status import settle, start_status_loop
    from gpu_conformance.sim.profiles.catalogue import PROFILES
    from gpu_conformance.sim.services.kube_client import Kube

    if operator not in OPERATORS:
        raise UsageError(f"unknown operator {operator!r} (known: {', '.join(OPERATORS)})")
    if operator == "real" and profile == "default":
        profile = "v25.3"
    if profile not in PROFILES:
        raise UsageError(f"unknown sim profile {profile!r} (known: {', '.join(PROFILES)})")
    for f in faults or []:
        if f not in fault_catalogue.FAULTS:
            raise UsageError(f"unknown sim fault {f!r} (see: gpu-conformance sim faults)")
    if gpu_nodes < 0 or cpu_nodes < 0:
        raise UsageError("--sim-gpu-nodes/--sim-cpu-nodes must not be negative")
    bin_dir = ensure_binaries()
    t0 = time.monotonic()
    cluster = SimCluster(state_dir=state_dir, bin_dir=bin_dir, log_containers=LOG_CONTAINERS)
    if detach:
        cluster.start(detach=True)
    else:
        cluster.start()
    t1 = time.monotonic()
    try:
        if operator == "real":
            from gpu_conformance.sim.operator.real_operator import install_real

            inst = install_real(cluster, profile, gpu_nodes=gpu_nodes, cpu_nodes=cpu_nodes)
        else:
            inst = install(cluster.api_client(), profile, gpu_nodes=gpu_nodes, cpu_nodes=cpu_nodes,
                           log_writer=cluster.write_container_log)
        from gpu_conformance.sim.operator.operand_loop import wait_started
        from gpu_conformance.sim.operator.real_operator import OPERAND_LOOP, start_operand_loop

        if operator == "sim":
            # The operand side (kubelet and operand programs) is the same process for both operators.
            start_operand_loop(cluster, inst.profile, inst.namespace)
        # Faults change what the loop would otherwise do on its first round (e.g. advertise GPUs again).
        wait_started(Kube(cluster.api_client()), cluster.process(OPERAND_LOOP).pid)
        fault_catalogue.apply_all(inst, list(faults or []), cluster)
        if operator == "sim":
            # The hand-written operator keeps its ClusterPolicy status current, in a process of its own that
            # lives as long as the cluster (stopped with it), like the real operator's reconcile loop.
            start_status_loop(cluster, inst.namespace, inst.profile.operator_version)
        # Judge only once the operator has seen what the faults did (its next reconcile).
        settle(Kube(cluster.api_client()), inst.namespace, inst.profile.operator_version,
               write=operator == "sim")
    except BaseException:
        cluster.stop()  # a half-installed cluster is of no use, detached or not
        raise
    t2 = time.monotonic()
    booted = BootedSim(cluster, inst, t1 - t0, t2 - t1)
    if not quiet:
        who = "real operator v25.3.4" if operator == "real" else "operator"
        print(f"gpu-conformance: simulated cluster up in {t1 - t0:.1f}s, {who} profile {profile!r} installed "
              f"in {t2 - t1:.1f}s ({gpu_nodes} GPU + {cpu_nodes} CPU nodes"
              f"{', faults: ' + ', '.join(faults) if faults else ''})",
              file=sys.stderr)
    return booted

