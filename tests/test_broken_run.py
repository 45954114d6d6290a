"""Never a green report from a broken run (issue 26): a crash, an API answer the probe has no rule for, a signal,
a report that cannot be written — each ends with its own exit code and one line, and the reports say ERROR or
INCOMPLETE, never the verdict of the layers read before it.

Runs the plugin in-process on factory data (no cluster): the failure is injected where it happens in real runs.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

import gpu_conformance.probe.run as probe_mod

# Imported here, at collection: pytester's in-process runs drop modules first imported inside them, and a
# conftest patching a dropped module's twin would patch nothing.
import gpu_conformance.report.json_report as json_report
from gpu_conformance.errors import EXIT_CLUSTER_ACCESS, EXIT_INTERNAL, EXIT_OUTPUT
from gpu_conformance.session import ConformanceRun

ALL_LAYERS = """
from gpu_conformance.model import LAYER_ORDER
from gpu_conformance.plugin import layer_params
import pytest

@pytest.mark.parametrize("check_id", [p for layer in LAYER_ORDER for p in layer_params(layer)])
def test_check(check_id, conformance, request):
    conformance.check(check_id, request)
"""

# ConformanceRun.start on factory data: a healthy cluster, so every layer before the probe passes and only the
# injected failure can keep the verdict from CONFORMANT. `INJECT` is appended per test.
FAKE_START = """
from types import SimpleNamespace
import factory
from gpu_conformance.session import ConformanceRun
import gpu_conformance.probe.run as probe_mod
from gpu_conformance.probe import api as probe_api

def start(self):
    snap = factory.healthy_snapshot()
    self.conn = SimpleNamespace(api=None, server="https://fake", user="u", close=lambda: None)
    self.probe_namespace = ("gpu-conformance-probe", "shared")
    self.judge_read(snap)

ConformanceRun.start = start
"""


@pytest.fixture
def inprocess(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch):  # noqa: ANN201 - a runner
    """Run `pytest --cluster` in this process with FAKE_START + `inject`; returns (result, report dir)."""
    # The conftest replaces these in this very process: put them back after the test.
    monkeypatch.setattr(ConformanceRun, "start", ConformanceRun.start)
    for name in ("_gpus_in_use", "_create_pods", "_wait", "_capture_logs", "_cleanup"):
        monkeypatch.setattr(probe_mod.Probe, name, getattr(probe_mod.Probe, name))
    monkeypatch.setattr(json_report, "write_text_atomic", json_report.write_text_atomic)

    def run(inject: str, *args: str) -> tuple[pytest.RunResult, Path]:
        pytester.makeconftest(FAKE_START + inject)
        pytester.makepyfile(test_layers=ALL_LAYERS)
        reports = pytester.path / "reports"
        result = pytester.runpytest_inprocess("--cluster", f"--report-dir={reports}", "-p", "no:cacheprovider",
                                              *args)
        return result, reports

    return run


def verdict_of(reports: Path) -> str:
    return json.loads((reports / "conformance.json").read_text())["verdict"]


# Healthy probe I/O, so that the baseline run below is CONFORMANT and each failure is the only difference.
HEALTHY_PROBE = """
def _create(self):
    pass

def _wait(self):
    for p in self.obs.pods.values():
        p.pod = {"spec": {"nodeName": p.node}, "status": {"phase": "Succeeded",
                 "containerStatuses": [{"state": {"terminated": {"exitCode": 0}}}]}}

def _logs(self):
    for i, p in enumerate(self.obs.pods.values()):
        uuid = f"GPU-0000000{i}-0000-0000-0000-000000000000"
        p.logs = (f"== nvidia-smi -L\\nGPU 0: NVIDIA A100-SXM4-80GB (UUID: {uuid})\\n"
                  "rc=0\\n== env\\nNVIDIA_VISIBLE_DEVICES=void\\n== devices\\n/dev/nvidia0\\n/dev/nvidiactl\\n"
                  "== cdi\\nnvidia.yaml\\n== end\\n")

def _cleanup(self):
    self.obs.deleted = True

