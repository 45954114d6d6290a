"""Layer 4, driver-toolkit: the driver (operator container or host), the toolkit, the validator chain."""

from gpu_conformance.model import Layer

# The plugin parametrizes check_id with this layer's checks from the catalogue (one test per check).
LAYER = Layer.DRIVER_TOOLKIT


def test_driver_toolkit(check_id: str, conformance, request) -> None:
    conformance.check(check_id, request)
