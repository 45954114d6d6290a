"""NFD's PCI labels in the shapes the GPU Operator does not read.

nfd-worker labels a node `feature.node.kubernetes.io/pci-<fields>.present=true` per PCI device class it is told to
look at, <fields> being the values of its `sources.pci.deviceLabelFields` joined by '_' (class "0302", vendor
"10de", device, subsystem_vendor, subsystem_device; default class and vendor: pci-0302_10de). The operator finds
GPU nodes by exactly three of those shapes, the same in every release from v22.9.0 to v26.7.0 (state_manager.go
gpuNodeLabels: pci-10de, pci-0302_10de, pci-0300_10de). Any other field list (a device id added, as another GPU
vendor's operator recommends; the vendor left out) labels the same NVIDIA GPU in a shape the operator takes for
no GPU: on a node it had labelled it writes gpu.present=false and withdraws every operand, as for a GPU gone
from the PCI bus. Telling the two apart needs the label shapes, not the hardware.
"""

from __future__ import annotations

import re

from gpu_conformance.cluster.snapshot import NFD_GPU_LABELS

NVIDIA_VENDOR = "10de"
_PCI_LABEL = re.compile(r"^feature\.node\.kubernetes\.io/pci-([0-9a-f]{4}(?:_[0-9a-f]{4})*)\.present$")
# PCI base class 03 is a display controller (0300 VGA, 0302 3D): what an NVIDIA GPU reports.
_DISPLAY_CLASS = re.compile(r"^03[0-9a-f]{2}$")


def unread_pci_labels(labels: dict[str, str]) -> tuple[list[str], list[str]]:
    """NFD PCI labels (set to "true") the operator does not read: those naming the NVIDIA vendor id in another
    field list (pci-10de_2237, pci-0302_10de_2237), and display-class labels without any vendor id (pci-0302:
    NFD not told to label the vendor, so no label can say NVIDIA)."""
    nvidia, vendorless = [], []
    for key, value in sorted(labels.items()):
        m = _PCI_LABEL.match(key)
        if value != "true" or m is None or key in NFD_GPU_LABELS:
            continue
        fields = m.group(1).split("_")
        if NVIDIA_VENDOR in fields:
            nvidia.append(key)
        elif len(fields) == 1 and _DISPLAY_CLASS.match(fields[0]):
            vendorless.append(key)
    return nvidia, vendorless


def short(key: str) -> str:
    return key.split("/")[-1]


def explain(nvidia: list[str], vendorless: list[str]) -> str:
    """Why the operator does not see the node's GPU, in the labels' words ('' when no label says so)."""
    read = ", ".join(short(k) for k in NFD_GPU_LABELS)
    if nvidia:
        return (f"NFD still labels an NVIDIA PCI device here, as {', '.join(short(k) for k in nvidia)}, a shape the "
                f"operator does not read (it reads only {read}): NFD's sources.pci.deviceLabelFields were changed "
                "(e.g. 'device' added); use class+vendor (the default) or vendor alone")
    if vendorless:
        return (f"NFD labels display-class PCI devices here without a vendor id "
                f"({', '.join(short(k) for k in vendorless)}), so no label says NVIDIA and the operator (it reads "
                f"only {read}) sees no GPU: NFD's sources.pci.deviceLabelFields lack 'vendor'")
    return ""
