"""rbac.yaml is enough to run the suite (probe included), grants nothing more, and a missing permission is named.

Least privilege is checked on the real API server of the simulated cluster, as the ServiceAccount, with
server-side dry runs of what the old cluster-wide probe role allowed: deleting kube-system, creating a pod
in another namespace running as another ServiceAccount with the host's filesystem mounted.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest
import yaml
from kubernetes import config as kube_config
from kubernetes.client.exceptions import ApiException

from gpu_conformance.errors import ClusterAccessError
from gpu_conformance.probe.claims import RESOURCE_API, template_manifest
from gpu_conformance.probe.manifests import RUN_LABEL, SHARED_NAMESPACE
from gpu_conformance.sim.services.kube_client import Kube

pytestmark = pytest.mark.sim
REPO = Path(__file__).resolve().parents[1]
RBAC = REPO / "rbac.yaml"
_PATHS = {"Namespace": "/api/v1/namespaces",
          "ServiceAccount": "/api/v1/namespaces/{ns}/serviceaccounts",
          "ClusterRole": "/apis/rbac.authorization.k8s.io/v1/clusterroles",
          "ClusterRoleBinding": "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
          "Role": "/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/roles",
          "RoleBinding": "/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/rolebindings"}
BINDINGS = ("ClusterRoleBinding", "RoleBinding")


def token_kubeconfig(admin_kubeconfig: Path, token: str, out: Path) -> Path:
    cfg = yaml.safe_load(admin_kubeconfig.read_text())
    cfg["users"] = [{"name": "sa", "user": {"token": token}}]
    for c in cfg["contexts"]:
        c["context"]["user"] = "sa"
    out.write_text(yaml.safe_dump(cfg))
    return out


def apply(kube: Kube, doc: dict) -> None:
    kube.request("POST", _PATHS[doc["kind"]].format(ns=doc["metadata"].get("namespace", "")), doc)


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


def denied(kube: Kube, method: str, path: str, body: dict | None = None) -> str:
    """The API's refusal of a server-side dry run (nothing is changed even if it were allowed)."""
    try:
        kube.request(method, path, body, query=[("dryRun", "All")])
    except ApiException as e:
        assert e.status in (403, 422), (e.status, e.body)
        return json.loads(e.body)["message"]
    pytest.fail(f"{method} {path} was allowed")


def escalation_pod(namespace: str, service_account: str) -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "escalate", "namespace": namespace},
            "spec": {"serviceAccountName": service_account,
                     "containers": [{"name": "c", "image": "busybox", "volumeMounts": [{"name": "host",
                                                                                         "mountPath": "/host"}]}],
                     "volumes": [{"name": "host", "hostPath": {"path": "/"}}]}}


def test_service_account_with_rbac_yaml_runs_the_suite_and_nothing_more(tmp_path: Path) -> None:
    from gpu_conformance.sim.session import start_sim

    booted = start_sim(quiet=True)
    try:
        admin = Kube(booted.cluster.api_client())
        docs = [d for d in yaml.safe_load_all(RBAC.read_text()) if d]
        for d in docs:
            if d["kind"] not in BINDINGS:
                apply(admin, d)
        tok = admin.request("POST", "/api/v1/namespaces/gpu-conformance/serviceaccounts/gpu-conformance/token",
                            {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                             "spec": {"expirationSeconds": 3600}})["status"]["token"]
        assert json.loads(base64.urlsafe_b64decode(tok.split(".")[1] + "==")).get("sub", "").endswith(
            ":gpu-conformance")
        kc = token_kubeconfig(booted.kubeconfig, tok, tmp_path / "sa-kubeconfig")

        # Without the bindings: one clear line naming verb and resource.
        with pytest.raises(ClusterAccessError, match=r"missing permissions: .*list nodes"):
            run(kc, tmp_path)
        apply(admin, next(d for d in docs if d["kind"] == "ClusterRoleBinding"))
        # Reader only: the probe's permissions in its namespace are named, and --no-probe runs read-only.
        with pytest.raises(ClusterAccessError, match=rf"probe: create pods in namespace {SHARED_NAMESPACE}"):
            run(kc, tmp_path)
        assert run(kc, tmp_path, no_probe=True)["verdict"] == "INCOMPLETE"
        apply(admin, next(d for d in docs if d["kind"] == "RoleBinding"))

        data = run(kc, tmp_path)
        assert data["verdict"] == "CONFORMANT", [(c["id"], c["reason"]) for c in data["checks"]
                                                 if c["status"] != "pass"]
        probe = data["probe"]
        assert (probe["namespace"], probe["mode"], probe["deleted"]) == (SHARED_NAMESPACE, "shared", True)
        assert len(probe["pods"]) == 3 and {p["phase"] for p in probe["pods"]} == {"Succeeded"}
        left = [p for p in admin.list("Pod", SHARED_NAMESPACE, label_selector=f"{RUN_LABEL}={data['run_id']}")
                if not p["metadata"].get("deletionTimestamp")]
        assert left == []
        assert run(kc, tmp_path, probe_namespace=SHARED_NAMESPACE)["verdict"] == "CONFORMANT"

        # Nothing more: what the old cluster-wide probe role allowed is refused (server-side dry runs).
        sa = Kube(kube_config.new_client_from_config(config_file=str(kc)))
        assert "cannot delete resource" in denied(sa, "DELETE", "/api/v1/namespaces/kube-system")
        assert "cannot create resource" in denied(sa, "POST", "/api/v1/namespaces",
                                                  {"apiVersion": "v1", "kind": "Namespace",
                                                   "metadata": {"name": "mine"}})
        assert "cannot create resource" in denied(sa, "POST", "/api/v1/namespaces/gpu-operator/pods",
                                                  escalation_pod("gpu-operator", "gpu-operator"))
        # In its own namespace the pod may not mount the host either (Pod Security baseline).
        assert "hostPath" in denied(sa, "POST", f"/api/v1/namespaces/{SHARED_NAMESPACE}/pods",
                                    escalation_pod(SHARED_NAMESPACE, "default"))
        assert "cannot create resource" in denied(
            sa, "POST", f"/apis/rbac.authorization.k8s.io/v1/namespaces/{SHARED_NAMESPACE}/rolebindings",
            {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
             "metadata": {"name": "x", "namespace": SHARED_NAMESPACE},
             "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
             "subjects": [{"kind": "ServiceAccount", "name": "gpu-conformance", "namespace": "gpu-conformance"}]})
        # The DRA models' probe: its ResourceClaimTemplate in its namespace (server-side dry run), nowhere else.
        template = template_manifest("gpu-conformance-probe-x", {}, {}, 1)
        sa.request("POST", f"{RESOURCE_API}/namespaces/{SHARED_NAMESPACE}/resourceclaimtemplates", template,
                   query=[("dryRun", "All")])
        assert "cannot create resource" in denied(sa, "POST", f"{RESOURCE_API}/namespaces/gpu-operator/"
                                                  "resourceclaimtemplates", template)
        sa.request("GET", f"{RESOURCE_API}/namespaces/{SHARED_NAMESPACE}/resourceclaims")
    finally:
        booted.stop()
