"""Evidence read in time order (issue 20 item 4): a runtime refusal explains a node only when it was seen after the
node's toolkit became Ready and after the pod last ran; before that the driver is the story, and a driver within
its startup probe's window is work in progress.

The bring-up order these tests encode (GPU Operator v25.3.4 and v26.7.0): runtimeClass operands (validator, device
plugin, GFD, DCGM exporter, MIG manager) need the `nvidia` handler, which the toolkit writes only after its own
driver-validation init container passed and removes when it exits; the driver container's startup probe allows
60 s + 120 × 10 s.
"""

from __future__ import annotations

import pytest
from check_runner import N1, on
from factory import (
    T1,
    T2,
    add_event,
    crash_container,
    events_api_form,
    fail_pod,
    healthy_snapshot,
    pod_for,
    refresh,
    remove_pods,
    sandbox_refused,
    stuck_init,
)

from gpu_conformance import catalogue
from gpu_conformance.check_input import check_input
from gpu_conformance.checks import driver_toolkit  # noqa: F401  (registers the checks)
from gpu_conformance.cluster.snapshot import ClusterSnapshot
from gpu_conformance.cluster.timeline import event_last_seen, parse_time, pod_last_start
from gpu_conformance.model import Layer, Status
from gpu_conformance.settings import Settings
from gpu_conformance.verdict import Verdict, decide

DRIVER = "nvidia-driver-daemonset"
TOOLKIT = "nvidia-container-toolkit-daemonset"
VALIDATOR = "nvidia-operator-validator"
CUDA = "nvidia-cuda-validator"
RUNTIME_CLASS_OPERANDS = (VALIDATOR, "nvidia-device-plugin-daemonset", "gpu-feature-discovery",
                          "nvidia-dcgm-exporter")
NO_NVIDIA_RUNTIME = ('Failed to create pod sandbox: rpc error: code = Unknown desc = failed to get sandbox runtime: '
                     'no runtime for "nvidia" is configured')
BRING_UP = "2026-10-01T09:07:00Z"     # the operands' refusals while the driver is not up (driver started 09:06)


def judge(snap: ClusterSnapshot) -> Verdict:
    refresh(snap)
    inp = check_input(snap, Settings())
    findings = [f for c in catalogue.all_checks() if c.func for f in c.run(inp)]
    return decide(catalogue.all_checks(), findings, snap.gpu_node_names, [la for la in Layer if la != Layer.PROBE])


def node_verdict(v: Verdict, node: str = N1):
    return next(n for n in v.nodes if n.node == node)


def fresh_node(version: str, driver_state: str = "Running", message: str = "") -> ClusterSnapshot:
    """gpu-node-1 just joined: its driver container is not Ready (compiling, or `driver_state`), the toolkit waits
    in driver-validation, every runtimeClass operand is refused its sandbox (no handler yet), no CUDA validator."""
    snap = healthy_snapshot(version)
    crash_container(pod_for(snap, DRIVER, N1), "nvidia-driver-ctr", reason=driver_state, restarts=0,
                    message=message, snapshot=snap)
    stuck_init(pod_for(snap, TOOLKIT, N1), "driver-validation", reason="Running", restarts=0, snapshot=snap)
    for app in RUNTIME_CLASS_OPERANDS:
        sandbox_refused(snap, pod_for(snap, app, N1), NO_NVIDIA_RUNTIME, first=BRING_UP, last=BRING_UP)
    remove_pods(snap, CUDA, N1)
    return snap


# ---- a fresh node ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("version", ["v25.3.4", "v26.7.0"])
def test_fresh_node_with_the_driver_compiling_is_in_progress_not_a_runtime_fault(version: str) -> None:
    snap = fresh_node(version)
    snap.read_at = "2026-10-01T09:10:00Z"           # 4 min into the driver's 21 min
    v = judge(snap)
    nv = node_verdict(v, N1)
    assert nv.root_cause is None, nv.root_cause
    assert nv.transient is not None and nv.transient.check_id == "DRV-002"
    assert "4 min of the 21 min" in nv.transient.message
    drv6 = on("DRV-006", snap)
    assert drv6.status == Status.PASS and "not held against it" in drv6.message
    assert "handler cannot exist yet" in drv6.message and len(drv6.evidence["history"]) == 4
    assert on("DRV-003", snap).status == Status.NA and "still starting" in on("DRV-003", snap).message
    assert on("DRV-004", snap).status == Status.NA
    opr7 = on("OPR-007", snap)                      # the DCGM exporter is refused too: waiting, not broken
    assert opr7.status == Status.WARN and "no sandbox before the toolkit is Ready" in opr7.message
    assert v.overall != "NOT CONFORMANT", [(n.node, n.root_cause) for n in v.nodes]
    assert all(node_verdict(v, n).root_cause is None for n in ("gpu-node-2", "gpu-node-3"))


