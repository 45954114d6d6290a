"""Which of the suite's own tests may run in parallel workers (`pytest -n N`, pytest-xdist), and which stay together.

pytest-xdist runs tests in N worker processes; its `loadgroup` scheduling sends every test of one `xdist_group` to
the same worker, one after another, and spreads the rest. What is left free was read for what could clash:
- every simulated cluster takes free ports (bound together, then handed to its processes), a temporary state dir
  and a /dev/shm etcd dir of its own; the real operator runs in a private mount namespace over its state dir;
- every binary built on first use (the simulated cluster's, the operator, the node binaries, the Go tools, the
  fake NVML) is built under one file lock per cache directory (`go_build.build_lock`), re-checked once the lock is
  held: two workers that both find a binary missing build it once, the second waits;
- the tests write into their own tmp_path; the fault matrix's shared timings file is written under a lock.
What is grouped, and why, is below (`group_of`).
"""

from __future__ import annotations

from collections.abc import Iterable

# Tiers that hold one machine-wide resource: the kind tier's Docker daemon, data root and cluster name (a second
# kind tier on the machine is refused by its lock, sim/kind/cluster.py). One group: one worker, one test at a time.
EXCLUSIVE_TIERS = ("kind",)

# Modules that write one fixed path outside tmp_path: a module-scoped fixture writes the page that a person looks
# at afterwards (reports/browser-check/, reports/history-check/). Split over two workers, each worker's fixture
# would rewrite the page while the other worker's Chromium reads it.
FIXED_PATH_MODULES = ("tests/test_report_browser.py", "tests/test_history_browser.py")

# Module-scoped fixtures meant to exist once per worker, so their modules' tests spread:
# - the fault matrix's pool keeps one simulated cluster per profile and undoes each fault on it: each worker boots
#   its own (~9 s), which is what lets the faults of one profile run on two workers at once;
# - the differential test's check that the real operator is built: idempotent and locked, seconds on a second
#   worker, while each of its tests boots two clusters of its own (60-80 s).
PER_WORKER_FIXTURES = ("sim_pool", "_real_operator_built")


def group_of(nodeid: str, marks: Iterable[str], slow: bool, module_fixtures: Iterable[str]) -> str | None:
    """The xdist group of one test (None: any worker).

    `marks` are the test's marker names, `slow` whether it is in the slow tier, `module_fixtures` the names of the
    module-scoped fixtures it uses.
    """
    marks = set(marks)
    tier = next((t for t in EXCLUSIVE_TIERS if t in marks), None)
    if tier is not None:
        return tier
    module = nodeid.split("::", 1)[0]
    if module in FIXED_PATH_MODULES:
        return module
    # A slow test's module fixture boots something (a simulated cluster, an API server, a whole read-only run):
    # split over two workers, each would boot its own copy. That is safe (free ports, own dirs) but pays again the
    # boot the fixture exists to pay once, so the module's tests that use it stay on one worker.
    if slow and set(module_fixtures) - set(PER_WORKER_FIXTURES):
        return module
    return None


def dist_mode(numprocesses: int | None, dist: str) -> str:
    """The scheduling to use: `load` (what `-n N` alone means) ignores the groups above; here it becomes
    `loadgroup`, the same spreading of every ungrouped test plus the groups. Another mode asked for is kept."""
    return "loadgroup" if numprocesses and dist == "load" else dist
