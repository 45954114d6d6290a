"""What every check is given: one explicit, frozen input, built the same way by the session and the tests.

A check sees the cluster as read (the snapshot: raw objects), what the run derived from it once (facts.py: operator
version, resource model, each operand's pods, each node's driver mode, the DRA view), what the probe saw (None until
the probe ran) and the settings. Nothing is cached on the snapshot: a fact has one home, this input's `facts`, so a
check, the report header and the reports cannot work it out differently.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from gpu_conformance import operands as ops
from gpu_conformance.cluster.snapshot import ClusterSnapshot
from gpu_conformance.facts import ClusterFacts, DriverMode, build_facts, driver_mode
from gpu_conformance.probe.observations import ProbeObservations
from gpu_conformance.settings import Settings

Obj = dict[str, Any]


@dataclass(frozen=True)
class CheckInput:
    snapshot: ClusterSnapshot
    facts: ClusterFacts
    settings: Settings
    # What the probe captured; None while no probe ran (the probe layer's checks then say nothing).
    probe: ProbeObservations | None = None

    def with_probe(self, probe: ProbeObservations) -> CheckInput:
        """The same read and facts, with the probe's observations: the probe layer is judged after the others."""
        return replace(self, probe=probe)

    # The questions nearly every check asks, answered from the facts (shorthands, not another cache).
    def operand_pod(self, operand: ops.Operand, node: str) -> Obj | None:
        return self.facts.operands.pod(operand, node)

    def operand_pods(self, operand: ops.Operand) -> list[Obj]:
        return self.facts.operands.pods(operand)

    def driver_mode(self, node: str) -> DriverMode:
        """The node's driver configuration as the facts hold it (every GPU node); worked out the same way for a node
        outside them (a node the GPU node selector leaves out), so DRV-001, DRV-002 and the header agree."""
        mode = self.facts.driver_modes.get(node)
        if mode is None:
            mode = driver_mode(self.snapshot, node, self.facts.operands, self.facts.resource_model)
        return mode


def check_input(snapshot: ClusterSnapshot, settings: Settings, probe: ProbeObservations | None = None) -> CheckInput:
    """The one way an input is built (the session once per run; tests/check_runner.py per call): facts included."""
    return CheckInput(snapshot, build_facts(snapshot), settings, probe)
