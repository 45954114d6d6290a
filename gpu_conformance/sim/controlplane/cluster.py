"""A real Kubernetes control plane on 127.0.0.1 with kwok as the kubelet of simulated GPU nodes.

etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kwok run as separate processes, each
in its own session (process group) so a detached cluster survives the process that started it and
teardown can kill whole groups. Everything binds 127.0.0.1 on free ports; component HTTP(S) traffic to
any other address is sent to a dead loopback proxy, so a node or webhook pointing elsewhere fails
instead of leaving the machine.

    with SimCluster(log_containers=["nvidia-driver-ctr"]) as sim:
        api = sim.api_client()
        ...

Nodes the tests create must carry the annotation kwok.x-k8s.io/node=fake to be managed by kwok.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import re
import shutil
import signal
import socket
import ssl
import tempfile
import threading
import time
import urllib.error
import urllib.request
import weakref
from base64 import b64encode
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from importlib import resources
from pathlib import Path
from types import FrameType, TracebackType
from typing import TYPE_CHECKING, Any

import yaml
from tenacity import RetryError, Retrying, retry_if_exception_type, stop_after_delay, wait_fixed

from gpu_conformance.errors import ConformanceError, UsageError
from gpu_conformance.pids import pid_alive
from gpu_conformance.sim.builds import binaries
from gpu_conformance.sim.controlplane.pki import Pki, make_pki
from gpu_conformance.sim.services.failed_start import cleaned_up_on_failure
from gpu_conformance.sim.services.processes import Proc, last_line, proc_stat, spawn_logged, stop_all

if TYPE_CHECKING:
    from kubernetes.client import ApiClient

LOOPBACK = "127.0.0.1"
CONTEXT_NAME = "gpu-sim"
KWOK_NODE_ANNOTATION = "kwok.x-k8s.io/node"
KWOK_NODE_ANNOTATION_VALUE = "fake"
UNPULLABLE_REGISTRY = "registry.invalid/"
SERVICE_CIDR = "10.96.0.0/16"
# Pod IPs handed out by kwok: loopback, so nothing could ever route to a fake pod off-host.
POD_CIDR = "127.1.0.0/16"
# Components' outbound HTTP(S) to non-loopback hosts goes to this proxy, where nothing listens.
# Go (and gRPC) never proxy loopback destinations, so the cluster's own traffic is unaffected.
DEAD_PROXY = "http://127.0.0.1:1"
PIDS_FILE = "pids.json"
# Marks a directory as a simulated cluster's state dir; `sim down` touches nothing without it.
MARKER_FILE = ".gpu-conformance-sim.json"
ETCD_SHM_PREFIX = "gpu-sim-etcd-"
TEMP_PREFIX = "gpu-sim-"
COMPONENTS = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok")
# Everything the sim writes into its state dir: `sim down` removes these and nothing else.
STATE_ENTRIES = ("kubeconfig", "kwok.yaml", PIDS_FILE, "logs", "pki", "kwok-home", "etcd",
                 *(f"{c}.log" for c in COMPONENTS),
                 # Logs of the processes the simulated and the real operator add (operator/status.LOOP_NAME,
                 # real_operator.PROCESS / OPERAND_LOOP): sim down removes them too.
                 "sim-operator-status.log", "gpu-operator.log", "sim-operands.log")

_CONTAINER_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
# The API server holds no state of its own (etcd does) but drains watches on SIGTERM for longer than any
# caller waits (5 s measured, then SIGKILL anyway): a short grace, then it is killed.
_GRACE_BY_NAME = {"kube-apiserver": 1.0}


_UNUSED_CONTROLLERS = (
    "endpoints", "endpointslice", "endpointslice-mirroring",
    "persistentvolume-attach-detach", "persistentvolume-binder", "persistentvolume-expander",
    "persistentvolume-protection", "persistentvolumeclaim-protection", "ephemeral-volume",
    "volumeattributesclass-protection", "statefulset", "disruption", "horizontal-pod-autoscaler", "cronjob",
    "device-taint-eviction", "replicationcontroller", "ttl", "service-lb", "node-route",
    "cloud-node-lifecycle",
)

class SimClusterError(ConformanceError):
    """The simulated cluster failed to start (the message names the component and its log)."""


class StateDirError(UsageError):
    """A state dir the sim must not use or remove (not empty, not marked as the sim's): one line, exit 4."""


class _NotYet(Exception):
    """A readiness probe that has not passed yet; tenacity retries on it."""


# Started, non-detached clusters: stopped at interpreter exit and on SIGTERM.
_LIVE: set[SimCluster] = set()
_LIVE_LOCK = threading.Lock()
_HOOKS_INSTALLED = False
_PREVIOUS_SIGTERM: Any = None


class SimCluster:
    """etcd + kube-apiserver + kube-controller-manager + kube-scheduler + kwok on 127.0.0.1 (api_only: first two)."""

    def __init__(self, state_dir: Path | None = None, bin_dir: Path | None = None,
                 log_containers: Iterable[str] = (), api_only: bool = False) -> None:
        self._owns_state_dir = state_dir is None
        # etcd + kube-apiserver only: nothing reconciles what is written (no DaemonSet, node lifecycle or
        # garbage controller, no kubelet), so objects and their status stay exactly as a test wrote them.
        self.api_only = api_only
        if state_dir is None:
            reap_orphaned_temp_dirs()
        self.state_dir: Path = (Path(tempfile.mkdtemp(prefix=TEMP_PREFIX)) if state_dir is None
                                else Path(state_dir).expanduser().resolve())
        self.kubeconfig: Path = self.state_dir / "kubeconfig"
        self.logs_dir: Path = self.state_dir / "logs"
        self.bin_dir: Path | None = Path(bin_dir).resolve() if bin_dir is not None else None
        # Before the first file is written into it (log containers below): refuses a directory not ours.
        claim_state_dir(self.state_dir, temporary=self._owns_state_dir)
        self.ports: dict[str, int] = {}
        self._log_containers: list[str] = []
        for name in log_containers:
            self._add_log_container(name)
        self._procs: dict[str, Proc] = {}
        self._pki: Pki | None = None
        self._etcd_dir: Path | None = None
        self._started = False
        self._detached = False
        self._lock = threading.RLock()
        # An object that is never started (or never stopped, in-process) must not leak its temp dir.
        self._dir_finalizer: weakref.finalize[Any, Any] | None = (
            weakref.finalize(self, shutil.rmtree, str(self.state_dir), True) if self._owns_state_dir else None
        )

    # ---------------------------------------------------------------- lifecycle

    def start(self, timeout: float = 60.0, detach: bool = False) -> SimCluster:
        """Start every component and return once the cluster is usable.

        Ready means: apiserver /readyz ok, the default ServiceAccount exists (kcm's serviceaccount
        controller runs), kcm and scheduler healthy, kwok's server answering; with api_only, apiserver
        /readyz alone. With detach=True the
        processes outlive this Python process (for `sim up`; `stop_state_dir` tears them down) and no
        exit/SIGTERM hooks are installed.
        """
        with self._lock:
            if self._started:
                return self
            claim_state_dir(self.state_dir, temporary=self._owns_state_dir)
            bin_dir = self.bin_dir or binaries.ensure_binaries()
            self.bin_dir = bin_dir
            self._started = True
            self._detached = detach
            if detach and self._dir_finalizer is not None:
                self._dir_finalizer.detach()
            if not detach:
                _register_live(self)
            deadline = time.monotonic() + timeout
            # A failed boot keeps the state dir (the component logs are the only clue); an interrupt removes all.
            with cleaned_up_on_failure(SimClusterError, self._teardown, "state dir kept for debugging"):
                self._launch(bin_dir)
                self._wait_ready(deadline, only=("kube-apiserver",))
                if not self.api_only:
                    # kcm and the scheduler read the authentication ConfigMap once at startup and exit if
                    # the apiserver is not serving yet, hence only now.
                    for name in ("kube-controller-manager", "kube-scheduler"):
                        self.spawn(name, self._command(name, bin_dir))
                    self._wait_ready(deadline)
            return self

    def cpu_seconds(self) -> dict[str, float]:
        """CPU time (user + system, its reaped children included) each running process of this cluster used."""
        tick = os.sysconf("SC_CLK_TCK")
        out: dict[str, float] = {}
        for name, proc in self._procs.items():
            stat = proc_stat(proc.pid)
            if stat:
                # Fields after the command (stat[0] = state): utime 11, stime 12, cutime 13, cstime 14.
                out[name] = sum(int(stat[i]) for i in (11, 12, 13, 14)) / tick
        return out

    def stop(self) -> None:
        """Kill every process this cluster started (whole groups) and remove what it created."""
        self._teardown(keep_state_dir=False)

    def _teardown(self, keep_state_dir: bool) -> None:
        with self._lock:
            stop_all(list(self._procs.values()), _GRACE_BY_NAME)
            self._procs.clear()
            if self._etcd_dir is not None:
                shutil.rmtree(self._etcd_dir, ignore_errors=True)
                self._etcd_dir = None
            if self._owns_state_dir and not keep_state_dir:
                shutil.rmtree(self.state_dir, ignore_errors=True)
            else:
                # The processes are gone: a stale pid list must never be acted on later.
                (self.state_dir / PIDS_FILE).unlink(missing_ok=True)
                if keep_state_dir and self._dir_finalizer is not None:
                    self._dir_finalizer.detach()
            _unregister_live(self)
            self._started = False  # a stopped cluster may be started again, on fresh ports and data

    def __enter__(self) -> SimCluster:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    # ---------------------------------------------------------------- clients and logs

    def api_client(self) -> ApiClient:
        """A kubernetes.client.ApiClient for the admin user, from the generated kubeconfig.

        Built like the suite's own connection: the admin key stays in memory, never in a temp file.
        """
        from gpu_conformance.cluster.connect import connect  # deferred: importing kubernetes costs ~0.5 s

        return connect(str(self.kubeconfig), CONTEXT_NAME).api

    def write_container_log(self, container: str, text: str, previous: bool = False) -> None:
        """Set what `kubectl logs [--previous]` returns for every pod's container named `container`.

        Written in CRI format (what kwok's log reader expects). A name not passed as log_containers
        is added; on a running cluster that restarts kwok (about a second) to load the new config.
        """
        with self._lock:
            if container not in self._log_containers:
                self._add_log_container(container)
                if self._procs:
                    self._write_kwok_config()
                    self._restart_kwok()
            self.logs_dir.mkdir(parents=True, exist_ok=True)
            target = self.logs_dir / (f"{container}.previous.log" if previous else f"{container}.log")
            _write_atomic(target, _cri_lines(text))

    @property
    def log_containers(self) -> tuple[str, ...]:
        return tuple(self._log_containers)

    @property
    def server(self) -> str:
        return f"https://{LOOPBACK}:{self.ports['apiserver']}"

    # ---------------------------------------------------------------- internals: launch

    def _add_log_container(self, name: str) -> None:
        if not _CONTAINER_NAME.match(name) or len(name) > 63:
            raise ValueError(f"{name!r} is not a valid container name (DNS-1123 label)")
        if name not in self._log_containers:
            self._log_containers.append(name)
            # An empty log file makes `kubectl logs` answer with nothing instead of an error, as a kubelet
            # does for a container that has not written anything.
            self.logs_dir.mkdir(parents=True, exist_ok=True)
            for suffix in (".log", ".previous.log"):
                (self.logs_dir / f"{name}{suffix}").touch(exist_ok=True)

    def _launch(self, bin_dir: Path) -> None:
        self.state_dir.mkdir(parents=True, exist_ok=True)
        self.logs_dir.mkdir(parents=True, exist_ok=True)
        (self.state_dir / "kwok-home").mkdir(exist_ok=True)
        for name in self._log_containers:
            for suffix in (".log", ".previous.log"):
                (self.logs_dir / f"{name}{suffix}").touch()
        self.ports = dict(zip(("etcd", "etcd-peer", "apiserver", "kcm", "scheduler", "kwok"),
                              _free_ports(6), strict=True))
        self._pki = make_pki(self.state_dir / "pki")
        self._write_kubeconfig()
        self._write_kwok_config()
        self._etcd_dir = _make_etcd_dir(self.state_dir)
        # Together: the apiserver retries etcd and kwok waits for the apiserver by itself.
        for name in ("etcd", "kube-apiserver") + (() if self.api_only else ("kwok",)):
            self.spawn(name, self._command(name, bin_dir))

    def _command(self, name: str, bin_dir: Path) -> list[str]:
        assert self._pki is not None and self._etcd_dir is not None
        pki, ports, kubeconfig = self._pki, self.ports, str(self.kubeconfig)
        serving = [f"--tls-cert-file={pki.cert}", f"--tls-private-key-file={pki.key}"]
        delegated = [f"--kubeconfig={kubeconfig}", f"--authentication-kubeconfig={kubeconfig}",
                     f"--authorization-kubeconfig={kubeconfig}"]
        if name == "etcd":
            client, peer = f"http://{LOOPBACK}:{ports['etcd']}", f"http://{LOOPBACK}:{ports['etcd-peer']}"
            return [str(bin_dir / "etcd"), "--name=sim", f"--data-dir={self._etcd_dir}",
                    f"--listen-client-urls={client}", f"--advertise-client-urls={client}",
                    f"--listen-peer-urls={peer}", f"--initial-advertise-peer-urls={peer}",
                    f"--initial-cluster=sim={peer}", "--initial-cluster-state=new",
                    # Throw-away data: fsync buys nothing and costs seconds on a busy disk.
                    "--unsafe-no-fsync=true", "--log-level=warn"]
        if name == "kube-apiserver":
            return [str(bin_dir / "kube-apiserver"),
                    f"--etcd-servers=http://{LOOPBACK}:{ports['etcd']}",
                    f"--bind-address={LOOPBACK}", f"--advertise-address={LOOPBACK}",
                    f"--secure-port={ports['apiserver']}", *serving,
                    f"--cert-dir={self.state_dir / 'pki'}",
                    f"--client-ca-file={pki.ca_cert}",
                    # Front-proxy (aggregation) trust: without it kcm and the scheduler log an error
                    # every few seconds about the missing requestheader CA.
                    f"--requestheader-client-ca-file={pki.ca_cert}",
                    f"--proxy-client-cert-file={pki.cert}", f"--proxy-client-key-file={pki.key}",
                    "--requestheader-allowed-names=admin",
                    "--requestheader-username-headers=X-Remote-User",
                    "--requestheader-group-headers=X-Remote-Group",
                    "--requestheader-extra-headers-prefix=X-Remote-Extra-",
                    "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
                    f"--service-account-key-file={pki.sa_pub}",
                    f"--service-account-signing-key-file={pki.sa_key}",
                    f"--service-cluster-ip-range={SERVICE_CIDR}",
                    "--authorization-mode=Node,RBAC",
                    # Its client certificate toward kubelets (logs, exec), as a real control plane presents
                    # one (a kubelet admits no anonymous caller); kwok ignores it.
                    f"--kubelet-client-certificate={pki.cert}", f"--kubelet-client-key={pki.key}",
                    "--allow-privileged=true",
                    # kwok's kubelet endpoint is the node's InternalIP (127.0.0.1); the Hostname
                    # address is the node name, which resolves nowhere.
                    "--kubelet-preferred-address-types=InternalIP",
                    # The loopback advertise address is invalid in Endpoints; nothing in-cluster
                    # needs the kubernetes Service's endpoints, so skip the reconciler's error loop.
                    "--endpoint-reconciler-type=none",
                    "--profiling=false"]
        if name == "kube-controller-manager":
            return [str(bin_dir / "kube-controller-manager"), *delegated, *serving,
                    "--leader-elect=false", f"--bind-address={LOOPBACK}", f"--secure-port={ports['kcm']}",
                    f"--service-account-private-key-file={pki.sa_key}", f"--root-ca-file={pki.ca_cert}",
                    "--use-service-account-credentials=false",
                    # Not the Endpoints/EndpointSlice controllers: kwok's pod IPs are loopback, which those
                    # objects reject, so they only retried failing writes over every operand pod (at 1,000
                    # nodes a large share of kcm's CPU); nothing in the suite reads endpoints.
                    # Nor the controllers for what neither the GPU Operator nor the suite uses (volumes,
                    # StatefulSets, PDBs, HPAs, CronJobs, DRA device taints, cloud routes): each watches every
                    # pod or node and the ttl controller patches every node once, which on a 1,000-node install
                    # costs CPU the operand pods need. DaemonSets, Deployments, Jobs, namespaces, GC, node lifecycle,
                    # taint eviction and resourceclaim (the DRA probe's claims from its template) stay: faults
                    # and the probe go through them.
                    "--controllers=*," + ",".join(f"-{c}-controller" for c in _UNUSED_CONTROLLERS),
                    f"--cluster-signing-cert-file={pki.ca_cert}", f"--cluster-signing-key-file={pki.ca_key}",
                    # kwok heartbeats every 4-5 min without leases (kwok-stages.yaml); a generous grace
                    # keeps a loaded machine (a 1,000-node install starves kwok of CPU) from tainting
                    # simulated nodes unreachable and marking their pods not ready.
                    "--node-monitor-grace-period=10m", "--node-startup-grace-period=10m",
                    # The default 20 requests/s client limit makes a 50-node install wait on pod creation.
                    "--kube-api-qps=5000", "--kube-api-burst=10000", "--profiling=false"]
        if name == "kube-scheduler":
            return [str(bin_dir / "kube-scheduler"), *delegated, *serving,
                    "--leader-elect=false", f"--bind-address={LOOPBACK}",
                    f"--secure-port={ports['scheduler']}", "--kube-api-qps=5000", "--kube-api-burst=10000",
                    "--profiling=false"]
        if name == "kwok":
            return [str(bin_dir / "kwok"), f"--kubeconfig={kubeconfig}",
                    f"--config={self.state_dir / 'kwok.yaml'}",
                    "--manage-all-nodes=false",
                    f"--manage-nodes-with-annotation-selector={KWOK_NODE_ANNOTATION}={KWOK_NODE_ANNOTATION_VALUE}",
                    f"--node-ip={LOOPBACK}", f"--node-port={ports['kwok']}",
                    f"--server-address={LOOPBACK}:{ports['kwok']}", f"--cidr={POD_CIDR}", *serving,
                    # No node leases: a restarted kwok (new identity) would otherwise wait out the
                    # old holder's lease before managing the nodes again.
                    "--node-lease-duration-seconds=0",
                    # At INFO kwok logs a line per pod and node patch (tens of thousands on a 1,000-node
                    # install); warnings and errors are what a failed boot needs.
                    "--v=WARN"]
        raise ValueError(name)

    def spawn(self, name: str, cmd: list[str]) -> None:
        """Run `cmd` as one of this cluster's processes: in pids.json, logged to <state dir>/<name>.log, stopped
        with the cluster (the operators' loops and the real operator run this way too)."""
        env = {key: DEAD_PROXY for key in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy")}
        env["NO_PROXY"] = env["no_proxy"] = ",".join((LOOPBACK, "localhost"))
        # kwok also loads $KWOK_WORKDIR/kwok.yaml; point it at an empty dir so a developer's
        # ~/.kwok/kwok.yaml cannot inject stages.
        env["KWOK_WORKDIR"] = str(self.state_dir / "kwok-home")
        self._procs[name] = spawn_logged(name, cmd, self.state_dir / f"{name}.log", self.state_dir, env)
        self._write_pids()

    def process(self, name: str) -> Proc | None:
        """The process `spawn` started under `name`, if it did."""
        return self._procs.get(name)

    def _write_pids(self) -> None:
        data = {
            "version": 1,
            "owner_pid": os.getpid(),
            "detached": self._detached,
            "server": self.server if "apiserver" in self.ports else None,
            "kubeconfig": str(self.kubeconfig),
            "ports": self.ports,
            "etcd_data_dir": str(self._etcd_dir) if self._etcd_dir else None,
            "processes": {p.name: {"pid": p.pid, "pgid": p.pid, "start_time": p.start_time}
                          for p in self._procs.values()},
        }
        _write_atomic(self.state_dir / PIDS_FILE, json.dumps(data, indent=2) + "\n")

    def _write_kubeconfig(self) -> None:
        assert self._pki is not None

        def b64(path: Path) -> str:
            return b64encode(path.read_bytes()).decode()

        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": CONTEXT_NAME, "cluster": {
                "server": self.server, "certificate-authority-data": b64(self._pki.ca_cert)}}],
            "users": [{"name": f"{CONTEXT_NAME}-admin", "user": {
                "client-certificate-data": b64(self._pki.cert), "client-key-data": b64(self._pki.key)}}],
            "contexts": [{"name": CONTEXT_NAME, "context": {
                "cluster": CONTEXT_NAME, "user": f"{CONTEXT_NAME}-admin", "namespace": "default"}}],
            "current-context": CONTEXT_NAME,
        }
        _write_atomic(self.kubeconfig, yaml.safe_dump(config, sort_keys=False), mode=0o600)

    def _write_kwok_config(self) -> None:
        docs: list[str] = [yaml.safe_dump({
            "apiVersion": "config.kwok.x-k8s.io/v1alpha1",
            "kind": "KwokConfiguration",
            # kwok v0.8.0 applies its option defaults only when no KwokConfiguration is given, so
            # a config file must spell out every option that defaults to non-zero (zero
            # parallelism is rejected; unset debugging handlers would mean no `kubectl logs`).
            "options": {"manageAllNodes": False,
                        "manageNodesWithAnnotationSelector": f"{KWOK_NODE_ANNOTATION}={KWOK_NODE_ANNOTATION_VALUE}",
                        "cidr": POD_CIDR, "nodeIP": LOOPBACK,
                        "enableDebuggingHandlers": True, "enableProfilingHandler": False,
                        "enableContentionProfiling": False,
                        "podPlayStageParallelism": 8, "nodePlayStageParallelism": 4,
                        "nodeLeaseParallelism": 4, "podsOnNodeSyncParallelism": 1,
                        "enablePodsOnNodeSyncListPager": True, "enablePodsOnNodeSyncStreamWatch": False,
                        # Per-pod logs from the API server (sim/operator/pod_logs.py; its CRD comes with the install).
                        "enableCRDs": ["Logs"]},
        }, sort_keys=False)]
        # The stages file carries its own leading "---" separators.
        docs[0] += "\n" + stages_yaml().strip("\n")
        for name in self._log_containers:
            docs.append(yaml.safe_dump({
                "apiVersion": "kwok.x-k8s.io/v1alpha1",
                "kind": "ClusterLogs",
                "metadata": {"name": f"logs-{name}"},
                "spec": {"logs": [{"containers": [name],
                                   "logsFile": str(self.logs_dir / f"{name}.log"),
                                   "previousLogsFile": str(self.logs_dir / f"{name}.previous.log")}]},
            }, sort_keys=False))
        _write_atomic(self.state_dir / "kwok.yaml", "\n---\n".join(d.strip("\n") for d in docs) + "\n")

    def _restart_kwok(self) -> None:
        assert self.bin_dir is not None
        old = self._procs.pop("kwok", None)
        if old is not None:
            stop_all([old], _GRACE_BY_NAME)
        self.spawn("kwok", self._command("kwok", self.bin_dir))
        self._wait_ready(time.monotonic() + 30.0, only=("kwok",))

    # ---------------------------------------------------------------- internals: readiness

    def _ssl_context(self) -> ssl.SSLContext:
        assert self._pki is not None
        ctx = ssl.create_default_context(cafile=str(self._pki.ca_cert))
        ctx.load_cert_chain(str(self._pki.cert), str(self._pki.key))
        return ctx

    def _wait_ready(self, deadline: float, only: tuple[str, ...] | None = None) -> None:
        ctx = self._ssl_context()
        # No proxies for our own loopback probes, whatever the environment says.
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}),
                                             urllib.request.HTTPSHandler(context=ctx))
        api = self.server
        probes: list[tuple[str, str, str]] = [
            ("kube-apiserver", "/readyz", f"{api}/readyz"),
            ("kube-controller-manager", "default ServiceAccount",
             f"{api}/api/v1/namespaces/default/serviceaccounts/default"),
            ("kube-controller-manager", "/healthz", f"https://{LOOPBACK}:{self.ports['kcm']}/healthz"),
            ("kube-scheduler", "/readyz", f"https://{LOOPBACK}:{self.ports['scheduler']}/readyz"),
            ("kwok", "/healthz", f"https://{LOOPBACK}:{self.ports['kwok']}/healthz"),
        ]
        if only is not None:
            probes = [p for p in probes if p[0] in only]
        for component, what, url in probes:
            self._wait_for(component, what, deadline, lambda url=url: _probe(opener, url))

    def _wait_for(self, component: str, what: str, deadline: float, probe: Callable[[], None]) -> None:
        def attempt() -> None:
            self._check_alive()
            probe()

        try:
            for attempt_ctx in Retrying(stop=stop_after_delay(max(deadline - time.monotonic(), 0.0)),
                                        wait=wait_fixed(0.2), retry=retry_if_exception_type(_NotYet),
                                        reraise=False):
                with attempt_ctx:
                    attempt()
        except RetryError as exc:
            last = exc.last_attempt.exception()
            log = self.state_dir / f"{component}.log"
            raise SimClusterError(f"simulated cluster not ready: {component} {what} still failing when the "
                                  f"start timeout ran out ({last}); last log line: {last_line(log)} (log: {log})"
                                  ) from None

    def _check_alive(self) -> None:
        for proc in self._procs.values():
            code = proc.popen.poll() if proc.popen is not None else None
            if code is not None:
                log = self.state_dir / f"{proc.name}.log"
                raise SimClusterError(f"simulated cluster: {proc.name} exited with code {code} during start: "
                                      f"{last_line(log)} (log: {log})")