probe_mod.Probe._gpus_in_use = lambda self, nodes: {}
probe_mod.Probe._create_pods = _create
probe_mod.Probe._wait = _wait
probe_mod.Probe._capture_logs = _logs
probe_mod.Probe._cleanup = _cleanup
"""


def test_the_fake_run_is_conformant_without_a_fault(inprocess) -> None:
    # The control: the same run without an injected failure reaches CONFORMANT, so the tests below can fail.
    result, reports = inprocess(HEALTHY_PROBE)
    assert result.ret == 0, result.stdout.str()[-3000:]
    assert verdict_of(reports) == "CONFORMANT"


def test_410_on_the_probe_pod_list_is_incomplete_exit_3_not_a_traceback(inprocess) -> None:
    # Issue 26 HIGH: a refused pod LIST (then an expired continue token) ended in INTERNALERROR and CONFORMANT.
    result, reports = inprocess(HEALTHY_PROBE + """
def gone(self, nodes):
    raise probe_api.ProbeApiError(410, "The provided continue parameter is too old")
probe_mod.Probe._gpus_in_use = gone
""")
    out = result.stdout.str() + result.stderr.str()
    assert result.ret == EXIT_CLUSTER_ACCESS, out[-3000:]
    assert "INTERNALERROR" not in out and "Traceback" not in out
    assert "continue parameter is too old" in out
    assert verdict_of(reports) == "INCOMPLETE"


def test_a_bug_in_the_probe_is_incomplete_and_exit_7(inprocess) -> None:
    result, reports = inprocess(HEALTHY_PROBE + """
def broken(self):
    raise KeyError("status")
probe_mod.Probe._wait = broken
""")
    out = result.stdout.str() + result.stderr.str()
    assert result.ret == EXIT_INTERNAL, out[-3000:]
    assert "internal error in the probe: KeyError" in out and "Traceback" not in out
    assert verdict_of(reports) == "INCOMPLETE"
    data = json.loads((reports / "conformance.json").read_text())
    assert "internal error" in data["probe"]["aborted"]


def test_a_crash_in_a_hook_writes_error_reports_and_exit_7(inprocess) -> None:
    # Any INTERNALERROR (here: a hook that raises after every check passed) must not leave a green report.
    result, reports = inprocess(HEALTHY_PROBE + """
def pytest_runtest_logfinish(nodeid, location):
    if "PRB" in nodeid:
        raise RuntimeError("a plugin broke")
""")
    out = result.stdout.str() + result.stderr.str()
    assert result.ret == EXIT_INTERNAL, out[-3000:]
    # pytest's terminal reporter still prints the foreign plugin's traceback; ours adds the one line to act on.
    assert "internal error during the run: RuntimeError: a plugin broke" in out
    assert verdict_of(reports) == "ERROR"
    assert "a plugin broke" in (reports / "internal-error.txt").read_text()


def test_a_crash_while_reading_is_one_line_and_exit_7(inprocess) -> None:
    result, reports = inprocess("""
def start2(self):
    raise TypeError("'int' object is not subscriptable")
ConformanceRun.start = start2
""")
    out = result.stdout.str() + result.stderr.str()
    assert result.ret == EXIT_INTERNAL, out[-3000:]
    assert "internal error while reading the cluster: TypeError" in out and "Traceback" not in out
    assert verdict_of(reports) == "ERROR"


def on_writing_json(body: str) -> str:
    """Conftest code that runs the statement `body` (with `path` bound) when conformance.json is about to be written."""
    return f"""
import errno, os, signal, sys
json_report = sys.modules["gpu_conformance.report.json_report"]
real_write = json_report.write_text_atomic
def write_text_atomic(path, text):
    if path.name == "conformance.json":
        {body.strip()}
    return real_write(path, text)
json_report.write_text_atomic = write_text_atomic
"""


def test_reports_that_cannot_be_written_are_exit_8_and_the_probe_is_cleaned_up(inprocess) -> None:
    # ENOSPC while writing conformance.json: was a traceback and exit 1 ("not conformant").
    result, _ = inprocess(HEALTHY_PROBE + on_writing_json(
        'raise OSError(errno.ENOSPC, "No space left on device", str(path))') + """
def _cleanup(self):
    self.obs.deleted = True
    print("PROBE-CLEANED")
