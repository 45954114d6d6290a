"""`--cluster=kind`: a kind cluster (Docker) with the fake-GPU stack on its workers, started for the run.

The node image is built offline here unless GPU_CONFORMANCE_KIND_IMAGE names one.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpu_conformance.targets.provider import BootedTarget


@dataclass(frozen=True)
class KindOptions:
    """None yet: a `--kind-<flag>` option is one `option()` field here, read in `KindTarget.start`."""


class KindTarget(BootedTarget):
    name = "kind"
    summary = "a kind cluster with fake GPUs; needs Docker"
    options_type = KindOptions

    def start(self) -> None:
        from gpu_conformance.sim.kind.cluster import KindCluster

        self.cluster = KindCluster().start()
