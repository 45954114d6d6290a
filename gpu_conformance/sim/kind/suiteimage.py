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

from gpu_conformance.go_build import repo_root
from gpu_conformance.sim.kind import nodeimage
from gpu_conformance.sim.kind.docker import Dockerd

BASE_PACKAGES = ("python3", "python3-venv", "passwd")
CONTEXT_FILES = ("Dockerfile", ".dockerignore", "pyproject.toml", "README.md", "rbac.yaml")
CONTEXT_DIRS = ("gpu_conformance", "tests_conformance")
INPUTS_LABEL = "gpu-conformance.inputs"
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


def _context_files(repo: Path) -> list[Path]:
    files = [repo / n for n in CONTEXT_FILES if (repo / n).is_file()]
    for d in CONTEXT_DIRS:
        files += sorted(p for p in (repo / d).rglob("*")
                        if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc")
    return files


def inputs_key(repo: Path, base: str) -> str:
    """A hash of everything the build copies (and the base): an image with this key needs no rebuild.

    The dependencies' wheels come from pyproject.toml's ranges, so a new release on PyPI is picked up only
    when one of these files changes.
    """
    parts: list[bytes | str] = [base]
    for p in _context_files(repo):
        parts += [str(p.relative_to(repo)), p.read_bytes()]
    return nodeimage.content_digest(parts)


def build(docker: Dockerd, tag: str = IMAGE) -> str:
    """Build the repository's Dockerfile offline into `docker` as `tag` unless `tag` already holds the same
    inputs (INPUTS_LABEL); returns the tag."""
    log = nodeimage.cache_root() / "suite-build.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    base = ensure_base(docker, log)
    repo = repo_root()
    key = inputs_key(repo, base)
    have = docker.docker("image", "inspect", "-f", f'{{{{ index .Config.Labels "{INPUTS_LABEL}" }}}}', tag,
                         check=False)
    if have.returncode == 0 and have.stdout.decode().strip() == key:
        return tag
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="suite-ctx-") as tmp:
        ctx = Path(tmp)
        for src in _context_files(repo):
            dst = ctx / src.relative_to(repo)
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dst)
        # Our wheel and every dependency's, from the host's pip (PyPI or its cache): the build has no network.
        nodeimage.run_logged([sys.executable, "-m", "pip", "wheel", "-q", "--disable-pip-version-check",
                              "-w", str(ctx / ".wheels"), str(ctx)], log)
        env = {**docker.env(), "DOCKER_BUILDKIT": "0"}
        with open(log, "a") as f:
            proc = subprocess.run(["docker", "build", "--network", "none", "--build-arg", f"BASE={base}",
                                   "--label", f"{INPUTS_LABEL}={key}", "-t", tag, str(ctx)],
                                  env=env, stdout=f, stderr=subprocess.STDOUT, check=False)
        if proc.returncode != 0:
            raise SuiteImageError(f"docker build of the suite image failed (exit {proc.returncode}); see {log}")
    if not docker.external:
        # The previous build's image, now untagged (~380 MB each), only fills the tier's data root.
        docker.docker("image", "prune", "-f", check=False)
    print(f"built suite image {tag} in {time.monotonic() - started:.0f} s", file=sys.stderr, flush=True)
    return tag
