"""The real NVIDIA GPU Operator (v25.3.4, the binary of sim/builds/operator_module.py) reconciling the kind cluster.

No registry is reachable, so every image the operator's objects name is built here as an OCI archive and
loaded into the nodes (`kind load image-archive`) under the name the ClusterPolicy gives it:

* the operator: its unmodified static binary, with its assets and manifests at /opt/gpu-operator as in
  NVIDIA's image;
* on the CDI path the container toolkit: NVIDIA's installer and binaries at the chart's toolkit.version v1.17.8
  (toolkit_image.py), so the operator's own toolkit DaemonSet installs the runtime under /usr/local/nvidia/toolkit,
  writes containerd's config and the management CDI spec and restarts containerd, as on a real node;
* the validator: on the CDI path NVIDIA's own nvidia-validator of the same release (operator_module.py builds it
  from the operator's module), laid out as NVIDIA's image has it (validator/Dockerfile: /usr/bin/nvidia-validator,
  the CUDA sample at /usr/bin/vectorAdd, the workload pod manifests at /var/nvidia/manifests, the image's NVIDIA_*
  variables), with fixtures/fake-gpu's vectorAdd in place of the CUDA sample; on the legacy path and in the DRA
  model the stand-in fake-nvidia-validator;
* the device plugin: the stand-in from fixtures/fake-gpu (the fake plugin as nvidia-device-plugin);
all on busybox, for the shells the operator's manifests run.

The nodes are set up the way a cluster with the driver preinstalled is (the operator's `driver.enabled=false`):
the fake driver (GPU table, nvidia-smi, the fake NVML, device nodes) on each GPU node (nvidia_cdi.py).

How a pod gets its GPU is the GPU path (GPU_PATH_ENV, see gpu_path()):
* "cdi" (the default): the ClusterPolicy's `toolkit.enabled=true`, `cdi.enabled=true`, `cdi.default=true`. At
  v25.3.4 that makes the operator render the device plugin's DEVICE_LIST_STRATEGY=envvar,cdi-annotations with
  CDI_ANNOTATION_PREFIX nvidia.cdi.k8s.io/ (controllers/object_controls.go TransformDevicePlugin) and the toolkit's
  CDI_ENABLED, NVIDIA_CONTAINER_RUNTIME_MODE=cdi and that annotation prefix (TransformToolkit). The toolkit makes
  `nvidia` containerd's default runtime (the installer's set-as-default, which v25.3.4 leaves on) and lists the
  prefix in its `container_annotations`; the plugin writes its CDI spec and annotates each container with its CDI
  names, which NVIDIA's runtime in CDI mode resolves from the spec (whose edits leave NVIDIA_VISIBLE_DEVICES=void).
  containerd's own CDI support does not act: it reads only cdi.k8s.io/.
* "legacy": `cdi.enabled=false` (v25.3.4's chart default) and `toolkit.enabled=false`: containerd's default runtime
  `nvidia` is the fake legacy-mode runtime (fixtures/fake-gpu, legacy_runtime_patch()), the plugin sets
  NVIDIA_VISIBLE_DEVICES=GPU-... and the fake runtime injects the GPUs it names.

NFD is not deployed (`nfd.enabled=false`: its image cannot be built here); the tier labels the GPU nodes
with NFD's PCI label as NFD would. GFD, DCGM exporter and the MIG manager are switched off (no stand-ins for
them yet). Everything else (which DaemonSets exist, their pods, init containers, RuntimeClass, node labels,
ClusterPolicy status) is the operator's own doing.
"""

from __future__ import annotations

import copy
import os
from pathlib import Path
from typing import Any

