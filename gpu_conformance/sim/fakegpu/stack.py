"""The fake-GPU stack of fixtures/fake-gpu/ as the tiers use it: the device plugin's command line and its images.

One stack everywhere (the kind tier, a user's cluster through fixtures/fake-gpu/Dockerfile):

* the device plugin (fixtures/fake-gpu/cmd/fake-gpu-device-plugin) advertises nvidia.com/gpu and answers
  Allocate with CDI names `nvidia.com/gpu=<index>` (strategies cdi-cri, cdi-annotations) or, to reproduce the
  pre-CDI failure, only NVIDIA_VISIBLE_DEVICES (envvar);
* at start it writes the node's fake driver (fixtures/fake-gpu/fakegpu.go): the CDI spec (device nodes
  /dev/nvidiaN + /dev/nvidiactl, NVIDIA_VISIBLE_DEVICES=void, nvidia-smi and its GPU table bind-mounted),
  the fake nvidia-smi (fixtures/fake-gpu/nvidia-smi, embedded in the plugin) and the GPU table, with the
  UUIDs of the simulated nodes (sim/nvidia_smi.gpu_uuid), so the probe parses a real node like a simulated one;
* the images: fixtures/fake-gpu/Dockerfile for Docker users, and IMAGES here, which builds the same images as
  OCI archives without Docker or a registry (sim/builds/oci.py). tests/test_fakegpu.py checks they agree.

Like gobuild/, fixtures/ is read from a source checkout only (the binaries are built from it); an installed
package runs the simulated cluster without it.

    python -m gpu_conformance.sim.fakegpu.stack images --out DIR [--target device-plugin ...]   # OCI archives
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from gpu_conformance.errors import ConformanceError, cli_main
from gpu_conformance.settings import DEFAULT_PROBE_IMAGE
from gpu_conformance.sim.builds import node_binaries as nodebin
from gpu_conformance.sim.builds import oci
from gpu_conformance.sim.profiles.catalogue import get_profile
from gpu_conformance.sim.profiles.nvidia_smi import gpu_name, gpu_uuid

FIXTURE_DIR = nodebin.FAKEGPU_MODULE
CDI_KIND = "nvidia.com/gpu"
CDI_SPEC_FILE = "nvidia.json"          # fakegpu.go CDISpecFile
# The kind of the CDI spec NVIDIA's device plugin (v0.17) writes and names its devices by (fakegpu.go
# PluginCDIVendor): the fake plugin run as nvidia-device-plugin does the same.
PLUGIN_CDI_KIND = "k8s.device-plugin.nvidia.com/gpu"
SMI_FILE, TABLE_FILE = "nvidia-smi", "gpus"   # in the driver root (fakegpu.go)
FAKE_GPU_IMAGE = "gpu-conformance.local/fake-gpu-device-plugin:1"
# Names from the tier that first ran these images (now folded into kind), kept: the kind node image holds them
# under these names, and its cache key does not cover image names.
PAUSE_IMAGE = "realnode.local/pause:1"
BUSYBOX_IMAGE = "realnode.local/busybox:1"


class FakeGpuNode:
    """Mixed into each fake GPU node class (nvidia_runtime.Node): the fake device plugin
    writes its CDI spec into the node's `cdi_dir`, under the file name only this module knows."""

    cdi_dir: Path

    @property
    def cdi_spec(self) -> Path:
        return self.cdi_dir / CDI_SPEC_FILE


class FixtureError(ConformanceError):
    """fixtures/fake-gpu is not there (an installed package, not a source checkout)."""


def fixture_dir() -> Path:
    if not (FIXTURE_DIR / "go.mod").is_file():
        raise FixtureError(f"{FIXTURE_DIR} not found: the fake-GPU stack is built from a source checkout of "
                           f"this repository")
    return FIXTURE_DIR


def default_product() -> str:
    """The GPU product of the default sim profile's first GPU node (a real node looks like its sibling)."""
    return get_profile("default").gpu_hardware[0].product


def uuids(node: str, count: int) -> list[str]:
    """The UUIDs the plugin derives for a node (fakegpu.go GPUUUID is the same function)."""
    return [gpu_uuid(node, i) for i in range(count)]


def gpu_table(node: str, count: int, product: str | None = None) -> str:
    """The GPU table the plugin writes into the driver root (fakegpu.go Table): "<minor> <uuid> <name>" per GPU;
    the fake nvidia-smi and the fake NVML (fixtures/fake-gpu/nvml) read it."""
    name = gpu_name(product or default_product())
    return "".join(f"{i} {uuid} {name}\n" for i, uuid in enumerate(uuids(node, count)))


def cdi_device_name(index: int) -> str:
    return f"{CDI_KIND}={index}"


