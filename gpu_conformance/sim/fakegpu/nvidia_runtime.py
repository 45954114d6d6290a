"""NVIDIA's container runtime and the kind tier's fake, run side by side on one node's files and one OCI bundle.

The kind tier's GPU pods go through fixtures/fake-gpu/cmd/fake-nvidia-container-runtime. Its reference is NVIDIA's
nvidia-container-runtime (gotools.NVIDIA_CONTAINER_RUNTIME) in CDI mode, which needs neither a GPU nor
libnvidia-container: it turns NVIDIA_VISIBLE_DEVICES into CDI names of the default kind, injects them from the
specs in its spec dirs and execs the low-level runtime. Here both runtimes get:

* a node: the fake driver (GPU table, nvidia-smi) and the CDI spec, written by the device plugin's --setup-only
  as the kind tier writes them on its GPU workers (fakegpu.plugin_command);
* a bundle whose config.json is what containerd hands an OCI runtime for a pod's container;
* a recording runc: a script that copies the config.json it is handed aside and exits 0, so what a runtime did
  to the bundle is compared, not what runc would make of it.

The real runtime is configured only through a config.toml in the work directory (found through
XDG_CONFIG_HOME); its spec dir, low-level runtime and log files are all under that directory.
"""

from __future__ import annotations

import copy
import json
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpu_conformance.sim.fakegpu import stack as fakegpu

# What a runtime edits in config.json: the parts the comparison looks at.
EDITED = ("process.env", "linux.devices", "linux.resources.devices", "mounts", "hooks")


@dataclass(frozen=True)
class Node(fakegpu.FakeGpuNode):
    """One GPU node's fake driver and CDI spec, in a directory standing for its root."""
    root: Path
    name: str
    gpus: int

    @property
    def cdi_dir(self) -> Path:
        return self.root / "var/run/cdi"

    @property
    def driver_root(self) -> Path:
        return self.root / "var/lib/fake-gpu"

    def uuid(self, index: int) -> str:
        return fakegpu.uuids(self.name, self.gpus)[index]


def write_node(plugin: Path, root: Path, name: str = "kind-worker", gpus: int = 2) -> Node:
    """The node's files as the kind tier writes them on a GPU worker (cluster._install_host_driver)."""
    node = Node(root, name, gpus)
    cmd = fakegpu.plugin_command(plugin, name, gpus, node.cdi_dir, node.driver_root, strategy="envvar",
                                 setup_only=True)
    subprocess.run(cmd, capture_output=True, text=True, check=True, timeout=60)
    return node


def container_config(env: list[str], uid: int = 0, gid: int = 0) -> dict[str, Any]:
    """A pod container's config.json as containerd writes it (abridged: the parts a runtime may touch, and
    mounts at several depths, since CDI sorts the mounts it adds among them)."""
    ro = ["rbind", "rprivate", "ro"]
    return {
        "ociVersion": "1.2.0",
        "process": {"user": {"uid": uid, "gid": gid, "additionalGids": [gid]}, "args": ["sleep", "infinity"],
                    "env": ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", *env,
                            "KUBERNETES_SERVICE_HOST=10.96.0.1"],
                    "cwd": "/", "noNewPrivileges": False},
        "root": {"path": "rootfs"},
        "hostname": "probe",
        "mounts": [
            {"destination": "/proc", "type": "proc", "source": "proc", "options": ["nosuid", "noexec", "nodev"]},
            {"destination": "/dev", "type": "tmpfs", "source": "tmpfs", "options": ["nosuid", "strictatime"]},
            {"destination": "/dev/pts", "type": "devpts", "source": "devpts", "options": ["nosuid", "noexec"]},
            {"destination": "/sys", "type": "sysfs", "source": "sysfs", "options": ["nosuid", "noexec", "ro"]},
            {"destination": "/etc/hosts", "type": "bind", "source": "/var/lib/kubelet/pods/p/etc-hosts",
             "options": ["rbind", "rprivate", "rw"]},
            {"destination": "/var/run/secrets/kubernetes.io/serviceaccount", "type": "bind",
             "source": "/var/lib/kubelet/pods/p/volumes/token", "options": ro},
            {"destination": "/dev/shm", "type": "bind", "source": "/run/containerd/sandboxes/s/shm",
             "options": ["rbind", "ro"]},
        ],
        "annotations": {"io.kubernetes.cri.container-type": "container",
                        "io.kubernetes.cri.container-name": "probe"},
        "linux": {
            "resources": {"devices": [{"allow": False, "access": "rwm"}], "memory": {"limit": 134217728}},
            "cgroupsPath": "kubepods-besteffort-p.slice:cri-containerd:c",
            "namespaces": [{"type": "pid"}, {"type": "ipc"}, {"type": "uts"}, {"type": "mount"},
                           {"type": "network", "path": "/proc/1/ns/net"}],
            "maskedPaths": ["/proc/kcore"], "readonlyPaths": ["/proc/sys"],
        },
    }


@dataclass(frozen=True)
class RuntimeRun:
    returncode: int
    output: str                       # the runtime's stdout and stderr
    runc_args: list[str] | None       # what the low-level runtime was called with (None: not called)
    config: dict[str, Any] | None     # the config.json it was handed

    @property
    def ran_runc(self) -> bool:
        return self.runc_args is not None


def recording_runc(path: Path, record: Path) -> Path:
    """A "runc" that saves its arguments and the bundle's config.json into `record` and exits 0."""
    path.write_text(f"""#!/bin/sh
set -e
bundle=.
prev=
for a in "$@"; do
  case "$prev" in --bundle|-b) bundle=$a ;; esac
  case "$a" in --bundle=*) bundle=${{a#--bundle=}} ;; esac
  prev=$a
done
mkdir -p '{record}'
printf '%s\\n' "$@" > '{record}/args'
if [ -f "$bundle/config.json" ]; then cp "$bundle/config.json" '{record}/config.json'; fi
""")
    path.chmod(0o755)
    return path


