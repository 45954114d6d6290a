"""One real node: kubelet + containerd + the fake-GPU device plugin, joined to the simulated control plane.

Everything runs inside one private mount namespace and one network namespace that this module creates
(a `sleep` holds both): nothing on the host is written except this node's work dir and cgroup root.

* mounts (only in the private namespace): work-dir copies over /var/lib, /var/log and /run, because the
  kubelet hard-codes /var/lib/kubelet/device-plugins and /var/log/containers; and a file with the value
  the kubelet wants over each /proc/sys kernel tunable it would otherwise *set* on the host
  (vm.overcommit_memory, kernel.panic, ...): it reads the value it wants and leaves the host alone;
* network: a veth pair, the host end and the node end in a /30 of REALNODE_CIDR, so the API server
  reaches the kubelet (`kubectl logs`); a relay (relay.py) brings the API server's 127.0.0.1 port into
  the namespace; pods get addresses from a bridge CNI inside the namespace, with no default route, so
  nothing can leave the machine; image pulls go to a closed port (certs.d), failing at once;
* cgroups: the kubelet's cgroupRoot is a directory of its own (/gpu-rn-<id>) in each hierarchy, so
  teardown kills exactly the pods' processes and removes it;
* the fake GPU: the stack of fixtures/fake-gpu (sim/fakegpu.py): the device plugin writes the CDI spec and
  the fake nvidia-smi into the work dir, advertises nvidia.com/gpu and answers Allocate with CDI names, which
  containerd resolves with that spec (device nodes, env, nvidia-smi); the pause and probe images are the
  stack's (its Dockerfile's stages, built as OCI archives);
* the kubelet's API (port 10250 on the node's veth address) authenticates every caller: no anonymous
  requests; client certificates of the control plane's CA (the API server presents its own for logs/exec)
  and bearer tokens through TokenReview, each request authorized by SubjectAccessReview (webhook).

Every process started is recorded in <work>/realnode.json (pid + start time) and stopped by PID; the
namespaces, their mounts and the veth pair vanish with the last process in them.
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import os
import shutil
import signal
import ssl
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from http.client import HTTPSConnection
from pathlib import Path
from typing import Any

import yaml

from gpu_conformance.errors import ConformanceError
from gpu_conformance.sim import fakegpu
from gpu_conformance.sim.controlplane import Proc, last_line, spawn_logged
from gpu_conformance.sim.controlplane import proc_start_time as _start_time
from gpu_conformance.sim.failed_start import cleaned_up_on_failure
from gpu_conformance.sim.realnode import binaries as rnbin

# Node and host ends of each node's veth pair live in a /30 of this range; the simulated API server is
# told not to proxy it (SimCluster no_proxy), and nothing else on the machine is expected to use it.
REALNODE_CIDR = "10.213.0.0/16"
POD_CIDR = "10.214.0.0/24"            # inside the node's namespace only
KUBELET_PORT = 10250                  # inside the node's namespace only
PAUSE_IMAGE = fakegpu.PAUSE_IMAGE
BUSYBOX_IMAGE = fakegpu.BUSYBOX_IMAGE
STATE_FILE = "realnode.json"
REAL_NODE_LABEL = "gpu-conformance.sim/real-node"
# The kubelet sets these on start unless they already hold these values (container_manager_linux.go).
KUBELET_SYSCTLS = {"vm/overcommit_memory": "1", "vm/panic_on_oom": "0", "kernel/panic": "10",
                   "kernel/panic_on_oops": "1", "kernel/keys/root_maxkeys": "1000000",
                   "kernel/keys/root_maxbytes": "25000000"}
_STOP_GRACE = 5.0


class RealNodeError(ConformanceError):
    """The real node could not be started (the message names the step and its log)."""


class RealNodeUnsupported(RealNodeError):
    """This machine cannot run a real node (not root, no overlayfs, no namespaces...): callers may skip."""


def unsupported_reason() -> str | None:
    """Why this machine cannot run a real node, or None when it can (cheap: no build, no process)."""
    if sys.platform != "linux":
        return "the real-node tier needs Linux"
    if os.geteuid() != 0:
        return "the real-node tier needs root (namespaces, mounts, cgroups, veth)"
    if "overlay" not in Path("/proc/filesystems").read_text():
        return "the real-node tier needs overlayfs (containerd's snapshotter)"
    if not Path("/sys/fs/cgroup").is_dir():
        return "the real-node tier needs cgroups mounted at /sys/fs/cgroup"
    try:
        rnbin.host_tools()
    except ConformanceError as e:
        return str(e)
    probe = subprocess.run(["unshare", "--mount", "--net", "--propagation", "private", "true"],
                           capture_output=True, text=True, check=False)
    if probe.returncode != 0:
        return f"`unshare --mount --net` fails here: {probe.stderr.strip()[:200]}"
    return None


@dataclass
class ControlPlane:
    """What a node needs of the simulated control plane."""
    api_port: int
    ca_cert: Path
    ca_key: Path
    admin_kubeconfig: Path

    @classmethod
    def of(cls, sim: Any) -> ControlPlane:
        pki = sim.state_dir / "pki"
        return cls(api_port=int(sim.ports["apiserver"]), ca_cert=pki / "ca.crt", ca_key=pki / "ca.key",
                   admin_kubeconfig=sim.kubeconfig)


def _alive(pid: int, start_time: int) -> bool:
    st = _start_time(pid)
    if st is None or (start_time and st != start_time):
        return False
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def _stop_pid(pid: int, start_time: int, popen: subprocess.Popen[bytes] | None = None) -> None:
    """SIGTERM, up to _STOP_GRACE s, then SIGKILL; only while pid is still the process we started."""
    for sig, grace in ((signal.SIGTERM, _STOP_GRACE), (signal.SIGKILL, _STOP_GRACE)):
        if not _alive(pid, start_time):
            break
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)
        deadline = time.monotonic() + grace
        while _alive(pid, start_time) and time.monotonic() < deadline:
            if popen is not None and popen.poll() is not None:
                break
            time.sleep(0.05)
    if popen is not None:
        with contextlib.suppress(subprocess.TimeoutExpired):
            popen.wait(timeout=_STOP_GRACE)


def _ns_inode(pid: int, kind: str) -> str | None:
    try:
        return os.readlink(f"/proc/{pid}/ns/{kind}")
    except OSError:
        return None


def pids_in_namespace(holder_pid: int, kind: str = "mnt") -> list[int]:
    """Processes (other than the holder) in the namespace the holder holds: shims reparented to init."""
    ns = _ns_inode(holder_pid, kind)
    if ns is None:
        return []
    out = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != holder_pid and _ns_inode(int(entry.name), kind) == ns:
            out.append(int(entry.name))
    return out


def free_subnet() -> ipaddress.IPv4Network:
    """A /30 of REALNODE_CIDR that no host address or route uses yet (not race-free between processes)."""
    used = subprocess.run(["ip", "-4", "-o", "addr"], capture_output=True, text=True, check=False).stdout
    used += subprocess.run(["ip", "-4", "route"], capture_output=True, text=True, check=False).stdout
    for net in ipaddress.ip_network(REALNODE_CIDR).subnets(new_prefix=30):
        if str(net.network_address + 1) + "/" not in used and f"{net}" not in used \
                and str(net.network_address + 2) + "/" not in used:
            return net
    raise RealNodeError(f"no free /30 left in {REALNODE_CIDR}")


class RealNode(fakegpu.FakeGpuNode):
    """A kubelet + containerd node with `gpus` fake GPUs; start() joins it, stop() removes every trace."""

    def __init__(self, control_plane: ControlPlane, name: str = "real-gpu-node-0", gpus: int = 2,
                 work_dir: Path | None = None, bin_dir: Path | None = None, strategy: str = "cdi-cri,cdi-annotations"
                 ) -> None:
        self.cp = control_plane
        self.name = name
        self.gpus = gpus
        self.strategy = strategy
        self.work = Path(work_dir) if work_dir else Path(tempfile.mkdtemp(prefix="gpu-rn-"))
        self.bin_dir = bin_dir
        self.procs: dict[str, Proc] = {}
        self.host_if = ""
        self.subnet: ipaddress.IPv4Network | None = None
        self.cgroup_root = f"/gpu-rn-{self.work.name.removeprefix('gpu-rn-')}"
        self.timings: dict[str, float] = {}
        self._t0 = 0.0

    # ------------------------------------------------------------------ paths
    @property
    def node_ip(self) -> str:
        assert self.subnet is not None
        return str(self.subnet.network_address + 2)

    @property
    def host_ip(self) -> str:
        assert self.subnet is not None
        return str(self.subnet.network_address + 1)

    @property
    def containerd_socket(self) -> Path:
        return self.work / "containerd" / "containerd.sock"

    @property
    def cdi_dir(self) -> Path:
        return self.work / "cdi"

    @property
    def holder_pid(self) -> int:
        return self.procs["holder"].pid

    def log(self, name: str) -> Path:
        return self.work / "logs" / f"{name}.log"

    # ------------------------------------------------------------------ lifecycle
    def start(self, timeout: float = 120.0) -> RealNode:
        reason = unsupported_reason()
        if reason:
            raise RealNodeUnsupported(reason)
        self.bin_dir = self.bin_dir or rnbin.ensure_binaries()
        self._t0 = time.monotonic()
        deadline = self._t0 + timeout
        # A failed start keeps the logs (the message names the dir); an interrupt removes everything.
        with cleaned_up_on_failure(RealNodeError, self.stop, f"logs kept in {self.work / 'logs'}"):
            self._prepare_dirs()
            self._start_holder()
            self._mounts()
            self._network()
            self._mark("namespaces")
            self._spawn("relay", [sys.executable, "-m", "gpu_conformance.sim.realnode.relay",
                                  f"--netns-pid={self.holder_pid}", f"--port={self.cp.api_port}"], in_ns=False)
            self._cgroups()
            self._node_credentials()
            self._start_containerd(deadline)
            self._mark("containerd")
            self._import_images()
            self._mark("images")
            self._start_kubelet()
            self.start_device_plugin(self.strategy, wait=None)
            self._wait_node(deadline)
            self._mark("node ready with GPUs")
        return self

    def stop(self, keep_logs: bool = False) -> None:
        """Stop everything by PID, then remove the cgroup root, the node object and the work dir."""
        self._save()
        stop_work_dir(self.work, procs=self.procs, keep_logs=keep_logs)
        self.procs.clear()

    def __enter__(self) -> RealNode:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _mark(self, step: str) -> None:
        self.timings[step] = round(time.monotonic() - self._t0, 2)

    # ------------------------------------------------------------------ steps
    def _prepare_dirs(self) -> None:
        for d in ("logs", "var-lib/kubelet/device-plugins", "var-log", "run", "sysctl", "containerd/certs.d/_default",
                  "cni/conf", "cni/ipam", "kubelet/pki", "images", "gpu", "cdi"):
            (self.work / d).mkdir(parents=True, exist_ok=True)
        self._save()

    def _spawn(self, name: str, cmd: list[str], in_ns: bool = True, env: dict[str, str] | None = None) -> Proc:
        if in_ns:
            cmd = ["nsenter", f"--target={self.holder_pid}", "--mount", "--net", "--", *cmd]
        proc = spawn_logged(name, cmd, self.log(name), self.work, env or {})
        self.procs[name] = proc
        self._save()
        return proc

    def _ns_run(self, *cmd: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        full = ["nsenter", f"--target={self.holder_pid}", "--mount", "--net", "--", *cmd]
        out = subprocess.run(full, capture_output=True, text=True, check=False)
        if check and out.returncode != 0:
            raise RealNodeError(f"real node {self.name}: `{' '.join(cmd)}` failed: "
                                f"{(out.stderr or out.stdout).strip()[:300]}")
        return out

    def _host_run(self, *cmd: str) -> None:
        out = subprocess.run(list(cmd), capture_output=True, text=True, check=False)
        if out.returncode != 0:
            raise RealNodeError(f"real node {self.name}: `{' '.join(cmd)}` failed: "
                                f"{(out.stderr or out.stdout).strip()[:300]}")

    def _start_holder(self) -> None:
        holder = self._spawn("holder", ["unshare", "--mount", "--net", "--propagation", "private", "--",
                                        "sleep", "infinity"], in_ns=False)
        own = _ns_inode(os.getpid(), "net")
        for _ in range(200):
            if holder.popen is not None and holder.popen.poll() is not None:
                raise RealNodeError(f"real node {self.name}: unshare exited ({last_line(self.log('holder'))})")
            if _ns_inode(holder.pid, "net") not in (None, own):
                return
            time.sleep(0.02)
        raise RealNodeError(f"real node {self.name}: the namespace holder did not enter new namespaces")

    def _mounts(self) -> None:
        for src, dst in (("var-lib", "/var/lib"), ("var-log", "/var/log"), ("run", "/run")):
            self._ns_run("mount", "--bind", str(self.work / src), dst)
        for key, want in KUBELET_SYSCTLS.items():
            path = Path("/proc/sys") / key
            with contextlib.suppress(OSError):
                if path.read_text().strip() == want:
                    continue
            value = self.work / "sysctl" / key.replace("/", ".")
            value.write_text(want + "\n")
            self._ns_run("mount", "--bind", str(value), str(path))

    def _network(self) -> None:
        self.subnet = free_subnet()
        self.host_if = f"grn{self.holder_pid % 10_000_000}"[:15]
        self._save()
        self._host_run("ip", "link", "add", "name", self.host_if, "type", "veth", "peer", "name", "eth0",
                       "netns", str(self.holder_pid))
        self._host_run("ip", "addr", "add", f"{self.host_ip}/30", "dev", self.host_if)
        self._host_run("ip", "link", "set", self.host_if, "up")
        self._ns_run("ip", "link", "set", "lo", "up")
        self._ns_run("ip", "addr", "add", f"{self.node_ip}/30", "dev", "eth0")
        self._ns_run("ip", "link", "set", "eth0", "up")

    def _cgroups(self) -> None:
        for hierarchy in _cgroup_hierarchies():
            path = hierarchy / self.cgroup_root.lstrip("/")
            path.mkdir(exist_ok=True)
            # cpuset (v1) children start empty and refuse tasks: inherit the parent's CPUs and memory nodes.
            for knob in ("cpuset.cpus", "cpuset.mems"):
                if (path / knob).exists() and not (path / knob).read_text().strip():
                    (path / knob).write_text((hierarchy / knob).read_text())

    def _node_credentials(self) -> None:
        try:
            crt, key = client_certificate(self.cp, f"/O=system:nodes/CN=system:node:{self.name}",
                                          self.work / "kubelet" / "pki", "node")
        except RealNodeError as exc:
            raise RealNodeError(f"real node {self.name}: {exc}") from None
        kubeconfig = {
            "apiVersion": "v1", "kind": "Config",
            "clusters": [{"name": "sim", "cluster": {"server": f"https://127.0.0.1:{self.cp.api_port}",
                                                     "certificate-authority": str(self.cp.ca_cert)}}],
            "users": [{"name": self.name, "user": {"client-certificate": str(crt), "client-key": str(key)}}],
            "contexts": [{"name": "sim", "context": {"cluster": "sim", "user": self.name}}],
            "current-context": "sim",
        }
        (self.work / "kubelet" / "kubeconfig").write_text(yaml.safe_dump(kubeconfig, sort_keys=False))

    def _containerd_config(self) -> str:
        w, tools = self.work, rnbin.host_tools()
        (w / "containerd" / "certs.d" / "_default" / "hosts.toml").write_text(
            '# No registry is reachable: every pull fails at once against a closed port of the namespace.\n'
            'server = "http://127.0.0.1:9"\n[host."http://127.0.0.1:9"]\n  capabilities = ["pull", "resolve"]\n')
        (w / "cni" / "conf" / "10-realnode.conflist").write_text(json.dumps({
            "cniVersion": "1.0.0", "name": "realnode",
            "plugins": [{"type": "bridge", "bridge": "rnbr0", "isGateway": False, "ipMasq": False,
                         "hairpinMode": False,
                         "ipam": {"type": "host-local", "dataDir": str(w / "cni" / "ipam"),
                                  "ranges": [[{"subnet": POD_CIDR}]]}}],
        }, indent=2))
        return f"""version = 3