def plugin_command(plugin: Path, node: str, count: int, cdi_dir: Path | str, driver_root: Path | str,
                   strategy: str = "cdi-cri,cdi-annotations", host_driver_root: Path | str | None = None,
                   product: str | None = None, setup_only: bool = False) -> list[str]:
    """The device plugin's command line for `count` fake GPUs of `node`."""
    cmd = [str(plugin), f"--node-name={node}", f"--count={count}",
           f"--gpu-name={gpu_name(product or default_product())}", f"--cdi-kind={CDI_KIND}",
           f"--strategy={strategy}", f"--cdi-spec-dir={cdi_dir}", f"--driver-root={driver_root}"]
    if host_driver_root is not None:
        cmd.append(f"--host-driver-root={host_driver_root}")
    if setup_only:
        cmd.append("--setup-only")
    return cmd


# ---------------------------------------------------------------------------------------------------- images

@dataclass(frozen=True)
class ImageSpec:
    """One final stage of fixtures/fake-gpu/Dockerfile, as the offline builder makes it."""
    target: str                                 # the Dockerfile stage (docker build --target)
    names: tuple[str, ...]
    base: str                                   # "busybox" or "scratch"
    binaries: tuple[tuple[str, str], ...] = ()  # (built binary, path in the image): the stage's COPY --from=build
    entrypoint: tuple[str, ...] = ()
    cmd: tuple[str, ...] = ()
    env: tuple[str, ...] = ()                   # beyond PATH (which both the busybox image and oci.Image set)


IMAGES: dict[str, ImageSpec] = {s.target: s for s in (
    ImageSpec("device-plugin", (FAKE_GPU_IMAGE,), "busybox",
              (("fake-gpu-device-plugin", "/usr/local/bin/fake-gpu-device-plugin"),),
              entrypoint=("/usr/local/bin/fake-gpu-device-plugin",)),
    ImageSpec("pause", (PAUSE_IMAGE,), "scratch", (("pause", "/pause"),), entrypoint=("/pause",)),
    # The probe's default image name too: CUDA base images carry no nvidia-smi either (the driver's CDI spec
    # mounts it), so a shell is all the probe needs of the image.
    ImageSpec("probe", (BUSYBOX_IMAGE, DEFAULT_PROBE_IMAGE), "busybox", cmd=("sh",)),
)}


def busybox_applets(busybox: Path) -> list[str]:
    return subprocess.run([str(busybox), "--list"], capture_output=True, text=True, check=False).stdout.split()


def oci_image(spec: ImageSpec, bin_dir: Path, busybox: Path) -> oci.Image:
    """The image of one Dockerfile stage, from our built binaries and the host's static busybox."""
    entries = oci.busybox_entries(busybox, busybox_applets(busybox)) if spec.base == "busybox" else []
    entries += [oci.Entry(at, source=bin_dir / name) for name, at in spec.binaries]
    return oci.Image(spec.names, entries, entrypoint=spec.entrypoint, cmd=spec.cmd,
                     env=(*oci.DEFAULT_ENV, *spec.env))


def write_images(out: Path, targets: Sequence[str] = tuple(IMAGES), bin_dir: Path | None = None,
                 busybox: Path | None = None) -> list[Path]:
    """OCI archives (`ctr images import`, `kind load image-archive`) of the given stages, in `out`."""
    bin_dir = bin_dir or nodebin.ensure_binaries()
    busybox = busybox or nodebin.static_busybox()
    out.mkdir(parents=True, exist_ok=True)
    return [oci.write_archive(oci_image(IMAGES[t], bin_dir, busybox), out / f"fake-gpu-{t}.tar") for t in targets]


# ---------------------------------------------------------------------------------------------- the Dockerfile

@dataclass
class Stage:
    """What a Dockerfile stage puts into its image (the instructions that can differ from the builder)."""
    name: str
    base: str                                   # "busybox", "scratch" or the FROM image as written
    copies: list[tuple[str, str, str]] = field(default_factory=list)   # (from-stage or "", source, dest)
    entrypoint: tuple[str, ...] = ()
    cmd: tuple[str, ...] = ()
    env: list[str] = field(default_factory=list)
    other: list[str] = field(default_factory=list)                    # RUN, WORKDIR, ... as written