def real_runtime_config(spec_dir: Path, runc: Path, log: Path, prefixes: tuple[str, ...] = ("cdi.k8s.io/",)) -> str:
    """config.toml for nvidia-container-runtime: CDI mode on one spec dir, the recording runc, the CDI
    annotations read under `prefixes`."""
    return "\n".join([
        "[nvidia-container-runtime]",
        f"debug = {json.dumps(str(log))}",
        'log-level = "debug"',
        'mode = "cdi"',
        f"runtimes = [{json.dumps(str(runc))}]",
        "",
        "[nvidia-container-runtime.modes.cdi]",
        f'default-kind = "{fakegpu.CDI_KIND}"',
        f"spec-dirs = [{json.dumps(str(spec_dir))}]",
        f"annotation-prefixes = {json.dumps(list(prefixes))}",
        "",
    ])


def _run(cmd: list[str], env: dict[str, str], work: Path, config: dict[str, Any]) -> RuntimeRun:
    bundle = work / "bundle"
    bundle.mkdir(parents=True)
    (bundle / "config.json").write_text(json.dumps(config))
    # containerd's shim calls the runtime with global options before the command.
    args = ["--root", str(work / "state"), "--log", str(bundle / "log.json"), "--log-format", "json",
            "create", "--bundle", str(bundle), "--pid-file", str(work / "pid"), "c1"]
    proc = subprocess.run([*cmd, *args], env=env, capture_output=True, text=True, check=False, timeout=60,
                          cwd=work)
    record = work / "runc-record"
    seen = record / "config.json"
    return RuntimeRun(proc.returncode, proc.stdout + proc.stderr,
                      (record / "args").read_text().splitlines() if (record / "args").is_file() else None,
                      json.loads(seen.read_text()) if seen.is_file() else None)


def run_real(binary: Path, node: Node, work: Path, config: dict[str, Any], spec_dir: Path | None = None,
             prefixes: tuple[str, ...] = ("cdi.k8s.io/",)) -> RuntimeRun:
    """NVIDIA's runtime on one bundle, configured through <work>/xdg/nvidia-container-runtime/config.toml; its
    CDI specs from the node's spec dir, or from `spec_dir`; CDI annotations under `prefixes`."""
    work.mkdir(parents=True)
    runc = recording_runc(work / "runc", work / "runc-record")
    toml = work / "xdg" / "nvidia-container-runtime" / "config.toml"
    toml.parent.mkdir(parents=True)
    toml.write_text(real_runtime_config(spec_dir or node.cdi_dir, runc, work / "nvidia-container-runtime.log",
                                        prefixes))
    return _run([str(binary)], {"XDG_CONFIG_HOME": str(work / "xdg"), "PATH": "/usr/bin:/bin"}, work, config)


def run_fake(binary: Path, node: Node, work: Path, config: dict[str, Any]) -> RuntimeRun:
    """The kind tier's fake runtime on one bundle, pointed at the node's files and the recording runc."""
    work.mkdir(parents=True)
    runc = recording_runc(work / "runc", work / "runc-record")
    env = {"FAKE_GPU_DRIVER_ROOT": str(node.driver_root), "FAKE_GPU_CDI_SPEC": str(node.cdi_spec),
           "FAKE_NVIDIA_RUNC": str(runc), "PATH": "/usr/bin:/bin"}
    return _run([str(binary)], env, work, config)


def _get(doc: dict[str, Any], dotted: str) -> Any:
    for key in dotted.split("."):
        if not isinstance(doc, dict):
            return None
        doc = doc.get(key)  # type: ignore[assignment]
    return doc


def edited(config: dict[str, Any]) -> dict[str, Any]:
    """The parts of a config.json that the runtimes edit (EDITED), as plain JSON values."""
    return {part: copy.deepcopy(_get(config, part)) for part in EDITED}


def without_edited(config: dict[str, Any]) -> dict[str, Any]:
    """The rest of a config.json: what a runtime must hand on unchanged."""
    rest = copy.deepcopy(config)
    for part in EDITED:
        *parents, last = part.split(".")
        holder = _get(rest, ".".join(parents)) if parents else rest
        if isinstance(holder, dict):
            holder.pop(last, None)
    return rest


# The device `nvidia-ctk cdi generate --device-id none` adds: no edits of its own but a marker variable (a CDI
# device must have edits). The node's spec lacks it, as nvidia-ctk's default spec does.
NONE_DEVICE = {"name": "none", "containerEdits": {"env": ["NVCT_EMPTY_DEVICE="]}}


def spec_dir_with_none_device(node: Node, spec_dir: Path) -> Path:
    """A spec dir holding the node's CDI spec plus NONE_DEVICE."""
    spec = json.loads(node.cdi_spec.read_text())
    spec["devices"].append(NONE_DEVICE)
    spec_dir.mkdir(parents=True)
    (spec_dir / fakegpu.CDI_SPEC_FILE).write_text(json.dumps(spec))
    return spec_dir


def pruned(value: Any) -> Any:
    """A JSON value without false, null and empty members: the real runtime rewrites config.json from Go structs
    whose omitempty fields drop them ("noNewPrivileges": false), which says the same."""
    if isinstance(value, dict):
        out = {k: pruned(v) for k, v in value.items()}
        return {k: v for k, v in out.items() if not (v is False or v is None or v == {} or v == [])}
    if isinstance(value, list):
        return [pruned(v) for v in value]
    return value