root = '{w}/containerd/root'
state = '{w}/containerd/state'
temp = '{w}/containerd/tmp'
[grpc]
  address = '{self.containerd_socket}'
[ttrpc]
  address = '{self.containerd_socket}.ttrpc'
[plugins]
  [plugins.'io.containerd.cri.v1.images']
    snapshotter = 'overlayfs'
    [plugins.'io.containerd.cri.v1.images'.pinned_images]
      sandbox = '{PAUSE_IMAGE}'
    [plugins.'io.containerd.cri.v1.images'.registry]
      config_path = '{w}/containerd/certs.d'
  [plugins.'io.containerd.cri.v1.runtime']
    cdi_spec_dirs = ['{self.cdi_dir}']
    netns_mounts_under_state_dir = true
    disable_apparmor = true
    enable_selinux = false
    # Without CAP_SYS_RESOURCE (some VMs drop it) runc cannot lower oom_score_adj to the kubelet's -998.
    restrict_oom_score_adj = true
    [plugins.'io.containerd.cri.v1.runtime'.containerd]
      default_runtime_name = 'runc'
      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
        runtime_type = 'io.containerd.runc.v2'
        [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
          BinaryName = '{tools["runc"]}'
          Root = '{w}/containerd/runc'
          SystemdCgroup = false
    [plugins.'io.containerd.cri.v1.runtime'.cni]
      bin_dirs = ['{tools["cni"]}']
      conf_dir = '{w}/cni/conf'
      use_internal_loopback = true
  [plugins.'io.containerd.grpc.v1.cri']
    stream_server_address = '127.0.0.1'
    stream_server_port = '0'
  [plugins.'io.containerd.internal.v1.opt']
    path = '{w}/containerd/opt'
  [plugins.'io.containerd.nri.v1.nri']
    disable = true
  [plugins.'io.containerd.shim.v1.manager']
    socket_dir = '{w}/containerd/s'
"""

    def _start_containerd(self, deadline: float) -> None:
        assert self.bin_dir is not None
        cfg = self.work / "containerd" / "config.toml"
        cfg.write_text(self._containerd_config())
        # The shim is found on PATH: put ours first.
        env = {"PATH": f"{self.bin_dir}:{os.environ.get('PATH', '/usr/sbin:/usr/bin:/sbin:/bin')}"}
        self._spawn("containerd", [str(self.bin_dir / "containerd"), f"--config={cfg}"], env=env)
        while True:
            if self.ctr("version", check=False).returncode == 0:
                return
            proc = self.procs["containerd"]
            if proc.popen is not None and proc.popen.poll() is not None:
                raise RealNodeError(f"real node {self.name}: containerd exited: {last_line(self.log('containerd'))} "
                                    f"(log: {self.log('containerd')})")
            if time.monotonic() > deadline:
                raise RealNodeError(f"real node {self.name}: containerd not ready (log: {self.log('containerd')})")
            time.sleep(0.1)

    def ctr(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        assert self.bin_dir is not None
        return self._ns_run(str(self.bin_dir / "ctr"), f"--address={self.containerd_socket}", "--namespace=k8s.io",
                            *args, check=check)

    def containers_of(self, namespace_prefix: str) -> list[str]:
        """IDs of the containers (sandboxes included) containerd still has for pods in matching namespaces."""
        out = self.ctr("containers", "ls", "--quiet",
                       f'labels."io.kubernetes.pod.namespace"~="^{namespace_prefix}"', check=False)
        return out.stdout.split()

    def _import_images(self) -> None:
        assert self.bin_dir is not None
        # The sandbox image and the probe's (busybox, also tagged as the suite's default probe image).
        for archive in fakegpu.write_images(self.work / "images", ("pause", "probe"), bin_dir=self.bin_dir):
            self.ctr("images", "import", "--platform=linux/amd64", str(archive))

    def _kubelet_config(self) -> dict[str, Any]:
        return {
            "apiVersion": "kubelet.config.k8s.io/v1beta1", "kind": "KubeletConfiguration",
            "failCgroupV1": False,  # these VMs run cgroup v1; v1.35+ refuses it unless told otherwise
            "cgroupDriver": "cgroupfs", "cgroupRoot": self.cgroup_root, "cgroupsPerQOS": True,
            "failSwapOn": False,
            "containerRuntimeEndpoint": f"unix://{self.containerd_socket}",
            "podLogsDir": str(self.work / "var-log" / "pods"),
            "address": self.node_ip, "port": KUBELET_PORT, "readOnlyPort": 0,
            "healthzBindAddress": "127.0.0.1", "healthzPort": 10248,
            # As kubeadm sets it up: the port is reachable from the host (veth), so no caller is anonymous;
            # the API server presents its kubelet client certificate (CA-signed, system:masters), and
            # every request is authorized by a SubjectAccessReview to the simulated API server.
            "authentication": {"anonymous": {"enabled": False}, "webhook": {"enabled": True, "cacheTTL": "30s"},
                               "x509": {"clientCAFile": str(self.cp.ca_cert)}},
            "authorization": {"mode": "Webhook", "webhook": {"cacheAuthorizedTTL": "30s",
                                                             "cacheUnauthorizedTTL": "5s"}},
            "protectKernelDefaults": False, "makeIPTablesUtilChains": False,
            "resolvConf": "",
            "evictionHard": {"memory.available": "100Mi", "nodefs.available": "1%", "imagefs.available": "1%",
                             "nodefs.inodesFree": "1%"},
            "imageGCHighThresholdPercent": 100, "imageGCLowThresholdPercent": 99,
            "maxPods": 20, "serializeImagePulls": False,
            # Report the device plugin's GPUs within seconds, not the default 10 s.
            "nodeStatusUpdateFrequency": "2s", "nodeStatusReportFrequency": "10s",
            "volumeStatsAggPeriod": "0s",
        }

    def _start_kubelet(self) -> None:
        assert self.bin_dir is not None
        cfg = self.work / "kubelet" / "config.yaml"
        cfg.write_text(yaml.safe_dump(self._kubelet_config(), sort_keys=False))
        self._spawn("kubelet", [str(self.bin_dir / "kubelet"), f"--config={cfg}",
                                f"--kubeconfig={self.work / 'kubelet' / 'kubeconfig'}",
                                f"--hostname-override={self.name}", f"--node-ip={self.node_ip}",
                                f"--cert-dir={self.work / 'kubelet' / 'serving'}", "--v=1"])

    def start_device_plugin(self, strategy: str, wait: float | None = 30.0) -> None:
        """(Re)start the fake device plugin with a device-list strategy (cdi-cri, cdi-annotations, envvar).

        Waits up to `wait` seconds until it registered with the kubelet (None: do not wait, as at start,
        where the kubelet is not listening yet and _wait_node waits for the GPUs instead).
        """
        assert self.bin_dir is not None
        old = self.procs.pop("device-plugin", None)
        if old is not None:
            _stop_pid(old.pid, old.start_time, old.popen)
        self.strategy = strategy
        log = self.log("device-plugin")
        registered_before = _count_lines(log, "registered nvidia.com/gpu")
        # It (re)writes the CDI spec, nvidia-smi and the GPU table before it registers.
        proc = self._spawn("device-plugin", fakegpu.plugin_command(
            self.bin_dir / "fake-gpu-device-plugin", self.name, self.gpus, self.cdi_dir, self.work / "gpu",
            strategy=strategy))
        if wait is None:
            return
        # Until the kubelet has the new endpoint, Allocate fails and pods bound here fail admission.
        deadline = time.monotonic() + wait
        while _count_lines(log, "registered nvidia.com/gpu") <= registered_before:
            if (proc.popen is not None and proc.popen.poll() is not None) or time.monotonic() > deadline:
                raise RealNodeError(f"real node {self.name}: the fake device plugin did not register "
                                    f"({last_line(log)}; log: {log})")
            time.sleep(0.1)

    def _wait_node(self, deadline: float) -> None:
        from gpu_conformance.cluster.connect import connect

        conn = connect(str(self.cp.admin_kubeconfig), None)
        try:
            while True:
                for name in ("kubelet", "containerd", "device-plugin", "relay"):
                    p = self.procs[name]
                    if p.popen is not None and p.popen.poll() is not None:
                        raise RealNodeError(f"real node {self.name}: {name} exited: {last_line(self.log(name))} "
                                            f"(log: {self.log(name)})")
                node = self.get_node(conn)
                if node is not None:
                    ready = any(c.get("type") == "Ready" and c.get("status") == "True"
                                for c in node.get("status", {}).get("conditions") or [])
                    alloc = (node.get("status", {}).get("allocatable") or {}).get("nvidia.com/gpu")
                    if ready and "registered" not in self.timings:
                        self._mark("registered and Ready")
                    if ready and alloc == str(self.gpus):
                        self._label(conn)
                        return
                if time.monotonic() > deadline:
                    raise RealNodeError(f"real node {self.name} did not become Ready with {self.gpus} nvidia.com/gpu "
                                        f"in time: kubelet says {last_line(self.log('kubelet'))} "
                                        f"(log: {self.log('kubelet')})")
                time.sleep(0.5)
        finally:
            conn.close()

    def kubelet_status(self, path: str, cert: tuple[Path, Path] | None = None, timeout: float = 10.0) -> int:
        """HTTP status of a GET on the kubelet's API (port 10250 on the veth address), as a client on the host
        sees it: anonymously, or with a client certificate (cert, key). The kubelet's serving certificate
        is self-signed, so it is not verified (the API server does not verify it either)."""
        ctx = ssl.create_default_context()
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        if cert is not None:
            ctx.load_cert_chain(str(cert[0]), str(cert[1]))
        http = HTTPSConnection(self.node_ip, KUBELET_PORT, context=ctx, timeout=timeout)
        try:
            http.request("GET", path)
            return http.getresponse().status
        finally:
            http.close()

    def get_node(self, conn: Any) -> dict[str, Any] | None:
        from gpu_conformance.cluster.connect import API_ERRORS, raw_request

        try:
            return json.loads(raw_request(conn.api, "GET", f"/api/v1/nodes/{self.name}", [], timeout=(5, 10)))
        except (*API_ERRORS, ValueError):  # not registered yet (404), or the apiserver not answering yet
            return None

    def _label(self, conn: Any) -> None:
        """The labels NFD, the operator and GFD put on a GPU node, with every operand opted out.

        The operator's operands cannot run here (privileged NVIDIA images, host paths such as /): the
        admin's documented switch for such a node is nvidia.com/gpu.deploy.operands=false, and the
        suite reports it (LBL-001). The node's GPU stack is this tier's: fake device plugin + CDI spec.
        """
        from gpu_conformance.cluster.connect import raw_request
        from gpu_conformance.sim import install as inst
        from gpu_conformance.sim.profiles import get_profile

        profile = get_profile("default")
        hw = profile.gpu_hardware[0]
        labels = {inst.NFD_PCI_LABEL: "true", "nvidia.com/gpu.present": "true",
                  "nvidia.com/gpu.deploy.operands": "false", REAL_NODE_LABEL: "true",
                  **inst.gfd_labels(profile, hw)}
        labels["nvidia.com/gpu.count"] = str(self.gpus)
        raw_request(conn.api, "PATCH", f"/api/v1/nodes/{self.name}", [],
                    body={"metadata": {"labels": labels}}, timeout=(5, 20),
                    content_type="application/merge-patch+json")

    def _save(self) -> None:
        data = {"version": 1, "name": self.name, "work": str(self.work), "host_if": self.host_if,
                "cgroup_root": self.cgroup_root, "admin_kubeconfig": str(self.cp.admin_kubeconfig),
                "processes": {p.name: {"pid": p.pid, "start_time": p.start_time} for p in self.procs.values()}}
        if self.work.is_dir():
            tmp = self.work / f".{STATE_FILE}.tmp"
            tmp.write_text(json.dumps(data, indent=2) + "\n")
            os.replace(tmp, self.work / STATE_FILE)


def client_certificate(cp: ControlPlane, subject: str, out_dir: Path, name: str) -> tuple[Path, Path]:
    """A client certificate (and its key) for `subject` (openssl -subj form) signed by the control plane's CA."""
    out_dir.mkdir(parents=True, exist_ok=True)
    key, csr, crt = out_dir / f"{name}.key", out_dir / f"{name}.csr", out_dir / f"{name}.crt"
    for cmd in (["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", str(key)],
                ["req", "-new", "-key", str(key), "-subj", subject, "-out", str(csr)],
                ["x509", "-req", "-in", str(csr), "-CA", str(cp.ca_cert), "-CAkey", str(cp.ca_key),
                 "-CAcreateserial", "-CAserial", str(out_dir / "ca.srl"), "-days", "30", "-out", str(crt)]):
        out = subprocess.run(["openssl", *cmd], capture_output=True, text=True, check=False)
        if out.returncode != 0:
            raise RealNodeError(f"`openssl {cmd[0]}` for {subject} failed: {(out.stderr or out.stdout).strip()[:300]}")
    return crt, key


# ---------------------------------------------------------------------- teardown (also for `sim down`)

def _count_lines(log: Path, text: str) -> int:
    try:
        return sum(text in line for line in log.read_text(errors="replace").splitlines())
    except OSError:
        return 0


def _cgroup_hierarchies() -> list[Path]:
    root = Path("/sys/fs/cgroup")
    if (root / "cgroup.controllers").exists():
        return [root]  # cgroup v2: one hierarchy
    return [p for p in sorted(root.iterdir()) if p.is_dir() and not p.is_symlink() and (p / "cgroup.procs").exists()]


def _cgroup_dirs_deepest_first(path: Path) -> list[Path]:
    """Every directory under a cgroup path, children before parents.

    os.walk, not Path.rglob: the kubelet, containerd's shims and the kernel remove pod cgroups while we
    walk, and rglob raises on a directory that vanished under it (a CI run failed so); os.walk skips it.
    """
    return [Path(top) for top, _, _ in os.walk(path, topdown=False)]


def _cgroup_pids(path: Path) -> set[int]:
    pids: set[int] = set()
    for d in _cgroup_dirs_deepest_first(path):
        with contextlib.suppress(OSError, ValueError):
            pids.update(int(x) for x in (d / "cgroup.procs").read_text().split())
    return pids


def _remove_cgroup_root(cgroup_root: str) -> None:
    """Kill what is left in the node's cgroup root (pod processes), then remove its directories."""
    if not cgroup_root.strip("/").startswith("gpu-rn-"):
        return
    dirs = [h / cgroup_root.lstrip("/") for h in _cgroup_hierarchies()]
    for _ in range(50):
        left = set().union(*(_cgroup_pids(d) for d in dirs if d.is_dir()))
        if not left:
            break
        for pid in left:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.1)
    # A cgroup whose last task just exited can refuse rmdir (EBUSY) for a moment: a few passes.
    for _ in range(20):
        for d in dirs:
            for sub in _cgroup_dirs_deepest_first(d):  # ends with d itself
                with contextlib.suppress(OSError):
                    sub.rmdir()
        if not any(d.is_dir() for d in dirs):
            break
        time.sleep(0.1)


