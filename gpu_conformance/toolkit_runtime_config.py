"""Which containerd configs a container-toolkit release can edit, and what its refusal to edit one means.

From NVIDIA/nvidia-container-toolkit at the release tags: the toolkit's containerd config engine
(internal/config/engine/containerd, later pkg/config/engine/containerd) of v1.13.0 .. v1.17.3 knows config
version 1 and 2 only and returns "unsupported config version: N" for anything else; v1.17.4 added version 3
(CHANGELOG "Add support for containerd version 3 config"), and from then on no release refuses a version. containerd
2.x writes version 3 (`containerd config dump`), so an older toolkit image - a pinned `toolkit.version`, an old
chart's default - cannot configure a node that moved to containerd 2, whatever the operator release. The image is
the cause, not the node.
"""

from __future__ import annotations

import re

from gpu_conformance import versions
from gpu_conformance.facts import image_tag

# The first toolkit release whose containerd engine reads a version 3 config.
CONTAINERD_V3_SINCE: versions.Version = (1, 17, 4)
_UNSUPPORTED = re.compile(r"unsupported config version: (\d+)")


def config_version_refusal(log: str, image: str) -> str | None:
    """What the toolkit's "unsupported config version: N" means for this toolkit image (None when the log has none).

    The meaning names the image and the release that reads the node's config when the image predates it; with an
    image that cannot be dated it still names the version the node's containerd writes.
    """
    found = _UNSUPPORTED.findall(log)
    if not found:
        return None
    config_version = int(found[-1])
    tag = image_tag(image)
    release = versions.parse(tag)
    said = f"the node's containerd writes config version {config_version}"
    if config_version >= 3 and release is not None and release < CONTAINERD_V3_SINCE:
        return (f"toolkit image {tag} cannot edit this node's containerd config: {said} (containerd 2.x), which "
                f"the toolkit reads only from {versions.text(CONTAINERD_V3_SINCE)} — the toolkit image predates the "
                f"node's containerd (an image pinned in toolkit.version or an old chart's default)")
    return (f"the toolkit ({tag or image or 'image unknown'}) cannot edit this node's containerd config: {said}, "
            "which this toolkit release does not read")
