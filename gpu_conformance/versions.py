"""Version rules of the GPU Operator, as data: what changed in which release (kube-bench keeps its mappings so too).

Checks, the probe, the report and the simulated operator ask `since(RULE, version)`; none writes a version
number of its own. An unknown version answers None, and a caller then accepts what every supported version does.
Sources: the operator's source per release (../shared/docs/gpu-operator-facts.md, research/realism-audit.md).
"""

from __future__ import annotations

Version = tuple[int, int, int]

# The oldest release the suite knows: status shapes and labels before it differ too much to judge.
OLDEST_SUPPORTED: Version = (22, 9, 0)

# ClusterPolicy status has conditions (Ready / Error with reasons) from here; before it only status.state.
STATUS_CONDITIONS = "status-conditions"
# spec.cdi.enabled defaults to true (kubebuilder default, Helm cdi.enabled) and the device plugin hands out
# CDI devices with DEVICE_LIST_STRATEGY=cdi-annotations,cdi-cri; before, false and envvar.
CDI_DEFAULT_ON = "cdi-default-on"
# The validator runs from the operator image (no separate gpu-operator-validator image).
VALIDATOR_IN_OPERATOR_IMAGE = "validator-in-operator-image"
# The operator adds nvidia.com/gpu.deploy.client to GPU nodes.
CLIENT_DEPLOY_LABEL = "client-deploy-label"
# "ClusterPolicy is not ready; states not ready: [...]" (semicolon) instead of ", states not ready".
NOT_READY_SEMICOLON = "not-ready-message-semicolon"

RULES: dict[str, Version] = {
    STATUS_CONDITIONS: (23, 9, 0),
    CDI_DEFAULT_ON: (25, 10, 0),
    VALIDATOR_IN_OPERATOR_IMAGE: (25, 10, 0),
    NOT_READY_SEMICOLON: (25, 10, 0),
    CLIENT_DEPLOY_LABEL: (26, 7, 0),
}


def parse(tag: str | None) -> Version | None:
    """'v26.3.3' / '26.3.3' / 'gpu-operator-v25.3.4' -> (26, 3, 3); None for anything that is not a release."""
    if not tag:
        return None
    t = tag.rsplit("-v", 1)[-1] if "-v" in tag else tag
    t = t.lstrip("v").split("-")[0].split("+")[0]
    parts = t.split(".")
    if len(parts) < 2 or not all(p.isdigit() for p in parts[:3]):
        return None
    nums = [int(p) for p in parts[:3]] + [0] * (3 - len(parts[:3]))
    # Image tags like 'latest' fail above; a bare '1.2' of an unrelated scheme is not an operator release.
    if nums[0] < 1:
        return None
    return (nums[0], nums[1], nums[2])


def since(rule: str, version: Version | None) -> bool | None:
    """Whether `rule` holds for `version`; None when the version is unknown."""
    if version is None:
        return None
    return version >= RULES[rule]


def text(version: Version | None) -> str:
    return "v{}.{}.{}".format(*version) if version else "unknown"
