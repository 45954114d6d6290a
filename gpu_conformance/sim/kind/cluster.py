"""The kind tier's cluster: kind through pytest-kubernetes, a bridge CNI, and the real GPU Operator on fake GPUs.

Lifecycle (KindCluster.start / stop):
1. Docker: the user's (DOCKER_HOST set, as in GitHub Actions) or a dockerd of our own (docker.py);
2. the node image: built offline here (nodeimage.py), or `kindest/node:<version>` when GPU_CONFORMANCE_KIND_IMAGE
   says so (a user's CI with internet);
3. `kind create cluster` through pytest-kubernetes' KindManagerBase, pointed at our kind binary (the plugin finds
   `kind` and `kubectl` on PATH and inherits the process environment, so both are set for the cluster's lifetime);
4. networking: disableDefaultCNI, then per node a bridge CNI config for its podCIDR (Debian's plugins, in the node
   image) and routes to the other nodes' pod subnets over the kind network: what kindnetd does, minus its image;
5. the GPU workers as with a preinstalled driver: on the CDI path (the default, operator.gpu_path) the fake host
   driver under the node's root and the device plugin's CDI spec by NVIDIA's `nvidia-ctk cdi generate` on the
   fake NVML (nvidia_cdi.py); on the legacy path the fake driver by the fake plugin's --setup-only and containerd's
   default runtime `nvidia`, the fake legacy-mode runtime (operator.legacy_runtime_patch); NFD's PCI label;
6. the real GPU Operator v25.3.4 with its operand images (operator.py): on the CDI path its toolkit DaemonSet runs
   NVIDIA's installer v1.17.8 (toolkit_image.py), which installs the runtime, writes containerd's config and the
   management CDI spec and restarts containerd (SIGHUP: containerd v2 has no handler for it and exits; kind's
   systemd unit restarts it, Restart=always); it deploys the validator and the device plugin, and the workers
   advertise nvidia.com/gpu; the tier waits for the ClusterPolicy's Ready.
   With `dra=True` the device plugin is off and our fake DRA kubelet plugin runs as NVIDIA's DRA driver chart
   runs its own (dra_driver.py): the workers publish their GPUs as ResourceSlices instead.
stop deletes the cluster (kind removes its containers) and stops our dockerd by PID.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import secrets
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

import yaml
from pytest_kubernetes.options import ClusterOptions
from pytest_kubernetes.providers.kind import KindManagerBase

from gpu_conformance.errors import ConformanceError
from gpu_conformance.gotools import TOOLKIT_CTK, TOOLKIT_TOOLS, ensure_tool
from gpu_conformance.sim.builds import node_binaries as nodebin
from gpu_conformance.sim.builds import operator_module
from gpu_conformance.sim.fakegpu import nvml as fakenvml
from gpu_conformance.sim.fakegpu import stack as fakegpu
from gpu_conformance.sim.kind import binaries as kindbin
from gpu_conformance.sim.kind import dra_driver, nodeimage, nvidia_cdi
from gpu_conformance.sim.kind import operator as kindop
from gpu_conformance.sim.kind.docker import Dockerd, tier_root, unavailable_reason

KIND_DIR = Path(__file__).resolve().parents[3] / "kind"
CLUSTER_NAME = "gpu-conformance"
IMAGE_ENV = "GPU_CONFORMANCE_KIND_IMAGE"
GPU_LABEL = "gpu-conformance.kind/fake-gpu"
GPUS_PER_NODE = 2
CNI_CONFIG = "/etc/cni/net.d/10-gpu-conformance-bridge.conflist"
# Fake-GPU binaries mounted into every node: built file -> path on the node (the fake runtime on the legacy path
# only: on the CDI path the operator's toolkit installs NVIDIA's).
NODE_BINARIES = {"fake-nvidia-container-runtime": kindop.LEGACY_RUNTIME,
                 "fake-gpu-device-plugin": "/usr/local/bin/fake-gpu-device-plugin"}
RUNTIME_BINARY = NODE_BINARIES["fake-nvidia-container-runtime"]


class KindError(ConformanceError):
    """The kind cluster could not be created or prepared (the message names the step)."""


def unsupported_reason() -> str | None:
    """Why this machine cannot run the kind tier at all, or None (cheap: starts nothing)."""
    if reason := unavailable_reason():
        return reason
    if not os.environ.get("DOCKER_HOST") and shutil.which("debootstrap") is None and not os.environ.get(IMAGE_ENV):
        return "the kind tier builds its node image with debootstrap (apt-get install debootstrap)"
    return None


class _Kind(KindManagerBase):
    """pytest-kubernetes' kind provider, running our kind binary instead of whatever `kind` is on PATH."""

    kind_path: Path = Path("kind")

    @property
    def _exec_path(self) -> Path:
        return self.kind_path