from gpu_conformance import operands as ops
from gpu_conformance.errors import ConformanceError
from gpu_conformance.sim.builds import oci, operator_module
from gpu_conformance.sim.fakegpu import stack as fakegpu
from gpu_conformance.sim.fakegpu.stack import busybox_applets
from gpu_conformance.sim.kind import toolkit_image
from gpu_conformance.sim.operator import install
from gpu_conformance.sim.operator.chart import clusterpolicy_from_module
from gpu_conformance.sim.profiles.catalogue import get_profile
from gpu_conformance.sim.services.json_tree import without

Obj = dict[str, Any]
NAMESPACE = "gpu-operator"
NFD_PCI_LABEL = "feature.node.kubernetes.io/pci-10de.present"
# The validator's driver stage (host driver) creates /dev/char symlinks after loading the NVIDIA kernel modules and
# reading their majors from /proc/devices (nvidia-container-toolkit's create-dev-char-symlinks, which v25.3.4 runs
# with modules loaded and device nodes created). The fake GPUs have no kernel module, so that step fails on every
# node; the tier switches it off the way NVIDIA's own error message tells an admin to (validator.driver.env). The
# stand-in validator ignores the variable.
VALIDATOR_DRIVER_ENV = [{"name": "DISABLE_DEV_CHAR_SYMLINK_CREATION", "value": "true"}]
# What an admin passes to `helm install` for nodes with the driver preinstalled, minus the operands we
# have no stand-in for. Keys are ClusterPolicy spec paths.
SPEC_OVERRIDES: dict[str, Any] = {
    "driver.enabled": False, "gfd.enabled": False, "dcgmExporter.enabled": False,
    "migManager.enabled": False, "nodeStatusExporter.enabled": False,
    "validator.driver.env": VALIDATOR_DRIVER_ENV,
}
# What NVIDIA's validator image sets (validator/Dockerfile at v25.3.4): no GPU unless a container asks for one.
VALIDATOR_IMAGE_ENV = ("NVIDIA_DISABLE_REQUIRE=true", "NVIDIA_VISIBLE_DEVICES=void",
                       "NVIDIA_DRIVER_CAPABILITIES=utility,compute")
VALIDATOR_MANIFEST_DIR = "/var/nvidia/manifests"
# The installer's device-node creation (CREATE_DEVICE_NODES, default "control": nvidiactl, nvidia-modeset,
# nvidia-uvm{,-tools}) looks each node's major up in /proc/devices, which a container reads from the kernel and
# no fake driver registers in: turned off through toolkit.env, the ClusterPolicy's way to set the installer's
# options (a mode it does not know is skipped with a warning). The device nodes it would make are the fake
# driver's, made at node setup (nvidia_cdi.py). The runtime's log at debug level, as an admin turns it on to see
# what it does (the installer's NVIDIA_CONTAINER_RUNTIME_DEBUG/_LOG_LEVEL; default: info to /dev/null): the CDI
# devices it resolves are logged at debug only, and the tests read them there.
RUNTIME_LOG = "/var/log/nvidia-container-runtime.log"
TOOLKIT_ENV = [{"name": "CREATE_DEVICE_NODES", "value": "none"},
               {"name": "NVIDIA_CONTAINER_RUNTIME_DEBUG", "value": RUNTIME_LOG},
               {"name": "NVIDIA_CONTAINER_RUNTIME_LOG_LEVEL", "value": "debug"}]
GPU_PATH_ENV = "GPU_CONFORMANCE_KIND_GPU_PATH"
GPU_PATHS = ("cdi", "legacy")
# The ClusterPolicy's CDI and toolkit switches per GPU path: the operator's toolkit on the CDI path; none on the
# legacy path, whose runtime is the fake legacy-mode one the tier configures itself.
CDI_OVERRIDES: dict[str, dict[str, Any]] = {
    "cdi": {"cdi.enabled": True, "cdi.default": True, "toolkit.enabled": True, "toolkit.env": TOOLKIT_ENV},
    "legacy": {"cdi.enabled": False, "cdi.default": False, "toolkit.enabled": False}}
