"""Layer 5, device-plugin: nvidia.com/gpu in capacity and allocatable, GFD labels, RuntimeClasses, CDI."""

import pytest

from gpu_conformance.model import Layer
from gpu_conformance.plugin import layer_params


@pytest.mark.parametrize("check_id", layer_params(Layer.DEVICE_PLUGIN))
def test_device_plugin(check_id: str, conformance, request) -> None:
    conformance.check(check_id, request)
