"""Guards on the structure: which module may import which, and check IDs that once shipped never disappear."""

from __future__ import annotations

import ast
from pathlib import Path

from gpu_conformance import catalogue

PKG = Path(__file__).resolve().parent.parent / "gpu_conformance"
RELEASED = Path(__file__).parent / "data" / "released-check-ids.txt"

# Product modules that may import the simulated cluster: the target table that boots it, the `sim` CLI
# commands, the README generator that lists its faults, gotools (CI build helper sharing its Go cache lock),
# and the benchmark (`python -m gpu_conformance.bench` boots a 1,000-node simulated cluster to measure on).
MAY_IMPORT_SIM = {"targets.py", "cli.py", "docs.py", "gotools.py", "bench.py"}
# Checks are pure functions of the snapshot: no API access, no probe, no run, no reports, no simulation.
CHECKS_MUST_NOT_IMPORT = ("gpu_conformance.cluster.reader", "gpu_conformance.cluster.connect",
                          "gpu_conformance.probe", "gpu_conformance.session", "gpu_conformance.plugin",
                          "gpu_conformance.pytest_reporting",
                          "gpu_conformance.sim", "gpu_conformance.report", "gpu_conformance.targets")


def imports(path: Path) -> set[str]:
    """Every module a file imports, at any depth (lazy imports inside functions count too)."""
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            out.add(node.module)
            out.update(f"{node.module}.{a.name}" for a in node.names)
    return out


def offending(path: Path, forbidden: tuple[str, ...]) -> list[str]:
    return sorted(m for m in imports(path) if any(m == f or m.startswith(f + ".") for f in forbidden))


def test_checks_only_read_the_snapshot() -> None:
    bad = {p.name: offending(p, CHECKS_MUST_NOT_IMPORT) for p in (PKG / "checks").glob("*.py")}
    assert not {k: v for k, v in bad.items() if v}


def test_product_code_reaches_the_simulation_only_through_the_target_table() -> None:
    product = [p for p in PKG.rglob("*.py") if "sim" not in p.relative_to(PKG).parts[:1]
               and p.name not in MAY_IMPORT_SIM]
    bad = {str(p.relative_to(PKG)): offending(p, ("gpu_conformance.sim",)) for p in product}
    assert not {k: v for k, v in bad.items() if v}


def test_the_simulation_does_not_use_the_checks() -> None:
    # The simulated operator must not be written from the checks it is meant to test.
    bad = {p.name: offending(p, ("gpu_conformance.checks",)) for p in (PKG / "sim").glob("*.py")}
    assert not {k: v for k, v in bad.items() if v}


def test_the_guard_sees_lazy_imports(tmp_path: Path) -> None:
    f = tmp_path / "x.py"
    f.write_text("def f():\n    from gpu_conformance.sim.session import boot_sim\n")
    assert offending(f, ("gpu_conformance.sim",)) == ["gpu_conformance.sim.session",
                                                      "gpu_conformance.sim.session.boot_sim"]


def test_released_check_ids_never_disappear() -> None:
    released = [ln.strip() for ln in RELEASED.read_text().splitlines() if ln.strip()]
    current = {c.id for c in catalogue.all_checks()}
    gone = sorted(set(released) - current)
    assert not gone, f"released check IDs removed or renamed: {gone} (IDs are stable: deprecate, never reuse)"
    new = sorted(current - set(released))
    assert not new, f"new check IDs {new}: append them to {RELEASED.name} (the list only grows)"
