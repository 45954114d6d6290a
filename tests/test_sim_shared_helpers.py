"""The test bed's shared services: undoing a failed start (the control plane), process supervision and pruning JSON
values."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from gpu_conformance.errors import ConformanceError
from gpu_conformance.sim.services.failed_start import cleaned_up_on_failure
from gpu_conformance.sim.services.json_tree import without
from gpu_conformance.sim.services.processes import (
    group_alive,
    is_same_process,
    last_line,
    proc_start_time,
    spawn_logged,
    stop_all,
)


class StartError(ConformanceError):
    pass


def test_a_failed_start_keeps_its_logs_and_says_where() -> None:
    stops: list[bool] = []
    with pytest.raises(StartError) as err, cleaned_up_on_failure(StartError, stops.append, "logs kept in /w/logs"):
        raise StartError("kubelet never registered (see /w/logs/kubelet.log)")
    assert stops == [True]
    assert str(err.value) == "kubelet never registered (see /w/logs/kubelet.log) [logs kept in /w/logs]"
    assert err.value.__cause__ is None and err.value.__suppress_context__


@pytest.mark.parametrize("exc", [KeyboardInterrupt(), OSError("disk full")])
def test_an_interrupted_or_otherwise_failed_start_removes_everything(exc: BaseException) -> None:
    stops: list[bool] = []
    with pytest.raises(type(exc)), cleaned_up_on_failure(StartError, stops.append, "kept"):
        raise exc
    assert stops == [False]


def test_a_start_that_succeeds_stops_nothing() -> None:
    stops: list[bool] = []
    with cleaned_up_on_failure(StartError, stops.append, "kept"):
        pass
    assert stops == []


def test_without_drops_the_selected_entries_at_every_depth_and_leaves_the_input_alone() -> None:
    value = {"a": None, "b": {"c": None, "d": [{"e": None, "f": 1}, 2]}, "g": "x"}
    assert without(value, lambda _k, v: v is None) == {"b": {"d": [{"f": 1}, 2]}, "g": "x"}
    assert without(value, lambda k, _v: k in ("b", "a")) == {"g": "x"}
    assert value["a"] is None and value["b"]["d"][0] == {"e": None, "f": 1}


def test_a_pid_is_trusted_only_with_its_start_time() -> None:
    me = os.getpid()
    start = proc_start_time(me)
    assert start is not None
    assert is_same_process(me, start)
    assert not is_same_process(me, start + 1)  # a recycled pid has another start time


def test_a_spawned_component_is_logged_and_stopped_with_its_whole_group(tmp_path: Path) -> None:
    log = tmp_path / "sleeper.log"
    # The child starts a grandchild in the same group: stopping the component must stop both.
    code = "import subprocess, time; subprocess.Popen(['sleep', '60']); print('up', flush=True); time.sleep(60)"
    proc = spawn_logged("sleeper", [sys.executable, "-c", code], log, tmp_path, {})
    assert proc.start_time and group_alive(proc.pid)
    stop_all([proc], {"sleeper": 2.0})
    assert not group_alive(proc.pid)
    assert log.read_text().startswith("\n# ") and sys.executable in log.read_text()


def test_the_last_log_line_names_why_a_process_did_not_start(tmp_path: Path) -> None:
    assert last_line(tmp_path / "missing.log") == "no log"
    (tmp_path / "empty.log").write_text("\n  \n")
    assert last_line(tmp_path / "empty.log") == "empty log"
    (tmp_path / "a.log").write_text("starting\nfatal: port in use\n\n")
    assert last_line(tmp_path / "a.log") == "fatal: port in use"
