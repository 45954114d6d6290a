"""A Docker daemon of the tier's own: its own data root, exec root, pidfile and unix socket; stopped by PID.

Started only when no usable Docker is given (DOCKER_HOST set by the user, as in a GitHub Actions runner, is used
as is). Kept off the network: no iptables rules, no default bridge, no IP forwarding (the host's stays off, so a
container's packet to an outside address dies in this machine's routing), and the embedded DNS forwards to a
loopback address nothing answers on. kind then creates its user-defined `kind` bridge on this daemon.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from gpu_conformance.errors import ConformanceError
from gpu_conformance.sim.services.processes import proc_start_time

# Capability names by number (linux/capability.h), to read this machine's bounding set.
_CAPS = (
    "CHOWN", "DAC_OVERRIDE", "DAC_READ_SEARCH", "FOWNER", "FSETID", "KILL", "SETGID", "SETUID", "SETPCAP",
    "LINUX_IMMUTABLE", "NET_BIND_SERVICE", "NET_BROADCAST", "NET_ADMIN", "NET_RAW", "IPC_LOCK", "IPC_OWNER",
    "SYS_MODULE", "SYS_RAWIO", "SYS_CHROOT", "SYS_PTRACE", "SYS_PACCT", "SYS_ADMIN", "SYS_BOOT", "SYS_NICE",
    "SYS_RESOURCE", "SYS_TIME", "SYS_TTY_CONFIG", "MKNOD", "LEASE", "AUDIT_WRITE", "AUDIT_CONTROL", "SETFCAP",
    "MAC_OVERRIDE", "MAC_ADMIN", "SYSLOG", "WAKE_ALARM", "BLOCK_SUSPEND", "AUDIT_READ", "PERFMON", "BPF",
    "CHECKPOINT_RESTORE",
)

# A runc wrapper as dockerd's default runtime. Docker 20.10 (Debian's docker.io) gives a --privileged container
# every capability it knows, and runc fails with "unable to apply caps: operation not permitted" when one is
# outside this machine's bounding set (CAP_SYS_RESOURCE here). kind's node containers are privileged, so the
# wrapper drops, from the bundle's config.json, exactly the capabilities the bounding set lacks; then it is runc.
_RUNC_WRAPPER = """#!/usr/bin/python3
import json, os, sys
CAPS = %r
args = sys.argv[1:]

def arg(*names):
    return next((args[i + 1] for i, a in enumerate(args[:-1]) if a in names), None)

def bound(caps):
    bnd = next(int(l.split()[1], 16) for l in open("/proc/self/status") if l.startswith("CapBnd:"))
    lacking = {"CAP_" + n for i, n in enumerate(CAPS) if not bnd >> i & 1}
    for k, v in caps.items():
        caps[k] = [c for c in v or () if c not in lacking]

if "create" in args or "run" in args:      # the container: <bundle>/config.json, process.capabilities
    path = os.path.join(arg("--bundle", "-b") or ".", "config.json")
    key = ("process", "capabilities")
elif "exec" in args and arg("--process", "-p"):   # docker exec --privileged: a process.json
    path, key = arg("--process", "-p"), ("capabilities",)
else:
    path = None
if path:
    with open(path) as f:
        spec = json.load(f)
    node = spec
    for k in key:
        node = node.get(k) or {}
    if node:
        bound(node)
        with open(path, "w") as f:
            json.dump(spec, f)
os.execvp("runc", ["runc", *args])
"""


class DockerError(ConformanceError):
    """The tier's Docker daemon could not be started or used."""


class DockerUnavailable(DockerError):
    """No dockerd binary or no root on this machine: callers may skip."""


def unavailable_reason() -> str | None:
    """Why this machine cannot run the tier's own dockerd, or None."""
    if os.environ.get("DOCKER_HOST"):
        return None
    if os.geteuid() != 0:
        return "the kind tier starts its own dockerd, which needs root (or set DOCKER_HOST to a running Docker)"
    for tool in ("dockerd", "docker"):
        if shutil.which(tool) is None:
            return f"the kind tier needs `{tool}` (apt-get install docker.io)"
    return None


def tier_root() -> Path:
    from gpu_conformance.go_build import cache_root

    return cache_root() / "kind-docker"