# -------------------------------------------------------------------- teardown of a detached cluster


def claim_state_dir(state_dir: Path, temporary: bool = False) -> None:
    """Make ``state_dir`` the sim's: it must be new, empty, or already carry the sim's marker.

    The marker records whether the sim created the directory, so that `sim down` removes the directory
    itself only then, and only once the files the sim wrote are gone.
    """
    state_dir = Path(state_dir).expanduser().resolve()
    if read_marker(state_dir) is not None:
        return
    if state_dir.exists() or state_dir.is_symlink():
        if not state_dir.is_dir():
            raise StateDirError(f"--state-dir {state_dir} is not a directory")
        if any(state_dir.iterdir()):
            raise StateDirError(f"--state-dir {state_dir} is not empty and not a simulated cluster's state dir: "
                                "choose a new or empty directory (sim up and sim down only touch what they create)")
        created = temporary
    else:
        state_dir.mkdir(parents=True)
        created = True
    marker = {"version": 1, "created_dir": created, "temporary": temporary, "owner_pid": os.getpid(),
              "owner_uid": os.getuid()}
    _write_atomic(state_dir / MARKER_FILE, json.dumps(marker, indent=2) + "\n", mode=0o600)


def read_marker(state_dir: Path) -> dict[str, Any] | None:
    try:
        data = json.loads((Path(state_dir) / MARKER_FILE).read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and data.get("version") == 1 else None


def stop_state_dir(state_dir: Path) -> None:
    """Tear down a cluster started (possibly detached) with this state dir: kill it, remove what it wrote.

    Idempotent: a missing dir is fine. A directory without the sim's marker is refused untouched, so a typo
    (or `--state-dir .`) cannot remove anything else; in a marked one only the sim's own files go, and the
    directory itself only if the sim created it and nothing else is left in it.
    """
    state_dir = Path(state_dir).expanduser().resolve()
    if not state_dir.exists():
        return
    marker = read_marker(state_dir)
    if marker is None:
        raise StateDirError(f"{state_dir} is not a simulated cluster's state dir (no {MARKER_FILE}); "
                            "not touching it")
    pids_path = state_dir / PIDS_FILE
    data: dict[str, Any] = {}
    if pids_path.is_file():
        with contextlib.suppress(OSError, ValueError):
            data = json.loads(pids_path.read_text())
    procs = [Proc(name, int(p["pid"]), int(p.get("start_time", 0)))
             for name, p in (data.get("processes") or {}).items()]
    stop_all(procs, _GRACE_BY_NAME)
    etcd_dir = data.get("etcd_data_dir")
    if etcd_dir and _is_our_etcd_dir(Path(etcd_dir), state_dir):
        shutil.rmtree(etcd_dir, ignore_errors=True)
    _remove_state_files(state_dir, bool(marker.get("created_dir")))


def _remove_state_files(state_dir: Path, created_dir: bool) -> None:
    for name in STATE_ENTRIES:
        for path in (state_dir / name, state_dir / f".{name}.tmp"):
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path, ignore_errors=True)
            else:
                path.unlink(missing_ok=True)
    (state_dir / MARKER_FILE).unlink(missing_ok=True)
    if created_dir:
        with contextlib.suppress(OSError):
            state_dir.rmdir()  # only when empty: whatever someone else put there stays


