"""One judged run on factory data of N GPU nodes, as a separate process so that its peak memory can be read.

Usage: python tests/tools/scale_run.py N REPORT_DIR  -> one JSON line: times, report sizes, maxrss_mib.
"""

from __future__ import annotations

import json
import resource
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from factory import healthy_snapshot, pod_for, refresh, stuck_init  # noqa: E402

from gpu_conformance import catalogue  # noqa: E402
from gpu_conformance.check_input import check_input
from gpu_conformance.report.html import write_html  # noqa: E402
from gpu_conformance.report.json_report import write_json  # noqa: E402
from gpu_conformance.run_result import RunResult  # noqa: E402
from gpu_conformance.settings import Settings  # noqa: E402
from gpu_conformance.verdict import decide  # noqa: E402


def main(nodes: int, report_dir: Path) -> dict:
    t0 = time.monotonic()
    snap = healthy_snapshot(gpu_nodes=nodes, cpu_nodes=2)
    stuck_init(pod_for(snap, "nvidia-operator-validator", "gpu-node-7"), "toolkit-validation", restarts=3)
    refresh(snap)
    t1 = time.monotonic()
    settings = Settings(operator_namespace="gpu-operator", run_id="scale")
    inp = check_input(snap, settings)
    findings = [f for c in catalogue.all_checks() if c.func for f in c.run(inp)]
    verdict = decide(catalogue.all_checks(), findings, snap.gpu_node_names)
    result = RunResult("scale", "2026-12-02T00:00:00+00:00", 1.0, {"server": "https://x", "requests": 14},
                       {"namespace": "gpu-operator", "version": "v26.3.3", "policy": {}}, {},
                       catalogue.all_checks(), findings, verdict, {"pods": []}, {})
    report_dir.mkdir(parents=True, exist_ok=True)
    j, h = write_json(result, report_dir), write_html(result, report_dir)
    t2 = time.monotonic()
    return {"nodes": nodes, "build_s": round(t1 - t0, 1), "judge_and_reports_s": round(t2 - t1, 1),
            "json_bytes": j.stat().st_size, "html_bytes": h.stat().st_size, "findings": len(findings),
            "maxrss_mib": peak_mib()}


def peak_mib() -> int:
    """This process's own peak RSS. VmHWM starts afresh at exec; ru_maxrss keeps the forking parent's peak."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return round(int(line.split()[1]) / 1024)
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)


if __name__ == "__main__":
    print(json.dumps(main(int(sys.argv[1]), Path(sys.argv[2]))))
