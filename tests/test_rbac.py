"""rbac.yaml is enough to run the suite, and a missing permission is named once as verb and resource."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest
import yaml

from gpu_conformance.errors import ClusterAccessError
from gpu_conformance.sim.reconcile import Kube

pytestmark = pytest.mark.sim
REPO = Path(__file__).resolve().parents[1]
RBAC = REPO / "rbac.yaml"
_PATHS = {"Namespace": "/api/v1/namespaces",
          "ServiceAccount": "/api/v1/namespaces/gpu-conformance/serviceaccounts",
          "ClusterRole": "/apis/rbac.authorization.k8s.io/v1/clusterroles",
          "ClusterRoleBinding": "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings"}


def token_kubeconfig(admin_kubeconfig: Path, token: str, out: Path) -> Path:
    cfg = yaml.safe_load(admin_kubeconfig.read_text())
    cfg["users"] = [{"name": "sa", "user": {"token": token}}]
    for c in cfg["contexts"]:
        c["context"]["user"] = "sa"
    out.write_text(yaml.safe_dump(cfg))
    return out


def run(kubeconfig: Path, tmp_path: Path, **kw) -> dict:
    from gpu_conformance.session import ConformanceRun
    from gpu_conformance.settings import Settings

    run = ConformanceRun(Settings(kubeconfig=str(kubeconfig), report_dir=str(tmp_path), probe_timeout=60,
                                  **kw).validate(), "current")
    try:
        run.start()
        run.run_probe()
        return run.result().to_json_dict()
    finally:
        run.close()


def test_service_account_with_rbac_yaml_runs_the_suite(tmp_path: Path) -> None:
    from gpu_conformance.sim.session import start_sim

    booted = start_sim(quiet=True)
    try:
        kube = Kube(booted.cluster.api_client())
        docs = [d for d in yaml.safe_load_all(RBAC.read_text()) if d]
        for d in docs:
            if d["kind"] != "ClusterRoleBinding":
                kube.request("POST", _PATHS[d["kind"]], d)
        tok = kube.request("POST", "/api/v1/namespaces/gpu-conformance/serviceaccounts/gpu-conformance/token",
                           {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                            "spec": {"expirationSeconds": 3600}})["status"]["token"]
        assert json.loads(base64.urlsafe_b64decode(tok.split(".")[1] + "==")).get("sub", "").endswith(
            ":gpu-conformance")
        kc = token_kubeconfig(booted.kubeconfig, tok, tmp_path / "sa-kubeconfig")

        # Without the bindings: one clear line naming verb and resource.
        with pytest.raises(ClusterAccessError, match=r"missing permissions: .*list nodes"):
            run(kc, tmp_path)
        reader = next(d for d in docs if d["kind"] == "ClusterRoleBinding" and d["metadata"]["name"].endswith(
            "reader"))
        kube.request("POST", _PATHS["ClusterRoleBinding"], reader)
        # Reader only: the probe's permissions are named, and --no-probe runs read-only.
        with pytest.raises(ClusterAccessError, match=r"probe: create namespaces"):
            run(kc, tmp_path)
        assert run(kc, tmp_path, no_probe=True)["verdict"] == "INCOMPLETE"
        probe = next(d for d in docs if d["kind"] == "ClusterRoleBinding" and d["metadata"]["name"].endswith("probe"))
        kube.request("POST", _PATHS["ClusterRoleBinding"], probe)
        data = run(kc, tmp_path)
        assert data["verdict"] == "CONFORMANT", [(c["id"], c["reason"]) for c in data["checks"]
                                                 if c["status"] != "pass"]
    finally:
        booted.stop()