@contextlib.contextmanager
def docker_for_tier() -> Iterator[Dockerd]:
    """The user's Docker when DOCKER_HOST is set, else a daemon of our own for the duration (stopped by PID)."""
    if os.environ.get("DOCKER_HOST"):
        yield Dockerd(tier_root(), external=True)
        return
    daemon = Dockerd(tier_root()).start()
    try:
        yield daemon
    finally:
        daemon.stop()


@dataclass
class Dockerd:
    root: Path                      # data-root (images survive here between runs), exec-root, logs
    pid: int = 0
    start_time: int = 0
    popen: subprocess.Popen[bytes] | None = None
    external: bool = False          # the user's daemon (DOCKER_HOST): used, never started or stopped

    @property
    def socket(self) -> Path:
        # A short path: unix socket paths are limited to 108 bytes.
        return self.root / "d.sock"

    @property
    def host(self) -> str:
        return os.environ["DOCKER_HOST"] if self.external else f"unix://{self.socket}"

    def env(self) -> dict[str, str]:
        return {**os.environ, "DOCKER_HOST": self.host}

    def start(self, timeout: float = 60.0) -> Dockerd:
        reason = unavailable_reason()
        if reason:
            raise DockerUnavailable(reason)
        self.root.mkdir(parents=True, exist_ok=True)
        self._stop_stale()
        wrapper = self.root / "runc-bounded"
        wrapper.write_text(_RUNC_WRAPPER % (_CAPS,))
        wrapper.chmod(0o755)
        log = open(self.root / "dockerd.log", "ab")  # noqa: SIM115 - handed to the child for its lifetime
        cmd = ["dockerd", "--data-root", str(self.root / "data"), "--exec-root", str(self.root / "exec"),
               "--pidfile", str(self.root / "dockerd.pid"), "-H", self.host, "--iptables=false",
               "--ip6tables=false", "--ip-forward=false", "--ip-masq=false", "--bridge=none",
               "--dns", "127.0.0.1", "--userland-proxy=true", "--storage-driver=overlay2",
               "--add-runtime", f"runc-bounded={wrapper}", "--default-runtime", "runc-bounded",
               "--log-level=warn", "--containerd-namespace", "gpu-conformance-kind",
               "--containerd-plugins-namespace", "gpu-conformance-kind-plugins"]
        self.popen = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                      start_new_session=True)
        log.close()
        self.pid = self.popen.pid
        self.start_time = proc_start_time(self.pid) or 0
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.popen.poll() is not None:
                raise DockerError(f"dockerd exited with {self.popen.returncode}: see {self.root / 'dockerd.log'}")
            if self.socket.exists() and self.docker("version", check=False).returncode == 0:
                return self
            time.sleep(0.3)
        self.stop()
        raise DockerError(f"dockerd did not answer within {timeout:.0f} s: see {self.root / 'dockerd.log'}")

    def docker(self, *args: str, check: bool = True, input: bytes | None = None,
               timeout: float | None = 600) -> subprocess.CompletedProcess[bytes]:
        proc = subprocess.run(["docker", *args], env=self.env(), capture_output=True, input=input,
                              timeout=timeout, check=False)
        if check and proc.returncode != 0:
            raise DockerError(f"docker {' '.join(args[:3])} failed: {proc.stderr.decode(errors='replace')[-400:]}")
        return proc

    def _stop_stale(self) -> None:
        # A daemon of an earlier, killed run still holding this root: ours by pidfile and command line only.
        pidfile = self.root / "dockerd.pid"
        with contextlib.suppress(OSError, ValueError):
            pid = int(pidfile.read_text().strip())
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            if cmdline and cmdline[0].endswith(b"dockerd") and str(self.root).encode() in b" ".join(cmdline):
                _terminate(pid, proc_start_time(pid) or 0)

    def stop(self) -> None:
        if self.pid:
            _terminate(self.pid, self.start_time, self.popen)
            if self.popen is not None:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    self.popen.wait(timeout=1)
            self.pid = 0


def _terminate(pid: int, start_time: int, popen: subprocess.Popen[bytes] | None = None,
               grace: float = 20.0) -> None:
    """SIGTERM, then SIGKILL after `grace`: dockerd stops its containerd and shims itself on SIGTERM."""
    def alive() -> bool:
        if popen is not None:
            return popen.poll() is None  # our child: reaped here, never a zombie counted as alive
        st = proc_start_time(pid)
        return st is not None and (not start_time or st == start_time)

    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 5.0)):
        if not alive():
            return
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)
        deadline = time.monotonic() + wait
        while alive() and time.monotonic() < deadline:
            time.sleep(0.2)
