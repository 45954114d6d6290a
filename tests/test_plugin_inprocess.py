"""The pytest plugin in-process (pytester): no exit code or subprocess needed to see how it treats a session."""

from __future__ import annotations

import json

import pytest

from gpu_conformance import catalogue
from gpu_conformance.model import Layer
from gpu_conformance.session import ConformanceRun

LAYER_MODULE = """
import pytest
from gpu_conformance.model import Layer
from gpu_conformance.plugin import layer_params

@pytest.mark.parametrize("check_id", layer_params(Layer.OPERATOR))
def test_operator(check_id, conformance, request):
    conformance.check(check_id, request)
"""


def test_without_cluster_every_check_skips_and_says_how_to_run(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_layer=LAYER_MODULE)
    result = pytester.runpytest_inprocess("-rs")
    result.assert_outcomes(skipped=len(catalogue.checks_for(Layer.OPERATOR)))
    result.stdout.fnmatch_lines(["*pytest --cluster*"])


def test_unknown_target_is_refused_in_one_line(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_layer=LAYER_MODULE)
    result = pytester.runpytest_inprocess("--cluster=nowhere")
    assert result.ret != 0
    assert "unknown target 'nowhere'" in result.stdout.str() + result.stderr.str()


def test_without_cluster_no_session_object_is_registered(pytester: pytest.Pytester) -> None:
    pytester.makeconftest("""
from gpu_conformance.plugin import session_of

def pytest_sessionfinish(session):
    assert session_of(session.config) is None
    print("NO-SESSION-OK")
""")
    pytester.makepyfile(test_layer=LAYER_MODULE)
    result = pytester.runpytest_inprocess("-s")
    result.stdout.fnmatch_lines(["*NO-SESSION-OK*"])


def test_cluster_session_is_one_registered_plugin_object(pytester: pytest.Pytester) -> None:
    # No stash, no private config attributes: what a session holds is the object registered under PLUGIN_NAME,
    # from pytest_configure to pytest_unconfigure. An unreadable kubeconfig ends it before any test runs.
    pytester.makeconftest("""
import pytest
from gpu_conformance.plugin import PLUGIN_NAME, ConformanceSession, session_of

def pytest_sessionfinish(session):
    s = session_of(session.config)
    assert isinstance(s, ConformanceSession) and s is session.config.pluginmanager.get_plugin(PLUGIN_NAME)
    assert s.settings.kubeconfig.endswith("missing-kubeconfig") and s.run is None
    assert "missing-kubeconfig" in str(s.error)
    assert not [a for a in vars(session.config) if a.startswith("_gpu")]
    print("SESSION-OK")

@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config):
    assert session_of(config) is None
    print("UNREGISTERED-OK")
""")
    pytester.makepyfile(test_layer=LAYER_MODULE)
    reports = pytester.path / "reports"
    result = pytester.runpytest_inprocess("-s", "--cluster", f"--kubeconfig={pytester.path / 'missing-kubeconfig'}",
                                          f"--report-dir={reports}", "-p", "no:cacheprovider")
    result.stdout.fnmatch_lines(["*SESSION-OK*", "*UNREGISTERED-OK*"])
    assert result.ret not in (0, 1)  # the error's own exit code, not a test outcome
    # The failed run still leaves reports that say so.
    assert (reports / "conformance.json").is_file()


def test_a_run_writes_verdict_and_evidence_to_every_report(pytester: pytest.Pytester,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    # The in-process conftest below replaces ConformanceRun.start in this very process: put it back after the
    # test (left replaced, every later test's run read no cluster: 33 failures in a full run).
    monkeypatch.setattr(ConformanceRun, "start", ConformanceRun.start)
    # The cluster read is replaced by factory data: the plugin object, the reports and the pytest-html / allure
    # integration (pytest_reporting) run as in a real session.
    pytester.makeconftest("""
import factory
from gpu_conformance.session import ConformanceRun

def start(self):
    self.judge_read(factory.healthy_snapshot())

ConformanceRun.start = start
""")
    pytester.makepyfile(test_layer=LAYER_MODULE)
    reports = pytester.path / "reports"
    result = pytester.runpytest_inprocess("--cluster", f"--report-dir={reports}", "-p", "no:cacheprovider")
    n = len(catalogue.checks_for(Layer.OPERATOR))
    # OPR-008 judges a GPUCluster: n/a (skipped) in this device-plugin cluster.
    result.assert_outcomes(passed=n - 1, skipped=1)
    # One layer selected: the verdict cannot speak for the others.
    result.stdout.fnmatch_lines(["*GPU Operator conformance*", "*verdict: INCOMPLETE*"])
    assert json.loads((reports / "conformance.json").read_text())["verdict"] == "INCOMPLETE"
    assert 'check_id" value="OPR-001"' in (reports / "junit.xml").read_text().replace("'", '"')
    assert "evidence" in (reports / "pytest.html").read_text()
    allure = [json.loads(p.read_text()) for p in (reports / "allure-results").glob("*-result.json")]
    assert len(allure) == n
    opr1 = next(r for r in allure if r["name"].startswith("OPR-001 "))
    assert {"name": "layer", "value": "operator"} in opr1["labels"]
    assert opr1["steps"][0]["attachments"][0]["name"] == "OPR-001 evidence"
