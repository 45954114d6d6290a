"""Layer 5, device-plugin: nvidia.com/gpu in capacity and allocatable, GFD labels, RuntimeClasses, CDI."""

from gpu_conformance.model import Layer

# The plugin parametrizes check_id with this layer's checks from the catalogue (one test per check).
LAYER = Layer.DEVICE_PLUGIN


def test_device_plugin(check_id: str, conformance, request) -> None:
    conformance.check(check_id, request)
