"""Which line of a failing container's log says what went wrong: the one a finding quotes.

Most operand containers die on their error, so their last line is the one to quote. The driver container does
not: its script (NVIDIA/gpu-driver-container, `nvidia-driver` of every distribution) runs `_shutdown` on EXIT,
which stops the driver's daemons, unloads the modules and unmounts the driver rootfs, echoing one line per step.
A build or load failure therefore always ends in the same cleanup lines, and the cause (the compiler's or the
installer's ERROR, the kernel's refusal quoted under "Kernel messages:") sits above them, behind lines that only
say that something failed (make's `***` lines, the installer's generic "Unable to load the kernel module ...
This happens most frequently when ..."). Those are skipped so the quote names the cause.

Every operand container but the driver's is a Go program (device plugin, GFD, MIG manager, validator, toolkit,
DCGM exporter, driver manager), and a Go program that dies in a panic, a runtime fatal error or klog's Fatal does not
end on its error either: the runtime then prints the stack of every goroutine ("goroutine 1 [running]:" and two
lines per frame), so the last line is a source position. The line that names the cause is the one just above the
first goroutine header: "panic: ...", "fatal error: ..." or klog's F-line. When the read tail starts inside the
dump, that line is not in it, and the quote says so instead of quoting a frame.

The container toolkit of v1.10 .. v1.16 (NVIDIA/nvidia-container-toolkit tools/container/nvidia-toolkit/run.go) runs
its steps as separate programs ("toolkit install", "<runtime> setup|cleanup"). When one dies, that program's own
fatal line (logrus `level=fatal msg="Error: ..."`) says why; the wrapper then logs "Shutting Down" and ends on
"error running nvidia-toolkit: ...: error running <command> command: exit status N", which only says that it
failed. The fatal line above is quoted instead.

CUDA's samples (vectorAdd, which the validator's CUDA stage runs in its workload pod) print their banner on stdout
and their error on stderr ("Failed to allocate device vector A (error code ...)!"), then exit. The container log
holds the two streams as the runtime read them, so when the program fails at once the banner can come after the
error (seen on the kind tier: the last line "[Vector addition of 50000 elements]"). The sample's error line is quoted
wherever it is.
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


# The first line of a goroutine's stack in a Go dump (runtime/traceback.go: "goroutine N [status]:", the status
# possibly with ", M minutes" or ", locked to thread").
_GO_STACK_HEADER = re.compile(r"^goroutine \d+ \[[^\]]*\]:$")
# What a Go program prints before that dump: a panic (nested ones as "panic: ... [recovered]" lines), the
# runtime's "fatal error: ...", or klog's Fatal line ("F1215 12:28:28.123456       1 main.go:42] ...").
_GO_DEATH = re.compile(r"^(panic: |fatal error: |F\d{4} \d\d:\d\d:\d\d)")
# A line of a goroutine's stack: "pkg.Func(args)", its "/path/file.go:87 +0x336", "created by ...", and what the
# runtime or a wrapper adds at the end. A dump only counts when the log ends in it (a program that dumped its
# stacks on SIGQUIT and went on logging did not die of it).
_GO_FRAME = re.compile(r"^(created by .+|\S+\(.*\)|\S+\.go:\d+( \+0x[0-9a-f]+)?|\.\.\.\d+ frames elided\.\.\.|"
                       r"exit status \d+|\[signal .+\])$")
GO_DUMP_CUT = "its log ends in a Go stack trace whose panic message lies above the lines read"


# The toolkit wrapper's closing line when a step program failed, and that program's own death (logrus Fatal).
_TOOLKIT_WRAPPER = re.compile(r"error running nvidia-toolkit: .*error running .+ command: exit status \d+")
_STEP_DEATH = re.compile(r"level=fatal\b")


# A CUDA sample's error line (cuda-samples' checks: "Failed to <step> (error code <cudaGetErrorString>)!").
_CUDA_SAMPLE_ERROR = re.compile(r"^Failed to .+ \(error code .+\)!?$")


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
    death = _go_death(lines)
    if death is not None:
        return death, True
    sample = next((ln for ln in reversed(lines) if _CUDA_SAMPLE_ERROR.match(ln)), None)
    if sample is not None:
        return sample, sample != lines[-1]
    if _TOOLKIT_WRAPPER.search(lines[-1]):
        step = next((ln for ln in reversed(lines[:-1]) if _STEP_DEATH.search(ln)), None)
        if step is not None:
            return step, True
    body = list(lines)
    while body and body[-1] in DRIVER_EPILOGUE:
        body.pop()
    if len(body) == len(lines) or not body:
        return lines[-1], False
    specific = next((ln for ln in reversed(body) if _ERRORISH.search(ln) and not _GENERIC.search(ln)), None)
    if specific is not None:
        return specific, True
    return body[-1], True


def _go_death(lines: list[str]) -> str | None:
    """The panic/fatal line above the Go stack dump a log ends in; None when it has no dump, or the dump's start
    was not read (go_dump_cut)."""
    headers = [i for i, ln in enumerate(lines) if _GO_STACK_HEADER.match(ln)]
    if not headers or not all(_GO_FRAME.match(ln) for ln in lines[headers[-1] + 1:]):
        return None
    deaths = [i for i in range(headers[-1]) if _GO_DEATH.match(lines[i])]
    if not deaths:
        return None
    first = deaths[-1]
    # "panic: A [recovered]" then "panic: B": the first of the run is what the program died of first.
    while first > 0 and _GO_DEATH.match(lines[first - 1]):
        first -= 1
    return lines[first]


def go_dump_cut(log: str) -> bool:
    """Whether the log read ends in a Go stack dump whose panic/fatal line is above its first line."""
    lines = _lines(log)
    headers = [i for i, ln in enumerate(lines) if _GO_STACK_HEADER.match(ln)]
    return (bool(headers) and all(_GO_FRAME.match(ln) for ln in lines[headers[-1] + 1:])
            and not any(_GO_DEATH.match(ln) for ln in lines[:headers[-1]]))


def with_log(message: str, log: str) -> str:
    """The message with the log line that says what went wrong (see telling_line)."""
    if go_dump_cut(log):
        return f"{message} — {GO_DUMP_CUT} (read the whole previous log)"
    line, earlier = telling_line(log)
    if not line:
        return message
    return f'{message} — {"error in its log" if earlier else "last log line"}: "{line}"'
