"""Parallel workers (`pytest -n N`): what must stay on one worker does, the rest is spread (tests/parallel.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from parallel import dist_mode, group_of

REPO = Path(__file__).resolve().parents[1]


def test_the_kind_tier_is_one_group_whatever_its_module() -> None:
    for nodeid in ("tests/test_kind.py::test_whole_suite", "tests/test_kind_dra.py::test_claim"):
        assert group_of(nodeid, ["kind", "parametrize"], slow=True, module_fixtures=["cluster"]) == "kind"


def test_a_slow_module_fixture_keeps_its_users_on_one_worker() -> None:
    assert group_of("tests/test_sim_install.py::test_x", ["sim"], slow=True,
                    module_fixtures=["default_install"]) == "tests/test_sim_install.py"
    # The fault matrix's pool is one per worker by design: its faults spread.
    assert group_of("tests/test_fault_matrix.py::test_f[a]", ["sim"], slow=True, module_fixtures=["sim_pool"]) is None
    # A fast test's module fixture is a lookup (a binary's path, a CA): no reason to hold the module together.
    assert group_of("tests/test_fakegpu.py::test_x", [], slow=False, module_fixtures=["bin_dir"]) is None
    assert group_of("tests/test_verdict.py::test_x", [], slow=False, module_fixtures=[]) is None


def test_modules_writing_one_fixed_path_stay_together() -> None:
    nodeid = "tests/test_report_browser.py::test_screenshot_is_not_blank"
    assert group_of(nodeid, ["browser"], slow=False, module_fixtures=["page"]) == "tests/test_report_browser.py"


def test_dash_n_alone_schedules_by_group() -> None:
    assert dist_mode(2, "load") == "loadgroup"
    assert dist_mode(2, "loadfile") == "loadfile"
    assert dist_mode(None, "no") == "no" and dist_mode(0, "no") == "no"


PLUGIN = '''
import json
def pytest_collection_finish(session):
    groups = {i.nodeid: [m.args[0] for m in i.iter_markers("xdist_group")] for i in session.items}
    kind = [i.nodeid for i in session.items if i.get_closest_marker("kind")]
    print("GROUPS " + json.dumps({"groups": groups, "kind": kind}))
'''


def test_the_real_tree_is_grouped_as_declared(tmp_path: Path) -> None:
    pytest.importorskip("xdist")
    (tmp_path / "groups_plugin.py").write_text(PLUGIN)
    env = {**os.environ, "PYTHONPATH": f"{tmp_path}:{REPO}"}
    proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "groups_plugin", "--co",
                           "-q", "--tiers=all", "tests"], cwd=REPO, capture_output=True, text=True, timeout=120,
                          check=False, env=env)
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("GROUPS ")), None)
    assert line is not None, proc.stdout[-2000:] + proc.stderr[-2000:]
    found = json.loads(line.removeprefix("GROUPS "))
    groups: dict[str, list[str]] = found["groups"]
    of = {nodeid: g[0] if g else None for nodeid, g in groups.items()}
    assert all(len(g) <= 1 for g in groups.values())
    assert found["kind"] and {of[n] for n in found["kind"]} == {"kind"}
    assert {of[n] for n in of if n.startswith("tests/test_report_browser.py")} == {"tests/test_report_browser.py"}
    assert {of[n] for n in of if n.startswith("tests/test_fault_matrix.py::test_fault_trips")} == {None}
    # Those of its tests that use the module's booted cluster; the others are free.
    assert "tests/test_probe_sim.py" in {of[n] for n in of if n.startswith("tests/test_probe_sim.py")}
    assert {of[n] for n in of if n.startswith("tests/test_probe_sim.py")} <= {"tests/test_probe_sim.py", None}
    assert {of[n] for n in of if n.startswith("tests/test_verdict.py")} == {None}
    assert {of[n] for n in of if n.startswith("tests/test_differential.py")} == {None}


# Tests that only say which worker ran them, when a run of test_a_group_runs_on_one_worker asks them to.
_WHERE = os.environ.get("GPU_CONFORMANCE_WORKER_PROBE")


@pytest.mark.xdist_group("worker-probe")
@pytest.mark.parametrize("n", range(6))
def test_worker_probe(n: int) -> None:
    if _WHERE:
        (Path(_WHERE) / str(n)).write_text(os.environ.get("PYTEST_XDIST_WORKER", "main"))


def test_a_group_runs_on_one_worker(tmp_path: Path) -> None:
    """`-n 2` alone, as the README runs it: the six tests of one group on one worker, not only marked so on the
    controller (they were spread over both workers until the workers were told)."""
    pytest.importorskip("xdist")
    env = {**os.environ, "GPU_CONFORMANCE_WORKER_PROBE": str(tmp_path)}
    proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-n", "2",
                           "tests/test_parallel.py", "-k", "test_worker_probe"], cwd=REPO, capture_output=True,
                          text=True, timeout=120, check=False, env=env)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    workers = {p.read_text() for p in tmp_path.iterdir()}
    assert len(list(tmp_path.iterdir())) == 6 and len(workers) == 1, workers
