"""What a validator's `driver-validation` init container says about why it is stuck, read from its own log.

The same program (nvidia-validator, component driver) runs in the validator's, the toolkit's and other operands'
driver-validation init containers. From NVIDIA/gpu-operator `validator/main.go` (v22.9.0..v25.3.x) and
`cmd/nvidia-validator/main.go` (v25.10.0..v26.7.0) it fails in three different places, and only one of them means
the driver is unusable:

- the host check: with /usr/bin/nvidia-smi under the host root it runs `chroot /host nvidia-smi`; without it (or,
  from v24.9.0, when that fails) it falls back to the driver container path and loops there. On a node with a host
  driver (driver.enabled=false, or pre-installed) there is no driver container, so a loop on that path means the
  host's nvidia-smi is missing from /usr/bin or fails. The shapes differ by release: v22.9..v24.6 retry either
  `running command chroot with args [/host nvidia-smi]` (present but failing) or, after "Driver is not
  pre-installed on the host", `stat /run/nvidia/validations/.driver-ctr-ready` (absent), printing no exit status;
  v24.9..v25.3 log "failed to validate the driver" and nothing about the host attempt; from v25.10.0 the host
  error is logged once, `No pre-installed driver detected on the host: <err>`.
- nvidia-smi's own exit status (`exit status N`): its documented return codes tell a GPU fault (14 infoROM
  corrupted, 15 GPU fallen off the bus) from a driver not loaded (9) — the GPU Operator's troubleshooting guide
  lists 14 as "infoROM is corrupted (nvidia-smi return code 14)".
- after the driver passed: creating /dev/char symlinks to the NVIDIA device nodes (`error creating symlink
  creator` / `error creating symlinks`, with the validator's own text that DISABLE_DEV_CHAR_SYMLINK_CREATION=true
  in ClusterPolicy validator.driver.env turns the step off; every release from v22.9.0). This is the validator's
  step, not the driver: nvidia-smi had already worked.
"""

from __future__ import annotations

import re

# nvidia-smi(1) RETURN VALUE, the codes that name a cause a node's owner can act on.
NVIDIA_SMI_EXIT: dict[int, str] = {
    9: "the NVIDIA driver is not loaded",
    12: "the NVML library could not be found or loaded",
    14: "the GPU's infoROM is corrupted (a GPU fault: check or replace the GPU)",
    15: "the GPU has fallen off the bus or is otherwise inaccessible (a GPU or PCIe fault)",
    255: "nvidia-smi hit an internal or driver error",
}

_HOST_ERROR = re.compile(r"No pre-installed driver detected on the host: (.+?)\"?$")
_EXIT = re.compile(r"exit status (\d+)")
_MODULE = re.compile(r"failed to load module ([\w-]+)")
_DEV_CHAR = ("error creating symlink creator", "error creating symlinks",
             "Failed to create symlinks under /dev/char")
# The fallback to a driver container: v24.9+ wording, and the v22.9..v24.6 retried command.
_CONTAINER_LOOP = ("failed to validate the driver", "Attempting to validate a driver container installation",
                   "Driver is not pre-installed on the host", ".driver-ctr-ready",
                   "chroot with args [/run/nvidia/driver nvidia-smi]")
_HOST_RETRY = "chroot with args [/host nvidia-smi]"


def exit_meaning(text: str) -> str:
    """'exit status 14' → 'nvidia-smi exits 14: the GPU's infoROM is corrupted (...)'; '' without a known code."""
    m = _EXIT.search(text)
    if m is None or int(m.group(1)) not in NVIDIA_SMI_EXIT:
        return ""
    code = int(m.group(1))
    return f"nvidia-smi exits {code}: {NVIDIA_SMI_EXIT[code]}"


def driver_stage_meaning(log: str, host_driver: bool, head: str = "") -> str | None:
    """Why driver-validation is stuck, in the validator's own terms; None when its log says nothing more specific
    (the caller keeps its general meaning). `log` is its last lines, `head` its first ones where they were read
    (the host error of v25.10+ is logged once, at the start)."""
    lines = [line for line in (head + "\n" + log).splitlines() if line.strip()]
    text = "\n".join(lines)
    if any(marker in text for marker in _DEV_CHAR):
        module = _MODULE.search(text)
        what = f" (loading kernel module {module.group(1)} failed)" if module else ""
        return ("the driver passed nvidia-smi, but the validator's next step failed: creating /dev/char symlinks "
                f"to the NVIDIA device nodes{what} — the validator's own step, not a broken driver; its message "
                "names the switch: DISABLE_DEV_CHAR_SYMLINK_CREATION=true in ClusterPolicy validator.driver.env")
    host_error = next((m.group(1) for line in lines if (m := _HOST_ERROR.search(line))), None)
    if host_error is not None:
        decoded = exit_meaning(host_error)
        if "no 'nvidia-smi' file present" in host_error:
            decoded = "there is no /usr/bin/nvidia-smi on the host, where the validator looks for a host driver"
        elif "empty 'nvidia-smi' file" in host_error:
            decoded = "the host's /usr/bin/nvidia-smi is an empty file"
        detail = f" — {decoded}" if decoded else ""
        return f"the validator rejected the host driver: \"{host_error}\"{detail}"
    if any(_HOST_RETRY in line for line in lines):
        decoded = exit_meaning(text)
        return ("the host driver's nvidia-smi fails (the validator retries `chroot /host nvidia-smi`)"
                + (f" — {decoded}" if decoded else ""))
    if host_driver and any(marker in text for marker in _CONTAINER_LOOP):
        return ("no working host driver where the validator looks: it runs /usr/bin/nvidia-smi on the host "
                "(chroot /host) and, when that is missing or fails, falls back to a driver container's files under "
                "/run/nvidia/driver, which this node's host driver does not provide — run `nvidia-smi` on the node "
                "(its exit status names the fault) and check that it is installed at /usr/bin/nvidia-smi")
    return None
