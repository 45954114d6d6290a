"""Helm default image tags of each GPU Operator release, and the image references an install runs.

The table is data, `gpu_conformance/data/helm-defaults.yaml`, with its sources: deployments/gpu-operator/values.yaml
(and the NFD sub-chart version in Chart.yaml) at each tag of NVIDIA/gpu-operator. A tag that is no row of the
table takes the defaults of its nearest release: the same minor's latest release not newer than it, else that
minor's first release, else the nearest older one.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

import yaml

from gpu_conformance.versions import Version, parse_or_newest


@dataclass(frozen=True)
class ComponentVersions:
    """Helm default image tags of one GPU Operator release (facts §0 table)."""

    operator: str
    driver: str
    driver_manager: str
    toolkit: str
    device_plugin: str  # also the GFD image from v24.3 (GFD moved into k8s-device-plugin with v0.15)
    dcgm_exporter: str
    dcgm: str
    mig_manager: str
    nfd: str  # NFD sub-chart version, also its image tag
    # The validator image moved into the operator image in v25.10.
    validator_repository: str
    validator_image: str
    gds: str = ""  # nvidia-fs image tag (gds.version), used only when gds.enabled
    dra_driver: str = ""  # draDriver.version (dra-driver-nvidia-gpu image), from v26.7.0
    gfd: str = ""  # before v24.3 GFD shipped as its own image, nvcr.io/nvidia/gpu-feature-discovery:<gfd>

    @property
    def version(self) -> Version:
        return parse_or_newest(self.operator)


HELM_DEFAULTS = Path(__file__).resolve().parent.parent / "data" / "helm-defaults.yaml"


def _load(path: Path) -> dict[str, ComponentVersions]:
    return {tag: ComponentVersions(operator=tag, **row) for tag, row in yaml.safe_load(path.read_text()).items()}


# Release tag -> its Helm defaults, oldest first.
COMPONENTS: dict[str, ComponentVersions] = _load(HELM_DEFAULTS)


def components_for(tag: str) -> ComponentVersions:
    """The defaults of release `tag`; for a tag not in the table, those of its nearest release (module doc),
    with the operator's own tag kept."""
    if tag in COMPONENTS:
        return COMPONENTS[tag]
    v = parse_or_newest(tag)
    known = sorted(COMPONENTS.values(), key=lambda c: c.version)
    same_minor = [c for c in known if c.version[:2] == v[:2]]
    nearest = ([c for c in same_minor if c.version <= v] or same_minor[:1]
               or [c for c in known if c.version <= v] or known[:1])[-1]
    return replace(nearest, operator=tag)


@dataclass(frozen=True)
class Images:
    """The image references one install runs."""

    operator: str
    validator: str
    driver: str
    driver_manager: str
    toolkit: str
    device_plugin: str
    gfd: str
    dcgm_exporter: str
    dcgm: str
    mig_manager: str
    nfd: str


def images(c: ComponentVersions, os_tag: str) -> Images:
    """Image references of the release's components; os_tag is the node OS the operator appends to the driver
    tag (e.g. 580.126.20-ubuntu22.04)."""
    nfd_tag = c.nfd if c.nfd.startswith("v") else "v" + c.nfd
    return Images(
        operator=f"nvcr.io/nvidia/gpu-operator:{c.operator}",
        validator=f"{c.validator_repository}/{c.validator_image}:{c.operator}",
        driver=f"nvcr.io/nvidia/driver:{c.driver}-{os_tag}",
        driver_manager=f"nvcr.io/nvidia/cloud-native/k8s-driver-manager:{c.driver_manager}",
        toolkit=f"nvcr.io/nvidia/k8s/container-toolkit:{c.toolkit}",
        device_plugin=f"nvcr.io/nvidia/k8s-device-plugin:{c.device_plugin}",
        gfd=(f"nvcr.io/nvidia/gpu-feature-discovery:{c.gfd}" if c.gfd
             else f"nvcr.io/nvidia/k8s-device-plugin:{c.device_plugin}"),
        dcgm_exporter=f"nvcr.io/nvidia/k8s/dcgm-exporter:{c.dcgm_exporter}",
        dcgm=f"nvcr.io/nvidia/cloud-native/dcgm:{c.dcgm}",
        mig_manager=f"nvcr.io/nvidia/cloud-native/k8s-mig-manager:{c.mig_manager}",
        nfd=f"registry.k8s.io/nfd/node-feature-discovery:{nfd_tag}",
    )
