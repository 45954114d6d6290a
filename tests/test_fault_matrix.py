"""The fault matrix: on a real (simulated) control plane, each fault trips exactly the checks it declares.

Per fault: a simulated cluster of the fault's profile, the fault injected through the API, the whole
suite run (probe included), and the conformance.json it produces held against the declaration: the
failing checks are exactly the declared ones, affected nodes have the declared root-cause layer with every
later layer blocked, unaffected nodes pass everything. The cluster is the profile's reused one, put back to
its installed objects after each fault (sim/reuse.py, sim/controlplane/restore.py), unless the fault is marked `fresh`.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpu_conformance import catalogue
from gpu_conformance.model import LAYER_ORDER
from gpu_conformance.sim.operator.faults import CLUSTER, FAULTS, Fault
from gpu_conformance.sim.reuse import ClusterPool, fresh_cluster
from gpu_conformance.verdict import CONFORMANT

pytestmark = pytest.mark.sim
TIMINGS = Path("reports/fault-matrix-timings.json")
# Checks no fault can make FAIL, by design (each says why in its catalogue entry).
NEVER_FAIL = {"OPR-005",  # an untagged operator image is a warning: expectations fall back to the newest release
              "DPL-013"}  # every GPU device claimed is busy, not broken: a warning (fault dra-all-claimed)
# Checks whose failures no sim fault reaches yet, with the unit tests that make them fail. OPR-003's one sim fault
# (no-gpu-nodes) is now explained by NFD-001 (issue 20 item 5); an MPS control daemon fault would trip it.
# The DRA checks (issue #22): the dra-* faults trip DPL-010..012 (DPL-013 only warns); OPR-008/OPR-009 have no
# sim fault yet: their unit tests make them fail.
DRA = "tests/test_checks_dra.py::"
UNIT_TESTED_ONLY = {"OPR-003": "tests/test_root_cause.py::test_mps_control_daemon_not_ready_is_named_on_its_node",
                    "OPR-008": DRA + "test_opr008_reconcile_failed_quotes_the_operator",
                    "OPR-009": DRA + "test_both_models_is_one_opr009_failure"}


@pytest.fixture(scope="module")
def sim_pool() -> Iterator[ClusterPool]:
    pool = ClusterPool()
    try:
        yield pool
    finally:
        pool.close()
        # One pool per parallel worker (pytest -n): each records its own, under the worker's name.
        worker = os.environ.get("PYTEST_XDIST_WORKER")
        _record("_pool" if worker is None else f"_pool.{worker}",
                {"boots": pool.boots, "reuses": pool.reuses, "reboots": pool.reboots,
                 "undo_seconds": pool.undo_seconds})


def run_suite(profile: str, faults: list[str], settings: dict, report_dir: Path, gpu_nodes: int = 3,
              operator: str = "sim", pool: ClusterPool | None = None) -> dict:
    from gpu_conformance.session import ConformanceRun
    from gpu_conformance.settings import Settings
    from gpu_conformance.sim.services.kube_client import Kube

    cluster = pool.cluster if pool is not None else fresh_cluster
    with cluster(profile, faults, gpu_nodes=gpu_nodes, operator=operator) as booted:
        run = None
        try:
            s = Settings(kubeconfig=str(booted.kubeconfig), report_dir=str(report_dir), probe_timeout=60,
                         **settings)
            run = ConformanceRun(s.validate(), "current")
            run.start()
            run.run_probe()
            run.write_reports()
            data = json.loads((report_dir / "conformance.json").read_text())
            # What the probe left behind, read from the cluster itself (not from the probe's own account).
            kube = Kube(booted.cluster.api_client())
            data["leftover_probe_namespaces"] = [
                ns["metadata"]["name"]
                for ns in kube.list("Namespace", label_selector="gpu-conformance.nvidia.com/run-id")
                if not ns["metadata"].get("deletionTimestamp")]
            with contextlib.suppress(Exception):  # no CRD, no ClusterPolicy: nothing to record
                data["clusterpolicy_status"] = [cp.get("status") for cp in kube.list("ClusterPolicy")]
            return data
        finally:
            if run is not None:
                run.close()


def failing_checks(data: dict) -> set[str]:
    return {c["id"] for c in data["checks"] if c["status"] == "fail"}


def assert_declared(f: Fault, data: dict) -> None:
    # The simulated operator wrote the status the real one would: the fault's states are reported not ready.
    if f.states_not_ready:
        (status,) = data["clusterpolicy_status"]
        error = next(c for c in status["conditions"] if c["type"] == "Error")
        assert status["state"] == "notReady" and error["reason"] == "OperandNotReady", status
        assert f.states_not_ready <= set(error["message"].rsplit("[", 1)[1].rstrip("]").split()), status
    assert data["verdict"] == f.verdict, (data["verdict"], data["cluster_blocker"])
    assert failing_checks(data) == set(f.checks), {c["id"]: c["findings"] for c in data["checks"]
                                                   if c["status"] == "fail"}
    warned = {c["id"] for c in data["checks"] if c["status"] == "warn"}
    assert f.warns <= warned, warned
    nodes = {n["name"]: n for n in data["nodes"]}
    affected = set(f.affected(sorted(nodes)))
    if f.nodes == CLUSTER:
        assert data["cluster_blocker"] and data["cluster_blocker"]["layer"] == str(f.layer)
    for name, n in nodes.items():
        if name in affected and f.layer is not None:
            rc = n["root_cause"]
            assert rc and rc["layer"] == str(f.layer), (name, rc)
            if f.root_cause_check:
                assert rc["check"] == f.root_cause_check and f.root_cause_says in rc["message"], (name, rc)
            later = LAYER_ORDER[LAYER_ORDER.index(f.layer) + 1:]
            # Off the GPU path (monitoring) nothing is blocked: the later layers, the probe included, are judged.
            after = {"pass", "warn", "n/a"} if rc.get("off_gpu_path") else {"blocked"}
            assert all(n["layers"][str(layer)] in after for layer in later), (name, n["layers"])
        elif name in affected:  # transient: paused, not failed
            assert n["root_cause"] is None and n["transient"], n
        else:
            assert n["root_cause"] is None and n.get("transient") is None, (name, n)
            assert set(n["layers"].values()) <= {"pass", "warn", "n/a"}, (name, n["layers"])


@pytest.mark.parametrize("name", list(FAULTS))
def test_fault_trips_exactly_its_checks(name: str, tmp_path: Path, sim_pool: ClusterPool) -> None:
    f = FAULTS[name]
    t0 = time.monotonic()
    data = run_suite(f.profile, [name], f.settings, tmp_path, pool=sim_pool)
    _record(name, time.monotonic() - t0)
    assert_declared(f, data)


@pytest.mark.fast  # pure: the fault list against the catalogue
def test_every_check_is_tripped_by_some_fault() -> None:
    tripped = set().union(*(f.checks for f in FAULTS.values()))
    unreached = {c.id for c in catalogue.all_checks()} - tripped - NEVER_FAIL - set(UNIT_TESTED_ONLY)
    assert not unreached, f"no fault makes these checks fail: {sorted(unreached)}"


@pytest.mark.fast
def test_every_fault_is_documented() -> None:
    for f in FAULTS.values():
        assert f.description and f.injection, f.name
        assert set(f.checks) <= {c.id for c in catalogue.all_checks()}, f.name
        if f.verdict == CONFORMANT and not f.warns:
            pytest.fail(f"{f.name} declares a conformant cluster without a warning: that is not a fault")


def _record(name: str, seconds: float | dict) -> None:
    import fcntl

    TIMINGS.parent.mkdir(exist_ok=True)
    # Parallel workers (pytest -n) record into the same file: one read-modify-write at a time.
    with (TIMINGS.parent / ".fault-matrix-timings.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            data = json.loads(TIMINGS.read_text()) if TIMINGS.exists() else {}
        except ValueError:
            data = {}
        data[name] = round(seconds, 1) if isinstance(seconds, float) else seconds
        TIMINGS.write_text(json.dumps(data, indent=1, sort_keys=True))