def reap_orphaned_temp_dirs(tmp: str | None = None) -> list[Path]:
    """Stop clusters of runs killed with SIGKILL: their temporary state dirs (keys included) and processes.

    Only temporary dirs this user's own runs created (marker with temporary=true), whose owning process is gone.
    """
    reaped: list[Path] = []
    base = Path(tmp or tempfile.gettempdir())
    try:
        candidates = [p for p in base.iterdir() if p.name.startswith(TEMP_PREFIX) and p.is_dir()
                      and not p.is_symlink()]
    except OSError:
        return reaped
    for state_dir in candidates:
        marker = read_marker(state_dir)
        if not marker or not marker.get("temporary") or marker.get("owner_uid") != os.getuid():
            continue
        if pid_alive(int(marker.get("owner_pid") or 0)):
            continue
        with contextlib.suppress(OSError, ConformanceError):
            stop_state_dir(state_dir)
            reaped.append(state_dir)
    return reaped



# -------------------------------------------------------------------- helpers


def stages_yaml() -> str:
    """Our kwok Stages, with the simulated kubelet version filled in."""
    text = resources.files("gpu_conformance.sim.controlplane").joinpath("data/kwok-stages.yaml").read_text()
    return text.replace("@KUBE_VERSION@", binaries.K8S_VERSION)