def _instructions(text: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) in order: comments dropped, backslash continuations joined."""
    out: list[tuple[str, str]] = []
    pending = ""
    for raw in text.splitlines():
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        line, pending = pending + line, ""
        word, _, rest = line.partition(" ")
        out.append((word.upper(), rest.strip()))
    return out


def dockerfile_stages(path: Path) -> dict[str, Stage]:
    """The Dockerfile's stages by name, with global ARG defaults substituted into FROM."""
    args: dict[str, str] = {}
    stages: dict[str, Stage] = {}
    stage: Stage | None = None
    for word, rest in _instructions(path.read_text()):
        if word == "ARG" and stage is None:
            key, _, value = rest.partition("=")
            args[key] = value
        elif word == "FROM":
            parts = re.sub(r"\$\{(\w+)\}", lambda m: args.get(m.group(1), m.group(0)), rest).split()
            image = parts[0]
            name = parts[2] if len(parts) == 3 and parts[1].upper() == "AS" else str(len(stages))
            base = "scratch" if image == "scratch" else "busybox" if image.startswith("busybox:") else image
            stage = stages[name] = Stage(name, base)
        elif stage is None:
            continue
        elif word == "COPY":
            parts = rest.split()
            src_stage = next((p.split("=", 1)[1] for p in parts if p.startswith("--from=")), "")
            files = [p for p in parts if not p.startswith("--")]
            stage.copies += [(src_stage, src, files[-1]) for src in files[:-1]]
        elif word in ("ENTRYPOINT", "CMD"):
            value = tuple(json.loads(rest)) if rest.startswith("[") else ("/bin/sh", "-c", rest)
            setattr(stage, word.lower(), value)
        elif word == "ENV":
            stage.env.append(rest)
        else:
            stage.other.append(f"{word} {rest}")
    return stages


def disagreements(dockerfile: Path | None = None, go_mod: Path | None = None) -> list[str]:
    """Where fixtures/fake-gpu/Dockerfile and IMAGES (the offline builder) differ; [] when they agree.

    Compared per image: the base (busybox or scratch), every file copied in (only the binaries of the build
    stage, at the same paths), ENTRYPOINT, CMD and ENV; and the build stage builds those binaries with the Go
    release go.mod asks for.
    """
    dockerfile = dockerfile or fixture_dir() / "Dockerfile"
    go_mod = go_mod or dockerfile.parent / "go.mod"
    stages = dockerfile_stages(dockerfile)
    problems: list[str] = []
    build = stages.get("build")
    if build is None:
        return [f"{dockerfile}: no `build` stage"]
    go = re.search(r"^go (\d+\.\d+)", go_mod.read_text(), re.M)
    if go is None or not build.base.startswith(f"golang:{go.group(1)}"):
        problems.append(f"build stage: {build.base} is not the Go release go.mod asks for "
                        f"({go.group(1) if go else '?'})")
    built = " ".join(build.other)
    for name in sorted(set(stages) - set(IMAGES) - {"build"}):
        problems.append(f"stage {name}: an image the offline builder does not make")
    for target, spec in IMAGES.items():
        stage = stages.get(target)
        if stage is None:
            problems.append(f"stage {target}: missing (the offline builder makes {', '.join(spec.names)})")
            continue
        if stage.base != spec.base:
            problems.append(f"stage {target}: FROM {stage.base}, the builder uses {spec.base}")
        copied = {(src.rsplit("/", 1)[-1], dest) for frm, src, dest in stage.copies if frm == "build"}
        if copied != set(spec.binaries):
            problems.append(f"stage {target}: copies {sorted(copied)}, the builder {sorted(spec.binaries)}")
        for frm, src, dest in stage.copies:
            if frm != "build":
                problems.append(f"stage {target}: copies {src} -> {dest}, which the builder does not")
        for name, _ in spec.binaries:
            if f"./cmd/{name}" not in built:
                problems.append(f"stage {target}: the build stage does not build ./cmd/{name}")
        for field_name in ("entrypoint", "cmd"):
            if getattr(stage, field_name) != getattr(spec, field_name):
                problems.append(f"stage {target}: {field_name.upper()} {list(getattr(stage, field_name))}, the "
                                f"builder {list(getattr(spec, field_name))}")
        if tuple(stage.env) != spec.env:
            problems.append(f"stage {target}: ENV {stage.env}, the builder {list(spec.env)}")
        if stage.other:
            problems.append(f"stage {target}: {stage.other[0]!r}: the builder runs nothing in the image")
    return problems


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m gpu_conformance.sim.fakegpu.stack",
                                     description="Build the fake-GPU stack's images as OCI archives (no Docker, "
                                                 "no registry).")
    sub = parser.add_subparsers(dest="command", required=True)
    images = sub.add_parser("images", help="write fixtures/fake-gpu/Dockerfile's images as OCI archives")
    images.add_argument("--out", type=Path, required=True)
    images.add_argument("--target", action="append", choices=sorted(IMAGES),
                        help="a Dockerfile stage (repeatable; default: all)")
    args = parser.parse_args(argv)

    def build() -> None:
        fixture_dir()
        print(*write_images(args.out, args.target or tuple(IMAGES)), sep="\n")

    return cli_main(build)


if __name__ == "__main__":
    sys.exit(main())
