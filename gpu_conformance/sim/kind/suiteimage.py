"""The suite's own container image (the repository's Dockerfile), built offline for the kind tier.

No registry is reachable, so the Dockerfile's `python:3.11-slim` base is replaced (build arg BASE) by a Debian
bookworm rootfs with python3 from debootstrap, `docker import`ed; the wheels (ours and every dependency) are made on
the host with `pip wheel` into the build context's .wheels/, and the build runs with `--network none`.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from gpu_conformance.sim import binaries as simbin
from gpu_conformance.sim.kind import nodeimage
from gpu_conformance.sim.kind.docker import Dockerd

BASE_PACKAGES = ("python3", "python3-venv", "passwd")
BASE_REPO = "gpu-conformance.local/python"
IMAGE = "gpu-conformance.local/suite:dev"


class SuiteImageError(nodeimage.NodeImageError):
    """The suite image could not be built (the message names the step and its log)."""


def ensure_base(docker: Dockerd, log: Path) -> str:
    rootfs = nodeimage.ensure_rootfs(log, BASE_PACKAGES)
    tag = f"{BASE_REPO}:3-{rootfs.name}"
    if docker.docker("image", "inspect", tag, check=False).returncode == 0:
        return tag
    tar = subprocess.Popen(["tar", "-C", str(rootfs), "--numeric-owner", "--exclude=./.complete", "-c", "."],
                           stdout=subprocess.PIPE)
    imp = subprocess.run(["docker", "import", "-", tag], stdin=tar.stdout, env=docker.env(), capture_output=True,
                         text=True, check=False)
    assert tar.stdout is not None
    tar.stdout.close()
    tar.wait()
    if imp.returncode != 0:
        raise SuiteImageError(f"docker import of the Python base failed: {imp.stderr.strip()[-400:]}")
    return tag


def build(docker: Dockerd, tag: str = IMAGE) -> str:
    """Build the repository's Dockerfile offline into `docker` as `tag`; returns the tag."""
    log = nodeimage.cache_root() / "suite-build.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    base = ensure_base(docker, log)
    repo = simbin.repo_root()
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="suite-ctx-") as tmp:
        ctx = Path(tmp)
        for name in ("Dockerfile", ".dockerignore", "pyproject.toml", "README.md", "rbac.yaml"):
            if (repo / name).exists():
                shutil.copy2(repo / name, ctx / name)
        for d in ("gpu_conformance", "tests_conformance"):
            shutil.copytree(repo / d, ctx / d, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        # Our wheel and every dependency's, from the host's pip (PyPI or its cache): the build has no network.
        nodeimage._run([sys.executable, "-m", "pip", "wheel", "-q", "--disable-pip-version-check",
                        "-w", str(ctx / ".wheels"), str(ctx)], log)
        env = {**docker.env(), "DOCKER_BUILDKIT": "0"}
        with open(log, "a") as f:
            proc = subprocess.run(["docker", "build", "--network", "none", "--build-arg", f"BASE={base}",
                                   "-t", tag, str(ctx)], env=env, stdout=f, stderr=subprocess.STDOUT, check=False)
        if proc.returncode != 0:
            raise SuiteImageError(f"docker build of the suite image failed (exit {proc.returncode}); see {log}")
    if not docker.external:
        # The previous build's image, now untagged (~380 MB each), only fills the tier's data root.
        docker.docker("image", "prune", "-f", check=False)
    print(f"built suite image {tag} in {time.monotonic() - started:.0f} s", file=sys.stderr, flush=True)
    return tag