def _free_ports(count: int) -> list[int]:
    # Hold all sockets open until every port is chosen, so the kernel cannot hand out one twice.
    socks = []
    try:
        for _ in range(count):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.bind((LOOPBACK, 0))
            socks.append(sock)
        return [s.getsockname()[1] for s in socks]
    finally:
        for sock in socks:
            sock.close()


def _make_etcd_dir(state_dir: Path) -> Path:
    shm = Path("/dev/shm")
    if shm.is_dir() and os.access(shm, os.W_OK):
        return Path(tempfile.mkdtemp(prefix=ETCD_SHM_PREFIX, dir=shm))
    path = state_dir / "etcd"
    path.mkdir(mode=0o700, exist_ok=True)
    return path


def _is_our_etcd_dir(path: Path, state_dir: Path) -> bool:
    path = path.resolve()
    return ((path.parent == Path("/dev/shm") and path.name.startswith(ETCD_SHM_PREFIX))
            or path.is_relative_to(state_dir))


def _probe(opener: urllib.request.OpenerDirector, url: str) -> None:
    try:
        with opener.open(url, timeout=3) as resp:
            if resp.status != 200:
                raise _NotYet(f"HTTP {resp.status}")
    except urllib.error.HTTPError as exc:
        raise _NotYet(f"HTTP {exc.code}") from None
    except (urllib.error.URLError, OSError) as exc:
        raise _NotYet(str(getattr(exc, "reason", exc))) from None


