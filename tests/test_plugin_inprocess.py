"""The pytest plugin in-process (pytester): no exit code or subprocess needed to see how it treats a session."""

from __future__ import annotations

import pytest

from gpu_conformance import catalogue
from gpu_conformance.model import Layer

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


def test_session_state_is_one_object(pytester: pytest.Pytester) -> None:
    # No private config attributes: what a session holds is the plugin's SessionState.
    pytester.makeconftest("""
from gpu_conformance.plugin import SessionState, state

def pytest_sessionfinish(session):
    st = state(session.config)
    assert isinstance(st, SessionState) and st.run is None and st.error is None
    assert not [a for a in vars(session.config) if a.startswith("_gpu")]
    print("STATE-OK")
""")
    pytester.makepyfile(test_layer=LAYER_MODULE)
    result = pytester.runpytest_inprocess("-s")
    result.stdout.fnmatch_lines(["*STATE-OK*"])
