"""`sim up` only uses a new, empty or sim-marked state dir; `sim down` only removes what the sim wrote
(issue 13 item 3: `sim up --state-dir .` followed by `sim down --state-dir .` used to wipe a repository)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpu_conformance.cli import main
from gpu_conformance.errors import EXIT_USAGE
from gpu_conformance.sim.controlplane.cluster import (
    MARKER_FILE,
    PIDS_FILE,
    StateDirError,
    claim_state_dir,
    reap_orphaned_temp_dirs,
    stop_state_dir,
)


def user_files(root: Path) -> dict[str, str]:
    (root / "src").mkdir(parents=True, exist_ok=True)
    files = {"README": "my project\n", "src/thesis.tex": "precious\n"}
    for name, text in files.items():
        (root / name).write_text(text)
    return files


def assert_intact(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        assert (root / name).read_text() == text, name


def fake_sim_files(state: Path) -> None:
    """What a booted sim leaves in its state dir (kubeconfig with the admin key, PKI, logs, pids)."""
    (state / "kubeconfig").write_text("client-key-data: x\n")
    (state / "pki").mkdir()
    (state / "pki" / "ca.key").write_text("key")
    (state / "logs").mkdir()
    (state / "logs" / "gpu-probe.log").write_text("")
    (state / "kube-apiserver.log").write_text("log")
    (state / PIDS_FILE).write_text(json.dumps({"version": 1, "processes": {}}))


def test_sim_down_refuses_a_directory_that_merely_holds_a_kubeconfig(tmp_path: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    victim = tmp_path / "victim"
    files = user_files(victim)
    (victim / "kubeconfig").write_text("x\n")
    assert main(["sim", "down", "--state-dir", str(victim)]) == EXIT_USAGE
    assert "not a simulated cluster's state dir" in capsys.readouterr().err
    assert_intact(victim, files)
    assert (victim / "kubeconfig").exists()


def test_sim_up_refuses_a_non_empty_directory_before_booting(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    files = user_files(tmp_path)
    monkeypatch.chdir(tmp_path)

    def no_boot(*a: object, **k: object) -> None:
        raise AssertionError("sim up must refuse before booting")

    monkeypatch.setattr("gpu_conformance.sim.session.start_sim", no_boot)
    assert main(["sim", "up", "--state-dir", "."]) == EXIT_USAGE
    assert "is not empty and not a simulated cluster's state dir" in capsys.readouterr().err
    assert main(["sim", "down", "--state-dir", "."]) == EXIT_USAGE
    assert_intact(tmp_path, files)
    assert not (tmp_path / MARKER_FILE).exists()


def test_sim_down_removes_only_what_the_sim_wrote(tmp_path: Path) -> None:
    state = tmp_path / "state"
    claim_state_dir(state)
    fake_sim_files(state)
    (state / "notes.txt").write_text("the user's, added later\n")
    stop_state_dir(state)
    assert sorted(p.name for p in state.iterdir()) == ["notes.txt"]
    with pytest.raises(StateDirError):  # no longer the sim's: a second `sim down` touches nothing
        stop_state_dir(state)
    assert (state / "notes.txt").exists()


def test_a_created_state_dir_goes_away_an_existing_empty_one_stays(tmp_path: Path) -> None:
    created, existing = tmp_path / "new", tmp_path / "empty"
    existing.mkdir()
    for state in (created, existing):
        claim_state_dir(state)
        fake_sim_files(state)
        stop_state_dir(state)
    assert not created.exists()
    assert existing.is_dir() and not any(existing.iterdir())


def test_claim_refuses_a_file(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("x")
    with pytest.raises(StateDirError, match="not a directory"):
        claim_state_dir(tmp_path / "f")


def test_orphaned_temporary_state_dirs_of_dead_runs_are_reaped(tmp_path: Path) -> None:
    dead, alive, user = tmp_path / "gpu-sim-dead", tmp_path / "gpu-sim-alive", tmp_path / "gpu-sim-user"
    for d in (dead, alive):
        d.mkdir()
        claim_state_dir(d, temporary=True)
        fake_sim_files(d)
    marker = json.loads((dead / MARKER_FILE).read_text())
    (dead / MARKER_FILE).write_text(json.dumps({**marker, "owner_pid": 2 ** 22 + 1}))  # above pid_max: gone
    claim_state_dir(user)  # a sim-marked dir of `sim up`, not temporary: never reaped
    assert reap_orphaned_temp_dirs(str(tmp_path)) == [dead]
    assert not dead.exists() and (alive / "kubeconfig").exists() and user.exists()


def test_operator_process_logs_go_with_the_state_dir(tmp_path: Path) -> None:
    # The status loop of the simulated operator and the real operator's processes log into the state dir.
    from gpu_conformance.sim.operator.real_operator import OPERAND_LOOP, PROCESS
    from gpu_conformance.sim.operator.status import LOOP_NAME

    state = tmp_path / "new"
    claim_state_dir(state)
    fake_sim_files(state)
    for name in (LOOP_NAME, PROCESS, OPERAND_LOOP):
        (state / f"{name}.log").write_text("x\n")
    stop_state_dir(state)
    assert not state.exists()
