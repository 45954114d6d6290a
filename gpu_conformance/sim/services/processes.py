"""Process supervision for the test bed: start a component in a process group of its own, know it is still the
process we started, stop its whole group.

The control plane's components, the real operator and the operand loop all run this way: a pid alone is never
trusted (pids are recycled), so each process is remembered with its start time from /proc/<pid>/stat, and a
signal goes only to a group whose leader still has that start time.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

# The caller's proxy and kubeconfig settings: a component gets its own (or none), never these.
NOT_INHERITED = frozenset({"HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "ALL_PROXY", "KUBECONFIG"})
STOP_GRACE = 5.0


@dataclass
class Proc:
    name: str
    pid: int
    start_time: int           # /proc/<pid>/stat field 22: guards against killing a recycled pid
    popen: subprocess.Popen[bytes] | None = None


def spawn_logged(name: str, cmd: list[str], log_path: Path, cwd: Path, env: dict[str, str]) -> Proc:
    """Start one component in a session of its own (stopped by its process group), its output appended to
    log_path after a line naming the command; the environment is ours without NOT_INHERITED, plus `env`."""
    run_env = {k: v for k, v in os.environ.items() if k.upper() not in NOT_INHERITED}
    run_env.update(env)
    with open(log_path, "ab") as log:
        log.write(f"\n# {datetime.now(UTC).isoformat()} {' '.join(cmd)}\n".encode())
        log.flush()
        popen = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                 cwd=cwd, env=run_env, start_new_session=True, close_fds=True)
    return Proc(name, popen.pid, proc_start_time(popen.pid) or 0, popen)


def proc_stat(pid: int) -> list[str] | None:
    """Fields of /proc/<pid>/stat after the command name (index 0 = state), or None if gone."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return raw[raw.rindex(")") + 2:].split()


def proc_start_time(pid: int) -> int | None:
    stat = proc_stat(pid)
    return int(stat[19]) if stat else None


def is_same_process(pid: int, start_time: int) -> bool:
    """Whether `pid` is still the process that had `start_time`, never a recycled pid."""
    return proc_start_time(pid) == start_time


def group_alive(pgid: int) -> bool:
    # Zombies do not count: a reaped-later child must not make teardown wait for nothing.
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            stat = proc_stat(int(entry.name))
            if stat and stat[2] == str(pgid) and stat[0] != "Z":
                return True
    return False


def ours(proc: Proc) -> bool:
    # The group leader still being the process we started (same start time) proves the pgid is ours.
    if proc.popen is not None and proc.popen.poll() is None:
        return True
    start = proc_start_time(proc.pid)
    return start is not None and (proc.start_time == 0 or start == proc.start_time)


def signal_group(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def stop_all(procs: list[Proc], grace_by_name: Mapping[str, float]) -> None:
    """Stop each group in reverse start order: SIGTERM, up to its grace (STOP_GRACE unless `grace_by_name`
    says otherwise), then SIGKILL; reap children.

    One at a time, dependents first (for the control plane: kwok, scheduler, kcm, apiserver, etcd): the apiserver
    exits in about a second while etcd is still up, but stalls for seconds when etcd is killed under it.
    """
    for proc in reversed(procs):
        if not ours(proc):
            continue
        signal_group(proc.pid, signal.SIGTERM)
        if not wait_group_gone(proc, grace_by_name.get(proc.name, STOP_GRACE)):
            signal_group(proc.pid, signal.SIGKILL)
            # After SIGKILL the kernel may need a moment to tear the process down and free its ports.
            wait_group_gone(proc, STOP_GRACE)
        if proc.popen is not None:
            # Reap our child: the group check ignores zombies, so it may have died after the last poll.
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.popen.wait(timeout=STOP_GRACE)


def wait_group_gone(proc: Proc, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while True:
        if not group_alive(proc.pid):
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.02)


def last_line(log: Path) -> str:
    """The last non-empty line of a process's log, for the one-line error that names why it did not start."""
    try:
        lines = [ln.strip() for ln in log.read_text(errors="replace").splitlines() if ln.strip()]
    except OSError:
        return "no log"
    return lines[-1][:300] if lines else "empty log"
