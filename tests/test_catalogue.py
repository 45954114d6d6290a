"""Every check in the one catalogue is complete: layer, title, hint, what it catches, a read-only command."""

import pytest

from gpu_conformance import catalogue
from gpu_conformance.model import LAYER_ORDER

PREFIX = {"operator": "OPR-", "nfd": "NFD-", "deploy-labels": "LBL-", "driver-toolkit": "DRV-",
          "device-plugin": "DPL-", "probe": "PRB-"}


@pytest.mark.parametrize("check", catalogue.all_checks(), ids=lambda c: c.id)
def test_check_is_complete(check) -> None:
    assert check.id.startswith(PREFIX[str(check.layer)])
    assert check.title and check.hint and check.detects
    cmd = check.render_kubectl("nv-ops", "gpu-node-9")
    assert cmd.startswith("kubectl ") and "{{" not in cmd and "{ns}" not in cmd and "{node}" not in cmd
    assert not any(verb in cmd.split() for verb in ("delete", "apply", "patch", "edit", "label", "annotate"))


def test_catalogue_is_in_layer_order_and_every_layer_has_checks() -> None:
    layers = [c.layer for c in catalogue.all_checks()]
    assert layers == sorted(layers, key=LAYER_ORDER.index)
    assert set(layers) == set(LAYER_ORDER)
