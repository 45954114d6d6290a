"""Which line of a failing container's log says what went wrong: the one a finding quotes.

Most operand containers die on their error, so their last line is the one to quote. The driver container does
not: its script (NVIDIA/gpu-driver-container, `nvidia-driver` of every distribution) runs `_shutdown` on EXIT,
which stops the driver's daemons, unloads the modules and unmounts the driver rootfs, echoing one line per step.
A build or load failure therefore always ends in the same cleanup lines, and the cause (the compiler's or the
installer's ERROR, the kernel's refusal quoted under "Kernel messages:") sits above them, behind lines that only
say that something failed (make's `***` lines, the installer's generic "Unable to load the kernel module ...
This happens most frequently when ..."). Those are skipped so the quote names the cause.
"""

from __future__ import annotations

import re

# The driver script's cleanup lines (`_unload_driver`, `_unmount_rootfs`, the signal trap), in every
# distribution's script and the vGPU manager's: printed after any failure, never its cause.
DRIVER_EPILOGUE = (
    "Stopping NVIDIA persistence daemon...",
    "Stopping NVIDIA grid daemon...",
    "Stopping NVIDIA topology daemon...",
    "Stopping NVIDIA fabric manager daemon...",
    "Stopping NVLink Subnet Manager daemon...",
    "Unloading NVIDIA driver kernel modules...",
    "Unmounting NVIDIA driver rootfs...",
    "Caught signal",
)

# Lines that say a step failed without saying why; the specific line is above them.
_GENERIC = re.compile(
    r"^make(\[\d+\])?: \*\*\*"                                   # make: a target failed (the compiler said why)
    r"|^ERROR: Installation has failed"                          # nvidia-installer's closing line
    r"|^ERROR: Unable to load the kernel module '[^']*'\.\s+This happens most frequently"  # its load boilerplate
    r"|^ERROR: An error occurred while performing the step"      # names the step, the output above says why
    r"|^ERROR: Failed to update the NVIDIA driver"               # the script's ERR trap
    r"|^ERROR: The nvidia kernel module was not created",
)
_ERRORISH = re.compile(r"error|fail|rejected|could not|unable to|cannot|can't|not found|no such|denied|"
                       r"not permitted|invalid|incompatible", re.IGNORECASE)


def _lines(log: str) -> list[str]:
    return [ln.strip() for ln in log.splitlines() if ln.strip()]


def telling_line(log: str) -> tuple[str, bool]:
    """The line to quote and whether it is an earlier error rather than the last line ('' when the log is empty).

    Only a log that ends in the driver script's cleanup is searched backwards: any other container's last line is
    what it died on, and quoting anything else would second-guess it.
    """
    lines = _lines(log)
    if not lines:
        return "", False
    body = list(lines)
    while body and body[-1] in DRIVER_EPILOGUE:
        body.pop()
    if len(body) == len(lines) or not body:
        return lines[-1], False
    specific = next((ln for ln in reversed(body) if _ERRORISH.search(ln) and not _GENERIC.search(ln)), None)
    if specific is not None:
        return specific, True
    return body[-1], True


def with_log(message: str, log: str) -> str:
    """The message with the log line that says what went wrong (see telling_line)."""
    line, earlier = telling_line(log)
    if not line:
        return message
    return f'{message} — {"error in its log" if earlier else "last log line"}: "{line}"'