def _cri_lines(text: str) -> str:
    # CRI log format: "<RFC3339Nano timestamp> <stream> <P|F> <content>"; F = a full line.
    now = time.time_ns()
    base = datetime.fromtimestamp(now // 1_000_000_000, tz=UTC).strftime("%Y-%m-%dT%H:%M:%S")
    stamp = f"{base}.{now % 1_000_000_000:09d}Z"
    return "".join(f"{stamp} stdout F {line}\n" for line in text.splitlines())


def _write_atomic(path: Path, text: str, mode: int = 0o644) -> None:
    # Readers (kwok serving logs, `sim down` reading pids) never see a half-written file.
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text)
    tmp.chmod(mode)
    os.replace(tmp, path)


# -------------------------------------------------------------------- exit and SIGTERM hooks


def _register_live(cluster: SimCluster) -> None:
    global _HOOKS_INSTALLED, _PREVIOUS_SIGTERM
    with _LIVE_LOCK:
        _LIVE.add(cluster)
        if _HOOKS_INSTALLED:
            return
        _HOOKS_INSTALLED = True
    atexit.register(_stop_live)
    # signal.signal only works in the main thread; elsewhere atexit (and __exit__) must do.
    if threading.current_thread() is threading.main_thread():
        _PREVIOUS_SIGTERM = signal.signal(signal.SIGTERM, _on_sigterm)


def _unregister_live(cluster: SimCluster) -> None:
    with _LIVE_LOCK:
        _LIVE.discard(cluster)


def _stop_live() -> None:
    with _LIVE_LOCK:
        clusters = list(_LIVE)
    for cluster in clusters:
        # Last resort (the SIGTERM handler): whatever one cluster's stop raises, the others are still stopped.
        with contextlib.suppress(Exception):
            cluster.stop()


def _on_sigterm(signum: int, frame: FrameType | None) -> None:
    _stop_live()
    previous = _PREVIOUS_SIGTERM
    if callable(previous):
        previous(signum, frame)
        return
    if previous == signal.SIG_IGN:
        return
    # Default disposition: die by SIGTERM as if we had never caught it (exit status stays -15).
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    os.kill(os.getpid(), signal.SIGTERM)
