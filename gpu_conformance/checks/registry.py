"""The @check decorator: a check's id, layer, title, hint and kubectl command live next to its code."""

from __future__ import annotations

import functools
from dataclasses import replace

from gpu_conformance.check_input import CheckInput
from gpu_conformance.model import Check, CheckFunc, Finding, Layer, Status
from gpu_conformance.resource_model import ResourceModel

REGISTRY: dict[str, Check] = {}
# The check that judges a ClusterPolicy beside a GPUCluster: with both, v26.7.0 reconciles neither (each controller
# refuses on seeing the other), so every other failure is its consequence.
MODEL_CONFLICT_CHECK = "OPR-009"


def check(id: str, layer: Layer, title: str, *, hint: str, kubectl: str, detects: str = "", rank: int = 0,
          gate: bool = False, gpu_path: bool = True, na_in: tuple[ResourceModel, ...] = (), na_why: str = ""):
    """Register a check function under a stable id. The id must never change once released.

    na_in: the GPU resource models (resource_model.py) the check does not apply to; it then reports one n/a
    finding saying na_why instead of judging objects that model does not create.
    """

    def wrap(func: CheckFunc) -> CheckFunc:
        if id in REGISTRY:
            raise ValueError(f"duplicate check id {id}")
        REGISTRY[id] = Check(id=id, layer=layer, title=title, hint=hint, kubectl=kubectl,
                             func=_model_scoped(id, func, na_in, na_why), detects=detects, rank=rank, gate=gate,
                             gpu_path=gpu_path, na_in=tuple(str(m) for m in na_in))
        return func

    return wrap


def _model_scoped(id: str, func: CheckFunc, na_in: tuple[ResourceModel, ...], na_why: str) -> CheckFunc:
    @functools.wraps(func)
    def run(inp: CheckInput) -> list[Finding]:
        model = inp.facts.resource_model
        if model in na_in:
            return [Finding(Status.NA, f"n/a in the {model} model: {na_why}",
                            evidence={"resource_model": str(model)})]
        findings = func(inp)
        if id == MODEL_CONFLICT_CHECK or not inp.facts.both_models:
            return findings
        return [replace(f, explained_by=(*f.explained_by, MODEL_CONFLICT_CHECK)) if f.status == Status.FAIL else f
                for f in findings]

    return run
