"""The test bed's shared helpers: undoing a failed start (the control plane) and pruning JSON values."""

from __future__ import annotations

import pytest

from gpu_conformance.errors import ConformanceError
from gpu_conformance.sim.services.failed_start import cleaned_up_on_failure
from gpu_conformance.sim.services.json_tree import without


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
