"""Checks judged one GPU node at a time: the loop over the GPU nodes and the deploy-label gate, written once.

Most checks say one thing per GPU node. Such a check is a judge `(inp, node) -> Finding` (inp: the run's
CheckInput); stacked
under `@check`, `@per_gpu_node()` runs it for every GPU node in the snapshot's order. With an operand as `gate`, a
node whose deploy label keeps that operand off on purpose (opted out, paused) gets `label_gate`'s finding, and the
judge is not asked about it.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

from gpu_conformance.check_input import CheckInput
from gpu_conformance.checks.pods import label_gate
from gpu_conformance.model import CheckFunc, Finding
from gpu_conformance.operands import Operand

NodeJudge = Callable[[CheckInput, str], Finding]


def per_gpu_node(gate: Operand | None = None) -> Callable[[NodeJudge], CheckFunc]:
    def wrap(judge: NodeJudge) -> CheckFunc:
        @functools.wraps(judge)
        def run(inp: CheckInput) -> list[Finding]:
            out = []
            for node in inp.snapshot.gpu_node_names:
                gated = label_gate(inp.snapshot, node, gate) if gate is not None else None
                out.append(gated if gated is not None else judge(inp, node))
            return out

        return run

    return wrap