# What TransformToolkit gives the toolkit with CDI on (NVIDIA_CONTAINER_RUNTIME_MODES_CDI_ANNOTATION_PREFIXES):
# the prefix the device plugin annotates with.
CDI_ANNOTATION_PREFIX = "nvidia.cdi.k8s.io/"
# Where the fake driver sits on a node (fixtures/fake-gpu: the plugin's --driver-root default).
DRIVER_ROOT = "/var/lib/fake-gpu"
CDI_DIR = "/var/run/cdi"
# The spec NVIDIA's device plugin writes at start when a CDI strategy is on (the CDI library names the file by the
# kind: "vendor/class" -> "vendor-class.json"); the runtime resolves the plugin's annotated names from it.
PLUGIN_CDI_SPEC = fakegpu.PLUGIN_CDI_KIND.replace("/", "-") + ".json"
DEVICE_PLUGIN_DS = ops.DEVICE_PLUGIN.daemonset
TOOLKIT_DS = ops.TOOLKIT.daemonset
# Where the legacy path's fake runtime is mounted on every node.
LEGACY_RUNTIME = "/usr/local/bin/nvidia-container-runtime"


class GPUPathError(ConformanceError):
    """GPU_CONFORMANCE_KIND_GPU_PATH names no GPU path."""


def gpu_path(value: str | None = None) -> str:
    """The GPU path: `value`, else $GPU_CONFORMANCE_KIND_GPU_PATH, else "cdi"; one clear error for another."""
    path = (value if value is not None else os.environ.get(GPU_PATH_ENV, "")).strip().lower() or "cdi"
    if path not in GPU_PATHS:
        raise GPUPathError(f"{GPU_PATH_ENV}={path!r}: want one of {', '.join(GPU_PATHS)}")
    return path


def legacy_runtime_patch() -> str:
    """The legacy path's containerd config patch: containerd's default runtime `nvidia` (the operator's
    RuntimeClass handler too) is the fake legacy-mode runtime the tier mounts at LEGACY_RUNTIME. On the CDI path
    the operator's toolkit writes the `nvidia` runtime itself."""
    return (
        "[plugins.'io.containerd.cri.v1.runtime'.containerd]\n"
        "  default_runtime_name = 'nvidia'\n"
        "[plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.nvidia]\n"
        "  runtime_type = 'io.containerd.runc.v2'\n"
        "  base_runtime_spec = '/etc/containerd/cri-base.json'\n"
        "  [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.nvidia.options]\n"
        f"    BinaryName = '{LEGACY_RUNTIME}'\n"
        "    SystemdCgroup = true\n")


def clusterpolicy(path: str = "cdi") -> Obj:
    """The ClusterPolicy the operator's chart renders for its release, with SPEC_OVERRIDES and the GPU path's
    CDI switches applied."""
    cp = _without_nulls(copy.deepcopy(clusterpolicy_from_module(operator_module.OPERATOR_VERSION)))
    for path_, value in {**SPEC_OVERRIDES, **CDI_OVERRIDES[gpu_path(path)]}.items():
        node = cp["spec"]
        *parents, leaf = path_.split(".")
        for p in parents:
            node = node.setdefault(p, {})
        node[leaf] = copy.deepcopy(value)
    return cp


def _without_nulls(obj: Any) -> Any:
    # The chart prints a block whose contents are all empty as a bare key (`plugin:` when validator.plugin.env
    # is []), i.e. null; the API server refuses null where the CRD says object ("must be of type object").
    return without(obj, lambda _key, value: value is None)


def image_name(component: Obj) -> str:
    return f"{component['repository']}/{component['image']}:{component['version']}"


def operator_image() -> str:
    return install.images(get_profile("v25.3")).operator


def _busybox(busybox: Path) -> list[oci.Entry]:
    return oci.busybox_entries(busybox, busybox_applets(busybox))


