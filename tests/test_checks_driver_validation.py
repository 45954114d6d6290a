"""A stuck driver-validation read in the validator's own words (DRV-003, DRV-004): the step that failed differs by
release and by driver mode, and only some of them mean the driver is unusable (checks/driver_validation.py)."""

from __future__ import annotations

import pytest
from check_runner import N1
from check_runner import only_node as assert_only_node_fails
from factory import healthy_snapshot, pod_for, stuck_init

from gpu_conformance.checks import driver_toolkit  # noqa: F401  (registers the checks)
from gpu_conformance.checks.driver_validation import driver_stage_meaning, exit_meaning

VALIDATOR = "nvidia-operator-validator"
TOOLKIT = "nvidia-container-toolkit-daemonset"
GENERAL = "the NVIDIA driver is not usable"

# The validator's /dev/char step after nvidia-smi passed (validator/main.go createDevCharSymlinks, every release).
DEV_CHAR = ('level=info msg="Error: error validating driver installation: error creating symlink creator: failed '
            "to load NVIDIA kernel modules: failed to load module nvidia-modeset: exit status 1; "
            "output=modprobe: ERROR: could not insert 'nvidia_modeset': No such device\"")
DEV_CHAR_LINKS = ('level=info msg="Error: error validating driver installation: error creating symlinks: '
                  'permission denied"')
# v24.9..v25.3 with a host driver: the host attempt leaves no trace, the container path loops.
LOOP_V25_3 = "\n".join(['level=info msg="Attempting to validate a pre-installed driver on the host"']
                       + ['level=info msg="Attempting to validate a driver container installation"',
                          'level=warning msg="failed to validate the driver, retrying after 5 seconds\\n"'] * 3)
# v22.9..v24.6 without /usr/bin/nvidia-smi on the host: it waits for a driver container that never comes.
LOOP_V23 = "\n".join(["Driver is not pre-installed on the host. Checking driver container status."]
                     + ["running command bash with args [-c stat /run/nvidia/validations/.driver-ctr-ready]",
                        "command failed, retrying after 5 seconds"] * 3)
# v22.9..v24.6 with /usr/bin/nvidia-smi present but failing: the retried command names the host.
HOST_RETRY_V23 = "\n".join(["Detected pre-installed driver on the host"]
                           + ["running command chroot with args [/host nvidia-smi]",
                              "command failed, retrying after 5 seconds"] * 3)


def host_error(err: str) -> str:
    """v25.10+: the host check's error, logged once before the container-path loop."""
    return "\n".join([f'level=info msg="No pre-installed driver detected on the host: {err}"',
                      'level=info msg="Validating containerized driver installation"',
                      'level=info msg="Attempting to validate a driver container installation"',
                      'level=warning msg="failed to validate the driver, retrying after 5 seconds\\n"'])


@pytest.mark.parametrize(("version", "log", "words"), [
    ("v23.9.1", DEV_CHAR, ["/dev/char", "nvidia-modeset", "DISABLE_DEV_CHAR_SYMLINK_CREATION", "not a broken driver"]),
    ("v25.3.4", DEV_CHAR_LINKS, ["/dev/char", "DISABLE_DEV_CHAR_SYMLINK_CREATION"]),
    ("v26.3.3", host_error("exit status 14"), ["exit status 14", "infoROM is corrupted"]),
    ("v26.3.3", host_error("exit status 15"), ["fallen off the bus"]),
    ("v25.10.1", host_error("no 'nvidia-smi' file present on the host: lstat /host/usr/bin/nvidia-smi: no such "
                            "file or directory"), ["no /usr/bin/nvidia-smi on the host"]),
    ("v25.3.2", LOOP_V25_3, ["/usr/bin/nvidia-smi", "/run/nvidia/driver", "host driver does not provide"]),
    ("v23.9.1", LOOP_V23, ["/usr/bin/nvidia-smi", "host driver does not provide"]),
    ("v22.9.2", HOST_RETRY_V23, ["host driver's nvidia-smi fails"]),
])
def test_validator_driver_stage_names_the_step_its_log_names(version, log, words):
    snap = healthy_snapshot(version, driver="host")
    stuck_init(pod_for(snap, VALIDATOR, N1), "driver-validation", reason="Running", restarts=0, snapshot=snap,
               log=log)
    f = assert_only_node_fails("DRV-004", snap)
    assert "validator stuck in driver-validation" in f.message and GENERAL not in f.message
    assert all(w in f.message for w in words), f.message


