"""What `--cluster=TARGET` names, resolved in one table (testinfra's backends pattern).

Each target gives a kubeconfig to read and a way to stop whatever it started. `current` is the cluster the user's
kubeconfig points at; `sim` boots the built-in simulated cluster. New tiers (kind, a real node) add a row here and
nothing else in the product changes. This is the only product module that may import `gpu_conformance.sim`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from gpu_conformance.errors import UsageError
from gpu_conformance.settings import Settings


@dataclass
class Target:
    name: str
    kubeconfig: str | None
    context: str | None
    stop: Callable[[], None] = field(default=lambda: None)
    # What the target started (the simulated cluster), for tests that want to reach into it.
    handle: object | None = None


def _current(settings: Settings) -> Target:
    return Target("current", settings.kubeconfig, settings.context)


def _sim(settings: Settings) -> Target:
    from gpu_conformance.sim.session import boot_sim

    booted = boot_sim(settings)
    return Target("sim", str(booted.kubeconfig), None, booted.stop, booted)


def _kind(settings: Settings) -> Target:
    # A kind cluster (Docker; node image built offline here unless GPU_CONFORMANCE_KIND_IMAGE names one) with the
    # fake-GPU stack on its workers. The settings name no kubeconfig: the cluster's own is used.
    from gpu_conformance.sim.kind.cluster import KindCluster

    cluster = KindCluster().start()
    return Target("kind", str(cluster.kubeconfig), None, cluster.stop, cluster)


TARGETS: dict[str, Callable[[Settings], Target]] = {"current": _current, "sim": _sim, "kind": _kind}


def open_target(name: str, settings: Settings) -> Target:
    try:
        factory = TARGETS[name]
    except KeyError:
        raise UsageError(f"--cluster={name}: unknown target (choose one of {', '.join(TARGETS)})") from None
    return factory(settings)