def test_driver_past_its_startup_window_is_the_root_cause() -> None:
    snap = fresh_node("v26.7.0")
    snap.read_at = "2026-10-01T09:40:00Z"           # 34 min: kubelet's startup probe would have given up
    nv = node_verdict(judge(snap), N1)
    assert nv.root_cause is not None and nv.root_cause.check_id == "DRV-002", nv.root_cause
    assert "longer than its startup probe allows (21 min)" in nv.root_cause.message
    assert on("DRV-006", snap).status == Status.PASS


def test_driver_restarted_by_its_startup_probe_is_a_failure_at_once() -> None:
    snap = fresh_node("v25.3.4", driver_state="CrashLoopBackOff")
    crash_container(pod_for(snap, DRIVER, N1), "nvidia-driver-ctr", restarts=2, snapshot=snap)
    snap.read_at = "2026-10-01T09:10:00Z"
    nv = node_verdict(judge(snap), N1)
    assert nv.root_cause is not None and nv.root_cause.check_id == "DRV-002" and nv.transient is None


def test_toolkit_that_cannot_pull_its_image_fails_while_the_driver_is_still_starting() -> None:
    snap = fresh_node("v26.7.0")
    stuck_init(pod_for(snap, TOOLKIT, N1), "driver-validation", reason="ImagePullBackOff", restarts=0,
               message='Back-off pulling image "nvcr.io/nvidia/gpu-operator:v26.7.0"', snapshot=snap)
    snap.read_at = "2026-10-01T09:10:00Z"
    nv = node_verdict(judge(snap), N1)
    assert nv.root_cause is not None and nv.root_cause.check_id == "DRV-003", nv.root_cause
    assert "cannot pull its image" in nv.root_cause.message


@pytest.mark.parametrize("version", ["v25.3.4", "v26.7.0"])
def test_driver_image_not_pullable_is_the_root_cause_not_the_runtime(version: str) -> None:
    snap = fresh_node(version, driver_state="ImagePullBackOff",
                      message='Back-off pulling image "nvcr.io/nvidia/driver:580.82.07-ubuntu24.04"')
    snap.read_at = "2026-10-01T09:10:00Z"
    nv = node_verdict(judge(snap), N1)
    assert nv.root_cause is not None and nv.root_cause.check_id == "DRV-002", nv.root_cause
    assert "cannot pull its image" in nv.root_cause.message
    assert on("DRV-006", snap).status == Status.PASS


def test_startup_window_comes_from_the_daemonsets_probe() -> None:
    snap = fresh_node("v26.7.0")
    ds = snap.daemonset(DRIVER)
    assert ds is not None
    ctr = next(c for c in ds["spec"]["template"]["spec"]["containers"] if c["name"] == "nvidia-driver-ctr")
    ctr["startupProbe"] = {"initialDelaySeconds": 60, "periodSeconds": 10, "failureThreshold": 6}   # 2 min
    snap.read_at = "2026-10-01T09:10:00Z"
    f = on("DRV-002", snap)
    assert f.status == Status.FAIL and "allows (2 min)" in f.message


# ---- the field-note story: toolkit Ready, then the runtime refuses ------------------------------------------------
@pytest.mark.parametrize("form", ["core/v1", "events.k8s.io/v1"])
def test_refusal_after_the_toolkit_became_ready_is_the_runtimes(form: str) -> None:
    snap = healthy_snapshot("v26.7.0")
    for app in RUNTIME_CLASS_OPERANDS:
        sandbox_refused(snap, pod_for(snap, app, N1), NO_NVIDIA_RUNTIME)   # 09:06 → 09:30; toolkit Ready 09:06
    if form != "core/v1":
        for ev in snap.events:
            events_api_form(ev, "2026-10-01T09:30:00Z")
    nv = node_verdict(judge(snap), N1)
    assert nv.root_cause is not None and nv.root_cause.check_id == "DRV-006", nv.root_cause
    assert "no nvidia handler" in nv.root_cause.message and "last seen 2026-10-01T09:30:00Z" in nv.root_cause.message


def test_refusal_while_the_toolkit_restarts_is_not_the_runtimes() -> None:
    # k8s-driver-manager evicts the toolkit on a driver reload and the installer removes the handler on exit:
    # until the toolkit is Ready again the refusals are expected; the toolkit's own state is the finding.
    snap = healthy_snapshot("v25.3.4")
    crash_container(pod_for(snap, TOOLKIT, N1), "nvidia-container-toolkit-ctr", restarts=4, snapshot=snap)
    sandbox_refused(snap, pod_for(snap, VALIDATOR, N1), NO_NVIDIA_RUNTIME)
    nv = node_verdict(judge(snap), N1)
    assert nv.root_cause is not None and nv.root_cause.check_id == "DRV-003", nv.root_cause
    assert on("DRV-004", snap).status == Status.NA and "before the toolkit" in on("DRV-004", snap).message


