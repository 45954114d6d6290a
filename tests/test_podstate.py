"""podstate: readiness, kubectl STATUS text and the stuck init container, over pods shaped like kubelet's."""

from __future__ import annotations

import copy

import pytest
from factory import crash_container, fail_pod, healthy_snapshot, pod_for, set_restarts, stuck_init

from gpu_conformance.cluster.podstate import (
    crashlooping,
    failing_container,
    pod_ready,
    pod_status_text,
    restart_count,
    stuck_init_container,
)

VALIDATOR = "nvidia-operator-validator"
PLUGIN = "nvidia-device-plugin-daemonset"


@pytest.fixture
def snap():
    return healthy_snapshot("v26.3.3")


def test_healthy_pod(snap):
    pod = pod_for(snap, VALIDATOR, "gpu-node-1")
    assert pod_ready(pod) is True
    assert pod_status_text(pod) == "Running"
    assert stuck_init_container(pod) is None
    assert restart_count(pod) == 0
    assert crashlooping(pod) == []
    assert failing_container(pod) is None


def test_init_crashloop_names_the_container(snap):
    pod = stuck_init(pod_for(snap, VALIDATOR, "gpu-node-1"), "toolkit-validation", restarts=12,
                     message="nvidia-smi: command not found")
    assert pod_ready(pod) is False
    assert pod_status_text(pod) == "Init:CrashLoopBackOff"
    stuck = stuck_init_container(pod)
    assert stuck == {"name": "toolkit-validation", "index": 1, "total": 4, "state": "waiting",
                     "reason": "CrashLoopBackOff", "exit_code": 1, "restarts": 12,
                     "message": "nvidia-smi: command not found"}
    assert crashlooping(pod) == ["toolkit-validation"]
    assert restart_count(pod) == 12


def test_init_running_shows_progress_counter(snap):
    pod = stuck_init(pod_for(snap, PLUGIN, "gpu-node-2"), "toolkit-validation", reason="Running", restarts=0)
    assert pod_status_text(pod) == "Init:0/1"
    stuck = stuck_init_container(pod)
    assert stuck is not None
    assert (stuck["name"], stuck["state"], stuck["restarts"]) == ("toolkit-validation", "running", 0)
    assert crashlooping(pod) == []


def test_later_init_running_counts_completed_ones(snap):
    pod = stuck_init(pod_for(snap, VALIDATOR, "gpu-node-1"), "cuda-validation", reason="Running", restarts=0)
    assert pod_status_text(pod) == "Init:2/4"
    assert stuck_init_container(pod)["name"] == "cuda-validation"


def test_v25_3_validator_chain_matched_by_position_of_its_own_list():
    snap = healthy_snapshot("v25.3.4")
    pod = stuck_init(pod_for(snap, VALIDATOR, "gpu-node-1"), "toolkit-validation", reason="Running", restarts=0)
    # v25.3: driver-validation, nvidia-fs-validation, toolkit-validation, ... -> two completed before it
    assert pod_status_text(pod) == "Init:2/5"
    assert stuck_init_container(pod)["index"] == 2


def test_init_terminated_error_and_exit_code(snap):
    pod = stuck_init(pod_for(snap, VALIDATOR, "gpu-node-1"), "driver-validation", reason="Error", restarts=0,
                     exit_code=3)
    assert pod_status_text(pod) == "Init:Error"
    stuck = stuck_init_container(pod)
    assert (stuck["state"], stuck["reason"], stuck["exit_code"]) == ("terminated", "Error", 3)
    pod["status"]["initContainerStatuses"][0]["state"]["terminated"]["reason"] = ""
    assert pod_status_text(pod) == "Init:ExitCode:3"


def test_init_image_pull(snap):
    pod = stuck_init(pod_for(snap, "nvidia-driver-daemonset", "gpu-node-1"), "k8s-driver-manager",
                     reason="ImagePullBackOff", restarts=0)
    assert pod_status_text(pod) == "Init:ImagePullBackOff"
    assert stuck_init_container(pod)["reason"] == "ImagePullBackOff"


