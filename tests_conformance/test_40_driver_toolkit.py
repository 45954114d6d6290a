"""Layer 4, driver-toolkit: the driver (operator container or host), the toolkit, the validator chain."""

import pytest

from gpu_conformance.model import Layer
from gpu_conformance.plugin import layer_params


@pytest.mark.parametrize("check_id", layer_params(Layer.DRIVER_TOOLKIT))
def test_driver_toolkit(check_id: str, conformance, request) -> None:
    conformance.check(check_id, request)