def validator_image(name: str, node_bin: Path, busybox: Path, nvidias: bool) -> oci.Image:
    """The validator image: NVIDIA's nvidia-validator with the vectorAdd stand-in (nvidias) or the stand-in."""
    if not nvidias:
        return oci.Image((name,), [*_busybox(busybox),
                                   oci.Entry("/usr/bin/nvidia-validator", source=node_bin / "fake-nvidia-validator")])
    manifests = [oci.Entry(f"{VALIDATOR_MANIFEST_DIR}/{p.name}", source=p, mode=0o644)
                 for p in operator_module.validator_manifests()]
    return oci.Image((name,), [
        *_busybox(busybox), oci.Entry("/usr/bin/nvidia-validator", source=operator_module.ensure_validator()),
        oci.Entry("/usr/bin/vectorAdd", source=node_bin / "vectorAdd"), *manifests],
        env=(*oci.DEFAULT_ENV, *VALIDATOR_IMAGE_ENV))


def images(node_bin: Path, busybox: Path, cp: Obj | None = None, nvidia_validator: bool = True) -> list[oci.Image]:
    """The operator's image and the operand images, named as `cp` (default: clusterpolicy()) names them; the
    validator NVIDIA's (nvidia_validator) or the stand-in."""
    spec = (cp or clusterpolicy())["spec"]
    module = operator_module.module_dir()
    opt = [oci.Entry(f"/opt/gpu-operator/{p.relative_to(module / 'assets')}", source=p, mode=0o644)
           for p in sorted((module / "assets").rglob("*")) if p.is_file()]
    opt += [oci.Entry(f"/opt/gpu-operator/manifests/{p.relative_to(module / 'manifests')}", source=p, mode=0o644)
            for p in sorted((module / "manifests").rglob("*")) if p.is_file()]
    operator = oci.Image((operator_image(),), [*_busybox(busybox),
                                               oci.Entry("/usr/bin/gpu-operator",
                                                         source=operator_module.ensure_binary()), *opt])
    validator = validator_image(image_name(spec["validator"]), node_bin, busybox, nvidia_validator)
    plugin = oci.Image((image_name(spec["devicePlugin"]),), [
        *_busybox(busybox),
        oci.Entry("/usr/local/bin/fake-gpu-device-plugin", source=node_bin / "fake-gpu-device-plugin"),
        # The operator's entrypoint runs `/bin/bash -c /bin/entrypoint.sh`, which execs nvidia-device-plugin.
        oci.Entry("/usr/bin/nvidia-device-plugin", link="/usr/local/bin/fake-gpu-device-plugin"),
        oci.Entry("/bin/bash", source=fakegpu.fixture_dir() / "bash")])
    toolkit = [toolkit_image.image(spec["toolkit"], busybox)] if spec["toolkit"].get("enabled") else []
    return [operator, validator, plugin, *toolkit]


def objects() -> list[Obj]:
    """Namespace, the operator's ServiceAccount and binding, its Deployment: what Helm would create.

    RBAC is simplified to cluster-admin (the chart's roles are narrower); the Deployment is the chart's (our
    install model) with the node's /etc/os-release mounted at /host-etc, which v25.3.4 reads at start.
    """
    ns = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}
    sa = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "gpu-operator", "namespace": NAMESPACE}}
    crb = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
           "metadata": {"name": "gpu-operator-conformance-kind"},
           "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
           "subjects": [{"kind": "ServiceAccount", "name": "gpu-operator", "namespace": NAMESPACE}]}
    dep = install.operator_deployment(get_profile("v25.3"), NAMESPACE)
    pod = dep["spec"]["template"]["spec"]
    pod["volumes"] = [{"name": "host-os-release", "hostPath": {"path": "/etc/os-release"}}]
    container = pod["containers"][0]
    container["image"] = operator_image()
    container["volumeMounts"] = [{"name": "host-os-release", "mountPath": "/host-etc/os-release",
                                  "readOnly": True}]
    return [ns, sa, crb, dep]
