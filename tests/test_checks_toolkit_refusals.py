"""Two families the fourth blind round misread (real cases #531, #2060).

DRV-006 reads a runtime refusal in every shape kubelet reports it: besides the waiting reasons, a container the
runtime could not start is terminated with containerd's StartError (exit 128) or dockershim's ContainerCannotRun, and
while kubelet backs off it is waiting CrashLoopBackOff with that refusal as lastState.

DRV-003 reads the toolkit's "unsupported config version: N" against the toolkit image: releases before v1.17.4 do
not read containerd 2's config version 3; the toolkit of v1.10..v1.16 runs that step as its own program, whose fatal
line sits above the wrapper's closing "error running ... command: exit status 1" (log_quote).
"""

from __future__ import annotations

import pytest
from check_runner import N1, on
from check_runner import only_node as assert_only_node_fails
from factory import crash_container, healthy_snapshot, pod_for, stuck_init

from gpu_conformance.checks import driver_toolkit  # noqa: F401  (registers the checks)
from gpu_conformance.log_quote import telling_line
from gpu_conformance.model import Status

TOOLKIT = "nvidia-container-toolkit-daemonset"
TOOLKIT_CTR = "nvidia-container-toolkit-ctr"
PLUGIN = "nvidia-device-plugin-daemonset"
VALIDATOR = "nvidia-operator-validator"
CDI = ("failed to create containerd task: failed to create shim task: OCI runtime create failed: could not apply "
       "required modification to OCI specification: error modifying OCI spec: failed to inject CDI devices: "
       "unresolvable CDI devices management.nvidia.com/gpu=all: unknown")
NO_BINARY = ('failed to create containerd task: failed to create shim task: OCI runtime create failed: runc create '
             'failed: unable to start container process: exec: "nvidia-smi": executable file not found in $PATH')
DOCKER = ("OCI runtime create failed: container_linux.go:380: starting container process caused: "
          "process_linux.go:545: container init caused: Running hook #0:: error running hook: exit status 1")


def _as_last_state(pod: dict, container: str, reason: str) -> None:
    """Turn the container's previous attempt into the runtime's refusal (kubelet backing off from it)."""
    for cs in pod["status"]["containerStatuses"] + (pod["status"].get("initContainerStatuses") or []):
        if cs["name"] == container:
            cs["lastState"]["terminated"]["reason"] = reason
            cs["lastState"]["terminated"]["exitCode"] = 128


# ---- runtime refusals in terminated / lastState shapes (DRV-006) -----------------------------------------------
def test_a_toolkit_container_terminated_with_start_error_is_the_runtimes_cdi_refusal():
    snap = healthy_snapshot("v23.3.1", cdi=True)
    crash_container(pod_for(snap, TOOLKIT, N1), TOOLKIT_CTR, "StartError", restarts=12, exit_code=128, message=CDI)
    f = assert_only_node_fails("DRV-006", snap)
    assert "StartError" in f.message and "unresolvable CDI devices management.nvidia.com/gpu=all" in f.message
    assert "CDI spec" in f.message


def test_crash_loop_backing_off_from_a_start_error_is_a_refusal_now():
    snap = healthy_snapshot("v25.10.1")
    pod = pod_for(snap, PLUGIN, N1)
    crash_container(pod, "nvidia-device-plugin", "CrashLoopBackOff", restarts=4, exit_code=128, message=NO_BINARY)
    _as_last_state(pod, "nvidia-device-plugin", "StartError")
    f = assert_only_node_fails("DRV-006", snap)
    assert "StartError" in f.message and "executable file not found" in f.message


def test_an_init_container_in_start_error_is_a_refusal():
    snap = healthy_snapshot("v22.9.2")
    stuck_init(pod_for(snap, VALIDATOR, N1), "toolkit-validation", "StartError", restarts=6, exit_code=128,
               message=CDI)
    f = assert_only_node_fails("DRV-006", snap)
    assert "nvidia-operator-validator" in f.message and "unresolvable CDI devices" in f.message


def test_dockershims_container_cannot_run_is_a_refusal():
    snap = healthy_snapshot("v22.9.2")
    crash_container(pod_for(snap, PLUGIN, N1), "nvidia-device-plugin", "ContainerCannotRun", restarts=3,
                    exit_code=128, message=DOCKER)
    f = assert_only_node_fails("DRV-006", snap)
    assert "ContainerCannotRun" in f.message and "Running hook #0" in f.message


