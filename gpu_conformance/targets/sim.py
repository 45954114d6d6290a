"""`--cluster=sim`: the built-in simulated GPU cluster, booted for the run and stopped after it.

`SimOptions` are also the arguments of `gpu-conformance sim up` (without the `sim-` prefix).
"""

from __future__ import annotations

from dataclasses import dataclass

from gpu_conformance.targets.provider import BootedTarget, option


@dataclass(frozen=True)
class SimOptions:
    # The help texts serve both `pytest --cluster=sim --sim-<flag>` and `gpu-conformance sim up --<flag>`.
    profile: str = option("default", "profile of the simulated cluster (gpu-conformance sim profiles)")
    gpu_nodes: int = option(3, "GPU nodes of the simulated cluster")
    cpu_nodes: int = option(1, "CPU-only nodes of the simulated cluster")
    faults: list[str] = option([], "fault to inject into the simulated cluster (repeatable; gpu-conformance sim "
                                   "faults)", flag="fault")
    operator: str = option("sim", "its operator: the hand-written one (sim, every profile) or the real GPU Operator "
                                  "v25.3.4 binary built from its Go module (real: profile v25.3; needs root for a "
                                  "mount namespace)", choices=("sim", "real"))


class SimTarget(BootedTarget):
    name = "sim"
    summary = "built-in simulated GPU cluster"
    options_type = SimOptions

    def start(self) -> None:
        # Imported here: only a run on the simulated cluster loads the test bed.
        from gpu_conformance.sim.session import start_sim

        o: SimOptions = self.options
        # A BootedSim: tests reach the simulated cluster through it.
        self.cluster = start_sim(profile=o.profile, gpu_nodes=o.gpu_nodes, cpu_nodes=o.cpu_nodes,
                                 faults=list(o.faults), operator=o.operator)
