"""5,000 GPU nodes: every check, the verdict and both reports stay fast (no per-node scans of all pods)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from factory import healthy_snapshot, pod_for, refresh, stuck_init

from gpu_conformance import catalogue
from gpu_conformance.check_input import check_input
from gpu_conformance.model import Status
from gpu_conformance.report.html import write_html
from gpu_conformance.report.json_report import write_json
from gpu_conformance.run_result import RunResult
from gpu_conformance.settings import Settings
from gpu_conformance.verdict import NOT_CONFORMANT, decide


@pytest.mark.slow  # scale: ~18 s
def test_five_thousand_nodes(tmp_path: Path) -> None:
    snap = healthy_snapshot(gpu_nodes=5000, cpu_nodes=10)
    stuck_init(pod_for(snap, "nvidia-operator-validator", "gpu-node-4242"), "toolkit-validation", restarts=3)
    refresh(snap)
    settings = Settings(operator_namespace="gpu-operator", run_id="scale")
    t0 = time.monotonic()
    inp = check_input(snap, settings)
    findings = [f for c in catalogue.all_checks() if c.func for f in c.run(inp)]
    t_checks = time.monotonic() - t0
    verdict = decide(catalogue.all_checks(), findings, snap.gpu_node_names)
    result = RunResult("scale", "2026-12-02T00:00:00+00:00", 1.0, {"server": "https://x", "requests": 14},
                       {"namespace": "gpu-operator", "version": "v26.3.3", "policy": {}}, {}, catalogue.all_checks(),
                       findings, verdict, {"pods": []}, {})
    write_json(result, tmp_path)
    html = write_html(result, tmp_path)
    total = time.monotonic() - t0
    print(f"5,000 nodes: checks {t_checks:.1f}s, checks+verdict+json+html {total:.1f}s, "
          f"html {html.stat().st_size // 1024} KiB")
    assert verdict.overall == NOT_CONFORMANT
    assert [n.node for n in verdict.nodes if n.root_cause] == ["gpu-node-4242"]
    assert verdict.outcomes["DRV-004"].status == Status.FAIL
    # Generous: wall times on these shared 2-core machines vary 3x; this only catches a quadratic regression.
    assert t_checks < 60 and total < 180, (t_checks, total)
    assert html.stat().st_size < 5 * 1024 * 1024


def test_thousand_node_reports_stay_small_and_keep_failures(tmp_path: Path) -> None:
    # Issue 14: every report <= 3 MB at 1,000 nodes, per-node detail kept for the failing node.
    import json

    snap = healthy_snapshot(gpu_nodes=1000, cpu_nodes=2)
    stuck_init(pod_for(snap, "nvidia-operator-validator", "gpu-node-7"), "toolkit-validation", restarts=3)
    refresh(snap)
    settings = Settings(operator_namespace="gpu-operator", run_id="scale")
    inp = check_input(snap, settings)
    findings = [f for c in catalogue.all_checks() if c.func for f in c.run(inp)]
    verdict = decide(catalogue.all_checks(), findings, snap.gpu_node_names)
    result = RunResult("scale", "2026-12-02T00:00:00+00:00", 1.0, {"server": "https://x", "requests": 14},
                       {"namespace": "gpu-operator", "version": "v26.3.3", "policy": {}}, {}, catalogue.all_checks(),
                       findings, verdict, {"pods": []}, {})
    j, h = write_json(result, tmp_path), write_html(result, tmp_path)
    assert j.stat().st_size < 3 * 1024 * 1024 and h.stat().st_size < 3 * 1024 * 1024
    data = json.loads(j.read_text())
    drv4 = next(c for c in data["checks"] if c["id"] == "DRV-004")
    failing = [f for f in drv4["findings"] if f["status"] == "fail"]
    assert [f["node"] for f in failing] == ["gpu-node-7"] and failing[0]["evidence"]
    grouped = next(f for f in drv4["findings"] if f.get("grouped"))
    assert len(grouped["nodes"]) == 999


def test_peak_memory_is_bounded(tmp_path: Path) -> None:
    # Issue 14: <= 300 MiB at 1,000 GPU nodes for checks, verdict and reports (the whole run, read and pytest
    # included, is held at 1,000 and 5,000 nodes by test_whole_read_only_run_memory_is_bounded).
    nodes, limit_mib = 1000, 300
    import json
    import subprocess
    import sys

    tool = Path(__file__).parent / "tools" / "scale_run.py"
    out = subprocess.run([sys.executable, str(tool), str(nodes), str(tmp_path)], capture_output=True, text=True,
                         timeout=900, check=True)
    figures = json.loads(out.stdout.strip().splitlines()[-1])
    print(figures)
    assert figures["maxrss_mib"] <= limit_mib, figures
    assert nodes > 1000 or figures["json_bytes"] <= 3 * 1024 * 1024, figures


# ---- the whole read-only run (`pytest --cluster --no-probe`, a fresh process) against factory data over HTTP ----
def _whole_run(nodes: int, work: Path) -> dict[str, Any]:
    from tools.factory_apiserver import FactoryApi, scale_snapshot, whole_run

    with FactoryApi(scale_snapshot(nodes)) as api:
        run = whole_run(api, work)
    # Exit 1: the one node the scale snapshot breaks (a validator stuck in toolkit-validation) fails DRV-004.
    assert run["exit"] == 1 and run["peak_mib"] > 0, run
    return run


@pytest.fixture(scope="module")
def small_run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return _whole_run(3, tmp_path_factory.mktemp("small"))


def test_whole_read_only_run_reads_each_kind_once(small_run: dict[str, Any], tmp_path: Path) -> None:
    # Issue 25: one LIST per kind whatever the number of nodes; only the stuck container's logs are read one by one.
    from gpu_conformance.cluster.reader import MAX_LOG_READS

    larger = _whole_run(60, tmp_path)
    assert larger["requests"] == small_run["requests"], (small_run["requests"], larger["requests"])
    lists = {k: n for k, n in larger["requests"].items() if k.startswith("GET ") and not k.endswith("/log")}
    assert "GET /api/v1/nodes" in lists and "GET /api/v1/namespaces/gpu-operator/pods" in lists, lists
    assert set(lists.values()) == {1}, lists
    logs = sum(n for k, n in larger["requests"].items() if k.endswith("/log"))
    assert 0 < logs <= MAX_LOG_READS, larger["requests"]


@pytest.mark.slow  # scale: builds 1,000 / 5,000 nodes of padded API objects (~30 s / ~2 min on 2 cores)
@pytest.mark.parametrize(("nodes", "limit_mib"), [(1000, 300), (5000, 1024)])
def test_whole_read_only_run_memory_is_bounded(nodes: int, limit_mib: int, small_run: dict[str, Any],
                                               tmp_path: Path) -> None:
    # Issue 25: a read-only run peaks <= 300 MiB at 1,000 GPU nodes and <= 1 GiB at 5,000 (a Job's memory limit),
    # on objects the size real API servers serve; its requests are those of 3 nodes.
    run = _whole_run(nodes, tmp_path)
    print({k: run[k] for k in ("seconds", "cpu_seconds", "peak_mib", "reports")})
    assert run["peak_mib"] <= limit_mib, run
    assert run["requests"] == small_run["requests"], (small_run["requests"], run["requests"])
