"""Layer 6, probe: a pod that requests nvidia.com/gpu with no runtimeClassName really gets a GPU."""

import pytest

from gpu_conformance.model import Layer
from gpu_conformance.plugin import layer_params


@pytest.mark.parametrize("check_id", layer_params(Layer.PROBE))
def test_probe(check_id: str, conformance, request) -> None:
    conformance.check(check_id, request)
