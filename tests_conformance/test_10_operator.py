"""Layer 1, operator: the GPU Operator: ClusterPolicy CRD and object, operator Deployment, operand DaemonSets."""

import pytest

from gpu_conformance.model import Layer
from gpu_conformance.plugin import layer_params


@pytest.mark.parametrize("check_id", layer_params(Layer.OPERATOR))
def test_operator(check_id: str, conformance, request) -> None:
    conformance.check(check_id, request)
