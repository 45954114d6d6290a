"""pytest-html and allure integration of the pytest plugin: default output paths and each check's evidence.

Both report plugins are dependencies, but a trimmed install (or `-p no:html`, `-p no:allure_pytest`) still runs
and writes conformance.json/html: the only error handled here is the plugin's package being absent.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from gpu_conformance.model import Check
    from gpu_conformance.verdict import CheckOutcome

# A check's redacted evidence, from the test that judged it to the report hook that shows it in pytest.html.
EVIDENCE_KEY = pytest.StashKey[list[dict[str, Any]]]()


def default_report_paths(config: pytest.Config, report_dir: Path) -> None:
    """Every run writes all machine formats next to our own report unless the user chose otherwise.

    Runs in pytest_configure before junitxml's, pytest-html's and allure's own configure read these options;
    an option is absent when its plugin is not installed or is disabled with -p no:...
    """
    if getattr(config.option, "xmlpath", None) is None:
        config.option.xmlpath = str(report_dir / "junit.xml")
    if hasattr(config.option, "htmlpath") and not config.option.htmlpath:
        config.option.htmlpath = str(report_dir / "pytest.html")
        config.option.self_contained_html = True
    if hasattr(config.option, "allure_report_dir") and not config.option.allure_report_dir:
        config.option.allure_report_dir = str(report_dir / "allure-results")


def attach_evidence(request: pytest.FixtureRequest | None, check: Check, outcome: CheckOutcome,
                    evidence: list[dict[str, Any]]) -> None:
    """A check's evidence for junit (user property), pytest-html (kept for add_html_evidence) and allure."""
    from gpu_conformance.report.redact import redact

    safe = redact(evidence)
    if request is not None:
        request.node.user_properties.append(("check_id", check.id))
        request.node.stash[EVIDENCE_KEY] = safe
    try:
        import allure
    except ImportError:  # allure-pytest not installed: nothing to label
        return
    # Without --alluredir these calls reach no listener and do nothing.
    allure.dynamic.label("layer", str(check.layer))
    allure.dynamic.tag(check.id)
    allure.dynamic.title(f"{check.id} {check.title}")
    allure.dynamic.description(check.hint)
    for node in sorted({f["node"] for f in safe if f.get("node")})[:50]:
        allure.dynamic.label("node", node)
    with allure.step(f"layer {check.layer}: {check.id} → {outcome.status}"):
        allure.attach(json.dumps(safe, indent=2, default=str), name=f"{check.id} evidence",
                      attachment_type=allure.attachment_type.JSON)


def add_html_evidence(item: pytest.Item, report: pytest.TestReport) -> None:
    """The call report of a check's test carries its evidence as a pytest-html JSON extra."""
    evidence = item.stash.get(EVIDENCE_KEY, None)
    if evidence is None or report.when != "call":
        return
    try:
        from pytest_html import extras
    except ImportError:  # pytest-html not installed: no pytest.html to show it in
        return
    report.extras = [*getattr(report, "extras", []), extras.json(evidence, name="evidence")]
