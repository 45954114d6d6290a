"""Guards on the structure: which module may import which, and check IDs that once shipped never disappear."""

from __future__ import annotations

import ast
from pathlib import Path

from gpu_conformance import catalogue

PKG = Path(__file__).resolve().parent.parent / "gpu_conformance"
RELEASED = Path(__file__).parent / "data" / "released-check-ids.txt"

# Product modules that may import the simulated cluster: the target providers that boot it, the `sim` CLI
# commands, the README generator that lists its faults, and the benchmark (`python -m gpu_conformance.bench`
# boots a 1,000-node simulated cluster to measure on).
MAY_IMPORT_SIM = {"targets/sim.py", "targets/kind.py", "cli.py", "docs.py", "bench.py"}
# Checks are pure functions of their input (check_input.py): no API access, no probe run, no run, no reports, no
# simulation. They read the probe's plan, states and observations (pure modules of gpu_conformance.probe), never its
# I/O modules.
PROBE_IO = ("gpu_conformance.probe.run", "gpu_conformance.probe.api", "gpu_conformance.probe.leftovers")
CHECKS_MUST_NOT_IMPORT = ("gpu_conformance.cluster.reader", "gpu_conformance.cluster.connect",
                          *PROBE_IO, "gpu_conformance.session", "gpu_conformance.plugin",
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


def test_the_probes_plan_and_words_do_no_io() -> None:
    # What the checks share with the probe run (plan, pod states, observations, output, the DRA path's words and
    # devices) stays pure, so the judging never reaches the API through it.
    pure = ("plan", "states", "observations", "output", "claims", "devices")
    forbidden = (*PROBE_IO, "gpu_conformance.cluster.reader", "gpu_conformance.cluster.connect")
    bad = {m: offending(PKG / "probe" / f"{m}.py", forbidden) for m in pure}
    assert not {k: v for k, v in bad.items() if v}


def test_product_code_reaches_the_simulation_only_through_the_target_table() -> None:
    product = [p for p in PKG.rglob("*.py") if "sim" not in p.relative_to(PKG).parts[:1]
               and p.relative_to(PKG).as_posix() not in MAY_IMPORT_SIM]
    bad = {str(p.relative_to(PKG)): offending(p, ("gpu_conformance.sim",)) for p in product}
    assert not {k: v for k, v in bad.items() if v}


def test_the_simulation_does_not_use_the_checks() -> None:
    # The simulated operator must not be written from the checks it is meant to test.
    bad = {p.name: offending(p, ("gpu_conformance.checks",)) for p in (PKG / "sim").rglob("*.py")}
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


# ---- the import graph: no circles, no private names across modules ---------------------------------------------
def module_name(path: Path) -> str:
    parts = list(path.relative_to(PKG.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _target(module: str, name: str) -> str:
    """`from module import name`: the submodule when `name` is one, else `module` itself."""
    sub = f"{module}.{name}"
    return sub if (PKG.parent / Path(*sub.split("."))).with_suffix(".py").is_file() else module


def import_graph() -> dict[str, set[str]]:
    """Module -> the package modules it imports (lazy ones too; a package's own __init__ is not an edge)."""
    graph: dict[str, set[str]] = {}
    for path in PKG.rglob("*.py"):
        me = module_name(path)
        out: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                out.update(a.name for a in node.names if a.name.startswith("gpu_conformance."))
            elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("gpu_conformance"):
                out.update(_target(node.module, a.name) for a in node.names)
        graph[me] = {m for m in out if m != me and (PKG.parent / Path(*m.split("."))).with_suffix(".py").is_file()}
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected groups of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_no_module_imports_itself_back_in_a_circle() -> None:
    assert circles(import_graph()) == []


def test_the_circle_guard_sees_a_circle() -> None:
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def private_imports(path: Path) -> list[str]:
    """Names starting with '_' that a module takes from another package module (import or attribute)."""
    found: list[str] = []
    aliases: set[str] = set()
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("gpu_conformance"):
            for a in node.names:
                if a.name.startswith("_"):
                    found.append(f"{node.module}.{a.name}")
                elif _target(node.module, a.name) != node.module:
                    aliases.add(a.asname or a.name)  # a module bound to a name: its _attributes are private
        elif isinstance(node, ast.Import):
            aliases.update(a.asname for a in node.names if a.name.startswith("gpu_conformance") and a.asname)
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__")
                and isinstance(node.value, ast.Name) and node.value.id in aliases):
            found.append(f"{node.value.id}.{node.attr}")
    return sorted(set(found))


def test_no_module_takes_another_modules_private_names() -> None:
    bad = {str(p.relative_to(PKG)): private_imports(p) for p in PKG.rglob("*.py")}
    assert not {k: v for k, v in bad.items() if v}


def test_the_private_name_guard_sees_both_spellings(tmp_path: Path) -> None:
    f = tmp_path / "x.py"
    f.write_text("from gpu_conformance.sim.builds.binaries import _build\n"
                 "from gpu_conformance.sim.builds import binaries as b\nb._go_env()\n")
    assert private_imports(f) == ["b._go_env", "gpu_conformance.sim.builds.binaries._build"]


# ---- the test bed's rooms: each imports only rooms on a lower floor (README, Architecture) ------------------------
# The tiers on top (the sim tier's boot and reuse, the kind tier), the simulated GPU Operator under them, then the
# control plane and the fake GPU stack, and on the ground what every room shares: Go builds, the API client and
# process supervision, the profiles of the simulated clusters. Rooms on one floor do not import each other.
SIM_FLOORS = {"tiers": 4, "kind": 4, "operator": 3, "controlplane": 2, "fakegpu": 2,
              "builds": 1, "services": 1, "profiles": 1}
SIM_TIER_MODULES = {"session", "reuse"}  # the sim tier: files of sim/ itself


def sim_room(module: str) -> str | None:
    """The room of a gpu_conformance.sim module ('tiers' for the sim tier's own files), None outside sim/."""
    parts = module.split(".")
    if parts[:2] != ["gpu_conformance", "sim"] or len(parts) < 3:
        return None
    return "tiers" if parts[2] in SIM_TIER_MODULES else parts[2]


def sim_imports_not_downward(graph: dict[str, set[str]]) -> list[str]:
    bad = []
    for me, targets in graph.items():
        mine = sim_room(me)
        if mine is None:
            continue
        for t in targets:
            theirs = sim_room(t)
            if theirs is not None and theirs != mine and SIM_FLOORS[theirs] >= SIM_FLOORS[mine]:
                bad.append(f"{me} -> {t}")
    return sorted(bad)


def test_every_module_of_the_test_bed_stands_in_a_room() -> None:
    rooms = {sim_room(m) for m in import_graph()} - {None}
    assert rooms <= set(SIM_FLOORS), f"place {sorted(rooms - set(SIM_FLOORS))} on a floor in SIM_FLOORS"


def test_the_test_beds_rooms_import_only_downward() -> None:
    assert sim_imports_not_downward(import_graph()) == []


def test_the_room_guard_sees_an_upward_and_a_sideways_import() -> None:
    graph = {"gpu_conformance.sim.services.kube_client": {"gpu_conformance.sim.operator.install"},
             "gpu_conformance.sim.fakegpu.stack": {"gpu_conformance.sim.controlplane.cluster"},
             "gpu_conformance.sim.operator.install": {"gpu_conformance.sim.profiles.catalogue",
                                                      "gpu_conformance.sim.operator.dra"},
             "gpu_conformance.sim.reuse": {"gpu_conformance.sim.session"}}
    assert sim_imports_not_downward(graph) == [
        "gpu_conformance.sim.fakegpu.stack -> gpu_conformance.sim.controlplane.cluster",
        "gpu_conformance.sim.services.kube_client -> gpu_conformance.sim.operator.install"]
