"""Layer 2, nfd: which nodes are GPU nodes, by Node Feature Discovery's PCI labels."""

from gpu_conformance.model import Layer

# The plugin parametrizes check_id with this layer's checks from the catalogue (one test per check).
LAYER = Layer.NFD


def test_nfd(check_id: str, conformance, request) -> None:
    conformance.check(check_id, request)
