"""Layer 3, deploy-labels: nvidia.com/gpu.deploy.* labels on every GPU node, and DaemonSets placed by them."""

import pytest

from gpu_conformance.model import Layer
from gpu_conformance.plugin import layer_params


@pytest.mark.parametrize("check_id", layer_params(Layer.DEPLOY_LABELS))
def test_deploy_labels(check_id: str, conformance, request) -> None:
    conformance.check(check_id, request)
