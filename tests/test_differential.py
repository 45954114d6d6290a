"""Differential test: every fault that applies to a v25.3 cluster, against the hand-written operator and the
real GPU Operator v25.3.4, must give the same per-node verdicts.

Both sides run profile v25.3 (the chart's defaults, which the real operator is given). Faults the real
operator heals, or that need another profile, are marked simulated-only with the reason (README fault table).
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import pytest
from test_fault_matrix import run_suite

from gpu_conformance.sim.operator.faults import FAULTS

pytestmark = [pytest.mark.sim, pytest.mark.realop]
ALL_DIFFERENTIAL = [name for name, f in FAULTS.items() if not f.simulated_only]
# One fault per layer and per new root-cause rule, for CI's 90-minute budget (each pair takes 60-80 s);
# GPU_CONFORMANCE_DIFFERENTIAL=all runs every fault that applies to v25.3 against both operators.
CI_SUBSET = ("driver-crashloop", "clusterpolicy-operand-not-ready", "gpu-node-runtime-down", "runtime-handler-missing",
             "toolkit-daemonset-deleted", "device-plugin-down", "deploy-labels-missing", "gfd-labels-missing")
DIFFERENTIAL = (ALL_DIFFERENTIAL if os.environ.get("GPU_CONFORMANCE_DIFFERENTIAL") == "all"
                else [n for n in ALL_DIFFERENTIAL if n in CI_SUBSET])


def verdicts(data: dict[str, Any]) -> dict[str, Any]:
    """What must agree: the verdict, the cluster blocker, and per node its root cause and layer outcomes."""
    blocker = data["cluster_blocker"]
    return {
        "verdict": data["verdict"],
        "blocker": (blocker["layer"], blocker.get("check")) if blocker else None,
        "failing": sorted(c["id"] for c in data["checks"] if c["status"] == "fail"),
        "nodes": {n["name"]: {"root_cause": (n["root_cause"]["layer"], n["root_cause"].get("check"))
                              if n["root_cause"] else None,
                              "transient": bool(n.get("transient")), "layers": n["layers"]}
                  for n in data["nodes"]},
    }


@pytest.mark.fast  # pure: the fault list
def test_every_fault_runs_against_the_real_operator_or_says_why_not() -> None:
    assert all(f.simulated_only or f.profile in ("default", "v25.3") for f in FAULTS.values())
    assert len(ALL_DIFFERENTIAL) >= 20 and set(DIFFERENTIAL) <= set(ALL_DIFFERENTIAL)


@pytest.mark.parametrize("name", DIFFERENTIAL)
def test_hand_written_and_real_operator_agree(name: str, tmp_path: Path) -> None:
    f = FAULTS[name]
    t0 = time.monotonic()
    sim = run_suite("v25.3", [name], f.settings, tmp_path / "sim", gpu_nodes=2)
    t1 = time.monotonic()
    real = run_suite("v25.3", [name], f.settings, tmp_path / "real", gpu_nodes=2, operator="real")
    print(f"{name}: hand-written {t1 - t0:.0f} s, real {time.monotonic() - t1:.0f} s")
    assert verdicts(real) == verdicts(sim)
    # The ClusterPolicy state each operator wrote (none when the fault removed the ClusterPolicy or its CRD).
    assert [s and s.get("state") for s in real.get("clusterpolicy_status") or []] == [
        s and s.get("state") for s in sim.get("clusterpolicy_status") or []]