def test_toolkit_driver_stage_reads_the_same_log():
    snap = healthy_snapshot("v23.9.1", driver="host")
    stuck_init(pod_for(snap, TOOLKIT, N1), "driver-validation", restarts=6, snapshot=snap, log=DEV_CHAR)
    f = assert_only_node_fails("DRV-003", snap)
    assert "/dev/char" in f.message and "DISABLE_DEV_CHAR_SYMLINK_CREATION" in f.message
    assert GENERAL not in f.message


def test_operator_driver_loop_keeps_the_general_meaning():
    """With the operator's driver the container path is the right one: a loop there is the driver container not
    ready, as before."""
    snap = healthy_snapshot("v25.3.2")
    stuck_init(pod_for(snap, VALIDATOR, N1), "driver-validation", reason="Running", restarts=0, snapshot=snap,
               log=LOOP_V25_3)
    f = assert_only_node_fails("DRV-004", snap)
    assert GENERAL in f.message and "/usr/bin/nvidia-smi" not in f.message


def test_no_log_keeps_the_general_meaning():
    assert driver_stage_meaning("", host_driver=True) is None
    assert driver_stage_meaning("some unrelated line", host_driver=True) is None


@pytest.mark.parametrize(("text", "words"), [
    ("exit status 9", "not loaded"), ("exit status 12", "NVML library"), ("exit status 255", "internal"),
    ("exit status 3", ""), ("no exit here", ""),
])
def test_nvidia_smi_exit_codes(text, words):
    meaning = exit_meaning(text)
    assert (words in meaning) if words else meaning == ""


def test_host_error_logged_once_is_read_from_the_head_of_the_log():
    """v25.10+: the host error is logged once; a minute later the last lines are only the driver-container retry
    loop, and the reader's head read (snapshot.log_heads) still has it."""
    snap = healthy_snapshot("v26.3.3", driver="host")
    pod = pod_for(snap, VALIDATOR, N1)
    head = host_error("exit status 14")
    loop = "\n".join(['level=info msg="Attempting to validate a driver container installation"',
                      'level=warning msg="failed to validate the driver, retrying after 5 seconds\\n"'] * 10)
    stuck_init(pod, "driver-validation", reason="Running", restarts=0, snapshot=snap, log=loop)
    tail_only = assert_only_node_fails("DRV-004", snap)
    assert "/usr/bin/nvidia-smi" in tail_only.message and "infoROM" not in tail_only.message
    snap.log_heads[(pod["metadata"]["name"], "driver-validation")] = head
    f = assert_only_node_fails("DRV-004", snap)
    assert "exit status 14" in f.message and "infoROM is corrupted" in f.message


def test_reader_reads_the_head_of_a_driver_validation_log_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """One more request per stuck driver-validation container: limitBytes without tailLines (the log's start)."""
    from types import SimpleNamespace

    import gpu_conformance.cluster.reader as reader

    asked: list[tuple[str, dict[str, str]]] = []

    def raw(api: object, method: str, path: str, query: list | None = None, *_: object, **__: object) -> bytes:
        asked.append((path, dict(query or [])))
        return b"No pre-installed driver detected on the host: exit status 14\n" + b"x" * 10_000

    monkeypatch.setattr(reader, "raw_request", raw)
    r = reader.ClusterReader(SimpleNamespace(api=None, server="https://x", context="c", user="u"))  # type: ignore[arg-type]
    heads = r._log_heads("gpu-operator", [("v-1", "driver-validation")])
    (path, query), = asked
    assert path.endswith("/pods/v-1/log") and "tailLines" not in query
    assert query == {"container": "driver-validation", "limitBytes": str(reader.HEAD_LOG_BYTES)}
    assert heads[("v-1", "driver-validation")].startswith("No pre-installed driver")
    assert len(heads[("v-1", "driver-validation")]) == reader.HEAD_LOG_BYTES
    assert r._log_heads("gpu-operator", []) == {} and len(asked) == 1
