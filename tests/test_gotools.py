"""gotools: how a pinned Go tool is built and when a cached binary counts as the pinned one (no Go build here)."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpu_conformance import gotools
from gpu_conformance.gotools import ACTIONLINT, NVIDIA_CDI_HOOK, NVIDIA_CONTAINER_RUNTIME, NVIDIA_CTK


def _script(path: Path, body: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(0o755)
    return path


def test_nvidia_runtime_is_built_with_cgo_and_stamped_with_its_version(tmp_path: Path) -> None:
    cmd = gotools._install_command("go", NVIDIA_CONTAINER_RUNTIME)
    assert cmd[-1] == "github.com/NVIDIA/nvidia-container-toolkit/cmd/nvidia-container-runtime@v1.20.2"
    assert "-X github.com/NVIDIA/nvidia-container-toolkit/internal/info.version=1.20.2" in cmd[2]
    assert gotools._go_env(tmp_path, NVIDIA_CONTAINER_RUNTIME)["CGO_ENABLED"] == "1"
    assert gotools._install_command("go", ACTIONLINT) == ["go", "install", f"{ACTIONLINT.package}@v1.7.12"]
    assert gotools._go_env(tmp_path, ACTIONLINT)["CGO_ENABLED"] == "0"


def test_nvidia_ctk_is_the_runtimes_module_and_version_built_the_same_way(tmp_path: Path) -> None:
    cmd = gotools._install_command("go", NVIDIA_CTK)
    assert cmd[-1] == "github.com/NVIDIA/nvidia-container-toolkit/cmd/nvidia-ctk@v1.20.2"
    assert cmd[2] == gotools._install_command("go", NVIDIA_CONTAINER_RUNTIME)[2]
    assert gotools._go_env(tmp_path, NVIDIA_CTK)["CGO_ENABLED"] == "1"
    # What urfave/cli prints for `nvidia-ctk --version` (the command's Name, then its Version).
    stamped = _script(tmp_path / "nvidia-ctk", 'echo "NVIDIA Container Toolkit CLI version 1.20.2"')
    assert gotools._answers_version(stamped, NVIDIA_CTK)
    assert gotools.TOOLS["nvidia-ctk"] is NVIDIA_CTK


def test_nvidia_cdi_hook_is_the_same_module_version_and_stamp(tmp_path: Path) -> None:
    """The hook the generated spec names comes from the generator's own module and release, built alike (cgo:
    its packages reach go-nvml)."""
    cmd = gotools._install_command("go", NVIDIA_CDI_HOOK)
    assert cmd[-1] == "github.com/NVIDIA/nvidia-container-toolkit/cmd/nvidia-cdi-hook@v1.20.2"
    assert cmd[2] == gotools._install_command("go", NVIDIA_CTK)[2]
    assert gotools._go_env(tmp_path, NVIDIA_CDI_HOOK)["CGO_ENABLED"] == "1"
    stamped = _script(tmp_path / "nvidia-cdi-hook", 'echo "NVIDIA CDI Hook version 1.20.2"')
    unstamped = _script(tmp_path / "u" / "nvidia-cdi-hook", 'echo "NVIDIA CDI Hook version unknown"')
    assert gotools._answers_version(stamped, NVIDIA_CDI_HOOK)
    assert not gotools._answers_version(unstamped, NVIDIA_CDI_HOOK)
    assert gotools.TOOLS["nvidia-cdi-hook"] is NVIDIA_CDI_HOOK


def test_the_version_text_not_the_exit_code_identifies_a_binary(tmp_path: Path) -> None:
    # What the runtime prints before it fails on a host without runc, and what an unstamped build prints.
    stamped = _script(tmp_path / "a" / "nvidia-container-runtime",
                      'echo "NVIDIA Container Runtime version 1.20.2"; exit 1')
    unstamped = _script(tmp_path / "b" / "nvidia-container-runtime",
                        'echo "NVIDIA Container Runtime version unknown"')
    assert gotools._answers_version(stamped, NVIDIA_CONTAINER_RUNTIME)
    assert not gotools._answers_version(unstamped, NVIDIA_CONTAINER_RUNTIME)


def test_missing_go_or_c_compiler_is_one_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.delenv("CC", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    with pytest.raises(gotools.GoMissingError, match="`go` is not on PATH"):
        gotools.ensure_tool(NVIDIA_CONTAINER_RUNTIME)
    # Go but no gcc: not GoMissingError (a test must not skip on it), and no build is started.
    _script(tmp_path / "go-only" / "go", "echo should not run >&2; exit 3")
    monkeypatch.setenv("PATH", str(tmp_path / "go-only"))
    with pytest.raises(gotools.ToolBuildError, match="needs cgo and no C compiler") as err:
        gotools.ensure_tool(NVIDIA_CONTAINER_RUNTIME)
    assert not isinstance(err.value, gotools.GoMissingError)


def test_the_toolkit_is_built_at_the_operators_chart_release_with_its_installer() -> None:
    """v25.3.4's chart ships toolkit v1.17.8, whose installer is tools/container/nvidia-toolkit (stamped through
    main.Version, as its image's Dockerfile does); the binaries it copies to the host come from cmd/ at that tag."""
    cmd = gotools._install_command("go", gotools.TOOLKIT_INSTALLER)
    assert cmd[-1] == "github.com/NVIDIA/nvidia-container-toolkit/tools/container/nvidia-toolkit@v1.17.8"
    assert "-X main.Version=1.17.8" in cmd[2]
    assert {t.name for t in gotools.TOOLKIT_BINARIES} == {
        "nvidia-container-runtime", "nvidia-container-runtime.cdi", "nvidia-container-runtime.legacy",
        "nvidia-container-runtime-hook", "nvidia-ctk", "nvidia-cdi-hook"}
    assert all(t.version == "v1.17.8" and t.cgo and t.package.endswith(f"/cmd/{t.name}")
               for t in gotools.TOOLKIT_BINARIES)
    # Their own cache directories: never the v1.20.2 binaries of the same names.
    assert gotools.TOOLKIT_CTK.dir_name == "nvidia-ctk-v1.17.8" != NVIDIA_CTK.dir_name
    assert gotools.TOOL_GROUPS["toolkit"] == gotools.TOOLKIT_TOOLS


def test_an_unknown_tool_is_one_usage_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert gotools.main(["nvidia-toolkit"]) == 4
    assert "toolkit" in capsys.readouterr().err
