"""Container images without a registry: write an OCI image layout as a tar that `ctr images import` reads.

One layer per image (a gzip tar built from (path in image, file or symlink) entries), a config with
`diff_ids` = sha256 of the uncompressed layer, a manifest, and an index whose entries carry the
`io.containerd.image.name` annotation: ctr names the imported image after it. Timestamps are fixed, so
the same inputs give the same digests.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import tarfile
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

MEDIA_INDEX = "application/vnd.oci.image.index.v1+json"
MEDIA_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
MEDIA_CONFIG = "application/vnd.oci.image.config.v1+json"
MEDIA_LAYER = "application/vnd.oci.image.layer.v1.tar+gzip"
_MTIME = 1767225600  # 2026-01-01: reproducible layers
# The PATH Docker's official base images (busybox, debian) set; an image from scratch gets it too.
DEFAULT_ENV = ("PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",)


@dataclass(frozen=True)
class Entry:
    """One path in the image: a copy of a host file (source), a symlink (link) or a directory (neither)."""
    path: str
    source: Path | None = None
    link: str | None = None
    mode: int = 0o755


@dataclass
class Image:
    names: tuple[str, ...]
    entries: list[Entry] = field(default_factory=list)
    entrypoint: tuple[str, ...] = ()
    cmd: tuple[str, ...] = ()
    env: tuple[str, ...] = DEFAULT_ENV


def _layer_tar(entries: Iterable[Entry]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        seen: set[str] = set()
        for e in entries:
            # Parent directories first, once, so the runtime never has to invent them.
            parts = e.path.strip("/").split("/")
            for i in range(1, len(parts)):
                d = "/".join(parts[:i])
                if d not in seen:
                    seen.add(d)
                    tar.addfile(_info(d, tarfile.DIRTYPE, 0o755))
            name = e.path.strip("/")
            if e.link is not None:
                info = _info(name, tarfile.SYMTYPE, 0o777)
                info.linkname = e.link
                tar.addfile(info)
            elif e.source is not None:
                data = e.source.read_bytes()
                info = _info(name, tarfile.REGTYPE, e.mode)
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
            elif name not in seen:
                tar.addfile(_info(name, tarfile.DIRTYPE, e.mode))
            seen.add(name)
    return buf.getvalue()


def _info(name: str, kind: bytes, mode: int) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.mode = mode
    info.mtime = _MTIME
    return info


def _blob(data: bytes) -> tuple[str, bytes]:
    return "sha256:" + hashlib.sha256(data).hexdigest(), data


def write_archive(image: Image, out: Path, arch: str = "amd64") -> Path:
    """Write the image as an OCI layout tar at `out` (one manifest, tagged with every name in image.names)."""
    layer = _layer_tar(image.entries)
    layer_gz = gzip.compress(layer, mtime=0)
    config = {
        "architecture": arch, "os": "linux",
        "config": {"Env": list(image.env), "Entrypoint": list(image.entrypoint) or None,
                   "Cmd": list(image.cmd) or None, "WorkingDir": "/"},
        "rootfs": {"type": "layers", "diff_ids": ["sha256:" + hashlib.sha256(layer).hexdigest()]},
        "history": [{"created": "2026-01-01T00:00:00Z", "created_by": "gpu_conformance.sim.builds.oci"}],
    }
    config_digest, config_bytes = _blob(json.dumps(config, sort_keys=True).encode())
    layer_digest, _ = _blob(layer_gz)
    manifest = {
        "schemaVersion": 2, "mediaType": MEDIA_MANIFEST,
        "config": {"mediaType": MEDIA_CONFIG, "digest": config_digest, "size": len(config_bytes)},
        "layers": [{"mediaType": MEDIA_LAYER, "digest": layer_digest, "size": len(layer_gz)}],
    }
    manifest_digest, manifest_bytes = _blob(json.dumps(manifest, sort_keys=True).encode())
    index = {
        "schemaVersion": 2, "mediaType": MEDIA_INDEX,
        "manifests": [{"mediaType": MEDIA_MANIFEST, "digest": manifest_digest, "size": len(manifest_bytes),
                       "platform": {"architecture": arch, "os": "linux"},
                       "annotations": {"io.containerd.image.name": name,
                                       "org.opencontainers.image.ref.name": name.rsplit(":", 1)[-1]}}
                      for name in image.names],
    }
    files = {"oci-layout": json.dumps({"imageLayoutVersion": "1.0.0"}).encode(),
             "index.json": json.dumps(index, sort_keys=True).encode()}
    for digest, data in ((config_digest, config_bytes), (layer_digest, layer_gz),
                         (manifest_digest, manifest_bytes)):
        files[f"blobs/sha256/{digest.removeprefix('sha256:')}"] = data
    out.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(out, "w") as tar:
        for d in ("blobs", "blobs/sha256"):
            tar.addfile(_info(d, tarfile.DIRTYPE, 0o755))
        for name, data in files.items():
            info = _info(name, tarfile.REGTYPE, 0o644)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return out


def busybox_entries(busybox: Path, applets: Iterable[str]) -> list[Entry]:
    """A root filesystem of one static busybox: /bin/busybox plus a symlink per applet (sh, ls, echo, ...)."""
    entries = [Entry("/bin/busybox", source=busybox), Entry("/tmp", mode=0o1777), Entry("/dev"),
               Entry("/proc"), Entry("/sys"), Entry("/etc"), Entry("/usr/bin")]
    entries += [Entry(f"/bin/{a}", link="busybox") for a in sorted(set(applets))
                if a and "/" not in a and a not in ("busybox",)]
    return entries
