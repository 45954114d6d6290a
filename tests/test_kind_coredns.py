"""CoreDNS in the kind node image: built from its Go module, tagged and laid out as kubeadm's Deployment runs it.

No kind cluster and no Docker: the image list is checked against what kubeadm itself prints (`config images list`,
`init phase addon coredns --print-manifest`), and the binary taken out of the image's layer answers a DNS query
on 127.0.0.1. The binaries come from the tiers' caches (CoreDNS cold: see gpu_conformance/sim/kind/binaries.py).
"""

from __future__ import annotations

import gzip
import io
import json
import re
import socket
import struct
import subprocess
import tarfile
import time
from pathlib import Path

import pytest
import yaml

from gpu_conformance.go_build import GoNotFoundError, repo_root
from gpu_conformance.sim.builds import binaries as simbin
from gpu_conformance.sim.builds import oci
from gpu_conformance.sim.kind import binaries as kindbin
from gpu_conformance.sim.kind import nodeimage

# The kind tier's node image and CoreDNS (built once, ~4 min cold) are a slow tier; the pins are not.
slow = pytest.mark.slow


@pytest.fixture(scope="module")
def dirs() -> kindbin.BinDirs:
    # Only a missing Go skips: a build that fails must fail these tests.
    try:
        return kindbin.ensure_binaries()
    except GoNotFoundError as exc:
        pytest.skip(f"the kind tier's binaries cannot be built here: {exc}")


def _kubeadm_coredns(kubeadm: Path) -> tuple[dict, str]:
    """The CoreDNS container of the Deployment kubeadm renders, and the Corefile of its ConfigMap."""
    out = subprocess.run([str(kubeadm), "init", "phase", "addon", "coredns", "--print-manifest",
                          "--kubernetes-version", simbin.K8S_VERSION], capture_output=True, text=True, check=True)
    docs = {d["kind"]: d for d in yaml.safe_load_all(out.stdout) if d}
    [container] = docs["Deployment"]["spec"]["template"]["spec"]["containers"]
    return container, docs["ConfigMap"]["data"]["Corefile"]


def _fake_rootfs(root: Path) -> Path:
    # kube-proxy's extra files come from the debootstrapped rootfs; empty dpkg lists stand in for it here.
    info = root / "var/lib/dpkg/info"
    info.mkdir(parents=True)
    for pkg in nodeimage.KUBE_PROXY_PACKAGES:
        (info / f"{pkg}.list").write_text("")
    return root


def test_pins_agree() -> None:
    gomod = (repo_root() / "gobuild/coredns/go.mod").read_text()
    assert re.search(rf"^\s*github\.com/coredns/coredns {re.escape(kindbin.COREDNS_VERSION)}\b", gomod, re.M)
    coredns = next(b for b in kindbin.BINARIES if b.name == "coredns")
    assert coredns.version_text == f"CoreDNS-{kindbin.COREDNS_VERSION.lstrip('v')}\n"


def test_coredns_image_refuses_a_tag_kubeadm_does_not_run(tmp_path: Path) -> None:
    ref = f"registry.k8s.io/coredns/coredns:{kindbin.COREDNS_VERSION}"
    assert nodeimage.coredns_image({"coredns": ref}, tmp_path / "coredns").names == (ref,)
    with pytest.raises(nodeimage.NodeImageError, match="COREDNS_VERSION"):
        nodeimage.coredns_image({"coredns": "registry.k8s.io/coredns/coredns:v1.99.0"}, tmp_path / "coredns")


@slow
def test_node_image_has_every_kubeadm_image_and_coredns_as_kubeadm_runs_it(dirs: kindbin.BinDirs,
                                                                          tmp_path: Path) -> None:
    kubeadm = dirs.find("kubeadm")
    images = nodeimage.kubeadm_images(dirs, _fake_rootfs(tmp_path / "rootfs"))
    listed = subprocess.run([str(kubeadm), "config", "images", "list", "--kubernetes-version", simbin.K8S_VERSION],
                            capture_output=True, text=True, check=True).stdout.split()
    assert set(listed) <= {n for image in images for n in image.names}

    container, _ = _kubeadm_coredns(kubeadm)
    [image] = [i for i in images if container["image"] in i.names]
    assert image.names == (f"registry.k8s.io/coredns/coredns:{kindbin.COREDNS_VERSION}",)
    # The Deployment gives only args: they follow our entrypoint.
    assert image.entrypoint == ("/coredns",) and image.cmd == () and "command" not in container
    assert container["args"] == ["-conf", "/etc/coredns/Corefile"]
    entries = {e.path: e for e in image.entries}
    assert entries["/coredns"].source == dirs.find("coredns") and entries["/coredns"].mode & 0o111
    # The ConfigMap's mount point goes in /etc; /tmp is there for anything that wants one.
    [mount] = container["volumeMounts"]
    assert str(Path(mount["mountPath"]).parent) in entries and "/tmp" in entries
    # Root in the container (no USER, no runAsUser) is what holds NET_BIND_SERVICE for :53 under readOnlyRootFilesystem.
    sc = container["securityContext"]
    assert sc["capabilities"]["add"] == ["NET_BIND_SERVICE"] and sc["readOnlyRootFilesystem"] is True
    assert "runAsUser" not in sc and "runAsNonRoot" not in sc


