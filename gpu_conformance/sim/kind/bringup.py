"""The simulated cluster's bring-up held to the kind tier's: the same real operator and ClusterPolicy on both.

`sim_bringup` boots a simulated cluster, starts recording (sim/services/bringup_trace.py's poller, the kind
recorder's format), installs the real GPU Operator v25.3.4 with the kind tier's CDI-path ClusterPolicy
(operator.clusterpolicy("cdi"); profile kind-cdi plays the nodes the same way: host driver, toolkit on) and records
until it converged. tests/test_bringup_order.py compares that trace with the kind recordings in tests/data/bringup/.

ALLOWED_DIFFERENCES is the one list of the differences the comparison accepts, each with its reason: the kind tier's
own artefacts, and what the simulated cluster does differently on purpose.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from gpu_conformance.sim.kind import operator as kindop
from gpu_conformance.sim.services.bringup_order import Allowed
from gpu_conformance.sim.services.bringup_trace import Trace, kube_lister, trace_of

PROFILE = "kind-cdi"
# The kind tier's recorder polls every 2 s; the simulated bring-up is faster, so it is looked at more often.
SIM_POLL_INTERVAL = 0.5

ALLOWED_DIFFERENCES: tuple[Allowed, ...] = (
    Allowed(r"^event not in the reference: Service gpu-operator: ClusterIPNotAllocated: ",
            "the simulated control plane's API server repairs the cluster IP of the Service the sim's Helm-side "
            "objects include (its allocator's sweep runs after the Service was written); the kind tier's Helm-side "
            "objects have no Service"),
    Allowed(r"^event not in the reference: Pod gpu-operator: FailedScheduling: .* untolerated taint",
            "the simulated cluster writes the Helm-side objects in the same instant as its nodes, and the scheduler "
            "may try the operator's pod before kwok cleared the nodes' not-ready taint; the kind tier installs the "
            "operator once its nodes are Ready"),
    Allowed(r"^event missing: Lease \S+: LeaderElection: ",
            "the simulated cluster runs the operator process without the chart's --leader-elect: OperatorPause "
            "(operand_loop.py) SIGSTOPs it while its Deployment is unavailable, and a leader whose lease ran out "
            "meanwhile exits on SIGCONT (controller-runtime: leader election lost), so the sim would lose its operator "
            "after every such fault"),
)


def sim_bringup(gpu_nodes: int = 2, cpu_nodes: int = 1, timeout: float = 180.0,
                state_dir: Path | None = None, raw: Path | None = None) -> Trace:
    """Boot, record, install the real operator with the kind tier's ClusterPolicy until converged, stop; `raw`:
    where the polls go as well (the kind recorder's format, one JSON line each)."""
    from gpu_conformance.sim.builds.binaries import ensure_binaries
    from gpu_conformance.sim.controlplane.cluster import SimCluster
    from gpu_conformance.sim.operator.real_operator import NAMESPACE, install_real
    from gpu_conformance.sim.operator.reconcile import LOG_CONTAINERS
    from gpu_conformance.sim.services.bringup_trace import Poller
    from gpu_conformance.sim.services.kube_client import Kube

    cp = kindop.clusterpolicy("cdi")
    with SimCluster(state_dir=state_dir, bin_dir=ensure_binaries(), log_containers=LOG_CONTAINERS) as cluster:
        poller = Poller(kube_lister(Kube(cluster.api_client()), NAMESPACE), interval=SIM_POLL_INTERVAL).start()
        try:
            install_real(cluster, PROFILE, gpu_nodes=gpu_nodes, cpu_nodes=cpu_nodes, timeout=timeout,
                         clusterpolicy=cp, kubelet_events=True)
            time.sleep(2 * SIM_POLL_INTERVAL)  # the events of the last moments are part of the bring-up
        finally:
            polls = poller.stop()
    if raw is not None:
        raw.write_text("".join(json.dumps(p) + "\n" for p in polls))
    return trace_of(polls, source=f"simulated cluster, real operator, profile {PROFILE}")
