"""deploy/'s nightly CronJob on the kind cluster, as a user applies it: a night run on demand, reports copied out.

What a user does, and what this does:
1. `kubectl apply -f rbac.yaml`, then `kubectl apply -k` an overlay of deploy/ that sets the image (kustomize
   `images:`, like `kustomize edit set image`) and suspends the schedule (a test's nights are started by hand,
   `kubectl create job --from=cronjob/...`; the 02:30 schedule must not add a night of its own);
2. storage for deploy/'s PersistentVolumeClaim, unchanged: the offline node image has no provisioner (kind's
   fallback StorageClass names kubernetes.io/host-path, which kube-controller-manager provisions only with
   --enable-hostpath-provisioner), so the claim gets a `local` PersistentVolume pre-bound to it on one worker,
   as an admin without dynamic provisioning would give it. A local volume honours the Pod's fsGroup, so the
   report folder is writable for the suite's non-root user the way deploy/ makes it on any real volume.
   With a public kind node image (local-path provisioner) the pre-bound volume is used just the same;
3. each night's Job log and exit code, and the volume's contents copied out of the node (`docker cp`).
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from gpu_conformance.sim.kind.cluster import KIND_DIR, KindCluster, KindError

DEPLOY_DIR = KIND_DIR.parent / "deploy"
NAMESPACE = "gpu-conformance"
CRONJOB = "gpu-conformance-nightly"
CLAIM = "gpu-conformance-reports"
VOLUME = "gpu-conformance-reports-kind"
# On the node (a directory in the kind node's container, i.e. under the tier's Docker data root).
NODE_DIR = "/var/lib/gpu-conformance/nightly"
IMAGE_NAME = "gpu-operator-conformance"   # the image name deploy/nightly.yaml uses


@dataclass(frozen=True)
class Night:
    job: str
    exit_code: int
    log: str


def split_image(ref: str) -> tuple[str, str]:
    """kustomize's newName and newTag of an image reference (a registry port is not a tag)."""
    name, sep, tag = ref.rpartition(":")
    if not sep or "/" in tag:
        return ref, "latest"
    return name, tag


def overlay(image: str, at: Path) -> Path:
    """A kustomization in `at` over deploy/: the image set and the schedule suspended."""
    at.mkdir(parents=True, exist_ok=True)
    new_name, new_tag = split_image(image)
    doc = {
        "apiVersion": "kustomize.config.k8s.io/v1beta1",
        "kind": "Kustomization",
        # kustomize refuses absolute paths to a base.
        "resources": [os.path.relpath(DEPLOY_DIR, at)],
        "images": [{"name": IMAGE_NAME, "newName": new_name, "newTag": new_tag}],
        "patches": [{"target": {"kind": "CronJob", "name": CRONJOB},
                     "patch": yaml.safe_dump([{"op": "add", "path": "/spec/suspend", "value": True}])}],
    }
    (at / "kustomization.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
    return at


def _default_storage_class(cluster: KindCluster) -> str:
    for sc in json.loads(cluster.kubectl("get", "storageclass", "-o", "json"))["items"]:
        ann = sc["metadata"].get("annotations") or {}
        if ann.get("storageclass.kubernetes.io/is-default-class") == "true":
            return str(sc["metadata"]["name"])
    return ""


def volume(node: str, storage_class: str) -> dict[str, object]:
    """The local PersistentVolume pre-bound to deploy/'s claim (its storage class is what the claim gets)."""
    return {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": VOLUME},
            "spec": {"capacity": {"storage": "2Gi"}, "accessModes": ["ReadWriteOnce"],
                     "persistentVolumeReclaimPolicy": "Retain", "storageClassName": storage_class,
                     "claimRef": {"namespace": NAMESPACE, "name": CLAIM},
                     "local": {"path": NODE_DIR},
                     "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                         {"key": "kubernetes.io/hostname", "operator": "In", "values": [node]}]}]}}}}


@dataclass
class KindNightly:
    cluster: KindCluster
    image: str
    node: str = ""
    _overlay: Path | None = None
    _jobs: list[str] = field(default_factory=list)

    def install(self) -> KindNightly:
        """rbac.yaml, the volume on the first GPU worker, and `kubectl apply -k` of the overlay."""
        c = self.cluster
        assert c.docker is not None
        self.node = c.gpu_nodes()[0]
        # A local volume's path must exist; empty, so an earlier run's nights are no baseline.
        c.docker.docker("exec", self.node, "sh", "-ec", f"rm -rf {NODE_DIR}; mkdir -p {NODE_DIR}")
        c.kubectl("apply", "-f", str(KIND_DIR.parent / "rbac.yaml"))
        c.kubectl("apply", "-f", "-", input=yaml.safe_dump(volume(self.node, _default_storage_class(c))))
        self._overlay = overlay(self.image, Path(tempfile.mkdtemp(prefix="nightly-overlay-", dir=c.work)))
        c.kubectl("apply", "-k", str(self._overlay))
        c.kubectl("wait", "-n", NAMESPACE, "--for=jsonpath={.status.phase}=Bound", f"pvc/{CLAIM}", "--timeout=60s")
        return self

    def run(self, job: str, timeout: float = 600.0) -> Night:
        """One night: a Job from the CronJob, waited for; its exit code and log."""
        c = self.cluster
        c.kubectl("create", "job", "-n", NAMESPACE, f"--from=cronjob/{CRONJOB}", job)
        self._jobs.append(job)
        deadline = time.monotonic() + timeout
        while True:
            pods = json.loads(c.kubectl("get", "pods", "-n", NAMESPACE, "-l", f"job-name={job}", "-o",
                                        "json"))["items"]
            term = [cs["state"]["terminated"] for p in pods for cs in p["status"].get("containerStatuses") or []
                    if cs.get("state", {}).get("terminated")]
            if term:
                break
            if time.monotonic() > deadline:
                raise KindError(f"the nightly Job {job} did not finish in {timeout:.0f} s:\n"
                                f"{c.kubectl('get', 'pods', '-n', NAMESPACE, '-o', 'wide')}")
            time.sleep(2)
        return Night(job, int(term[0]["exitCode"]), c.kubectl("logs", "-n", NAMESPACE, f"job/{job}"))

    def copy_reports(self, out: Path) -> Path:
        """The report volume's contents (one folder per night, history.html) copied to `out`."""
        assert self.cluster.docker is not None
        out.mkdir(parents=True, exist_ok=True)
        self.cluster.docker.docker("cp", f"{self.node}:{NODE_DIR}/.", str(out))
        return out

    def uninstall(self) -> None:
        """Everything install made but rbac.yaml's objects (the suite Job shares them)."""
        c = self.cluster
        if self._jobs:
            c.kubectl("delete", "jobs", "-n", NAMESPACE, *self._jobs, "--ignore-not-found", "--wait")
            self._jobs.clear()
        if self._overlay is not None:
            c.kubectl("delete", "-k", str(self._overlay), "--ignore-not-found", "--wait")
        c.kubectl("delete", "pv", VOLUME, "--ignore-not-found", "--wait")
        if self.node and c.docker is not None:
            c.docker.docker("exec", self.node, "rm", "-rf", NODE_DIR, check=False)