probe_mod.Probe._cleanup = _cleanup
""", "-s")
    out = result.stdout.str() + result.stderr.str()
    assert result.ret == EXIT_OUTPUT, out[-3000:]
    assert "No space left on device" in out and "Traceback" not in out
    assert "PROBE-CLEANED" in out


# ---- unit level -------------------------------------------------------------------------------------------------

def _pod(node: str, gpus: int) -> dict[str, Any]:
    return {"spec": {"nodeName": node, "containers": [{"resources": {"limits": {"nvidia.com/gpu": str(gpus)}}}]},
            "status": {"phase": "Running"}}


def test_operand_logs_are_read_with_a_byte_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    # One 5 MB log line gave a 33 MB pytest.html: the read is bounded by the API server (limitBytes).
    import gpu_conformance.cluster.reader as reader

    asked: list[dict[str, str]] = []

    def raw(api: object, method: str, path: str, query: list | None = None, *_: object, **__: object) -> bytes:
        q = dict(query or [])
        asked.append(q)
        return b"x" * min(int(q.get("limitBytes") or 5_000_000), 5_000_000)

    monkeypatch.setattr(reader, "raw_request", raw)
    from check_runner import N1
    from factory import healthy_snapshot, pod_for, stuck_init

    DRIVER = "nvidia-driver-daemonset"

    snap = healthy_snapshot()
    pod = pod_for(snap, DRIVER, N1)
    stuck_init(pod, "k8s-driver-manager")
    r = reader.ClusterReader(SimpleNamespace(api=None, server="https://x", context="c", user="u"))  # type: ignore[arg-type]
    logs = r._stuck_container_logs("gpu-operator", snap.pods)
    assert asked and all(q["limitBytes"] == str(reader.LOG_LIMIT_BYTES) for q in asked)
    text = logs[(pod["metadata"]["name"], "k8s-driver-manager")]
    assert len(text) < reader.LOG_LIMIT_BYTES + 100 and text.endswith(f"<log cut at {reader.LOG_LIMIT_BYTES} bytes>")


def test_a_long_log_line_is_clipped_in_the_finding() -> None:
    from check_runner import N1, only_node
    from factory import healthy_snapshot, pod_for, stuck_init

    from gpu_conformance.checks.pods import LOG_LINE_CHARS
    DRIVER = "nvidia-driver-daemonset"

    snap = healthy_snapshot()
    stuck_init(pod_for(snap, DRIVER, N1), "k8s-driver-manager", snapshot=snap,
               log="starting\n" + "E" * 16_000 + "\n")
    f = only_node("DRV-002", snap)
    assert len(f.message) < LOG_LINE_CHARS + 1000 and "(15500 more characters)" in f.message


def test_a_closed_stdout_still_writes_the_reports_and_exits_8(tmp_path: Path) -> None:
    # `pytest --cluster | head -1`: was exit 1, no conformance report, an empty green junit.xml.
    import subprocess
    import sys

    tests_dir = Path(__file__).parent
    (tmp_path / "conftest.py").write_text(f"import sys\nsys.path.insert(0, {str(tests_dir)!r})\n"
                                          + FAKE_START + HEALTHY_PROBE.replace("\\\\n", "\\n"))
    (tmp_path / "test_layers.py").write_text(ALL_LAYERS)
    reports = tmp_path / "reports"
    proc = subprocess.Popen([sys.executable, "-m", "pytest", "--cluster", f"--report-dir={reports}",
                             "-p", "no:cacheprovider"], cwd=tmp_path, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.readline()  # what `head -1` reads, then it exits
    proc.stdout.close()
    err = proc.stderr.read()
    assert proc.wait(timeout=120) == EXIT_OUTPUT, err
    assert "standard output was closed" in err and "Traceback" not in err, err
    assert verdict_of(reports) == "CONFORMANT"  # the run itself finished: its verdict is kept
    from gpu_conformance import catalogue

    assert f'tests="{len(catalogue.all_checks())}"' in (reports / "junit.xml").read_text()


def test_a_signal_while_the_reports_are_written_waits_for_them(inprocess) -> None:
    # SIGTERM while reports were written: sometimes a traceback and exit 1, or no conformance.json.
    result, reports = inprocess(HEALTHY_PROBE + on_writing_json("os.kill(os.getpid(), signal.SIGTERM)"))
    out = result.stdout.str() + result.stderr.str()
    assert result.ret == 2, out[-3000:]
    assert "SIGTERM while the reports were written" in out and "Traceback" not in out
    assert verdict_of(reports) == "CONFORMANT"
    assert (reports / "conformance.html").is_file()


def test_a_failed_mig_manager_that_keeps_running_has_its_log_read(monkeypatch: pytest.MonkeyPatch) -> None:
    # DPL-009 quotes the MIG manager's words; it keeps running after `failed`, so no stuck/crash rule asked for them.
    import gpu_conformance.cluster.reader as reader

    asked: list[str] = []

    def raw(api: object, method: str, path: str, query: list | None = None, *_: object, **__: object) -> bytes:
        asked.append(path)
        return b"applying MIG mode change...\nerror: GPU 0 is in use by process 4242\n"

    monkeypatch.setattr(reader, "raw_request", raw)
    from check_runner import N1
    from factory import healthy_snapshot

    snap = healthy_snapshot()
    node = snap.node_by_name[N1]
    node["metadata"]["labels"][reader.MIG_STATE_LABEL] = "failed"
    mig_pod = {"metadata": {"name": "nvidia-mig-manager-x"}, "status": {"phase": "Running"},
               "spec": {"nodeName": N1, "containers": [{"name": "nvidia-mig-manager"}]}}
    elsewhere = {**mig_pod, "metadata": {"name": "nvidia-mig-manager-y"}, "spec": {**mig_pod["spec"],
                                                                                   "nodeName": "gpu-node-2"}}
    r = reader.ClusterReader(SimpleNamespace(api=None, server="https://x", context="c", user="u"))  # type: ignore[arg-type]
    logs = r._stuck_container_logs("gpu-operator", [mig_pod, elsewhere], reader.mig_failed_nodes(snap.nodes))
    assert list(logs) == [("nvidia-mig-manager-x", "nvidia-mig-manager")]
    assert "in use by process 4242" in logs[("nvidia-mig-manager-x", "nvidia-mig-manager")]
    assert asked == ["/api/v1/namespaces/gpu-operator/pods/nvidia-mig-manager-x/log"]


def test_gpu_holders_are_listed_only_on_nodes_stuck_in_plugin_validation(monkeypatch: pytest.MonkeyPatch) -> None:
    # DPL-006 counts who holds a node's GPUs (any namespace): one bounded LIST per such node, unfinished pods only.
    import gpu_conformance.cluster.reader as reader

    asked: list[str] = []

    def list_raw(self: object, spec: reader.ListSpec) -> list[dict]:
        asked.append(spec.field_selector)
        if "gpu-node-3" in spec.field_selector:
            raise reader.ClusterAccessError("list pods failed: HTTP 500")
        return [{"metadata": {"name": "jupyter-0", "namespace": "ml"}}]

    monkeypatch.setattr(reader.ClusterReader, "list_raw", list_raw)
    from factory import healthy_snapshot, pod_for, stuck_init

    snap = healthy_snapshot(gpu_nodes=3)
    for node in ("gpu-node-1", "gpu-node-3"):
        stuck_init(pod_for(snap, "nvidia-operator-validator", node), "plugin-validation")
    stuck_init(pod_for(snap, "nvidia-operator-validator", "gpu-node-2"), "toolkit-validation")
    nodes = reader.plugin_validation_stuck_nodes(snap.pods)
    assert nodes == ["gpu-node-1", "gpu-node-3"]
    r = reader.ClusterReader(SimpleNamespace(api=None, server="https://x", context="c", user="u"))  # type: ignore[arg-type]
    got = r._gpu_holder_pods(nodes)
    # A node whose read failed is left out (unknown), not the end of the run.
    assert list(got) == ["gpu-node-1"] and got["gpu-node-1"][0]["metadata"]["name"] == "jupyter-0"
    assert sorted(asked) == [f"spec.nodeName={n},status.phase!=Succeeded,status.phase!=Failed" for n in nodes]
    assert len(r._gpu_holder_pods([f"n{i}" for i in range(50)])) == reader.MAX_NODE_POD_READS


def test_gpu_holders_are_also_listed_on_nodes_whose_driver_manager_is_stuck() -> None:
    # DRV-002 names who holds the GPUs k8s-driver-manager cannot unload the driver under (gpu-operator #2166).
    from factory import healthy_snapshot, pod_for, stuck_init

    import gpu_conformance.cluster.reader as reader

    snap = healthy_snapshot(gpu_nodes=3)
    stuck_init(pod_for(snap, "nvidia-driver-daemonset", "gpu-node-2"), "k8s-driver-manager")
    stuck_init(pod_for(snap, "nvidia-operator-validator", "gpu-node-3"), "plugin-validation")
    stuck_init(pod_for(snap, "nvidia-operator-validator", "gpu-node-1"), "driver-validation")
    assert reader.driver_manager_stuck_nodes(snap.pods) == ["gpu-node-2"]
    assert reader.gpu_holder_nodes(snap.pods) == ["gpu-node-2", "gpu-node-3"]
