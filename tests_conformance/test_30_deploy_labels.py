"""Layer 3, deploy-labels: nvidia.com/gpu.deploy.* labels on every GPU node, and DaemonSets placed by them."""

from gpu_conformance.model import Layer

# The plugin parametrizes check_id with this layer's checks from the catalogue (one test per check).
LAYER = Layer.DEPLOY_LABELS


def test_deploy_labels(check_id: str, conformance, request) -> None:
    conformance.check(check_id, request)