def stop_work_dir(work: Path, procs: dict[str, Proc] | None = None, remove: bool = True,
                  keep_logs: bool = False) -> None:
    """Stop a real node from its work dir's realnode.json (or the given live processes) and clean up.

    Order: plugin and kubelet; the pods' processes (the cgroup root); containerd; what is left in the
    node's namespaces (containerd's shims, reparented to init); the relay; the namespace holder, after
    which the namespaces, their mounts and the veth pair are gone.
    """
    state: dict[str, Any] = {}
    with contextlib.suppress(OSError, ValueError):
        state = json.loads((work / STATE_FILE).read_text())
    if procs is None:
        procs = {n: Proc(n, int(p["pid"]), int(p.get("start_time", 0)))
                 for n, p in (state.get("processes") or {}).items()}

    def stop(name: str) -> None:
        p = procs.get(name)
        if p is not None:
            _stop_pid(p.pid, p.start_time, p.popen)

    stop("device-plugin")
    stop("kubelet")
    _remove_cgroup_root(str(state.get("cgroup_root") or ""))
    stop("containerd")
    holder = procs.get("holder")
    if holder is not None and _alive(holder.pid, holder.start_time):
        for kind in ("mnt", "net"):
            for pid in pids_in_namespace(holder.pid, kind):
                _stop_pid(pid, _start_time(pid) or 0)
    stop("relay")
    stop("holder")
    host_if = str(state.get("host_if") or "")
    if host_if and Path(f"/sys/class/net/{host_if}").exists():
        # The veth pair goes with the namespace; this only catches a namespace kept alive elsewhere.
        subprocess.run(["ip", "link", "del", host_if], capture_output=True, check=False)
    _delete_node_object(state)
    if remove and work.name.startswith("gpu-rn-"):
        if keep_logs:
            for entry in work.iterdir():
                if entry.name != "logs":
                    shutil.rmtree(entry, ignore_errors=True) if entry.is_dir() else entry.unlink(missing_ok=True)
        else:
            shutil.rmtree(work, ignore_errors=True)


def _delete_node_object(state: dict[str, Any]) -> None:
    kubeconfig, name = state.get("admin_kubeconfig"), state.get("name")
    if not kubeconfig or not name or not Path(kubeconfig).is_file():
        return
    from gpu_conformance.cluster.connect import API_ERRORS, connect, raw_request

    # The control plane may already be gone (its stop came first): then so is the node object.
    with contextlib.suppress(ConformanceError, *API_ERRORS):
        conn = connect(kubeconfig, None)
        try:
            raw_request(conn.api, "DELETE", f"/api/v1/nodes/{name}", [], timeout=(2, 5))
        finally:
            conn.close()
