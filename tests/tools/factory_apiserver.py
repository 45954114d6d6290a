"""A factory snapshot served over HTTP as an API server serves it, for whole runs of the suite at any size.

    python tests/tools/factory_apiserver.py N DIR [--profile=FILE]
        -> serves N GPU nodes, runs `pytest --cluster --no-probe` against them in a fresh process (the bench's
           (b)), prints one JSON line: seconds, CPU seconds, exit code, peak MiB, requests by path, report sizes
    python tests/tools/factory_apiserver.py N DIR --serve
        -> serves N GPU nodes until interrupted, DIR/kubeconfig pointing at them (to profile a run by hand)

Every LIST the reader makes answers with the factory's objects padded to the size real API servers serve
(factory.as_served), each body built once before the run; SelfSubjectAccessReviews are allowed; every other path
is a 404 (an optional kind the cluster lacks), a selector nothing matches an empty list. The requests are
recorded, so a test can hold their count.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import yaml

TOOLS = Path(__file__).resolve().parent
sys.path.insert(0, str(TOOLS.parent))

from factory import as_served, healthy_snapshot, pod_for, refresh, stuck_init  # noqa: E402
from fake_api import Answer, FakeApi  # noqa: E402

from gpu_conformance.bench import PEAK_WRAPPER  # noqa: E402
from gpu_conformance.cluster.snapshot import ClusterSnapshot  # noqa: E402

NS = "gpu-operator"
SUITE = TOOLS.parent.parent / "tests_conformance"


def scale_snapshot(gpu_nodes: int) -> ClusterSnapshot:
    """A healthy cluster of `gpu_nodes` with one failing node, so the reports carry per-node failure detail."""
    snap = healthy_snapshot(gpu_nodes=gpu_nodes, cpu_nodes=2)
    node = f"gpu-node-{min(7, gpu_nodes)}"
    stuck_init(pod_for(snap, "nvidia-operator-validator", node), "toolkit-validation", restarts=3, snapshot=snap)
    return refresh(snap)


def list_bodies(snap: ClusterSnapshot) -> dict[tuple[str, str], bytes]:
    """(path, selector) -> LIST body, for every LIST ClusterReader.read makes of what the snapshot holds."""
    def body(kind: str, items: list[dict[str, Any]]) -> bytes:
        return json.dumps({"kind": f"{kind}List", "apiVersion": "v1", "metadata": {"resourceVersion": "1"},
                           "items": [as_served(i) for i in items]}).encode()

    ns = snap.operator_namespace
    crds = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
    out = {("/api/v1/nodes", ""): body("Node", snap.nodes),
           ("/apis/nvidia.com/v1/clusterpolicies", ""): body("ClusterPolicy", snap.clusterpolicies),
           ("/apis/nvidia.com/v1alpha1/nvidiadrivers", ""): body("NVIDIADriver", snap.nvidiadrivers),
           ("/apis/node.k8s.io/v1/runtimeclasses", ""): body("RuntimeClass", snap.runtimeclasses),
           ("/api/v1/pods", "app=gpu-operator"): body("Pod", snap.operator_pods),
           ("/api/v1/pods", "app.kubernetes.io/name=node-feature-discovery"): body("Pod", snap.nfd_pods),
           (f"/api/v1/namespaces/{ns}/pods", ""): body("Pod", snap.pods),
           (f"/apis/apps/v1/namespaces/{ns}/daemonsets", ""): body("DaemonSet", snap.daemonsets),
           (f"/apis/apps/v1/namespaces/{ns}/deployments", ""): body("Deployment", snap.deployments),
           (f"/api/v1/namespaces/{ns}/events", ""): body("Event", snap.events),
           ("/version", ""): json.dumps({"gitVersion": snap.kubernetes_version}).encode()}
    for crd in snap.crds:
        out[(crds, f"metadata.name={crd}")] = json.dumps({"items": [{"metadata": {"name": crd}}]}).encode()
    return out


class FactoryApi(FakeApi):
    """FakeApi answering the reader from a snapshot's LIST bodies."""

    def __init__(self, snap: ClusterSnapshot) -> None:
        self.bodies = list_bodies(snap)
        self.logs = snap.logs
        super().__init__(self._answer)

    def _answer(self, handler: BaseHTTPRequestHandler) -> Answer:
        url = urlsplit(handler.path)
        query = parse_qs(url.query)
        if handler.command == "POST" and url.path.endswith("/selfsubjectaccessreviews"):
            return 201, {}, b'{"status": {"allowed": true}}'
        if handler.command != "GET":
            return 405, {}, b'{"kind": "Status", "code": 405}'
        if url.path.endswith("/log"):
            pod, container = url.path.split("/")[-2], (query.get("container") or [""])[0]
            return 200, {"Content-Type": "text/plain"}, self.logs.get((pod, container), "").encode()
        selector = next((v[0] for k, v in query.items() if k in ("labelSelector", "fieldSelector")), "")
        data = self.bodies.get((url.path, selector))
        if data is None and any(path == url.path for path, _ in self.bodies):
            data = b'{"kind": "List", "apiVersion": "v1", "metadata": {}, "items": []}'  # nothing matches
        if data is None:
            return 404, {}, b'{"kind": "Status", "code": 404, "reason": "NotFound"}'
        return 200, {}, data

    def write_kubeconfig(self, path: Path) -> Path:
        path.write_text(yaml.safe_dump({
            "apiVersion": "v1", "kind": "Config", "current-context": "factory",
            "clusters": [{"name": "factory", "cluster": {"server": self.url}}],
            "users": [{"name": "u", "user": {"token": "not-a-real-token"}}],
            "contexts": [{"name": "factory", "context": {"cluster": "factory", "user": "u"}}]}))
        return path


