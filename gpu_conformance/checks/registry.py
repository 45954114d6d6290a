"""The @check decorator: a check's id, layer, title, hint and kubectl command live next to its code."""

from __future__ import annotations

from gpu_conformance.model import Check, CheckFunc, Layer

REGISTRY: dict[str, Check] = {}


def check(id: str, layer: Layer, title: str, *, hint: str, kubectl: str, detects: str = "", rank: int = 0,
          gate: bool = False, gpu_path: bool = True):
    """Register a check function under a stable id. The id must never change once released."""

    def wrap(func: CheckFunc) -> CheckFunc:
        if id in REGISTRY:
            raise ValueError(f"duplicate check id {id}")
        REGISTRY[id] = Check(id=id, layer=layer, title=title, hint=hint, kubectl=kubectl, func=func,
                             detects=detects, rank=rank, gate=gate, gpu_path=gpu_path)
        return func

    return wrap

