"""What the DRA driver publishes per node (ResourceSlices) and who holds which device (ResourceClaims).

The shape is resource.k8s.io/v1's: a slice names its driver (spec.driver), the node whose devices it lists
(spec.nodeName), its pool (spec.pool: name, generation, resourceSliceCount) and its devices (spec.devices[]: name,
attributes keyed by unqualified name with one typed value — string, int, bool or version —, capacity keyed by name
with a quantity `value`). NVIDIA's kubelet plugin publishes one pool per node, named after it; a GPU device carries
the attributes type, uuid, productName, ... and the capacity memory (bytes). A claim's allocation lists the devices
it got as (driver, pool, device) in status.allocation.devices.results.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from gpu_conformance.cluster.snapshot import ClusterSnapshot, name_of
from gpu_conformance.resource_model import DRA_DRIVER_NAME, GPU_DEVICE_TYPES

Obj = dict[str, Any]
_SUFFIX = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60,
           "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15, "E": 10**18, "": 1}
_QUANTITY = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(Ki|Mi|Gi|Ti|Pi|Ei|k|M|G|T|P|E)?\s*$")


def quantity_bytes(value: Any) -> int | None:
    """A Kubernetes quantity ('40Gi', '42949672960', '40G') as an integer; None when it is not one."""
    m = _QUANTITY.match(str(value)) if value is not None else None
    if m is None:
        return None
    return int(float(m.group(1)) * _SUFFIX[m.group(2) or ""])


def attribute(device: Obj, name: str) -> Any:
    """A device attribute's value, whichever of its typed fields holds it (None when absent)."""
    attrs = device.get("attributes") or {}
    value = attrs.get(name, attrs.get(f"{DRA_DRIVER_NAME}/{name}"))
    if not isinstance(value, dict):
        return None
    return next((value[k] for k in ("string", "version", "int", "bool") if k in value), None)


@dataclass(frozen=True)
class Device:
    name: str
    pool: str
    slice: str
    type: str
    uuid: str
    product: str
    memory: int | None

    @property
    def key(self) -> tuple[str, str]:
        return self.pool, self.name


def _dict(value: Any) -> Obj:
    """A field that should be an object; anything else (a hand-edited or foreign object) reads as empty."""
    return value if isinstance(value, dict) else {}


def _device(d: Obj, pool: str, slice_name: str) -> Device:
    memory = _dict(_dict(d.get("capacity")).get("memory")).get("value")
    return Device(name=str(d.get("name", "")), pool=pool, slice=slice_name, type=str(attribute(d, "type") or ""),
                  uuid=str(attribute(d, "uuid") or ""), product=str(attribute(d, "productName") or ""),
                  memory=quantity_bytes(memory))


@dataclass(frozen=True)
class NodeSlices:
    """The gpu.nvidia.com slices of one node, at their pool's newest generation."""

    slices: tuple[Obj, ...]
    devices: tuple[Device, ...]
    # Pools whose newest generation has fewer slices than resourceSliceCount says: the scheduler does not allocate
    # from an incomplete pool, so its devices cannot be claimed yet.
    incomplete: tuple[str, ...]

    @property
    def gpus(self) -> list[Device]:
        return [d for d in self.devices if d.type in GPU_DEVICE_TYPES or not d.type]

    @property
    def whole_gpus(self) -> list[Device]:
        return [d for d in self.devices if d.type == "gpu"]


class DraView:
    """The snapshot's DRA objects indexed once per run (the facts hold the one view): every per-node check asks
    about every node."""

    def __init__(self, snapshot: ClusterSnapshot) -> None:
        self.snapshot = snapshot

    @cached_property
    def by_node(self) -> dict[str, NodeSlices]:
        pools: dict[tuple[str, str], list[Obj]] = {}
        for s in self.snapshot.resource_slices:
            spec = _dict(s.get("spec"))
            if spec.get("driver") != DRA_DRIVER_NAME or not spec.get("nodeName"):
                continue
            pool = str(_dict(spec.get("pool")).get("name") or spec["nodeName"])
            pools.setdefault((str(spec["nodeName"]), pool), []).append(s)
        out: dict[str, tuple[list[Obj], list[Device], list[str]]] = {}
        for (node, pool), slices in pools.items():
            gen = max(_int(_pool(s).get("generation")) for s in slices)
            newest = [s for s in slices if _int(_pool(s).get("generation")) == gen]
            want = max(_int(_pool(s).get("resourceSliceCount")) for s in newest) or 1
            acc = out.setdefault(node, ([], [], []))
            acc[0].extend(newest)
            acc[1].extend(_device(d, pool, name_of(s)) for s in newest
                          for d in _list(s["spec"].get("devices")) if isinstance(d, dict))
            if len(newest) < want:
                acc[2].append(f"{pool} (generation {gen}: {len(newest)} of {want} slices)")
        return {n: NodeSlices(tuple(s), tuple(d), tuple(i)) for n, (s, d, i) in out.items()}

    def node(self, node: str) -> NodeSlices:
        return self.by_node.get(node, NodeSlices((), (), ()))

    @cached_property
    def holders(self) -> dict[tuple[str, str], list[str]]:
        """(pool, device) of gpu.nvidia.com -> the claims ('namespace/name') it is allocated to exclusively."""
        out: dict[tuple[str, str], list[str]] = {}
        for c in self.snapshot.resource_claims:
            results = _list(_dict(_dict(_dict(c.get("status")).get("allocation")).get("devices")).get("results"))
            meta = _dict(c.get("metadata"))
            who = f"{meta.get('namespace', '')}/{meta.get('name', '')}"
            for r in results:
                # An adminAccess allocation (the operator's nvidia-dra-validator holds one per node) monitors the
                # device without taking it: the scheduler still hands the device to ordinary claims.
                if isinstance(r, dict) and r.get("driver") == DRA_DRIVER_NAME and not r.get("adminAccess"):
                    out.setdefault((str(r.get("pool", "")), str(r.get("device", ""))), []).append(who)
        return out

    def device_class(self, name: str) -> Obj | None:
        return next((d for d in self.snapshot.device_classes if name_of(d) == name), None)


def _pool(s: Obj) -> Obj:
    return _dict(s["spec"].get("pool"))


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _int(value: Any) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return 0