def whole_run(api: FactoryApi, work: Path, profile: Path | None = None) -> dict[str, Any]:
    """`pytest --cluster --no-probe` against `api` in a fresh process, as the bench's (b) runs it."""
    reports, peak = work / "reports", work / "peak-kib"
    kubeconfig = api.write_kubeconfig(work / "kubeconfig")
    wrapper = work / "run_pytest.py"
    wrapper.write_text(PEAK_WRAPPER)
    head = [sys.executable] + (["-m", "cProfile", "-o", str(profile)] if profile else []) + [str(wrapper)]
    cmd = [*head, str(SUITE), "--cluster", f"--kubeconfig={kubeconfig}", "--no-probe", f"--report-dir={reports}",
           "-q", "-p", "no:cacheprovider", "-o", "addopts="]
    t0, cpu0 = time.monotonic(), _children_cpu()
    proc = subprocess.run(cmd, env={**_env(), "GPU_CONFORMANCE_BENCH_PEAK": str(peak)}, capture_output=True,
                          text=True, timeout=1800, check=False)
    seconds, cpu = time.monotonic() - t0, _children_cpu() - cpu0
    return {"seconds": round(seconds, 2), "cpu_seconds": round(cpu, 2), "exit": proc.returncode,
            "peak_mib": round(int(peak.read_text()) / 1024) if peak.exists() else -1,
            "requests": requests_by_kind(api), "tail": (proc.stdout + proc.stderr).strip().splitlines()[-2:],
            "reports": {p.name: p.stat().st_size for p in sorted(reports.glob("*")) if p.is_file()}}


def requests_by_kind(api: FakeApi) -> dict[str, int]:
    """How many requests of each kind the server answered: "GET path?selector" (a LIST and its selector), the
    log reads ("GET .../pods/*/log"), "POST path" (the access reviews)."""
    counts: dict[str, int] = {}
    for method, target, _ in api.requests:
        url = urlsplit(target)
        query = parse_qs(url.query)
        selector = ",".join(v[0] for k, v in sorted(query.items()) if k in ("labelSelector", "fieldSelector"))
        path = url.path
        if path.endswith("/log"):  # which pod's: the failing pod's name differs with the cluster's size
            path = path.rsplit("/", 2)[0] + "/*/log"
        key = f"{method} {path}" + (f"?{selector}" if selector else "")
        counts[key] = counts.get(key, 0) + 1
    return counts


def _children_cpu() -> float:
    import resource

    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def _env() -> dict[str, str]:
    import os

    # The suite's own package from this checkout, whatever the caller's working directory.
    root = str(TOOLS.parent.parent)
    return {**os.environ, "PYTHONPATH": os.pathsep.join([root, *filter(None, [os.environ.get("PYTHONPATH")])])}


def main(argv: list[str]) -> int:
    nodes, work = int(argv[0]), Path(argv[1])
    profile = next((Path(a.split("=", 1)[1]) for a in argv[2:] if a.startswith("--profile=")), None)
    work.mkdir(parents=True, exist_ok=True)
    with FactoryApi(scale_snapshot(nodes)) as api:
        if "--serve" in argv:
            print(api.write_kubeconfig(work / "kubeconfig"), flush=True)
            try:
                while True:
                    time.sleep(3600)
            except KeyboardInterrupt:
                return 0
        print(json.dumps(whole_run(api, work, profile)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
