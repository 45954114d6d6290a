"""`--cluster` / `--cluster=current`: the cluster the user's kubeconfig (or the pod's service account) points at."""

from __future__ import annotations

from gpu_conformance.targets.provider import Endpoint, Target


class CurrentTarget(Target):
    name = "current"
    summary = "the kubeconfig's current context"

    def start(self) -> None:
        """An existing cluster: nothing to bring up."""

    def connect(self) -> Endpoint:
        return Endpoint(self.settings.kubeconfig, self.settings.context)

    def stop(self) -> None:
        """Nothing was started."""