@dataclass
class KindCluster:
    # Named here, made by start() (and by the config writers): a cluster only configured, never started, left an
    # empty directory per instance in /tmp (dozens per test session).
    work: Path = field(
        default_factory=lambda: Path(tempfile.gettempdir()) / f"gpu-conformance-kind-{secrets.token_hex(6)}")
    workers: int = 2
    gpus: int = GPUS_PER_NODE
    docker: Dockerd | None = None
    manager: _Kind | None = None
    image: str = ""
    # "cdi" or "legacy" (operator.gpu_path; default from GPU_CONFORMANCE_KIND_GPU_PATH, else cdi).
    gpu_path: str = field(default_factory=kindop.gpu_path)
    # On the CDI path: NVIDIA's CDI generator (the device plugin's spec) and the fake NVML it runs on, installed
    # as the host driver's (nvidia_cdi.py).
    nvidia_ctk: Path | None = None
    fake_nvml: Path | None = None
    # The DRA model: device plugin off, the fake DRA kubelet plugin (built on start) publishing the GPUs.
    dra: bool = False
    dra_plugin: Path | None = None
    _saved_env: dict[str, str | None] = field(default_factory=dict)
    _saved_sysctls: dict[str, str] = field(default_factory=dict)
    _lock: TextIO | None = None

    @property
    def nvidia_cdi_specs(self) -> bool:
        """Whether the GPU nodes' CDI specs are NVIDIA's (nvidia_cdi.py): on the CDI path with the device plugin.
        The DRA model keeps the fake driver's layout, which the fake DRA plugin reads and writes its own spec from,
        as NVIDIA's DRA driver does."""
        return self.gpu_path == "cdi" and not self.dra

    @property
    def host_driver(self) -> bool:
        """Whether the GPU nodes get the fake driver under their root, as a host driver (nvidia_cdi.py): on the CDI
        path, where the operator's toolkit reads the driver there (NVIDIA_DRIVER_ROOT=/ from driver-ready)."""
        return self.gpu_path == "cdi"

    @property
    def kubeconfig(self) -> Path:
        return self.work / "kubeconfig"

    def start(self) -> KindCluster:
        # A kind node is privileged and shares the host's /proc/sys: its kubelet sets these kernel tunables on
        # the host (protectKernelDefaults false). Recorded here and put back in stop().
        self._saved_sysctls = read_sysctls()
        self._lock = _tier_lock()
        try:
            self.work.mkdir(parents=True, exist_ok=True)
            self._start()
        except BaseException:
            self.stop()
            raise
        return self

    def _start(self) -> None:
        started = time.monotonic()
        dirs = kindbin.ensure_binaries()
        if self.clusterpolicy()["spec"]["toolkit"]["enabled"]:
            # The toolkit image's binaries (the image itself is put together with the other images).
            for tool in TOOLKIT_TOOLS:
                ensure_tool(tool)
        if self.host_driver:
            self.nvidia_ctk = ensure_tool(TOOLKIT_CTK)
            self.fake_nvml = fakenvml.ensure_library()
        if self.dra:
            self.dra_plugin = dra_driver.ensure_plugin()
        self.docker = Dockerd(tier_root(), external=bool(os.environ.get("DOCKER_HOST")))
        if not self.docker.external:
            self.docker.start()
            # Our daemon is ours alone: containers left by a killed run (kind nodes restart with the daemon).
            leftovers = self.docker.docker("ps", "-aq").stdout.decode().split()
            if leftovers:
                self.docker.docker("rm", "-f", *leftovers)
        self.image = os.environ.get(IMAGE_ENV) or nodeimage.ensure_node_image(self.docker, dirs)
        config = self._write_config(dirs.node)
        # pytest-kubernetes runs `kind`/`kubectl` from PATH with this process's environment.
        self._set_env({"DOCKER_HOST": self.docker.host,
                       "PATH": f"{dirs.kind}:{dirs.sim}:{os.environ.get('PATH', '')}"})
        _Kind.kind_path = dirs.find("kind")
        self.manager = _Kind(provider_config=str(config), kubeconfig=self.kubeconfig)
        try:
            self.manager.create(ClusterOptions(cluster_timeout=900, provider_config=config,
                                               kubeconfig_path=self.kubeconfig), timeout=120)
        except subprocess.CalledProcessError as exc:
            raise KindError(f"kind create cluster failed: {_tail(exc.stderr)}") from None
        except RuntimeError as exc:
            raise KindError(f"kind create cluster: {exc}") from None
        self._setup_cni()
        self._install_host_driver()
        self._load_images(dirs, public=bool(os.environ.get(IMAGE_ENV)))
        self._install_operator_objects()
        # With the operator's toolkit the GPUs take longer: NVIDIA's toolkit container kills containerd (SIGHUP) from
        # inside a pod, and on these loaded 2 cores it often does so before containerd has finished starting that
        # very container, which then gets a SIGTERM and restarts in CrashLoopBackOff (NVIDIA's entrypoint sleeps 5 s
        # against exactly this, gpu-operator commit 963b8dc); it settles once one restart wins the race.
        self._wait_gpus(timeout=600.0 if self.clusterpolicy()["spec"]["toolkit"]["enabled"] else 180.0)
        self._wait_operator()
        print(f"kind cluster {CLUSTER_NAME} ready in {time.monotonic() - started:.0f} s", flush=True)

    def _load_images(self, dirs: kindbin.BinDirs, public: bool) -> None:
        """The operator's image and its operands' stand-ins into the nodes (OCI archives built here); with a
        public node image also the probe image, which our own node image already holds."""
        assert self.manager is not None
        busybox = nodebin.static_busybox()
        # NVIDIA's validator where the nodes have NVIDIA's driver layout and specs (the CDI path with the plugin).
        wanted = kindop.images(dirs.node, busybox, self.clusterpolicy(), nvidia_validator=self.nvidia_cdi_specs)
        if public:
            wanted += nodeimage.fake_gpu_images(dirs, busybox)
        for tar in nodeimage.cached_archives(wanted):
            try:
                self.manager._exec(["load", "image-archive", str(tar), "--name", CLUSTER_NAME])
            except subprocess.CalledProcessError as exc:
                raise KindError(f"kind load image-archive {tar.name} failed: {_tail(exc.stderr)}") from None

    def _write_config(self, node_bin: Path | None = None) -> Path:
        config = yaml.safe_load((KIND_DIR / "cluster.yaml").read_text())
        config["name"] = CLUSTER_NAME
        workers = [n for n in config["nodes"] if n["role"] == "worker"]
        config["nodes"] = [n for n in config["nodes"] if n["role"] != "worker"] + \
            [dict(workers[i % len(workers)]) for i in range(self.workers)]
        if self.gpu_path == "legacy":
            config["containerdConfigPatches"] = [*config.get("containerdConfigPatches", []),
                                                 kindop.legacy_runtime_patch()]
        for node in config["nodes"]:
            node["image"] = self.image
            if node_bin is not None:
                # The fake driver's installer and, on the legacy path, the runtime containerd runs: on every node,
                # since that runtime is the default.
                node["extraMounts"] = self._node_mounts(node_bin)
        self.work.mkdir(parents=True, exist_ok=True)
        path = self.work / "kind-config.yaml"
        path.write_text(yaml.safe_dump(config, sort_keys=False))
        return path

    def _node_mounts(self, node_bin: Path) -> list[dict[str, Any]]:
        mounts = {str(node_bin / src): dst for src, dst in NODE_BINARIES.items()
                  if self.gpu_path == "legacy" or dst != RUNTIME_BINARY}
        if self.host_driver:
            if self.nvidia_ctk is None or self.fake_nvml is None:
                raise KindError("the CDI path needs NVIDIA's nvidia-ctk and the fake NVML, which were not built")
            mounts.update(nvidia_cdi.node_mounts(self.nvidia_ctk, self.fake_nvml))
        if self.dra:
            if self.dra_plugin is None:
                raise KindError("the DRA model needs the fake DRA kubelet plugin, which was not built")
            mounts[str(self.dra_plugin)] = dra_driver.NODE_PATH
        return [{"hostPath": src, "containerPath": dst, "readOnly": True} for src, dst in mounts.items()]

    def _set_env(self, values: dict[str, str]) -> None:
        for k, v in values.items():
            self._saved_env.setdefault(k, os.environ.get(k))
            os.environ[k] = v

    def _restore_env(self) -> None:
        for k, v in self._saved_env.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        self._saved_env.clear()

    def kubectl(self, *args: str, input: str | None = None) -> str:
        assert self.manager is not None
        proc = subprocess.run(["kubectl", "--kubeconfig", str(self.kubeconfig), *args], capture_output=True,
                              text=True, input=input, timeout=300, check=False)
        if proc.returncode != 0:
            raise KindError(f"kubectl {' '.join(args[:3])} failed: {_tail(proc.stderr)}")
        return proc.stdout

    def nodes(self) -> list[dict[str, Any]]:
        return json.loads(self.kubectl("get", "nodes", "-o", "json"))["items"]

    def _setup_cni(self) -> None:
        assert self.docker is not None
        nodes = self.nodes()
        info = {}
        for n in nodes:
            name = n["metadata"]["name"]
            ip = next(a["address"] for a in n["status"]["addresses"] if a["type"] == "InternalIP")
            info[name] = (ip, n["spec"]["podCIDR"])
        for name, (_ip, cidr) in info.items():
            conflist = {"cniVersion": "1.0.0", "name": "gpu-conformance-bridge", "plugins": [
                {"type": "bridge", "bridge": "cni0", "isGateway": True, "ipMasq": False, "hairpinMode": True,
                 "ipam": {"type": "host-local", "ranges": [[{"subnet": cidr}]], "routes": [{"dst": "0.0.0.0/0"}]}},
                {"type": "portmap", "capabilities": {"portMappings": True}}]}
            script = [f"cat > {CNI_CONFIG} <<'EOF'\n{json.dumps(conflist, indent=1)}\nEOF"]
            script += [f"ip route replace {other_cidr} via {other_ip}"
                       for other, (other_ip, other_cidr) in info.items() if other != name]
            self.docker.docker("exec", name, "sh", "-ec", "\n".join(script))
        self.kubectl("wait", "--for=condition=Ready", "nodes", "--all", "--timeout=180s")

    def gpu_nodes(self) -> list[str]:
        return [n["metadata"]["name"] for n in self.nodes() if n["metadata"]["labels"].get(GPU_LABEL) == "true"]

    def _install_host_driver(self) -> None:
        """What a GPU node has before the operator comes: the (fake) driver, and NFD's PCI label (NFD itself is not
        deployed). On the CDI path the host driver under the node's root and the device plugin's spec by NVIDIA's
        `nvidia-ctk cdi generate` on the fake NVML (nvidia_cdi.py); on the legacy path (and in the DRA model) the
        fake plugin's --setup-only writes the fake driver and the spec the fake legacy runtime reads."""
        assert self.docker is not None
        product = fakegpu.default_product()
        gpu = self.gpu_nodes()
        for node in gpu:
            if not self.nvidia_cdi_specs:
                cmd = fakegpu.plugin_command(Path(NODE_BINARIES["fake-gpu-device-plugin"]), node, self.gpus,
                                             kindop.CDI_DIR, kindop.DRIVER_ROOT, strategy="envvar", product=product,
                                             setup_only=True)
                self.docker.docker("exec", node, *cmd)
            if self.host_driver:
                # In the DRA model too: the operator's toolkit reads the driver from the node's root.
                script = nvidia_cdi.node_setup_script(fakegpu.gpu_table(node, self.gpus, product), kindop.DRIVER_ROOT,
                                                      plugin_spec=self.nvidia_cdi_specs)
                proc = self.docker.docker("exec", node, "sh", "-ec", script, check=False)
                if proc.returncode != 0:
                    raise KindError(f"installing the fake host driver on {node} failed: {_tail(proc.stderr)}")
        self.kubectl("label", "node", *gpu, f"{kindop.NFD_PCI_LABEL}=true", "--overwrite")

    def _install_operator_objects(self) -> None:
        """The operator's CRDs (from its module), its Deployment and the ClusterPolicy (kind/operator.py)."""
        crds = [yaml.safe_load(p.read_text()) for p in operator_module.crd_files()]
        self.kubectl("apply", "--server-side", "-f", "-", input=yaml.safe_dump_all(crds))
        self.kubectl("wait", "--for=condition=Established", "--timeout=60s",
                     *[f"crd/{c['metadata']['name']}" for c in crds])
        self.kubectl("apply", "--server-side", "-f", "-",
                     input=yaml.safe_dump_all([*kindop.objects(), self.clusterpolicy()]))
        if self.dra:
            self.kubectl("apply", "--server-side", "-f", "-", input=yaml.safe_dump_all(
                dra_driver.objects(kindop.DRIVER_ROOT, kindop.CDI_DIR, GPU_LABEL)))

    def clusterpolicy(self) -> dict[str, Any]:
        """The ClusterPolicy of this cluster's GPU path; in the DRA model with the device plugin off, as NVIDIA's
        DRA install guide has it beside the DRA driver (one GPU allocator per node)."""
        cp = kindop.clusterpolicy(self.gpu_path)
        if self.dra:
            cp["spec"].setdefault("devicePlugin", {})["enabled"] = False
        return cp

    def _until(self, missing: Callable[[], str | None], timeout: float, interval: float) -> None:
        """Poll `missing` (None when done, else what is still missing); on timeout one error with the operator
        namespace's pods, where the reason usually shows."""
        deadline = time.monotonic() + timeout
        while (what := missing()) is not None:
            if time.monotonic() > deadline:
                pods = self.kubectl("get", "pods", "-n", kindop.NAMESPACE, "-o", "wide")
                raise KindError(f"{what} after {timeout:.0f} s:\n{pods}")
            time.sleep(interval)

    def _wait_gpus(self, timeout: float = 180.0) -> None:
        want = set(self.gpu_nodes())
        if self.dra:
            self._until(lambda: self._missing_slices(want), timeout, 2)
            return

        def missing() -> str | None:
            ready = {n["metadata"]["name"] for n in self.nodes()
                     if n["status"].get("allocatable", {}).get("nvidia.com/gpu") == str(self.gpus)}
            return f"nodes {sorted(want - ready)} advertise no nvidia.com/gpu" if want - ready else None

        self._until(missing, timeout, 2)

    def _missing_slices(self, want: set[str]) -> str | None:
        slices = json.loads(self.kubectl("get", "resourceslices", "-o", "json"))["items"]
        short = sorted(n for n in want if dra_driver.slice_devices(slices, n) != self.gpus)
        return f"nodes {short} publish no ResourceSlice with {self.gpus} GPUs" if short else None

    def clusterpolicy_status(self) -> dict[str, Any]:
        """The ClusterPolicy's status ({} when there is none or the operator has not written one)."""
        cps = json.loads(self.kubectl("get", "clusterpolicies.nvidia.com", "-o", "json"))["items"]
        return cps[0].get("status", {}) if cps else {}

    def _wait_operator(self, timeout: float = 300.0) -> None:
        """Until the ClusterPolicy is ready (state ready and condition Ready=True), as an install would wait."""
        def missing() -> str | None:
            status = self.clusterpolicy_status()
            ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions", []))
            ok = status.get("state") == "ready" and ready
            return None if ok else f"the ClusterPolicy is not ready (state {status.get('state')!r})"

        self._until(missing, timeout, 3)
        # As `helm install --wait` would: the operator's own pod Ready too (the ClusterPolicy can be ready before
        # its readiness probe first passes, and OPR-001 would then block every node).
        self.kubectl("wait", "--for=condition=Available", "deployment", "--all", "-n", kindop.NAMESPACE,
                     f"--timeout={timeout:.0f}s")

    def load_image(self, tag: str) -> None:
        """An image of our Docker into every node (pytest-kubernetes' load_image: `kind load docker-image`)."""
        assert self.manager is not None
        try:
            self.manager.load_image(tag)
        except subprocess.CalledProcessError as exc:
            raise KindError(f"kind load docker-image {tag} failed: {_tail(exc.stderr)}") from None

    def run_suite_job(self, image: str, out: Path, timeout: float = 900.0) -> int:
        """kind/suite-job.yaml with `image` under rbac.yaml's ServiceAccount; reports copied to `out`; exit code."""
        assert self.docker is not None
        rbac = (KIND_DIR.parent / "rbac.yaml").read_text()
        self.kubectl("apply", "-f", "-", input=rbac)
        job = yaml.safe_load((KIND_DIR / "suite-job.yaml").read_text())
        spec = job["spec"]["template"]["spec"]
        for c in (*spec["initContainers"], *spec["containers"]):
            c["image"] = image
        self.kubectl("delete", "job", "-n", "gpu-conformance", "gpu-conformance", "--ignore-not-found", "--wait")
        self.kubectl("apply", "-f", "-", input=yaml.safe_dump(job))
        deadline = time.monotonic() + timeout
        while True:
            pods = json.loads(self.kubectl("get", "pods", "-n", "gpu-conformance", "-l", "job-name=gpu-conformance",
                                           "-o", "json"))["items"]
            term = [cs["state"]["terminated"] for p in pods for cs in p["status"].get("containerStatuses") or []
                    if cs["name"] == "suite" and cs.get("state", {}).get("terminated")]
            if term:
                node = pods[0]["spec"]["nodeName"]
                break
            if time.monotonic() > deadline:
                raise KindError(f"the suite Job did not finish in {timeout:.0f} s:\n"
                                f"{self.kubectl('get', 'pods', '-n', 'gpu-conformance', '-o', 'wide')}")
            time.sleep(3)
        out.mkdir(parents=True, exist_ok=True)
        self.docker.docker("cp", f"{node}:/var/lib/gpu-conformance/reports/.", str(out))
        return int(term[0]["exitCode"])

    def stop(self) -> None:
        if self.manager is not None:
            # kind delete failing or timing out: the daemon's containers are removed below all the same.
            with contextlib.suppress(subprocess.SubprocessError, OSError):
                self.manager.delete()
            self.manager = None
        if self.docker is not None and not self.docker.external:
            with contextlib.suppress(subprocess.SubprocessError, OSError):
                # Whatever kind left (a failed create): our daemon, so every container is ours.
                leftovers = self.docker.docker("ps", "-aq", check=False).stdout.decode().split()
                if leftovers:
                    self.docker.docker("rm", "-f", *leftovers, check=False)
                self.docker.docker("network", "rm", "kind", check=False)
            self.docker.stop()
        self.docker = None
        self._restore_env()
        restore_sysctls(self._saved_sysctls)
        shutil.rmtree(self.work, ignore_errors=True)
        if self._lock is not None:
            self._lock.close()   # closing the file releases the lock
            self._lock = None


