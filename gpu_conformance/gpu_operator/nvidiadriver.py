"""The NVIDIADriver custom resource (driver.useNvidiaDriverCRD) and the driver DaemonSet the operator renders for it.

From NVIDIA/gpu-operator at each release tag: api/nvidia/v1alpha1/nvidiadriver_types.go (the spec's kubebuilder
defaults), internal/state/driver.go getDriverAppName (the DaemonSet is named nvidia-<driverType>-driver-<os>-<hash>,
the hash fnv-32a of the CR's uid, encoded by apimachinery's rand.SafeEncodeString; internal/utils GetStringHash)
and manifests/state-driver/0500_daemonset.yaml (its labels and selector; the containers are the ClusterPolicy
driver's). Read by tests/factory.py; the simulated operator has no NVIDIADriver profile.
"""

from __future__ import annotations

import copy
from typing import Any

from gpu_conformance.gpu_operator.operand_specs import driver_daemonset_labels
from gpu_conformance.versions import Version

Obj = dict[str, Any]

API_VERSION = "nvidia.com/v1alpha1"
KIND = "NVIDIADriver"
# apimachinery util/rand: the alphabet SafeEncodeString maps each character onto (no vowels, no look-alikes).
_SAFE_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"


def cr_spec(driver_version: str, driver_type: str = "gpu") -> Obj:
    """An NVIDIADriver's spec with the release's driver and the CRD's defaults."""
    return {"driverType": driver_type, "repository": "nvcr.io/nvidia", "image": "driver", "version": driver_version,
            "usePrecompiled": False}


def _string_hash(s: str) -> str:
    h = 0x811C9DC5
    for b in s.encode():
        h = ((h ^ b) * 0x01000193) & 0xFFFFFFFF
    return "".join(_SAFE_ALPHABET[ord(c) % len(_SAFE_ALPHABET)] for c in str(h))


def app_name(driver_type: str, os_tag: str, cr_uid: str) -> str:
    """The name of the CR's driver DaemonSet (and its pods' app label) on nodes of `os_tag` (no precompiled
    kernel)."""
    return f"nvidia-{driver_type}-driver-{os_tag}-{_string_hash(cr_uid)}"[:63]


def owner_reference(name: str, uid: str) -> Obj:
    return {"apiVersion": API_VERSION, "kind": KIND, "name": name, "uid": uid, "controller": True,
            "blockOwnerDeletion": True}


def driver_daemonset(clusterpolicy_driver: Obj, version: Version, cr_name: str, cr_uid: str, os_tag: str,
                     driver_type: str = "gpu") -> Obj:
    """The DaemonSet an NVIDIADriver CR gets: the ClusterPolicy driver's pod template under the CR's app name and
    labels, owned by the CR."""
    ds = copy.deepcopy(clusterpolicy_driver)
    name = app_name(driver_type, os_tag, cr_uid)
    labels = {"app": name, **driver_daemonset_labels(version), "nvidia.com/node.os-version": os_tag}
    ds["metadata"].update(name=name, labels=dict(labels), ownerReferences=[owner_reference(cr_name, cr_uid)])
    ds["spec"]["selector"] = {"matchLabels": {"app": name}}
    ds["spec"]["template"]["metadata"]["labels"] = dict(labels)
    return ds
