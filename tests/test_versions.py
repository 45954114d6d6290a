"""The version rules table (versions.py): one release per rule, and the boundaries the sources name."""

from __future__ import annotations

import pytest

from gpu_conformance import versions


def test_every_rule_belongs_to_exactly_one_release() -> None:
    listed = [rule for rules in versions.RELEASES.values() for rule in rules]
    declared = {v for k, v in vars(versions).items() if k.isupper() and isinstance(v, str)}
    assert sorted(listed) == sorted(set(listed)) == sorted(declared)


@pytest.mark.parametrize(("tag", "parsed"), [
    ("v26.3.3", (26, 3, 3)), ("25.10.1", (25, 10, 1)), ("gpu-operator-v25.3.4", (25, 3, 4)), ("v25.10", (25, 10, 0)),
    ("latest", None), ("", None), (None, None), ("0.1.2", None),
])
def test_parse(tag: str | None, parsed: versions.Version | None) -> None:
    assert versions.parse(tag) == parsed


def test_since_is_unknown_for_an_unknown_version() -> None:
    assert versions.since(versions.CDI_DEFAULT_ON, None) is None
    assert versions.since(versions.CDI_DEFAULT_ON, (25, 3, 4)) is False
    assert versions.since(versions.CDI_DEFAULT_ON, (25, 10, 0)) is True


def test_not_ready_separator_changed_in_v26_7() -> None:
    # v26.3.3 clusterpolicy_controller.go:178 still writes ", states not ready"; v26.7 writes "; states".
    from gpu_conformance.sim.operator.status import not_ready_message

    assert not_ready_message("v26.3.3", ["state-driver"]).startswith("ClusterPolicy is not ready, states")
    assert not_ready_message("v26.7.0", ["state-driver"]).startswith("ClusterPolicy is not ready; states")
    assert not versions.since(versions.NOT_READY_SEMICOLON, (26, 3, 3))
