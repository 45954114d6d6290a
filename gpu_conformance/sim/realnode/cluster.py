"""The simulated control plane with real nodes joined to it (`sim up --real-nodes`, the tier's tests).

The real nodes carry no operand pods of the simulated operator (they are opted out with
nvidia.com/gpu.deploy.operands=false, see RealNode._label), so the suite's layer gate rightly stops before
the probe layer for them; the tier's tests run the suite's own Probe on them directly.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpu_conformance.sim.realnode.node import ControlPlane, RealNode, stop_work_dir


@dataclass
class RealCluster:
    sim: Any                                  # gpu_conformance.sim.session.BootedSim
    nodes: list[RealNode] = field(default_factory=list)
    seconds: dict[str, float] = field(default_factory=dict)

    @property
    def kubeconfig(self) -> Path:
        return Path(self.sim.kubeconfig)


def start_real_nodes(sim: Any, count: int, gpus: int = 2) -> list[RealNode]:
    # sim: a BootedSim whose cluster was started with no_proxy including REALNODE_CIDR.
    """Join `count` real nodes (real-gpu-node-<i>) to a running simulated cluster; all or none."""
    cp = ControlPlane.of(sim.cluster)
    nodes: list[RealNode] = []
    try:
        for i in range(count):
            nodes.append(RealNode(cp, name=f"real-gpu-node-{i}", gpus=gpus).start())
    except BaseException:
        for node in nodes:
            node.stop()
        raise
    return nodes


REAL_NODES_FILE = "realnodes.json"


def record_real_nodes(state_dir: Path, nodes: list[RealNode]) -> None:
    """Remember a detached cluster's real nodes in its state dir, for `sim down`."""
    (state_dir / REAL_NODES_FILE).write_text(json.dumps([str(n.work) for n in nodes]) + "\n")


def stop_recorded_real_nodes(state_dir: Path) -> int:
    """Stop the real nodes `sim up --real-nodes` recorded in state_dir (by PID); returns how many."""
    path = state_dir / REAL_NODES_FILE
    try:
        works = json.loads(path.read_text())
    except (OSError, ValueError):
        return 0
    for work in works:
        stop_work_dir(Path(work))
    path.unlink(missing_ok=True)
    return len(works)
