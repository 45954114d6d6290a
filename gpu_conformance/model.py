"""The vocabulary every part of the suite shares: layers, statuses, findings and check definitions."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gpu_conformance.check_input import CheckInput


class Layer(StrEnum):
    """The layers in the order a GPU reaches a pod; the first failing one is a node's root cause."""

    OPERATOR = "operator"
    NFD = "nfd"
    DEPLOY_LABELS = "deploy-labels"
    DRIVER_TOOLKIT = "driver-toolkit"
    DEVICE_PLUGIN = "device-plugin"
    PROBE = "probe"

    @property
    def index(self) -> int:
        return LAYER_ORDER.index(self)


LAYER_ORDER: list[Layer] = list(Layer)


class Status(StrEnum):
    PASS = "pass"
    FAIL = "fail"
    # Something a person should know (an opt-out, a transient upgrade) that is not a break.
    WARN = "warn"
    # The check does not apply to this cluster or node (e.g. no driver pod in host-driver mode).
    NA = "n/a"
    # An earlier layer failed for this node, so this result would only repeat that failure.
    BLOCKED = "blocked"


# Worst first: how a set of statuses folds into one for a layer or a check.
STATUS_SEVERITY: dict[Status, int] = {
    Status.FAIL: 4,
    Status.BLOCKED: 3,
    Status.WARN: 2,
    Status.PASS: 1,
    Status.NA: 0,
}


def worst(statuses: list[Status] | set[Status]) -> Status:
    if not statuses:
        return Status.NA
    return max(statuses, key=lambda s: STATUS_SEVERITY[s])


@dataclass(frozen=True)
class Finding:
    """One observation by one check, about one node or (node=None) the whole cluster.

    Check functions leave `check_id` empty: the registry owns the ID and fills it in (Check.run), so a check body
    cannot report under another check's ID.
    """

    status: Status
    message: str
    node: str | None = None
    # Object and field, observed and expected: what a person needs to believe the message.
    evidence: dict[str, Any] = field(default_factory=dict)
    # Overrides of the catalogue's generic hint/command when the check knows better (e.g. a pod name).
    hint: str = ""
    kubectl: str = ""
    check_id: str = ""
    # A cluster-wide FAIL stops every node's later layers unless it is a symptom the per-node layers explain
    # (e.g. ClusterPolicy notReady because one node's driver crash-loops).
    blocking: bool = True
    # Checks whose failure explains this one, following the operator's own dependencies rather than the suite's
    # layer order (the operator deploys nothing while no node carries NFD's GPU label: NFD explains the missing
    # DaemonSets). Where one of them fails (on this node, or cluster-wide), it is the root cause and this finding
    # is reported as its consequence.
    explained_by: tuple[str, ...] = ()
    # Overrides the check's gpu_path for this finding (one check may judge operands on and off the GPU path).
    gpu_path: bool | None = None

    def __post_init__(self) -> None:
        # Positional arguments from before check_id moved last would shift silently; refuse them loudly.
        if not isinstance(self.status, Status):
            raise TypeError(f"Finding.status must be a Status, got {self.status!r}")

    def to_dict(self) -> dict[str, Any]:
        return {
            "check_id": self.check_id,
            "status": str(self.status),
            "message": self.message,
            "node": self.node,
            "evidence": self.evidence,
            "hint": self.hint,
            "kubectl": self.kubectl,
            "blocking": self.blocking,
            "explained_by": list(self.explained_by),
        }


# A check reads one explicit input (check_input.CheckInput: snapshot, facts, probe observations, settings).
CheckFunc = Callable[["CheckInput"], list[Finding]]


@dataclass(frozen=True)
class Check:
    """A catalogue entry: stable id, the layer it belongs to, and the pure function that runs it."""

    id: str
    layer: Layer
    title: str
    hint: str
    kubectl: str
    func: CheckFunc | None = None
    # What the check exists to catch, in one line (README table, report).
    detects: str = ""
    # Order inside its layer: lower first. A check that explains the others' symptoms (the runtime refusing to
    # create pods) goes before them, so the root cause names it.
    rank: int = 0
    # A node-level precondition (node health): its failure is the node's root cause whatever layer the other
    # failing checks belong to, because they are all consequences of it.
    gate: bool = False
    # Whether what it judges lies on the path a pod's GPU takes. An off-path failure (DCGM, its exporter, the node
    # status exporter) fails its check and the run, but blocks no later layer, and is a node's root cause only
    # when nothing on the GPU path fails there.
    gpu_path: bool = True
    # The GPU resource models (resource_model.py values) the check does not apply to: it reports n/a there.
    na_in: tuple[str, ...] = ()

    def on_gpu_path(self, finding: Finding) -> bool:
        return self.gpu_path if finding.gpu_path is None else finding.gpu_path

    def run(self, inp: CheckInput) -> list[Finding]:
        if self.func is None:
            raise RuntimeError(f"{self.id} has no function (a catalogue entry built by hand, e.g. in a test)")
        namespace = inp.settings.operator_namespace or "gpu-operator"
        return [self._complete(f, namespace) for f in self.func(inp)]

    def _complete(self, finding: Finding, namespace: str) -> Finding:
        hint = finding.hint or self.hint
        kubectl = finding.kubectl or self.render_kubectl(namespace, finding.node)
        if finding.check_id not in ("", self.id):
            raise RuntimeError(f"{self.id} returned a finding of {finding.check_id}")
        return replace(finding, check_id=self.id, hint=hint, kubectl=kubectl)

    def render_kubectl(self, namespace: str, node: str | None) -> str:
        # Plain replacement, not str.format: commands carry jsonpath braces of their own.
        return self.kubectl.replace("{ns}", namespace).replace("{node}", node or "<node>")
