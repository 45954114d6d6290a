"""Build (once) and locate the kind tier's own binaries: kubeadm, kube-proxy, CoreDNS and the kind CLI.

The rest of the node comes from two other caches: kube-apiserver, kube-controller-manager, kube-scheduler, kubectl
and etcd from the simulated cluster's build (gpu_conformance.sim.builds.binaries); kubelet, containerd, ctr, the runc
shim and the fake-GPU binaries from gpu_conformance.sim.builds.node_binaries. Each cache has its own versioned directory
and lock, so builds never mix.

    python -m gpu_conformance.sim.kind.binaries     # build every piece if needed, print the bin dirs
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from gpu_conformance.errors import cli_main
from gpu_conformance.sim.builds import binaries as simbin
from gpu_conformance.sim.builds import node_binaries as nodebin

KIND_VERSION = "v0.33.0"
# The CoreDNS kubeadm K8S_VERSION deploys (`kubeadm config images list`: registry.k8s.io/coredns/coredns:v1.14.2);
# the node image refuses to build when the two differ (nodeimage.coredns_image). Pinned in gobuild/coredns/go.mod.
COREDNS_VERSION = "v1.14.2"
BIN_DIR_NAME = f"kind-{KIND_VERSION}-k8s-{simbin.K8S_VERSION}"

BINARIES: tuple[simbin.Binary, ...] = (
    simbin.Binary("kubeadm", "k8s.io/kubernetes/cmd/kubeadm", "", simbin.K8S_LDFLAGS,
                  ("version", "-o", "short"), simbin.K8S_VERSION),
    simbin.Binary("kube-proxy", "k8s.io/kubernetes/cmd/kube-proxy", "", simbin.K8S_LDFLAGS,
                  ("--version",), f"Kubernetes {simbin.K8S_VERSION}"),
    # CoreDNS's version is a constant in its module (coremain.CoreVersion): `-version` prints "CoreDNS-1.14.2"
    # on a line of its own, matched whole so a v1.14.20 would not pass for v1.14.2.
    simbin.Binary("coredns", "github.com/coredns/coredns", "coredns", "-s -w", ("-version",),
                  f"CoreDNS-{COREDNS_VERSION.lstrip('v')}\n"),
    # kind's version core is a constant in its module, so no -X stamp is needed.
    simbin.Binary("kind", "sigs.k8s.io/kind", "kind", "-s -w", ("version",), f"kind {KIND_VERSION}"),
)


@dataclass(frozen=True)
class BinDirs:
    kind: Path        # kubeadm, kube-proxy, coredns, kind
    sim: Path         # kube-apiserver, kube-controller-manager, kube-scheduler, kubectl, etcd
    node: Path        # kubelet, containerd, ctr, containerd-shim-runc-v2, the fake-GPU binaries

    def find(self, name: str) -> Path:
        for d in (self.kind, self.sim, self.node):
            if (d / name).is_file():
                return d / name
        raise simbin.BinariesError(f"{name} is in none of {self.kind}, {self.sim}, {self.node}")


def cache_bin_dir() -> Path:
    return simbin.cache_bin_dir().parent / BIN_DIR_NAME


def ensure_own() -> Path:
    return simbin.build_missing(cache_bin_dir(), BINARIES)


def ensure_binaries() -> BinDirs:
    """Every binary the node image and the tier need, each built into its own cache if missing."""
    return BinDirs(kind=ensure_own(), sim=simbin.ensure_binaries(), node=nodebin.ensure_binaries())


def _ensure_all() -> str:
    dirs = ensure_binaries()
    return f"{dirs.kind}\n{dirs.sim}\n{dirs.node}"


def main(argv: Sequence[str] | None = None) -> int:
    del argv
    return cli_main(_ensure_all)


if __name__ == "__main__":
    sys.exit(main())
