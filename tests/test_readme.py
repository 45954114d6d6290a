"""The README's tables are generated from the catalogue and the fault list; they must not drift."""

from gpu_conformance import catalogue, docs
from gpu_conformance.sim.operator.faults import FAULTS


def test_readme_tables_are_current() -> None:
    text = docs.README.read_text()
    assert docs.render(text) == text, "README tables are stale: run python -m gpu_conformance.docs"
    for c in catalogue.all_checks():
        assert f"`{c.id}`" in text
    for name in FAULTS:
        assert f"`{name}`" in text


def test_readme_first_screen_has_the_two_commands() -> None:
    first = docs.README.read_text()[:2500]
    assert ".venv/bin/pytest --cluster=sim" in first
    assert "pip install -e '.[dev]' && .venv/bin/pytest -n auto\n" in first
    ci = (docs.README.parent / ".ci" / "run").read_text()
    # CI runs the README's test commands, nothing cleverer: the fast tier (parallel workers) and the slow tiers.
    assert "\n.venv/bin/pytest -n auto\n" in ci and "`.venv/bin/pytest --tiers=slow -n auto`" in first
    assert "\n.venv/bin/pytest --tiers=slow -n auto\n" in ci
