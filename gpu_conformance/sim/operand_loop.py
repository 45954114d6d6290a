"""What the operand programs do on a node, for operand pods whoever created them (the real operator's).

kwok runs the pods but not the programs in them. This loop plays their effects on the cluster, each
tied to the life of the pod that causes it:

* the device plugin's pod runs on a GPU node -> kubelet advertises the node's GPU resources; the pod is
  gone -> the resources become unallocatable (allocatable 0, capacity kept, as kubelet does when a plugin
  unregisters);
* GFD's pod runs -> the GFD labels (the operator then deploys mig-manager on MIG-capable GPUs);
* mig-manager's pod runs -> nvidia.com/mig.config.state=success;
* the validator's pod runs -> its cuda-validation creates an nvidia-cuda-validator pod on the node,
  which completes.

Effects fire on changes (a new pod uid, a pod gone), never as a level every round, so a fault that
changes a node's resources or labels afterwards stays as the fault left it.

    python -m gpu_conformance.sim.operand_loop --kubeconfig K --namespace NS --profile P
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from types import FrameType
from typing import Any

from kubernetes.client.exceptions import ApiException

from gpu_conformance import operands as op
from gpu_conformance.sim import install as inst
from gpu_conformance.sim.profiles import Profile, get_profile

Obj = dict[str, Any]


def _running(pod: Obj) -> bool:
    return (pod.get("status") or {}).get("phase") == "Running" and not pod["metadata"].get("deletionTimestamp")


def _gpu_node_names(nodes: list[Obj]) -> list[str]:
    return sorted(n["metadata"]["name"] for n in nodes
                  if (n["metadata"].get("labels") or {}).get(inst.NFD_PCI_LABEL) == "true")


class OperandSim:
    """One instance per cluster; step() is one round (also used in-process by tests)."""

    def __init__(self, kube: Any, profile: Profile, namespace: str) -> None:
        self.kube = kube
        self.profile = profile
        self.ns = namespace
        self.advertised: dict[str, str] = {}       # node -> device-plugin pod uid whose resources are in
        self.labelled: dict[tuple[str, str], str] = {}  # (node, operand key) -> pod uid
        self.cuda_for: dict[str, str] = {}         # node -> validator pod uid that created its cuda pod
        self.completed: set[str] = set()           # cuda validator pod uids completed

    def _clusterpolicy_uid(self) -> str | None:
        with contextlib.suppress(ApiException):
            cps = self.kube.list("ClusterPolicy")
            if cps:
                return min(cps, key=lambda c: c["metadata"].get("creationTimestamp", ""))["metadata"]["uid"]
        return None

    def step(self) -> int:
        """One round; returns how many effects it applied."""
        nodes = self.kube.list("Node")
        names = _gpu_node_names(nodes)
        # Hardware by node index, as the hand-written install assigns it (gpu-node-<i>).
        plans = {p.name: p for p in inst.node_plans(self.profile, names, [])}
        pods = self.kube.list("Pod", self.ns)
        running: dict[tuple[str, str], Obj] = {}
        for p in pods:
            node = p["spec"].get("nodeName") or ""
            app = (p["metadata"].get("labels") or {}).get("app", "")
            if node in plans and _running(p):
                running[(node, app)] = p
        applied = 0
        for node, plan in plans.items():
            applied += self._device_plugin(node, plan, running.get((node, op.DEVICE_PLUGIN.daemonset)))
            for operand in (op.GFD, op.MIG_MANAGER):
                pod = running.get((node, operand.daemonset))
                labels = plan.operand_labels.get(operand.key)
                if pod and labels and self.labelled.get((node, operand.key)) != pod["metadata"]["uid"]:
                    self.kube.patch("Node", node, {"metadata": {"labels": labels}})
                    self.labelled[(node, operand.key)] = pod["metadata"]["uid"]
                    applied += 1
            validator = running.get((node, op.VALIDATOR.daemonset))
            if validator and self.cuda_for.get(node) != validator["metadata"]["uid"]:
                applied += self._create_cuda_validator(node)
                self.cuda_for[node] = validator["metadata"]["uid"]
        for p in pods:
            app = (p["metadata"].get("labels") or {}).get("app", "")
            if app == op.CUDA_VALIDATOR_APP and _running(p) and p["metadata"]["uid"] not in self.completed:
                from gpu_conformance.sim.reconcile import _completed_status

                now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
                self.kube.patch("Pod", p["metadata"]["name"], {"status": _completed_status(p, now)}, self.ns,
                                status=True)
                self.completed.add(p["metadata"]["uid"])
                applied += 1
        return applied

    def _device_plugin(self, node: str, plan: inst.NodePlan, pod: Obj | None) -> int:
        if pod is not None and self.advertised.get(node) != pod["metadata"]["uid"] and plan.gpu_resources:
            self.kube.patch("Node", node, {"status": {"capacity": plan.gpu_resources,
                                                      "allocatable": plan.gpu_resources}}, status=True)
            self.advertised[node] = pod["metadata"]["uid"]
            return 1
        if pod is None and node in self.advertised:
            # The plugin unregistered: kubelet keeps the capacity but nothing is allocatable any more.
            self.kube.patch("Node", node, {"status": {"allocatable": dict.fromkeys(plan.gpu_resources, "0")}},
                            status=True)
            del self.advertised[node]
            return 1
        return 0

    def _create_cuda_validator(self, node: str) -> int:
        from gpu_conformance.sim.reconcile import cuda_validator_name

        existing = [p for p in self.kube.list("Pod", self.ns, label_selector=f"app={op.CUDA_VALIDATOR_APP}")
                    if p["spec"].get("nodeName") == node]
        for p in existing:  # the validator deletes its previous workload pod before creating a new one
            with contextlib.suppress(ApiException):
                self.kube.request("DELETE", self.kube.path("Pod", p["metadata"]["name"], self.ns),
                                  body={"gracePeriodSeconds": 0})
        pod = inst.cuda_validator_pod(self.profile, self.ns, node, self._clusterpolicy_uid(),
                                      name=None if existing else cuda_validator_name(node))
        self.kube.create(pod)
        return 1


class OperatorPause:
    """Keeps the real operator process in step with its stand-in pod: when the gpu-operator Deployment has
    no available pod (scaled to 0, crash-looping), the process is stopped (SIGSTOP), so nothing reconciles,
    as on a real cluster; it continues (SIGCONT) when the Deployment is available again."""

    def __init__(self, kube: Any, namespace: str, pid: int, start_time: int) -> None:
        self.kube = kube
        self.ns = namespace
        self.pid = pid
        self.start_time = start_time
        self.paused = False

    def _ours(self) -> bool:
        # The pid must still be the process the cluster started (same start time), never a recycled one.
        try:
            stat = Path(f"/proc/{self.pid}/stat").read_text()
        except OSError:
            return False
        return int(stat[stat.rindex(")") + 2:].split()[19]) == self.start_time

    def step(self) -> None:
        deps = [d for d in self.kube.list("Deployment", self.ns) if d["metadata"]["name"] == op.OPERATOR_DEPLOYMENT]
        available = not deps or bool((deps[0].get("status") or {}).get("availableReplicas"))
        if available == (not self.paused):
            return
        self.set_paused(not available)

    def set_paused(self, paused: bool) -> None:
        if self._ours():
            os.kill(self.pid, signal.SIGSTOP if paused else signal.SIGCONT)
            self.paused = paused


_STOP = False


def _on_term(signum: int, frame: FrameType | None) -> None:
    del signum, frame
    global _STOP
    _STOP = True


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m gpu_conformance.sim.operand_loop")
    ap.add_argument("--kubeconfig", required=True)
    ap.add_argument("--namespace", default="gpu-operator")
    ap.add_argument("--profile", required=True)
    ap.add_argument("--period", type=float, default=0.5)
    ap.add_argument("--operator-pid", type=int, default=0, help="the real operator's process, paused with its pod")
    ap.add_argument("--operator-start-time", type=int, default=0)
    a = ap.parse_args(argv)
    from kubernetes import config

    from gpu_conformance.sim.reconcile import Kube

    sim = OperandSim(Kube(config.new_client_from_config(config_file=a.kubeconfig)), get_profile(a.profile),
                     a.namespace)
    pause = OperatorPause(sim.kube, a.namespace, a.operator_pid, a.operator_start_time) if a.operator_pid else None
    signal.signal(signal.SIGTERM, _on_term)
    while not _STOP:
        try:
            busy = sim.step()
            if pause is not None:
                pause.step()
        except Exception:  # an API hiccup or a race with a deleted object: the next round retries
            busy = 0
        if not busy:
            time.sleep(a.period)
    if pause is not None and pause.paused:
        pause.set_paused(False)  # stopped before the operator: let it take its own SIGTERM
    return 0


if __name__ == "__main__":
    sys.exit(main())
