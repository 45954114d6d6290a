"""Shared test setup: `factory` importable everywhere; the simulated cluster's binaries on demand."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

import pytest

# Every check registers itself when the catalogue imports the check modules; a test module run alone must see them.
import gpu_conformance.catalogue  # noqa: F401

sys.path.insert(0, str(Path(__file__).parent))

from parallel import dist_mode, group_of  # noqa: E402  (tests/ on sys.path first)

if TYPE_CHECKING:
    from gpu_conformance.cluster.snapshot import ClusterSnapshot
    from gpu_conformance.probe.run import Probe

_binaries: dict[str, str | None] = {}

# The tiers (issue 24). `pytest` runs the fast one: every check's failing and healthy case on snapshots, the
# reports, the plugin, bad input — and one whole run of the suite on a simulated cluster (marked `fast`, as
# are the pure tests that live in a slow tier's module).
# `pytest --tiers=slow` runs the rest: the fault matrix and profiles on simulated clusters, the real operator,
# kind, scale. `--tiers=all` runs both in one session. A test is slow when it carries one of these
# marks (it boots something) or is marked `slow` itself (measured: it takes long without booting a cluster).
# The worker input key by which the controller tells its workers that it schedules by group.
LOADGROUP_INPUT = "gpu_conformance_loadgroup"
SLOW_MARKS = ("sim", "realop", "kind", "slow")
TIERS = ("fast", "slow", "all")


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--tiers", default="fast", choices=TIERS,
                     help="which of the suite's own tests run: fast (default, minutes), slow (the simulated, "
                          "real-operator, kind and scale tiers), all")


def is_slow(item: pytest.Item) -> bool:
    if item.get_closest_marker("fast") is not None:
        return False
    return any(item.get_closest_marker(m) is not None for m in SLOW_MARKS)


def pytest_configure(config: pytest.Config) -> None:
    # `pytest -n N` (pytest-xdist, a dev dependency) schedules by group (tests/parallel.py), so that `-n` alone is
    # as safe as `-n N --dist loadgroup`.
    if config.pluginmanager.hasplugin("xdist"):
        config.option.dist = dist_mode(config.getoption("numprocesses"), config.getoption("dist"))
        # A worker decides whether to tag its test ids with their group from its own command line's --dist, before
        # this hook runs (xdist 3.8, remote.setup_config): with `-n` alone the controller scheduled by group but the
        # workers sent untagged ids, so every test was a unit of its own and the kind tier's tests were split over
        # both workers. The controller says so in the worker's input (below).
        if getattr(config, "workerinput", {}).get(LOADGROUP_INPUT):
            config.option.loadgroup = True


@pytest.hookimpl(optionalhook=True)  # an xdist hook: unknown without it
def pytest_configure_node(node: Any) -> None:
    node.workerinput[LOADGROUP_INPUT] = node.config.getoption("dist") == "loadgroup"


def _module_fixtures(item: pytest.Item) -> list[str]:
    # pytest has no public view of a test's fixture definitions; without it, nothing is grouped by fixture.
    defs = getattr(getattr(item, "_fixtureinfo", None), "name2fixturedefs", None) or {}
    return [name for name, fds in defs.items() if fds and fds[-1].scope == "module"]


@pytest.hookimpl(tryfirst=True)  # before xdist's own, which reads the groups into the test ids it schedules
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # Only where pytest-xdist is installed (it registers the mark; without it the mark is an unknown-mark warning).
    for item in items if config.pluginmanager.hasplugin("xdist") else ():
        group = group_of(item.nodeid, (m.name for m in item.iter_markers()), is_slow(item), _module_fixtures(item))
        if group is not None:
            item.add_marker(pytest.mark.xdist_group(group))
    tiers = config.getoption("tiers")
    if tiers == "all" or config.getoption("cluster", None) is not None:
        return  # `--cluster` runs the conformance checks, whatever this says
    keep, drop = [], []
    for item in items:
        if item.nodeid.startswith("tests_conformance/"):
            keep.append(item)  # skipped with one line without --cluster: never a tier of their own
            continue
        (keep if is_slow(item) == (tiers == "slow") else drop).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


def pytest_runtest_setup(item: pytest.Item) -> None:
    """Tests marked `sim` need the binaries: build them once (first time ~10 min), skip only without Go.

    Tests marked `kind` need Docker (or root to start a dockerd of their own) and debootstrap, else skip with the
    reason. Tests marked `realop` need root and the real operator's binary (built once), else skip with the reason.
    """
    if item.get_closest_marker("kind") is not None:
        _kind_setup()
    if item.get_closest_marker("sim") is not None:
        _sim_setup()
    if item.get_closest_marker("realop") is not None:
        _realop_setup()


def _sim_setup() -> None:
    if "error" not in _binaries:
        from gpu_conformance.go_build import GoNotFoundError
        from gpu_conformance.sim.builds.binaries import ensure_binaries

        try:
            ensure_binaries()
            _binaries["error"] = None
        except GoNotFoundError as e:
            _binaries["error"] = str(e)
    if _binaries["error"]:
        pytest.skip(f"simulated cluster binaries not available: {_binaries['error']}")


def _realop_setup() -> None:
    if "realop" not in _binaries:
        import os

        from gpu_conformance.errors import ConformanceError
        from gpu_conformance.sim.builds import operator_module

        _binaries["realop"] = "" if os.geteuid() == 0 else "it needs root (a private mount namespace)"
        if not _binaries["realop"]:
            try:
                operator_module.ensure_binary()
            except ConformanceError as exc:
                _binaries["realop"] = f"it cannot be built here: {exc}"
    if _binaries["realop"]:
        pytest.skip(f"the real operator cannot run: {_binaries['realop']}")


def _kind_setup() -> None:
    if "kind" not in _binaries:
        from gpu_conformance.sim.kind.cluster import unsupported_reason

        _binaries["kind"] = unsupported_reason()
    if _binaries["kind"]:
        pytest.skip(f"kind tier cannot run here: {_binaries['kind']}")


@pytest.fixture(scope="session")
def fake_gpu_bins() -> Path:
    """The node binaries' directory (kubelet, containerd and the fake-GPU binaries), built once if needed."""
    from gpu_conformance.errors import ConformanceError
    from gpu_conformance.sim.builds import node_binaries as nodebin
    try:
        return nodebin.ensure_binaries()
    except ConformanceError as exc:
        pytest.skip(f"the fake-GPU binaries cannot be built here: {exc}")


@pytest.fixture
def fake_api_probe(monkeypatch: pytest.MonkeyPatch) -> Callable[..., Probe]:
    """make(request, snap, run_id, probe_timeout=10.0): a Probe over `snap` whose real I/O goes to `request`, an
    in-memory stand-in for raw_request (no cluster, no network), polling every 0.05 s; `probe.obs` holds
    its observations (the input of the probe layer's checks)."""
    import gpu_conformance.probe.run as probe_mod
    from gpu_conformance.probe import api as probe_api
    from gpu_conformance.settings import Settings

    monkeypatch.setattr(probe_mod, "POLL_INTERVAL", 0.05)

    def make(request: Callable[..., bytes], snap: ClusterSnapshot, run_id: str, probe_timeout: float = 10.0) -> Probe:
        monkeypatch.setattr(probe_api, "raw_request", request)
        conn: Any = SimpleNamespace(api=None, server="https://fake", user="u")
        probe = probe_mod.Probe(conn, Settings(run_id=run_id, probe_timeout=probe_timeout), snap)
        return probe

    return make
