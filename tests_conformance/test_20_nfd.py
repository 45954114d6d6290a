"""Layer 2, nfd: which nodes are GPU nodes, by Node Feature Discovery's PCI labels."""

import pytest

from gpu_conformance.model import Layer
from gpu_conformance.plugin import layer_params


@pytest.mark.parametrize("check_id", layer_params(Layer.NFD))
def test_nfd(check_id: str, conformance, request) -> None:
    conformance.check(check_id, request)
