"""The benchmark on a small simulated cluster: every figure beside its floor, request counts held (never wall
times: these 2 shared cores vary too much for a timing assertion to mean anything)."""

from __future__ import annotations

import pytest

from gpu_conformance.bench import TARGETS, Bench, _own_cpu

pytestmark = pytest.mark.sim


def test_bench_measures_every_figure_beside_its_floor() -> None:
    from gpu_conformance.sim.session import start_sim

    before = _own_cpu()
    booted = start_sim(gpu_nodes=4, cpu_nodes=1, quiet=True)
    try:
        installer = _own_cpu() - before
        bench = Bench(str(booted.kubeconfig), None, repeat=1)
        bench.install_cpu(installer, booted.cluster.cpu_seconds())
        bench.measure()
    finally:
        booted.stop()
    rows = {r.what.split(")")[0] + ")": r for r in bench.rows}
    assert sorted(rows) == ["(a)", "(b)", "(c)", "(d)", "(e)", "(f)"], bench.table()
    # (c): the probe and its floor both ran on every GPU node; the probe's requests stay within a small factor of
    # the bare pods' (it also lists its pods' events each poll), and grow with the nodes, not the cluster.
    probe, floor = rows["(c)"].value, rows["(c)"].floor
    probe_requests = int(probe.split(", ")[1].split()[0])
    floor_requests = int(floor.split(", ")[1].split()[0])
    assert "4 bare pods" in floor and floor_requests >= 4 + 4 + 2, bench.table()  # creates, logs, namespace
    assert probe_requests <= 2 * floor_requests + 8, bench.table()
    # (d): the memory bound holds at this size as at 1,000 nodes.
    assert rows["(d)"].met and int(rows["(d)"].value.split()[0]) <= TARGETS["memory_mib"], bench.table()
    # (f): the control plane's processes and the sim's own loops were all measured.
    assert "installer" in " ".join(bench.notes) and "kube-apiserver" in " ".join(bench.notes), bench.notes