def test_a_container_running_again_has_outlived_its_start_error():
    snap = healthy_snapshot("v25.10.1")
    pod = pod_for(snap, PLUGIN, N1)
    crash_container(pod, "nvidia-device-plugin", "Running", restarts=2, exit_code=128, message=NO_BINARY)
    _as_last_state(pod, "nvidia-device-plugin", "StartError")
    assert on("DRV-006", snap).status == Status.PASS


# ---- the toolkit's containerd config version against its image (DRV-003) ----------------------------------------
SUBCOMMAND_LOG = ('time="2026-01-21T12:32:09Z" level=info msg="Setting up runtime"\n'
                  'time="2026-01-21T12:32:09Z" level=fatal msg="Error: unable to load config: unsupported config '
                  'version: 3"\n'
                  'time="2026-01-21T12:32:09Z" level=info msg="Shutting Down"\n'
                  'time="2026-01-21T12:32:09Z" level=error msg="error running nvidia-toolkit: unable to setup runtime: '
                  'error running containerd command: exit status 1"')
INPROCESS_LOG = ('time="2025-01-10T08:00:00Z" level=error msg="error running nvidia-toolkit: unable to setup runtime: '
                 'unable to load containerd config: unsupported config version: 3"')


def _toolkit_image(snap, tag: str) -> None:
    for c in pod_for(snap, TOOLKIT, N1)["spec"]["containers"]:
        if c["name"] == TOOLKIT_CTR:
            c["image"] = f"nvcr.io/nvidia/k8s/container-toolkit:{tag}"


@pytest.mark.parametrize(("version", "tag", "log"), [
    ("v25.10.1", "v1.14.6-centos7", SUBCOMMAND_LOG),     # #2060: an old image pinned under a new operator
    ("v24.9.2", "v1.16.2-ubuntu20.04", SUBCOMMAND_LOG),  # the last release with step programs
    ("v24.9.2", "v1.17.3-ubuntu20.04", INPROCESS_LOG),   # in-process, still before version 3 support
])
def test_an_old_toolkit_image_on_containerd_2_names_the_image_and_the_release_that_reads_it(version, tag, log):
    snap = healthy_snapshot(version)
    _toolkit_image(snap, tag)
    crash_container(pod_for(snap, TOOLKIT, N1), TOOLKIT_CTR, "CrashLoopBackOff", restarts=6, snapshot=snap, log=log)
    f = assert_only_node_fails("DRV-003", snap)
    assert tag in f.message and "v1.17.4" in f.message and "config version 3" in f.message
    assert "unsupported config version: 3" in f.message      # the quoted line is the one that says it
    assert "toolkit.version" in f.hint


def test_an_undatable_toolkit_image_still_names_the_config_version():
    snap = healthy_snapshot("v25.10.1")
    _toolkit_image(snap, "latest")
    crash_container(pod_for(snap, TOOLKIT, N1), TOOLKIT_CTR, "CrashLoopBackOff", restarts=6, snapshot=snap,
                    log=SUBCOMMAND_LOG)
    f = assert_only_node_fails("DRV-003", snap)
    assert "config version 3" in f.message and "v1.17.4" not in f.message


def test_a_toolkit_crash_without_a_config_version_keeps_the_general_meaning():
    snap = healthy_snapshot("v25.10.1")
    crash_container(pod_for(snap, TOOLKIT, N1), TOOLKIT_CTR, "CrashLoopBackOff", restarts=6, snapshot=snap,
                    log='level=error msg="error running nvidia-toolkit: unable to setup runtime: unable to restart '
                        'containerd: signal: killed"')
    f = assert_only_node_fails("DRV-003", snap)
    assert "could not configure the container runtime" in f.message and "config version" not in f.message


# ---- which toolkit line says why (log_quote) ---------------------------------------------------------------------
def test_the_toolkit_wrappers_closing_line_yields_to_the_step_programs_fatal_line():
    assert telling_line(SUBCOMMAND_LOG) == (SUBCOMMAND_LOG.splitlines()[1], True)


def test_a_wrapper_line_without_a_fatal_step_line_is_quoted_as_is():
    log = 'level=info msg="Shutting Down"\nlevel=error msg="error running nvidia-toolkit: unable to install toolkit: ' \
          'error running [toolkit install] command: exit status 2"'
    assert telling_line(log) == (log.splitlines()[-1], False)


def test_other_programs_last_line_is_still_theirs():
    log = 'level=fatal msg="first"\nlevel=error msg="failed to start plugin: exit status 1"'
    assert telling_line(log) == (log.splitlines()[-1], False)
