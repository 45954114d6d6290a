"""Build a kind node image offline: Debian rootfs + Go-built Kubernetes/containerd + images built from our binaries.

No registry is reachable here, so neither kindest/node nor kindest/base can be pulled, and `kind build node-image`
needs the base. This module makes what that command makes, from parts this machine can reach:

1. a Debian bookworm root filesystem from `debootstrap` (systemd, iptables, runc, the CNI plugins...), cached
   under ~/.cache/gpu-operator-conformance/kind-node/rootfs-<hash of the package list>;
2. kind's base-image files (entrypoint, systemd units, kubelet drop-ins) read from the kind module in the Go module
   cache (never copied into this repository), the base Dockerfile's clean-up steps, and our containerd config
   (kind/node/containerd-config.toml);
3. kubelet, kubeadm, kubectl, containerd, ctr and the runc shim, from the Go builds of the three tiers;
4. the images kubeadm runs (`kubeadm config images list`), each an OCI archive of one of our static binaries
   (CoreDNS built from its Go module like kind) tagged as kubeadm expects, plus the fake-GPU device plugin and
   the probe image, imported into the node's containerd at boot by kind-import-images.service;
5. `docker import` of the result as gpu-conformance.local/kind-node:<key>, the key being a hash of every input.

    python -m gpu_conformance.sim.kind.nodeimage      # build if needed (starts the tier's own dockerd), print the tag
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Sequence
from pathlib import Path

from gpu_conformance import go_build
from gpu_conformance.errors import ConformanceError, cli_main
from gpu_conformance.settings import DEFAULT_PROBE_IMAGE
from gpu_conformance.sim.builds import binaries as simbin
from gpu_conformance.sim.builds import node_binaries as nodebin
from gpu_conformance.sim.builds import oci
from gpu_conformance.sim.fakegpu import stack as fakegpu
from gpu_conformance.sim.kind import binaries as kindbin
from gpu_conformance.sim.kind.docker import Dockerd

SUITE = "bookworm"
MIRROR = "http://deb.debian.org/debian"
# What kind's base Dockerfile installs, as far as Debian bookworm has it, plus runc and the CNI plugins
# (kind builds both from source; Debian's runc 1.1.5 runs containerd 2.4 here, see research/real-node.md).
PACKAGES = ("systemd", "systemd-sysv", "dbus", "conntrack", "iptables", "nftables", "iproute2", "ethtool",
            "util-linux", "mount", "kmod", "libseccomp2", "pigz", "bash", "ca-certificates", "curl", "jq", "procps",
            "runc", "containernetworking-plugins")
# Files a kube-proxy image needs to run iptables (iptables-nft) from a scratch image.
KUBE_PROXY_PACKAGES = ("libc6", "iptables", "libxtables12", "libnftnl11", "libmnl0", "libip4tc2", "libip6tc2",
                       "libnetfilter-conntrack3", "libnfnetlink0")
IMAGE_REPO = "gpu-conformance.local/kind-node"
FAKE_GPU_IMAGE = fakegpu.FAKE_GPU_IMAGE
# Bump when the way the image is built changes (the key also covers every input file and binary version).
BUILD_REVISION = "1"
_KIND_NODE_FILES = Path(__file__).resolve().parents[3] / "kind" / "node"


class NodeImageError(ConformanceError):
    """The kind node image could not be built (the message names the step and its log)."""


def cache_root() -> Path:
    return go_build.cache_root() / "kind-node"


def kind_module_dir() -> Path:
    """kind's module in the Go module cache (downloaded by the kind wrapper module's build)."""
    proc = subprocess.run(["go", "list", "-m", "-f", "{{.Dir}}", "sigs.k8s.io/kind"], cwd=simbin.gobuild_dir() / "kind",
                          capture_output=True, text=True, check=False, env=go_build.go_env())
    path = Path(proc.stdout.strip())
    if proc.returncode != 0 or not (path / "images" / "base" / "files").is_dir():
        raise NodeImageError(f"kind's module (sigs.k8s.io/kind {kindbin.KIND_VERSION}) is not in the Go module "
                             f"cache: {proc.stderr.strip()[-300:]}")
    return path


def content_digest(parts: Iterable[bytes | str]) -> str:
    h = hashlib.sha256()
    for p in parts:
        h.update(p.encode() if isinstance(p, str) else p)
        h.update(b"\0")
    return h.hexdigest()[:12]


# ---------------------------------------------------------------------------------------------------- rootfs

def ensure_rootfs(log: Path, packages: Sequence[str] = PACKAGES) -> Path:
    """A debootstrapped rootfs (built once per package list; a `.complete` marker guards half-made ones)."""
    root = cache_root() / f"rootfs-{SUITE}-{content_digest([MIRROR, *packages])}"
    if (root / ".complete").is_file():
        return root
    if shutil.which("debootstrap") is None:
        raise NodeImageError("the kind node image needs debootstrap (apt-get install debootstrap)")
    if root.exists():
        shutil.rmtree(root)
    root.parent.mkdir(parents=True, exist_ok=True)
    tmp = root.with_name(root.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    started = time.monotonic()
    print(f"debootstrap {SUITE} (~3 min; log: {log})", file=sys.stderr, flush=True)
    run_logged(["debootstrap", "--variant=minbase", f"--include={','.join(packages)}", SUITE, str(tmp), MIRROR], log)
    # Keep the rootfs small and free of the build host's identity.
    for junk in ("var/cache/apt/archives", "var/lib/apt/lists"):
        shutil.rmtree(tmp / junk, ignore_errors=True)
    tmp.rename(root)
    (root / ".complete").write_text(f"{time.monotonic() - started:.0f} s\n")
    return root


def package_files(rootfs: Path, packages: Iterable[str]) -> list[Path]:
    """Paths (inside rootfs, absolute) of the regular files and symlinks dpkg installed for these packages."""
    out: list[Path] = []
    for pkg in packages:
        listing = rootfs / "var/lib/dpkg/info" / f"{pkg}:amd64.list"
        if not listing.is_file():
            listing = rootfs / "var/lib/dpkg/info" / f"{pkg}.list"
        for line in listing.read_text().splitlines():
            p = rootfs / line.lstrip("/")
            if p.is_symlink() or p.is_file():
                out.append(Path(line))
    return out


# ---------------------------------------------------------------------------------------------------- images

def image_names(kubeadm: Path) -> dict[str, str]:
    """kubeadm's image list for our version, by short name (kube-apiserver, etcd, pause, coredns, ...)."""
    proc = subprocess.run([str(kubeadm), "config", "images", "list", "--kubernetes-version", simbin.K8S_VERSION],
                          capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise NodeImageError(f"kubeadm config images list failed: {proc.stderr.strip()[-300:]}")
    names = {}
    for ref in proc.stdout.split():
        short = ref.rsplit("/", 1)[-1].split(":", 1)[0]
        names[short] = ref
    return names


def _binary_image(names: tuple[str, ...], binary: Path, at: str, extra: Sequence[oci.Entry] = (),
                  entrypoint: tuple[str, ...] = ()) -> oci.Image:
    entries = [oci.Entry(at, source=binary), oci.Entry("/tmp", mode=0o1777), oci.Entry("/etc"), *extra]
    return oci.Image(names, entries, entrypoint=entrypoint)


def build_images(dirs: kindbin.BinDirs, rootfs: Path, out: Path, busybox: Path) -> list[Path]:
    """OCI archives of every image the node runs without a registry, written into `out`."""
    return _write(kubeadm_images(dirs, rootfs) + fake_gpu_images(dirs, busybox), out)


def kubeadm_images(dirs: kindbin.BinDirs, rootfs: Path) -> list[oci.Image]:
    """Every image in kubeadm's list (control plane, etcd, kube-proxy, pause, CoreDNS), tagged as kubeadm expects."""
    names = image_names(dirs.find("kubeadm"))
    images: list[oci.Image] = []
    for comp in ("kube-apiserver", "kube-controller-manager", "kube-scheduler"):
        images.append(_binary_image((names[comp],), dirs.find(comp), f"/usr/local/bin/{comp}"))
    images.append(_binary_image((names["etcd"],), dirs.find("etcd"), "/usr/local/bin/etcd",
                                extra=[oci.Entry("/var/lib/etcd", mode=0o700)]))
    # kube-proxy runs iptables-nft: the package files of iptables and its libraries from our rootfs.
    proxy_extra = [oci.Entry(str(p), link=os.readlink(rootfs / str(p).lstrip("/")))
                   if (rootfs / str(p).lstrip("/")).is_symlink() else
                   oci.Entry(str(p), source=rootfs / str(p).lstrip("/"),
                             mode=(rootfs / str(p).lstrip("/")).stat().st_mode & 0o7777)
                   for p in package_files(rootfs, KUBE_PROXY_PACKAGES)
                   if not str(p).startswith(("/usr/share", "/etc/alternatives", "/usr/lib/x86_64-linux-gnu/gconv"))]
    # Debian's iptables is an alternative (/etc/alternatives): point the names at the nft backend directly.
    proxy_extra += [oci.Entry(f"/usr/sbin/{n}", link="xtables-nft-multi")
                    for n in ("iptables", "iptables-save", "iptables-restore", "ip6tables", "ip6tables-save",
                              "ip6tables-restore")]
    images.append(_binary_image((names["kube-proxy"],), dirs.find("kube-proxy"), "/usr/local/bin/kube-proxy",
                                extra=[*proxy_extra, oci.Entry("/run"), oci.Entry("/var/lib")]))
    images.append(_binary_image((names["pause"],), dirs.find("pause"), "/pause", entrypoint=("/pause",)))
    images.append(coredns_image(names, dirs.find("coredns")))
    # A kubeadm image we do not build would sit in ErrImagePull in the cluster (as CoreDNS did): fail here instead.
    missing = sorted(set(names.values()) - {n for image in images for n in image.names})
    if missing:
        raise NodeImageError(f"kubeadm {simbin.K8S_VERSION} needs images the node image does not build: "
                             f"{', '.join(missing)}")
    return images


def coredns_image(names: dict[str, str], coredns: Path) -> oci.Image:
    """CoreDNS as upstream's image lays it out: the static binary at /coredns, entrypoint ["/coredns"].

    kubeadm's Deployment passes ["-conf", "/etc/coredns/Corefile"] (its ConfigMap mounted at /etc/coredns) with a
    read-only root filesystem and only NET_BIND_SERVICE; no runAsUser, so without a USER in the image CoreDNS runs as
    root in the container, holding that capability to bind :53 (upstream's nonroot user needs a file capability
    on /coredns, which our layer writer does not set).
    """
    ref = names["coredns"]
    tag = ref.rsplit(":", 1)[-1]
    if tag != kindbin.COREDNS_VERSION:
        raise NodeImageError(f"kubeadm {simbin.K8S_VERSION} runs {ref} but the kind tier builds CoreDNS "
                             f"{kindbin.COREDNS_VERSION}: set COREDNS_VERSION in gpu_conformance/sim/kind/binaries.py "
                             f"and gobuild/coredns/go.mod to {tag}")
    return _binary_image((ref,), coredns, "/coredns", entrypoint=("/coredns",))


def fake_gpu_images(dirs: kindbin.BinDirs, busybox: Path) -> list[oci.Image]:
    """The fake-GPU stack's images the nodes run (fixtures/fake-gpu/Dockerfile's stages, built offline): the
    device plugin of the DaemonSet, and the probe image, tagged only as the suite's default probe image so the
    probe pod starts without a pull."""
    probe = dataclasses.replace(fakegpu.IMAGES["probe"], names=(DEFAULT_PROBE_IMAGE,))
    return [fakegpu.oci_image(spec, dirs.node, busybox) for spec in (fakegpu.IMAGES["device-plugin"], probe)]


def _write(images: list[oci.Image], out: Path) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for i, image in enumerate(images):
        short = image.names[0].rsplit("/", 1)[-1].replace(":", "_")
        paths.append(oci.write_archive(image, out / f"{i:02d}-{short}.tar"))
    return paths


def image_key(image: oci.Image) -> str:
    """A hash of everything an archive of `image` holds (names, config, each entry and its file's bytes)."""
    parts: list[bytes | str] = [*image.names, *image.entrypoint, "\0", *image.cmd, "\0", *image.env]
    for e in image.entries:
        parts += [e.path, str(e.mode), e.link or "", e.source.read_bytes() if e.source else b""]
    return content_digest(parts)


def cached_archives(images: list[oci.Image], cache: Path | None = None) -> list[Path]:
    """OCI archives of `images`, written once per content key under the tier's cache (gzip of the 55 MB
    operator binary alone takes ~15-40 s on these machines); older archives of the same names are removed."""
    cache = cache or cache_root() / "images"
    cache.mkdir(parents=True, exist_ok=True)
    paths = []
    for image in images:
        short = image.names[0].rsplit("/", 1)[-1].replace(":", "_")
        path = cache / f"{short}-{image_key(image)}.tar"
        if not path.exists():
            for old in cache.glob(f"{short}-*.tar"):
                old.unlink()
            tmp = oci.write_archive(image, cache / f".{path.name}.tmp")
            tmp.rename(path)
        paths.append(path)
    return paths


# ---------------------------------------------------------------------------------------------------- node

def _install(src: Path, dst: Path, mode: int = 0o755) -> None:
    dst.parent.mkdir(parents=True, exist_ok=True)
    if dst.exists() or dst.is_symlink():
        dst.unlink()
    shutil.copyfile(src, dst)
    dst.chmod(mode)


def assemble(stage: Path, rootfs: Path, kind_files: Path, dirs: kindbin.BinDirs, image_tars: list[Path],
             log: Path) -> None:
    """The node's filesystem in `stage`: a copy of the rootfs with kind's base files and our parts on top."""
    run_logged(["cp", "-a", "--reflink=auto", f"{rootfs}/.", str(stage)], log)
    (stage / ".complete").unlink(missing_ok=True)
    # kind's base-image files, with the modes its Dockerfile gives them.
    for src in kind_files.rglob("*"):
        if src.is_dir() or src.name == "README.txt" and "LICENSES" in src.parts:
            continue
        rel = src.relative_to(kind_files)
        executable = rel.parts[0] == "usr" or rel.parts[:2] == ("kind", "bin")
        _install(src, stage / rel, 0o755 if executable else 0o644)
    pause_ref = image_names(dirs.find("kubeadm"))["pause"]
    (stage / "etc/containerd/config.toml").write_text(
        (_KIND_NODE_FILES / "containerd-config.toml").read_text().replace("@PAUSE_IMAGE@", pause_ref))
    _install(_KIND_NODE_FILES / "hosts.toml", stage / "etc/containerd/certs.d/_default/hosts.toml", 0o644)
    _install(_KIND_NODE_FILES / "kind-import-images.service", stage / "etc/systemd/system/kind-import-images.service",
             0o644)
    # containerd's base OCI spec, as kind's Dockerfile makes it: `ctr oci spec` + the product-files hook,
    # without rlimits.
    spec = json.loads(subprocess.run([str(dirs.find("ctr")), "oci", "spec"], capture_output=True, text=True,
                                     check=True).stdout)
    spec.setdefault("hooks", {}).setdefault("createContainer", []).append({"path": "/kind/bin/mount-product-files.sh"})
    spec["process"].pop("rlimits", None)
    (stage / "etc/containerd/cri-base.json").write_text(json.dumps(spec, indent=2))
    for name in ("containerd", "ctr", "containerd-shim-runc-v2"):
        _install(dirs.find(name), stage / "usr/local/bin" / name)
    for name in ("kubelet", "kubeadm", "kubectl"):
        _install(dirs.find(name), stage / "usr/bin" / name)
    # Debian ships the CNI plugins in /usr/lib/cni; kind and most CNI manifests expect /opt/cni/bin.
    (stage / "opt/cni").mkdir(parents=True, exist_ok=True)
    (stage / "opt/cni/bin").symlink_to("/usr/lib/cni")
    (stage / "etc/cni/net.d").mkdir(parents=True, exist_ok=True)
    (stage / "kind").mkdir(exist_ok=True)
    (stage / "kind/version").write_text(simbin.K8S_VERSION + "\n")
    for tar in image_tars:
        _install(tar, stage / "kind/images" / tar.name, 0o644)
    (stage / "etc/kubernetes/manifests").mkdir(parents=True, exist_ok=True)
    # kind's base Dockerfile: no units from the distribution start, only ours.
    for pattern in ("lib/systemd/system/multi-user.target.wants/*", "etc/systemd/system/*.wants/*",
                    "lib/systemd/system/local-fs.target.wants/*", "lib/systemd/system/sockets.target.wants/*udev*",
                    "lib/systemd/system/sockets.target.wants/*initctl*", "lib/systemd/system/basic.target.wants/*",
                    "lib/systemd/system/sysinit.target.wants/systemd-tmpfiles-setup.service"):
        for p in stage.glob(pattern):
            p.unlink()
    with open(stage / "etc/systemd/journald.conf", "a") as f:
        f.write("ReadKMsg=no\n")
    for unit in ("kubelet.service", "containerd.service", "undo-mount-hacks.service", "kind-import-images.service"):
        run_logged(["systemctl", f"--root={stage}", "enable", unit], log)
    run_logged(["systemctl", f"--root={stage}", "mask", "systemd-binfmt.service"], log)
    # No host identity in the image: kind writes hostname and resolv.conf at run time.
    for p in ("etc/machine-id", "var/lib/dbus/machine-id"):
        (stage / p).unlink(missing_ok=True)
    (stage / "etc/machine-id").write_text("")


def _inputs_key(dirs: kindbin.BinDirs, rootfs: Path, kind_files: Path) -> str:
    parts: list[bytes | str] = [rootfs.name, kindbin.KIND_VERSION, simbin.K8S_VERSION, nodebin.CONTAINERD_VERSION,
                                nodebin.FAKEGPU_VERSION, kindbin.COREDNS_VERSION, BUILD_REVISION]
    for d in (_KIND_NODE_FILES, kind_files):
        for p in sorted(d.rglob("*")):
            if p.is_file():
                parts += [str(p.relative_to(d)), p.read_bytes()]
    return content_digest(parts)


def ensure_node_image(docker: Dockerd, dirs: kindbin.BinDirs | None = None) -> str:
    """The node image's tag in `docker`, building and importing it if this daemon does not have it yet."""
    dirs = dirs or kindbin.ensure_binaries()
    busybox = nodebin.static_busybox()
    log = cache_root() / "build.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    rootfs = ensure_rootfs(log)
    kind_files = kind_module_dir() / "images" / "base" / "files"
    tag = f"{IMAGE_REPO}:{simbin.K8S_VERSION}-{_inputs_key(dirs, rootfs, kind_files)}"
    if docker.docker("image", "inspect", tag, check=False).returncode == 0:
        return tag
    started = time.monotonic()
    print(f"building kind node image {tag} (log: {log})", file=sys.stderr, flush=True)
    with tempfile.TemporaryDirectory(prefix="node-", dir=cache_root()) as tmp:
        stage = Path(tmp) / "rootfs"
        stage.mkdir()
        tars = build_images(dirs, rootfs, Path(tmp) / "images", busybox)
        assemble(stage, rootfs, kind_files, dirs, tars, log)
        tar_cmd = subprocess.Popen(["tar", "-C", str(stage), "--numeric-owner", "-c", "."], stdout=subprocess.PIPE)
        # `docker import` takes no STOPSIGNAL (kind's base sets SIGRTMIN+3); kind removes nodes with `rm -f`.
        imp = subprocess.run(["docker", "import", "--change", "ENV container=docker",
                              "--change", 'ENTRYPOINT ["/usr/local/bin/entrypoint", "/sbin/init"]', "-", tag],
                             stdin=tar_cmd.stdout, env=docker.env(), capture_output=True, text=True, check=False)
        assert tar_cmd.stdout is not None
        tar_cmd.stdout.close()
        tar_cmd.wait()
        if imp.returncode != 0 or tar_cmd.returncode != 0:
            raise NodeImageError(f"docker import of the node image failed: {imp.stderr.strip()[-400:]}")
    print(f"built kind node image in {time.monotonic() - started:.0f} s", file=sys.stderr, flush=True)
    # Older node images of ours (other keys) only take disk space (~630 MB each) in the tier's data root.
    if not docker.external:
        old = [t for t in docker.docker("images", "--format", "{{.Repository}}:{{.Tag}}", IMAGE_REPO)
               .stdout.decode().split() if t != tag]
        if old:
            docker.docker("rmi", *old, check=False)
    return tag


def run_logged(cmd: list[str], log: Path) -> None:
    with open(log, "a") as f:
        f.write(f"\n$ {' '.join(cmd)}\n")
        f.flush()
        proc = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, check=False)
    if proc.returncode != 0:
        raise NodeImageError(f"`{' '.join(cmd[:3])} ...` failed with exit code {proc.returncode}; see {log}")


def main(argv: Sequence[str] | None = None) -> int:
    del argv
    from gpu_conformance.sim.kind.docker import docker_for_tier

    def build() -> str:
        with docker_for_tier() as docker:
            return ensure_node_image(docker)

    return cli_main(build)


if __name__ == "__main__":
    sys.exit(main())
