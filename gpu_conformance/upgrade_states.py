"""The driver upgrade controller's node states (label nvidia.com/gpu-driver-upgrade-state) and what each holds.

Every value the upgrade state machine of k8s-operator-libs (pkg/upgrade, vendored in the operator) writes at the
revisions the operator pins from v22.9.2 to v26.7.0: the same eleven from the start, and two more of the
NodeMaintenance requestor mode from v25.10.0. What a state holds is what the state machine does on its way
through it (common_manager.go): cordon, wait for jobs, delete GPU pods, drain, restart the driver pod, wait for
the validator, uncordon. A node in one of those steps is paused, not broken, as long as its components are
healthy; `upgrade-failed` is a failure; `upgrade-required` is pending (the old driver still serves the node).
"""

from __future__ import annotations

from dataclasses import dataclass

UPGRADE_STATE_LABEL = "nvidia.com/gpu-driver-upgrade-state"
# An admin opts a node out of automatic upgrades; v26.7's ClusterPolicy status skips such nodes too.
UPGRADE_SKIP_LABEL = "nvidia.com/gpu-driver-upgrade.skip"
# v26.7.0: the NVIDIADriver CR a node belongs to (the ClusterPolicy's rollout status counts only these nodes).
DRIVER_OWNER_LABEL = "nvidia.com/gpu-operator.driver.owner"
# ProcessPodRestartNodes moves a node to upgrade-failed once a driver pod container that is not Ready has
# restarted more than this many times (isDriverPodFailing); below it the controller still waits.
DRIVER_POD_FAILING_RESTARTS = 10
# validation-required gives the validator this long (validationTimeoutSeconds) before upgrade-failed.
VALIDATION_TIMEOUT_SECONDS = 600

DONE = "upgrade-done"
FAILED = "upgrade-failed"
PENDING = "upgrade-required"
POD_RESTART = "pod-restart-required"
VALIDATION = "validation-required"


@dataclass(frozen=True)
class UpgradeState:
    value: str
    # What the node is going through, in words ('draining GPU pods').
    doing: str
    # The controller has cordoned the node in this step (from cordon-required until uncordon).
    cordoned: bool = False
    # A step in progress: the node is paused (INCOMPLETE while its components are healthy).
    in_progress: bool = False
    # The first operator release whose vendored state machine writes it.
    first: str = "v22.9.2"


STATES: dict[str, UpgradeState] = {s.value: s for s in (
    UpgradeState("", "not yet processed by the upgrade controller"),
    UpgradeState(PENDING, "driver upgrade pending: the node still runs its old driver and waits for an upgrade "
                 "slot (maxParallelUpgrades)"),
    UpgradeState("cordon-required", "driver upgrade starting: the node is about to be cordoned", in_progress=True),
    UpgradeState("wait-for-jobs-required", "driver upgrade: cordoned, waiting for GPU jobs to complete",
                 cordoned=True, in_progress=True),
    UpgradeState("pod-deletion-required", "driver upgrade: cordoned, deleting the pods that use GPUs",
                 cordoned=True, in_progress=True),
    UpgradeState("drain-required", "driver upgrade: cordoned, draining the node", cordoned=True, in_progress=True),
    UpgradeState("node-maintenance-required", "driver upgrade: a NodeMaintenance request cordons and drains the "
                 "node", cordoned=True, in_progress=True, first="v25.10.0"),
    UpgradeState("post-maintenance-required", "driver upgrade: after the NodeMaintenance drain, restarting the "
                 "driver", cordoned=True, in_progress=True, first="v25.10.0"),
    UpgradeState(POD_RESTART, "driver upgrade: the driver pod is being replaced by the new version",
                 cordoned=True, in_progress=True),
    UpgradeState(VALIDATION, "driver upgrade: new driver running, waiting for the validator (at most "
                 f"{VALIDATION_TIMEOUT_SECONDS} s)", cordoned=True, in_progress=True),
    UpgradeState("uncordon-required", "driver upgrade: validated, about to uncordon", cordoned=True,
                 in_progress=True),
    UpgradeState(DONE, "driver upgrade done"),
    UpgradeState(FAILED, "driver upgrade failed: the node stays cordoned until its driver pod is in sync with its "
                 "DaemonSet and Ready", cordoned=True),
)}


def upgrade_state(labels: dict[str, str]) -> str | None:
    """The node's upgrade state label value; None when the node has none."""
    return labels.get(UPGRADE_STATE_LABEL)


def known(value: str) -> bool:
    return value in STATES


def in_progress(value: str | None) -> bool:
    return value is not None and value in STATES and STATES[value].in_progress


def rollout_incomplete(value: str | None) -> bool:
    """v26.7.0 isIncompleteDriverUpgradeState: every state but upgrade-done and unset keeps the rollout open."""
    return value not in (None, "", DONE)
