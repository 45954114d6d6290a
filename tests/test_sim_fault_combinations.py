"""Combined sim faults either work together or are refused in one line (issue 13 item 11).

`--sim-fault=driver-crashloop --sim-fault=gpus-all-allocated` crashed with StopIteration: the node whose
driver crash-loops advertises no GPU, and the second fault assumed every GPU node had one.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from gpu_conformance.sim.operator import faults
from gpu_conformance.sim.operator.faults import FaultCombinationError, apply_all

SIM = SimpleNamespace(log_writer=None)  # what the fake faults below see of the simulated install


def test_a_fault_that_fails_on_top_of_another_is_refused_in_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []

    def fake(name: str, fails: bool) -> faults.Fault:
        def inject(ctx: faults.FaultContext) -> None:
            calls.append(name)
            if fails:
                raise KeyError("nvidia.com/gpu")
        return faults.Fault(name, "d", "i", inject, None, frozenset(), faults.ALL)

    monkeypatch.setitem(faults.FAULTS, "first", fake("first", False))
    monkeypatch.setitem(faults.FAULTS, "second", fake("second", True))
    with pytest.raises(FaultCombinationError, match=r"sim fault 'second' cannot be combined with 'first': "
                                                    r"KeyError") as e:
        apply_all(SIM, ["first", "second"])  # type: ignore[arg-type]
    assert "\n" not in str(e.value) and calls == ["first", "second"]
    with pytest.raises(KeyError):  # alone, a fault's own failure is a bug to see, not a combination problem
        apply_all(SIM, ["second"])  # type: ignore[arg-type]


@pytest.mark.sim
def test_driver_crashloop_with_all_gpus_allocated(tmp_path: Path) -> None:
    """The pair from the findings works: the busy pods take the GPUs of every node that still has any, and the
    suite judges the crash-looping node by its driver; the others are busy, not broken (warned, not probed)."""
    from test_fault_matrix import run_suite

    data = run_suite("default", ["driver-crashloop", "gpus-all-allocated"], {}, tmp_path)
    roots = {n["name"]: (n["root_cause"] or {}).get("layer") for n in data["nodes"]}
    assert roots == {"gpu-node-0": None, "gpu-node-1": "driver-toolkit", "gpu-node-2": None}, \
        json.dumps(roots)
    busy = {f["node"] for c in data["checks"] if c["id"] == "PRB-001" for f in c["findings"]
            if f["node"] and f["status"] == "warn" and "in use" in f["message"]}
    assert busy == {"gpu-node-0", "gpu-node-2"} and data["verdict"] == "NOT CONFORMANT"


def test_a_one_node_fault_on_a_cluster_without_that_node_is_refused_in_one_line() -> None:
    """`--sim-gpu-nodes=1 --sim-fault=device-plugin-down` was an internal error ("no ... pod on gpu-node-1")."""
    sim = SimpleNamespace(log_writer=None, gpu_nodes=["gpu-node-0"])
    with pytest.raises(faults.FaultNodeMissingError, match=r"^sim fault 'device-plugin-down' breaks gpu-node-1, "
                                                           r".*GPU nodes: gpu-node-0\).*--sim-gpu-nodes=2") as e:
        apply_all(sim, ["device-plugin-down"])  # type: ignore[arg-type]
    assert "\n" not in str(e.value)
