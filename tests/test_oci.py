"""OCI image archives written without Docker or a registry (gpu_conformance/sim/builds/oci.py), as the kind
tier loads them."""

from __future__ import annotations

import gzip
import hashlib
import json
import tarfile
from pathlib import Path

from gpu_conformance.sim.builds import oci


def test_oci_archive_is_a_consistent_image_layout(tmp_path: Path) -> None:
    payload = tmp_path / "hello"
    payload.write_text("hi\n")
    image = oci.Image(names=("example.local/x:1", "nvcr.io/nvidia/cuda:12.6.0-base-ubuntu22.04"),
                      entries=[oci.Entry("/usr/bin/hello", source=payload), oci.Entry("/bin/sh", link="busybox")],
                      cmd=("sh",))
    out = oci.write_archive(image, tmp_path / "img.tar")
    with tarfile.open(out) as tar:
        files = {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}  # type: ignore[union-attr]
    for name, data in files.items():
        if name.startswith("blobs/sha256/"):
            assert hashlib.sha256(data).hexdigest() == name.rsplit("/", 1)[1]
    index = json.loads(files["index.json"])
    assert [m["annotations"]["io.containerd.image.name"] for m in index["manifests"]] == list(image.names)
    manifest = json.loads(files["blobs/sha256/" + index["manifests"][0]["digest"].split(":")[1]])
    config = json.loads(files["blobs/sha256/" + manifest["config"]["digest"].split(":")[1]])
    layer_gz = files["blobs/sha256/" + manifest["layers"][0]["digest"].split(":")[1]]
    layer = gzip.decompress(layer_gz)
    assert config["rootfs"]["diff_ids"] == ["sha256:" + hashlib.sha256(layer).hexdigest()]
    assert config["config"]["Cmd"] == ["sh"] and config["os"] == "linux"
    # Same inputs, same digests: the archive is reproducible.
    again = oci.write_archive(image, tmp_path / "img2.tar")
    assert again.read_bytes() == out.read_bytes()
