"""deploy/ is accepted by a real kube-apiserver: server-side dry run of the CronJob, its PVC and its ConfigMap,
its pod admitted under Pod Security "restricted", run as rbac.yaml's ServiceAccount.

Static facts first (no cluster): the schedule semantics the issue asks for. Then the simulated cluster's
kube-apiserver v1.36.3 validates the objects as `kubectl apply -k deploy/ --dry-run=server` (kubectl's own
kustomize turns nightly-entrypoint.sh into the ConfigMap).
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]
DEPLOY = REPO / "deploy"
SA = "system:serviceaccount:gpu-conformance:gpu-conformance"


def cronjob(docs: list[dict[str, Any]]) -> dict[str, Any]:
    return next(d for d in docs if d["kind"] == "CronJob")


def test_cronjob_static_facts() -> None:
    docs = [d for d in yaml.safe_load_all((DEPLOY / "nightly.yaml").read_text()) if d]
    cj = cronjob(docs)
    spec = cj["spec"]
    assert spec["concurrencyPolicy"] == "Forbid"
    job = spec["jobTemplate"]["spec"]
    assert 0 < job["activeDeadlineSeconds"] <= 3600 and job["backoffLimit"] == 0
    pod = job["template"]["spec"]
    assert pod["serviceAccountName"] == "gpu-conformance" and pod["restartPolicy"] == "Never"
    [c] = pod["containers"]
    assert c["command"] == ["/bin/sh", "/nightly/nightly-entrypoint.sh"]
    # The suite's run, in the --option=VALUE form (a bare `--cluster tests_conformance` would take the path
    # as its target), on the conformance modules only.
    assert c["args"][0] == "pytest" and "--cluster=current" in c["args"] and c["args"][-1] == "tests_conformance"
    env = {e["name"]: e["value"] for e in c["env"]}
    mounts = {m["name"]: m["mountPath"] for m in c["volumeMounts"]}
    assert env["GPU_CONFORMANCE_REPORTS"] == mounts["reports"]
    volumes = {v["name"]: v for v in pod["volumes"]}
    pvc = next(d for d in docs if d["kind"] == "PersistentVolumeClaim")
    assert volumes["reports"]["persistentVolumeClaim"]["claimName"] == pvc["metadata"]["name"]
    # The service account of rbac.yaml, in its namespace.
    rbac = [d for d in yaml.safe_load_all((REPO / "rbac.yaml").read_text()) if d]
    sa = next(d for d in rbac if d["kind"] == "ServiceAccount")
    assert (sa["metadata"]["name"], sa["metadata"]["namespace"]) == ("gpu-conformance", cj["metadata"]["namespace"])


@pytest.fixture(scope="module")
def kubectl() -> Iterator[list[str]]:
    from gpu_conformance.sim.builds.binaries import ensure_binaries
    from gpu_conformance.sim.session import start_sim

    booted = start_sim(gpu_nodes=1, cpu_nodes=0, quiet=True)
    try:
        yield [str(ensure_binaries() / "kubectl"), f"--kubeconfig={booted.kubeconfig}"]
    finally:
        booted.stop()


def kc(kubectl: list[str], *args: str, stdin: str | None = None, ok: bool = True) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([*kubectl, *args], input=stdin, capture_output=True, text=True, timeout=120, check=False)
    if ok:
        assert proc.returncode == 0, (args, proc.stderr)
    return proc


@pytest.mark.sim
def test_server_side_dry_run(kubectl: list[str], tmp_path: Path) -> None:
    kc(kubectl, "apply", "-f", str(REPO / "rbac.yaml"))
    out = json.loads(kc(kubectl, "apply", "-k", str(DEPLOY), "--dry-run=server", "-o", "json").stdout)
    objs = {o["kind"]: o for o in out["items"]}
    assert set(objs) == {"ConfigMap", "PersistentVolumeClaim", "CronJob"}
    # The server filled in its defaults and kept ours.
    cj = objs["CronJob"]
    assert cj["metadata"]["namespace"] == "gpu-conformance"
    assert cj["spec"]["concurrencyPolicy"] == "Forbid" and cj["spec"]["timeZone"] == "Etc/UTC"
    assert cj["spec"]["jobTemplate"]["spec"]["activeDeadlineSeconds"] == 1800
    # The ConfigMap is the script, byte for byte, under the hashed name the CronJob mounts.
    cm = objs["ConfigMap"]
    assert cm["data"]["nightly-entrypoint.sh"] == (DEPLOY / "nightly-entrypoint.sh").read_text()
    volumes = {v["name"]: v for v in cj["spec"]["jobTemplate"]["spec"]["template"]["spec"]["volumes"]}
    assert volumes["entrypoint"]["configMap"]["name"] == cm["metadata"]["name"] != "gpu-conformance-nightly"

    # The dry run really validates: a wrong concurrencyPolicy is refused by the API server.
    rendered = kc(kubectl, "kustomize", str(DEPLOY)).stdout
    broken = rendered.replace("concurrencyPolicy: Forbid", "concurrencyPolicy: Sometimes")
    assert broken != rendered
    proc = kc(kubectl, "apply", "--dry-run=server", "-f", "-", stdin=broken, ok=False)
    assert proc.returncode != 0 and "concurrencyPolicy" in proc.stderr, proc.stderr


@pytest.mark.sim
def test_pod_admitted_under_restricted_pod_security(kubectl: list[str]) -> None:
    kc(kubectl, "apply", "-f", str(REPO / "rbac.yaml"))
    kc(kubectl, "label", "--overwrite", "namespace", "gpu-conformance", "pod-security.kubernetes.io/enforce=restricted")
    docs = [d for d in yaml.safe_load_all(kc(kubectl, "kustomize", str(DEPLOY)).stdout) if d]
    template = cronjob(docs)["spec"]["jobTemplate"]["spec"]["template"]
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "nightly-admission", "namespace": "gpu-conformance",
                                                           "labels": template["metadata"]["labels"]},
           "spec": template["spec"]}
    kc(kubectl, "create", "--dry-run=server", "-f", "-", stdin=json.dumps(pod))
    # Control: the same pod without its container securityContext is refused, so admission did judge it.
    del pod["spec"]["containers"][0]["securityContext"]
    proc = kc(kubectl, "create", "--dry-run=server", "-f", "-", stdin=json.dumps(pod), ok=False)
    assert proc.returncode != 0 and 'violates PodSecurity "restricted' in proc.stderr, proc.stderr


@pytest.mark.sim
def test_service_account_reads_and_cannot_manage(kubectl: list[str]) -> None:
    kc(kubectl, "apply", "-f", str(REPO / "rbac.yaml"))

    def can(*args: str) -> str:
        return kc(kubectl, "auth", "can-i", *args, f"--as={SA}", ok=False).stdout.strip()

    assert can("list", "nodes") == "yes"
    assert can("list", "clusterpolicies.nvidia.com") == "yes"
    # Least privilege: the nightly cannot change its own schedule, volume or script, nor any node.
    for verb, what in (("create", "cronjobs.batch"), ("delete", "persistentvolumeclaims"), ("patch", "configmaps"),
                       ("patch", "nodes"), ("get", "secrets")):
        assert can(verb, what, "-n", "gpu-conformance") == "no", (verb, what)