def _tier_lock() -> TextIO:
    """One kind tier per machine: two would share the Docker data root and the cluster name, and the second
    one's clean-up would remove the first one's nodes. The lock is held until stop() (or the process ends)."""
    path = tier_root() / "tier.lock"
    path.parent.mkdir(parents=True, exist_ok=True)
    f = open(path, "a+")  # noqa: SIM115 - held for the cluster's lifetime, closed in stop()
    try:
        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        f.seek(0)
        holder = f.read().strip() or "unknown"
        f.close()
        raise KindError(f"another kind tier is running on this machine (pid {holder}, lock {path}); "
                        "run one at a time") from None
    f.seek(0)
    f.truncate()
    f.write(f"{os.getpid()}\n")
    f.flush()
    return f


# The tunables a kubelet writes on start (pkg/kubelet/cm/container_manager_linux.go setupKernelTunables).
KUBELET_SYSCTLS = ("vm/overcommit_memory", "vm/panic_on_oom", "kernel/panic", "kernel/panic_on_oops",
                   "kernel/keys/root_maxkeys", "kernel/keys/root_maxbytes")


def read_sysctls(names: tuple[str, ...] = KUBELET_SYSCTLS) -> dict[str, str]:
    out = {}
    for n in names:
        with contextlib.suppress(OSError):
            out[n] = (Path("/proc/sys") / n).read_text().strip()
    return out


def restore_sysctls(saved: dict[str, str]) -> None:
    """Put back what the kind nodes' kubelets changed on the host (host hygiene)."""
    for n, value in saved.items():
        path = Path("/proc/sys") / n
        with contextlib.suppress(OSError):
            if path.read_text().strip() != value:
                path.write_text(value + "\n")


def _tail(text: str | bytes | None, limit: int = 600) -> str:
    if isinstance(text, bytes):
        text = text.decode(errors="replace")
    return (text or "").strip()[-limit:]
