"""One simulated cluster per profile, reused across the faults that can be undone (issue 24 item 3).

A fault marked `fresh` (its undo is not generic: what it sets going outlives any write-back) gets a cluster of
its own, booted with the fault as before. Every other fault is applied to the profile's running cluster, and
after the run `restore.undo` puts the cluster back to the objects captured right after its install; when the
undo does not get there (or the fault itself failed half-way), the cluster is stopped and the next fault boots
a fresh one, so one fault's leftovers never reach another's verdict.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

from gpu_conformance.sim.controlplane.restore import Capture, capture, undo
from gpu_conformance.sim.operator.faults import FAULTS, apply_all
from gpu_conformance.sim.operator.status import settle
from gpu_conformance.sim.services.kube_client import Kube
from gpu_conformance.sim.session import BootedSim, start_sim

PoolKey = tuple[str, int]  # (profile, GPU nodes)


@contextlib.contextmanager
def fresh_cluster(profile: str, faults: list[str], gpu_nodes: int = 3, operator: str = "sim") -> Iterator[BootedSim]:
    """A cluster of its own, booted with the faults and stopped on exit."""
    booted = start_sim(profile=profile, faults=faults, quiet=True, gpu_nodes=gpu_nodes, operator=operator)
    try:
        yield booted
    finally:
        booted.stop()


@dataclass
class _Pooled:
    booted: BootedSim
    baseline: Capture


@dataclass
class ClusterPool:
    """Running clusters by profile; `stats` counts boots, reuses and the reboots an undo forced (with why)."""

    clusters: dict[PoolKey, _Pooled] = field(default_factory=dict)
    boots: int = 0
    reuses: int = 0
    reboots: list[str] = field(default_factory=list)
    undo_seconds: list[float] = field(default_factory=list)

    @staticmethod
    def reusable(faults: list[str], operator: str = "sim") -> bool:
        # The real operator reconciles on its own schedule: no undo was measured against it.
        return operator == "sim" and not any(FAULTS[f].fresh for f in faults if f in FAULTS)

    @contextlib.contextmanager
    def cluster(self, profile: str, faults: list[str], gpu_nodes: int = 3,
                operator: str = "sim") -> Iterator[BootedSim]:
        """A cluster of the profile with the faults applied and settled, as `start_sim(faults=...)` gives."""
        if not self.reusable(faults, operator):
            self.boots += 1
            with fresh_cluster(profile, faults, gpu_nodes, operator) as booted:
                yield booted
            return
        key = (profile, gpu_nodes)
        pooled = self.clusters.get(key)
        if pooled is None:
            pooled = self._boot(key)
        else:
            self.reuses += 1
        booted = pooled.booted
        kube = Kube(booted.cluster.api_client())
        try:
            apply_all(booted.install, faults, booted.cluster)
            settle(kube, booted.install.namespace, booted.install.profile.operator_version)
        except BaseException:
            self._drop(key, f"{'+'.join(faults)}: the fault failed on the reused cluster")
            raise
        try:
            yield booted
        finally:
            t0 = time.monotonic()
            try:
                left = undo(kube, pooled.baseline, booted.cluster.logs_dir)
            except Exception as e:  # noqa: BLE001 — any failure to undo means: do not reuse this cluster
                left = [f"{type(e).__name__}: {e}"]
            self.undo_seconds.append(round(time.monotonic() - t0, 2))
            if left:
                # The first differences, and every refusal of the API server (they say why).
                why = left[:3] + [x for x in left[3:] if x[:3].isdigit()]
                self._drop(key, f"{'+'.join(faults)}: not undone ({'; '.join(why)})")

    def _boot(self, key: PoolKey) -> _Pooled:
        booted = start_sim(profile=key[0], gpu_nodes=key[1], quiet=True)
        self.boots += 1
        try:
            pooled = _Pooled(booted, capture(Kube(booted.cluster.api_client()), booted.cluster.logs_dir))
        except BaseException:
            booted.stop()
            raise
        self.clusters[key] = pooled
        return pooled

    def _drop(self, key: PoolKey, why: str) -> None:
        pooled = self.clusters.pop(key, None)
        if pooled is not None:
            self.reboots.append(why)
            pooled.booted.stop()

    def close(self) -> None:
        for key in list(self.clusters):
            self.clusters.pop(key).booted.stop()