def test_host_configured_runtime_refusal_is_judged_without_a_toolkit() -> None:
    snap = healthy_snapshot("v26.7.0", toolkit=False)
    sandbox_refused(snap, pod_for(snap, VALIDATOR, N1), NO_NVIDIA_RUNTIME)
    nv = node_verdict(judge(snap), N1)
    assert nv.root_cause is not None and nv.root_cause.check_id == "DRV-006", nv.root_cause


# ---- old bring-up events, pods now stuck elsewhere -------------------------------------------------------------
def test_bring_up_refusals_do_not_explain_a_validator_stuck_later() -> None:
    snap = healthy_snapshot("v25.3.4")
    validator = pod_for(snap, VALIDATOR, N1)
    stuck_init(validator, "cuda-validation", reason="Running", restarts=0, snapshot=snap)
    fail_pod(pod_for(snap, CUDA, N1), "cuda-validation", snapshot=snap,
             log="Failed to allocate device vector A (error code system not yet initialized)!")
    # Refused at 09:00-09:05, before the toolkit became Ready (09:06) and before the init containers ran.
    add_event(snap, "Pod", validator["metadata"]["name"], "FailedCreatePodSandBox", NO_NVIDIA_RUNTIME,
              first="2026-10-01T09:00:00Z", last=T1)
    v = judge(snap)
    nv = node_verdict(v, N1)
    assert nv.root_cause is not None and nv.root_cause.check_id == "DRV-005", nv.root_cause
    drv6 = on("DRV-006", snap)
    assert drv6.status == Status.PASS and "before the pod's containers last started" in drv6.message


def test_bring_up_refusal_before_toolkit_ready_is_history_even_with_nothing_started() -> None:
    snap = healthy_snapshot("v26.7.0")
    sandbox_refused(snap, pod_for(snap, VALIDATOR, N1), NO_NVIDIA_RUNTIME, first=T1, last=T1)
    drv6 = on("DRV-006", snap)
    assert drv6.status == Status.PASS and "bring-up history" in drv6.message
    nv = node_verdict(judge(snap), N1)
    assert nv.root_cause is not None and nv.root_cause.check_id != "DRV-006"


# ---- missing timestamps ------------------------------------------------------------------------------------------
def test_refusal_without_any_time_on_a_pod_that_never_ran_is_judged_and_said_unknown() -> None:
    snap = healthy_snapshot("v26.7.0")
    sandbox_refused(snap, pod_for(snap, VALIDATOR, N1), NO_NVIDIA_RUNTIME)
    events_api_form(snap.events[-1], None)
    toolkit = pod_for(snap, TOOLKIT, N1)
    for c in toolkit["status"]["conditions"]:
        c.pop("lastTransitionTime", None)
    f = on("DRV-006", snap)
    assert f.status == Status.FAIL and "carries no time" in f.message and f.evidence["last_seen"] == "unknown"


def test_refusal_without_any_time_on_a_pod_that_ran_since_is_history() -> None:
    snap = healthy_snapshot("v26.7.0")
    validator = pod_for(snap, VALIDATOR, N1)
    stuck_init(validator, "cuda-validation", reason="Running", restarts=0, snapshot=snap)
    events_api_form(add_event(snap, "Pod", validator["metadata"]["name"], "FailedCreatePodSandBox",
                              NO_NVIDIA_RUNTIME), None)
    f = on("DRV-006", snap)
    assert f.status == Status.PASS and "unknown time" in f.message


def test_driver_without_read_time_or_start_time_is_in_progress_and_says_so() -> None:
    snap = fresh_node("v26.7.0")
    driver = pod_for(snap, DRIVER, N1)
    for cs in driver["status"]["containerStatuses"]:
        cs["state"] = {"running": {}}
    driver["status"].pop("startTime", None)
    f = on("DRV-002", snap)                          # snap.read_at is "" (unknown) in factory snapshots
    assert f.status == Status.WARN and f.evidence["transient"] and "cannot tell how long" in f.message


def test_timestamps_are_read_in_every_form() -> None:
    assert parse_time("2026-10-01T09:05:00Z") == parse_time("2026-10-01T09:05:00.000000Z")
    assert parse_time("") is None and parse_time(None) is None and parse_time("yesterday") is None
    later = {"lastTimestamp": T1, "eventTime": "2026-10-01T09:00:00.000000Z",
             "series": {"lastObservedTime": "2026-10-01T09:30:00.5Z"}}
    assert event_last_seen(later) == parse_time("2026-10-01T09:30:00.5Z")
    assert event_last_seen({"lastTimestamp": None, "eventTime": None}) is None
    assert event_last_seen({"lastTimestamp": T2}) == parse_time(T2)
    assert pod_last_start({"status": {}}) is None