def test_main_container_crashloop(snap):
    pod = crash_container(pod_for(snap, "nvidia-driver-daemonset", "gpu-node-3"), "nvidia-driver-ctr", restarts=7)
    assert pod_status_text(pod) == "CrashLoopBackOff"
    assert stuck_init_container(pod) is None
    assert crashlooping(pod) == ["nvidia-driver-ctr"]
    assert restart_count(pod) == 7
    assert failing_container(pod)["name"] == "nvidia-driver-ctr"
    assert pod_ready(pod) is False


def test_restart_count_is_max_over_init_and_main(snap):
    pod = pod_for(snap, VALIDATOR, "gpu-node-1")
    set_restarts(pod, "driver-validation", 4)
    set_restarts(pod, "nvidia-operator-validator", 2)
    assert restart_count(pod) == 4
    assert pod_ready(pod) is True


def test_completed_and_failed_run_to_completion_pod(snap):
    pod = pod_for(snap, "nvidia-cuda-validator", "gpu-node-1")
    assert pod_status_text(pod) == "Completed"
    assert pod_ready(pod) is False
    assert stuck_init_container(pod) is None
    fail_pod(pod, "cuda-validation", exit_code=2)
    assert pod["status"]["phase"] == "Failed"
    assert pod_status_text(pod) == "Init:Error"
    assert stuck_init_container(pod)["exit_code"] == 2


def test_terminating_and_pending(snap):
    pod = copy.deepcopy(pod_for(snap, PLUGIN, "gpu-node-1"))
    pod["metadata"]["deletionTimestamp"] = "2026-10-01T10:00:00Z"
    assert pod_status_text(pod) == "Terminating"

    pending = copy.deepcopy(pod_for(snap, PLUGIN, "gpu-node-1"))
    pending["status"] = {"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False",
                                                            "reason": "Unschedulable"}]}
    assert pod_status_text(pending) == "Pending"
    stuck = stuck_init_container(pending)
    assert (stuck["name"], stuck["state"], stuck["reason"]) == ("toolkit-validation", "waiting", "")


def test_ready_main_after_completed_container_shows_running(snap):
    pod = copy.deepcopy(pod_for(snap, VALIDATOR, "gpu-node-1"))
    done = copy.deepcopy(pod["status"]["containerStatuses"][0])
    done["name"] = "side"
    done["ready"] = False
    done["state"] = {"terminated": {"exitCode": 0, "reason": "Completed"}}
    pod["status"]["containerStatuses"].insert(0, done)
    assert pod_status_text(pod) == "Running"


def test_started_sidecar_init_container_is_not_stuck(snap):
    pod = copy.deepcopy(pod_for(snap, PLUGIN, "gpu-node-1"))
    pod["spec"]["initContainers"].append({"name": "sidecar", "image": "x", "restartPolicy": "Always"})
    pod["status"]["initContainerStatuses"].append({"name": "sidecar", "ready": True, "started": True,
                                                   "restartCount": 0, "state": {"running": {}}})
    assert stuck_init_container(pod) is None
    assert pod_status_text(pod) == "Running"


def test_statuses_without_spec_fall_back_to_status_order():
    pod = {"status": {"phase": "Pending", "initContainerStatuses": [
        {"name": "a", "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}},
        {"name": "b", "restartCount": 2, "state": {"waiting": {"reason": "CrashLoopBackOff"}},
         "lastState": {"terminated": {"exitCode": 127, "message": "boom"}}}]}}
    assert pod_status_text(pod) == "Init:CrashLoopBackOff"
    stuck = stuck_init_container(pod)
    assert (stuck["name"], stuck["exit_code"], stuck["message"], stuck["restarts"]) == ("b", 127, "boom", 2)
