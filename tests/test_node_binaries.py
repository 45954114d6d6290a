"""The node binaries' host side (gpu_conformance/sim/builds/node_binaries.py): the static
busybox the images are made of."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpu_conformance.sim.builds import node_binaries as nodebin


def test_static_elf_detection(tmp_path: Path) -> None:
    # /bin/sh is dynamically linked on Debian (a PT_INTERP segment), a text file is no ELF at all.
    assert nodebin.is_static_elf(Path("/bin/sh")) is False
    assert nodebin.is_static_elf(Path("/etc/hostname")) is False
    assert nodebin.is_static_elf(tmp_path / "missing") is False


def test_missing_static_busybox_names_the_apt_command(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(nodebin, "BUSYBOX_PATHS", (tmp_path / "busybox",))
    with pytest.raises(nodebin.HostToolsError) as e:
        nodebin.static_busybox()
    assert str(e.value) == f"no static busybox in {tmp_path / 'busybox'}: apt-get install busybox-static"
