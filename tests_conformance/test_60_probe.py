"""Layer 6, probe: a pod that requests nvidia.com/gpu with no runtimeClassName really gets a GPU."""

from gpu_conformance.model import Layer

# The plugin parametrizes check_id with this layer's checks from the catalogue (one test per check).
LAYER = Layer.PROBE


def test_probe(check_id: str, conformance, request) -> None:
    conformance.check(check_id, request)