def _layer_file(archive: Path, name: str, out: Path) -> Path:
    with tarfile.open(archive) as tar:
        index = json.load(tar.extractfile("index.json"))  # type: ignore[arg-type]
        manifest = json.load(tar.extractfile(f"blobs/sha256/{index['manifests'][0]['digest'][7:]}"))  # type: ignore[arg-type]
        layer = tar.extractfile(f"blobs/sha256/{manifest['layers'][0]['digest'][7:]}").read()  # type: ignore[union-attr]
    with tarfile.open(fileobj=io.BytesIO(gzip.decompress(layer))) as tar:
        out.write_bytes(tar.extractfile(name).read())  # type: ignore[union-attr]
    out.chmod(0o755)
    return out


def _free_port() -> int:
    # CoreDNS listens on UDP and TCP: a port free for both.
    while True:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as t, socket.socket(socket.AF_INET,
                                                                                   socket.SOCK_DGRAM) as u:
            t.bind(("127.0.0.1", 0))
            port = t.getsockname()[1]
            try:
                u.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port


def _query_a(port: int, name: str) -> tuple[int, list[str]]:
    """rcode and A records of a plain UDP query (RFC 1035 by hand: no DNS library in the project)."""
    qid = 0x6770
    question = b"".join(bytes([len(label)]) + label.encode() for label in name.split(".")) + b"\0"
    query = struct.pack(">HHHHHH", qid, 0x0100, 1, 0, 0, 0) + question + struct.pack(">HH", 1, 1)
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.settimeout(1)
        s.sendto(query, ("127.0.0.1", port))
        data = s.recv(4096)
    rid, flags, _, answers, _, _ = struct.unpack(">HHHHHH", data[:12])
    assert rid == qid and data[12:len(query)] == query[12:]
    off, ips = len(query), []
    for _ in range(answers):
        while data[off] and data[off] & 0xC0 != 0xC0:  # owner name: labels up to a pointer or the root
            off += data[off] + 1
        off += 2 if data[off] & 0xC0 == 0xC0 else 1
        rtype, _, _, rdlen = struct.unpack(">HHIH", data[off:off + 10])
        off += 10
        if rtype == 1:
            ips.append(socket.inet_ntoa(data[off:off + rdlen]))
        off += rdlen
    return flags & 0xF, ips


@slow
def test_coredns_from_the_image_has_kubeadms_plugins_and_answers_dns(dirs: kindbin.BinDirs, tmp_path: Path) -> None:
    names = nodeimage.image_names(dirs.find("kubeadm"))
    archive = oci.write_archive(nodeimage.coredns_image(names, dirs.find("coredns")), tmp_path / "coredns.tar")
    coredns = _layer_file(archive, "coredns", tmp_path / "coredns")

    # Every directive of kubeadm's Corefile is compiled in (kubernetes, forward, loop, prometheus, ...).
    plugins = subprocess.run([str(coredns), "-plugins"], capture_output=True, text=True, check=True).stdout
    _, corefile = _kubeadm_coredns(dirs.find("kubeadm"))
    directives = set(re.findall(r"^ {4}([a-z_]+)", corefile, re.M))
    assert directives and directives <= {ln.strip().removeprefix("dns.") for ln in plugins.splitlines()}

    port = _free_port()
    (tmp_path / "Corefile").write_text(f".:{port} {{\n  bind 127.0.0.1\n  errors\n"
                                       f"  hosts {{\n    10.96.7.7 gpu.conformance.test\n  }}\n}}\n")
    proc = subprocess.Popen([str(coredns), "-conf", str(tmp_path / "Corefile")], cwd=tmp_path,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline, answer = time.monotonic() + 30, None
        while answer is None and time.monotonic() < deadline:
            assert proc.poll() is None, f"coredns exited {proc.returncode}: {proc.stdout.read()}"  # type: ignore[union-attr]
            try:
                answer = _query_a(port, "gpu.conformance.test")
            except OSError:  # not listening yet (refused, timed out)
                time.sleep(0.2)
        assert answer == (0, ["10.96.7.7"])
    finally:
        proc.terminate()
        proc.wait(timeout=10)
