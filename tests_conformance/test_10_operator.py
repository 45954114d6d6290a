"""Layer 1, operator: the GPU Operator: ClusterPolicy CRD and object, operator Deployment, operand DaemonSets."""

from gpu_conformance.model import Layer

# The plugin parametrizes check_id with this layer's checks from the catalogue (one test per check).
LAYER = Layer.OPERATOR


def test_operator(check_id: str, conformance, request) -> None:
    conformance.check(check_id, request)
