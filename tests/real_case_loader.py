"""Real cluster states from public issue threads: one YAML file per case under tests/real_cases/.

A case names the healthy cluster it starts from (`cluster:`, the keyword arguments of
factory.healthy_snapshot) and lists, as `overrides:`, only what the thread's user posted: pod states,
events, node conditions, labels, the ClusterPolicy status, images. Everything else is what a healthy
cluster of that operator version holds. `expect:` is the root cause the thread established, written down
before the suite was run on the case.
`suite_before:` records what the suite said when the case was added (verdict, and layer and check per node).
`known_miss: <why>` marks a case where the suite today disagrees with the thread: the replay is then a strict
xfail (it must keep failing until the fix lands, then the lead removes the field).

Override vocabulary (one key per list item):

    pod:            {app, node, status, container?, restarts?, exit_code?, message?, log?}
                    status: Running | NotReady | Init:Running | Init:<reason> | <reason> | SandboxFailed | Failed |
                    Missing  (NotReady = running, its startup/readiness probe not passed yet)
                    (<reason>: CrashLoopBackOff, Error, ImagePullBackOff, ErrImagePull, CreateContainerError,
                    RunContainerError, StartError, OOMKilled ...; Init:Running = the init container loops)
    event:          {app, node | daemonset, reason, message, type?, count?, first?, last?}  (an Event about that pod or
                    DaemonSet, from kubelet or the DaemonSet controller)
    node:           {name, condition?: {type, status, reason, message}, mark_pods_not_ready?, taints?,
                    unschedulable?, labels_remove_prefix?: [prefix], labels?: {key: value|null}, node_info?,
                    capacity?, allocatable?, remove_resources?: [name]}
    clusterpolicy:  {name?, status?: <raw status>, not_ready?: [states], message?, spec?: {dotted.path: value}}
                    (not_ready before v23.9 writes only status.state: notReady, as those releases do)
    operator_image: <image reference of the operator Deployment>
    replace_image:  {from, to}  (every container image and env value equal to `from`, in every object; the
                    operator's own container keeps its image, as v25.10+ validators share the operator image)
    crd:            {group, version, kind, plural, scope?}  (a permissive CRD, e.g. OLM's ClusterServiceVersion)
    object:         <a raw Kubernetes object to create as is>
    remove:         {kind, name}  (ClusterPolicy, DaemonSet (with its pods), RuntimeClass, or CustomResourceDefinition:
                    an object the healthy cluster holds that the thread's cluster lacks, e.g. a CRD a Helm upgrade
                    never installed, or a ClusterPolicy the apiserver refused)
    rename_nodes:   {old: new}  (applied last, to every reference)
"""

from __future__ import annotations

import copy
import datetime as dt
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import factory
import yaml

from gpu_conformance import versions
from gpu_conformance.cluster.snapshot import ClusterSnapshot, labels_of, name_of
from gpu_conformance.cluster.timeline import parse_time

Obj = dict[str, Any]

CASES_DIR = Path(__file__).parent / "real_cases"
LAYERS = ("operator", "nfd", "deploy-labels", "driver-toolkit", "device-plugin", "probe", "none")
VERDICTS = ("CONFORMANT", "NOT CONFORMANT", "INCOMPLETE")
OPERATOR_CONTAINER = "gpu-operator"
_REQUIRED = ("source", "title", "operator_version", "summary", "cluster", "expect")
_SOURCE = re.compile(r"^https://github\.com/[\w.-]+/[\w.-]+/(issues|pull)/\d+$")
_PULL_REASONS = {"ImagePullBackOff", "ErrImagePull", "CreateContainerError", "CreateContainerConfigError",
                 "ContainerCreating", "InvalidImageName"}


class CaseError(ValueError):
    """A case file that does not follow the schema (names the file and the field)."""


@dataclass
class NodeExpectation:
    layer: str
    message_contains: list[str] = field(default_factory=list)
    # False: the node must not be judged as a GPU node at all (e.g. excluded with gpu.present=false).
    judged: bool = True


@dataclass
class Case:
    id: str
    path: Path
    source: str
    title: str
    operator_version: str
    summary: str
    cluster: dict[str, Any]
    overrides: list[dict[str, Any]]
    verdict: str
    nodes: dict[str, NodeExpectation]
    # Why the suite today disagrees with the thread (None: it must agree); makes the replay a strict xfail.
    known_miss: str | None = None
    # What the suite said when the case was added: {verdict, nodes: {node: "<layer> (<check>)"}}.
    suite_before: dict[str, Any] | None = None
    # When the thread's state was seen, on the factory's timeline (T0 objects created, T1 containers started, ...):
    # every timestamp of the cluster is moved so that the suite's read happens at that moment. Without it a case is
    # read long after its events (hours later: bring-up windows and event ages as they are now, not as posted).
    read_at: str | None = None


@dataclass
class ClusterState:
    """What the case's cluster holds: the snapshot plus what a snapshot does not carry."""

    snapshot: ClusterSnapshot
    # The operator release the cluster runs (cluster.version): overrides write that release's object shapes.
    version: str = ""
    crds: list[Obj] = field(default_factory=list)
    objects: list[Obj] = field(default_factory=list)
    # Names of the operator's own CRDs this cluster lacks (the writer deletes them for the case, then restores them).
    removed_crds: list[str] = field(default_factory=list)


# ---- reading case files -----------------------------------------------------------------------------
def case_files() -> list[Path]:
    return sorted(CASES_DIR.glob("*.yaml"))


def load_case(path: Path) -> Case:
    data = yaml.safe_load(path.read_text())
    if not isinstance(data, dict):
        raise CaseError(f"{path.name}: not a mapping")
    missing = [k for k in _REQUIRED if k not in data]
    if missing:
        raise CaseError(f"{path.name}: missing {', '.join(missing)}")
    if not _SOURCE.match(str(data["source"])):
        raise CaseError(f"{path.name}: source must be a GitHub issue or pull request URL, not {data['source']!r}")
    expect = data["expect"]
    verdict = expect.get("verdict")
    if verdict not in VERDICTS:
        raise CaseError(f"{path.name}: expect.verdict must be one of {VERDICTS}, not {verdict!r}")
    nodes: dict[str, NodeExpectation] = {}
    for node, e in (expect.get("nodes") or {}).items():
        if e.get("layer") not in LAYERS:
            raise CaseError(f"{path.name}: expect.nodes.{node}.layer must be one of {LAYERS}")
        nodes[node] = NodeExpectation(e["layer"], [str(s) for s in e.get("message_contains") or []],
                                      bool(e.get("judged", True)))
    if not nodes:
        raise CaseError(f"{path.name}: expect.nodes names no node")
    known_miss = data.get("known_miss")
    if known_miss is not None and not (isinstance(known_miss, str) and known_miss.strip()):
        raise CaseError(f"{path.name}: known_miss must say why the suite disagrees, not {known_miss!r}")
    suite_before = data.get("suite_before")
    if suite_before is not None and not (isinstance(suite_before, dict) and suite_before.get("verdict") in VERDICTS):
        raise CaseError(f"{path.name}: suite_before needs a verdict, one of {VERDICTS}")
    read_at = data.get("read_at")
    if read_at is not None and _parse_time(str(read_at)) is None:
        raise CaseError(f"{path.name}: read_at must be an RFC 3339 UTC time like {factory.T1!r}, not {read_at!r}")
    return Case(id=path.stem, path=path, source=data["source"], title=data["title"],
                operator_version=str(data["operator_version"]), summary=data["summary"],
                cluster=dict(data["cluster"]), overrides=list(data.get("overrides") or []), verdict=verdict,
                nodes=nodes, known_miss=known_miss, suite_before=suite_before,
                read_at=str(read_at) if read_at is not None else None)


_TIME = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z$")


def _parse_time(value: str) -> dt.datetime | None:
    """An API timestamp (only those: a version or a date in a label is left alone), parsed as the suite does."""
    return parse_time(value) if _TIME.match(value) else None


def shift_times(obj: Any, delta: dt.timedelta) -> Any:
    """Every RFC 3339 UTC timestamp in obj moved by delta (the case's timeline replayed at another moment)."""
    if isinstance(obj, dict):
        return {k: shift_times(v, delta) for k, v in obj.items()}
    if isinstance(obj, list):
        return [shift_times(v, delta) for v in obj]
    if isinstance(obj, str) and (when := _parse_time(obj)) is not None:
        return (when + delta).strftime("%Y-%m-%dT%H:%M:%SZ")
    return obj


def replay_at(state: ClusterState, read_at: str, now: dt.datetime) -> None:
    """Move the state's timeline so that `read_at` (the case's moment) is `now` (the suite's read)."""
    when = _parse_time(read_at)
    assert when is not None
    delta = now - when
    snap = state.snapshot
    for attr in ("nodes", "pods", "daemonsets", "deployments", "events", "clusterpolicies", "nvidiadrivers",
                 "operator_pods", "nfd_pods", "dra_plugin_pods"):
        setattr(snap, attr, shift_times(getattr(snap, attr), delta))
    state.objects = shift_times(state.objects, delta)
    snap.read_at = now.strftime("%Y-%m-%dT%H:%M:%SZ")


# ---- building the cluster ------------------------------------------------------------------------------
def build(case: Case) -> ClusterState:
    """The healthy cluster of the case's version with the case's overrides applied, its timeline moved to now
    when the case says when it was seen (read_at)."""
    state = ClusterState(factory.healthy_snapshot(**case.cluster), version=str(case.cluster.get("version", "")))
    renames: dict[str, str] = {}
    for item in case.overrides:
        if len(item) != 1:
            raise CaseError(f"{case.path.name}: each override has exactly one key, got {sorted(item)}")
        (kind, arg), = item.items()
        if kind == "rename_nodes":
            renames.update(arg)
            continue
        handler = _HANDLERS.get(kind)
        if handler is None:
            raise CaseError(f"{case.path.name}: unknown override {kind!r} (known: {sorted(_HANDLERS)})")
        try:
            handler(state, arg)
        except (KeyError, LookupError, TypeError) as e:
            raise CaseError(f"{case.path.name}: override {kind} {arg!r}: {e}") from None
    _recompute_status(state.snapshot)
    if renames:
        _rename_nodes(state, renames)
    if case.read_at:
        replay_at(state, case.read_at, dt.datetime.now(dt.UTC))
    return state


def _pod(snap: ClusterSnapshot, app: str, node: str) -> Obj:
    return factory.pod_for(snap, app, node)


def _pod_override(state: ClusterState, arg: dict[str, Any]) -> None:
    snap = state.snapshot
    status: str = arg["status"]
    if status == "Missing":
        factory.remove_pods(snap, arg["app"], arg["node"])
        return
    pod = _pod(snap, arg["app"], arg["node"])
    restarts = int(arg.get("restarts", 0))
    exit_code = int(arg.get("exit_code", 1))
    message = str(arg.get("message", ""))
    inits = [c["name"] for c in pod["spec"].get("initContainers") or []]
    mains = [c["name"] for c in pod["spec"]["containers"]]
    if status == "Running":
        return
    if status == "NotReady":
        _running_not_ready(pod, arg.get("container") or mains[0], restarts, exit_code)
        return
    if status == "SandboxFailed":
        _sandbox_failed(pod)
    elif status == "Failed":
        factory.fail_pod(pod, arg.get("container") or (inits or mains)[0], exit_code)
    elif status.startswith("Init:"):
        container = arg.get("container") or inits[0]
        factory.stuck_init(pod, container, status.removeprefix("Init:"), restarts, exit_code=exit_code,
                           message=message)
    else:
        container = arg.get("container") or mains[0]
        factory.crash_container(pod, container, status, restarts, exit_code=exit_code, message=message)
        if status in _PULL_REASONS and restarts == 0:
            # A container that never started: the pod has not reached Running.
            pod["status"]["phase"] = "Pending"
            _, cs = factory._find_status(pod, "containerStatuses", container)
            cs["lastState"] = {}
            cs.pop("containerID", None)
            cs.pop("imageID", None)
    for key in ("log", "previous_log"):
        if key in arg:
            container = arg.get("container") or (inits if status.startswith("Init:") else mains)[0]
            snap.logs[(name_of(pod), container)] = str(arg[key])


def _running_not_ready(pod: Obj, container: str, restarts: int, exit_code: int) -> None:
    """Running, its startup/readiness probe not passed (yet): kubectl shows 0/1 Running.

    With restarts, kubelet has killed it for failing its startup probe before (lastState terminated)."""
    _, cs = factory._find_status(pod, "containerStatuses", container)
    cs["ready"] = False
    cs["started"] = False
    cs["restartCount"] = restarts
    if restarts:
        cs["lastState"] = {"terminated": {"exitCode": exit_code, "reason": "Error", "startedAt": factory.T0,
                                          "finishedAt": factory.T1}}
    for c in pod["status"]["conditions"]:
        if c["type"] in ("Ready", "ContainersReady"):
            c["status"] = "False"
            c["reason"] = "ContainersNotReady"
            c["message"] = f"containers with unready status: [{container}]"


def _sandbox_failed(pod: Obj) -> None:
    """No sandbox: kubelet reports every container waiting and the pod Pending (kubectl: Init:0/N)."""
    st = pod["status"]
    reason_init, reason_main = "PodInitializing", "PodInitializing" if st.get("initContainerStatuses") else \
        "ContainerCreating"
    for key, reason in (("initContainerStatuses", reason_init), ("containerStatuses", reason_main)):
        for cs in st.get(key) or []:
            cs.update({"ready": False, "started": False, "restartCount": 0, "lastState": {},
                       "state": {"waiting": {"reason": reason}}})
            for k in ("containerID", "imageID"):
                cs.pop(k, None)
    st["phase"] = "Pending"
    st.pop("podIP", None)
    inits = [c["name"] for c in pod["spec"].get("initContainers") or []]
    factory._set_conditions(pod, not inits, False, inits or None)
    for c in st["conditions"]:
        if c["type"] == "PodReadyToStartContainers":
            c["status"] = "False"


def _event_override(state: ClusterState, arg: dict[str, Any]) -> None:
    snap = state.snapshot
    if "daemonset" in arg:
        obj, api, source = factory.daemonset(snap, arg["daemonset"]), "apps/v1", {"component": "daemonset-controller"}
    else:
        obj, api, source = _pod(snap, arg["app"], arg["node"]), "v1", {"component": "kubelet", "host": arg["node"]}
    snap.events.append({
        "apiVersion": "v1", "kind": "Event",
        "metadata": {"name": f"{name_of(obj)}.{len(snap.events):04d}", "namespace": snap.operator_namespace},
        "involvedObject": {"apiVersion": api, "kind": obj["kind"], "name": name_of(obj),
                           "namespace": snap.operator_namespace, "uid": obj["metadata"].get("uid", "")},
        "reason": arg["reason"], "message": arg["message"], "type": arg.get("type", "Warning"),
        "count": int(arg.get("count", 1)), "source": source,
        # A posted event was still being reported when the issue was written: last seen after the node's operands
        # came up (T3), unless the case says when (first/last), e.g. bring-up events that stopped since.
        "firstTimestamp": arg.get("first", factory.T1), "lastTimestamp": arg.get("last", factory.T3),
    })


def _node_override(state: ClusterState, arg: dict[str, Any]) -> None:
    snap = state.snapshot
    node = factory.node(snap, arg["name"])
    if "condition" in arg:
        cond = {"lastHeartbeatTime": factory.T2, "lastTransitionTime": factory.T2, **arg["condition"]}
        conds = [c for c in node["status"]["conditions"] if c["type"] != cond["type"]]
        node["status"]["conditions"] = [*conds, cond]
    if arg.get("mark_pods_not_ready"):
        # What the node lifecycle controller does to the pods of a node that stopped reporting.
        for pod in snap.pods:
            if pod["spec"].get("nodeName") == arg["name"] and pod["status"].get("phase") == "Running":
                for c in pod["status"]["conditions"]:
                    if c["type"] in ("Ready", "ContainersReady"):
                        c["status"] = "False"
    if "taints" in arg:
        node["spec"]["taints"] = [{"timeAdded": factory.T2, **t} if t.get("effect") == "NoExecute" else dict(t)
                                  for t in arg["taints"]]
    if arg.get("unschedulable"):
        node["spec"]["unschedulable"] = True
    for prefix in arg.get("labels_remove_prefix") or []:
        for key in [k for k in node["metadata"]["labels"] if k.startswith(prefix)]:
            del node["metadata"]["labels"][key]
    for key, value in (arg.get("labels") or {}).items():
        if value is None:
            node["metadata"]["labels"].pop(key, None)
        else:
            node["metadata"]["labels"][key] = str(value)
    node["status"]["nodeInfo"].update(arg.get("node_info") or {})
    for key in ("capacity", "allocatable"):
        if key in arg:
            node["status"][key] = {k: str(v) for k, v in arg[key].items()}
        for resource in arg.get("remove_resources") or []:
            node["status"][key].pop(resource, None)


def _clusterpolicy_override(state: ClusterState, arg: dict[str, Any]) -> None:
    snap = state.snapshot
    cp = snap.clusterpolicies[0]
    if "name" in arg:
        old, new = name_of(cp), arg["name"]
        cp["metadata"]["name"] = new
        for obj in _all_objects(state):
            for ref in obj.get("metadata", {}).get("ownerReferences") or []:
                if ref.get("kind") == "ClusterPolicy" and ref.get("name") == old:
                    ref["name"] = new
    for path, value in (arg.get("spec") or {}).items():
        factory.set_policy(snap, path, value)
    if "status" in arg:
        cp["status"] = copy.deepcopy(arg["status"])
    if "not_ready" in arg:
        states = "[" + " ".join(arg["not_ready"]) + "]"
        message = arg.get("message") or f"ClusterPolicy is not ready, states not ready: {states}"
        if versions.since(versions.STATUS_CONDITIONS, versions.parse(state.version)) is False:
            # Before v23.9 the operator writes only status.state (it logs the states, it does not store them).
            cp["status"] = {"state": "notReady", "namespace": snap.operator_namespace}
            return
        cp["status"] = {"state": "notReady", "namespace": snap.operator_namespace, "conditions": [
            {"type": "Ready", "status": "False", "reason": "Error", "message": "",
             "lastTransitionTime": factory.T2},
            {"type": "Error", "status": "True", "reason": "OperandNotReady", "message": message,
             "lastTransitionTime": factory.T2}]}


def _operator_image(state: ClusterState, image: str) -> None:
    snap = state.snapshot
    dep = snap.deployment("gpu-operator")
    if dep is None:
        raise LookupError("no gpu-operator Deployment")
    old = dep["spec"]["template"]["spec"]["containers"][0]["image"]
    _replace_image(state, {"from": old, "to": image}, operator=True)


def _replace_image(state: ClusterState, arg: dict[str, str], operator: bool = False) -> None:
    old, new = arg["from"], arg["to"]
    hits = 0
    for obj in _all_objects(state):
        for c in _containers(obj):
            if c.get("image") == old and (operator == (c.get("name") == OPERATOR_CONTAINER)):
                c["image"] = new
                hits += 1
            for e in c.get("env") or []:
                if e.get("value") == old and not operator:
                    e["value"] = new
        st = obj.get("status") or {}
        for cs in (st.get("initContainerStatuses") or []) + (st.get("containerStatuses") or []):
            if cs.get("image") == old and (operator == (cs.get("name") == OPERATOR_CONTAINER)):
                cs["image"] = new
                if "imageID" in cs:
                    cs["imageID"] = new if "@" in new else new + "@sha256:" + "0" * 64
    if not hits:
        raise LookupError(f"no container uses image {old!r}")


def _crd_override(state: ClusterState, arg: dict[str, str]) -> None:
    plural, group = arg["plural"], arg["group"]
    state.crds.append({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{group}"},
        "spec": {"group": group, "scope": arg.get("scope", "Namespaced"),
                 "names": {"plural": plural, "singular": arg["kind"].lower(), "kind": arg["kind"],
                           "listKind": arg["kind"] + "List"},
                 "versions": [{"name": arg["version"], "served": True, "storage": True,
                               "subresources": {"status": {}},
                               "schema": {"openAPIV3Schema": {"type": "object",
                                                              "x-kubernetes-preserve-unknown-fields": True}}}]},
    })


def _object_override(state: ClusterState, obj: Obj) -> None:
    state.objects.append(copy.deepcopy(obj))


def _remove_override(state: ClusterState, arg: dict[str, str]) -> None:
    snap, kind, name = state.snapshot, arg["kind"], arg["name"]
    if kind == "ClusterPolicy":
        kept = [cp for cp in snap.clusterpolicies if name_of(cp) != name]
        if len(kept) == len(snap.clusterpolicies):
            raise LookupError(f"no ClusterPolicy {name!r}")
        snap.clusterpolicies = kept
    elif kind == "DaemonSet":
        factory.remove_daemonset(snap, name)
    elif kind == "RuntimeClass":
        factory.drop_runtimeclass(snap, name)
    elif kind == "CustomResourceDefinition":
        if name not in snap.crds:
            raise LookupError(f"no CRD {name!r}")
        snap.crds = snap.crds - {name}
        state.removed_crds.append(name)
    else:
        raise LookupError(f"remove: kind {kind!r} (known: ClusterPolicy, DaemonSet, RuntimeClass, "
                          "CustomResourceDefinition)")
    factory.refresh(snap)


_HANDLERS = {"pod": _pod_override, "event": _event_override, "node": _node_override,
             "clusterpolicy": _clusterpolicy_override, "operator_image": _operator_image,
             "replace_image": _replace_image, "crd": _crd_override, "object": _object_override,
             "remove": _remove_override}


# ---- helpers ------------------------------------------------------------------------------------------
def _all_objects(state: ClusterState) -> list[Obj]:
    s = state.snapshot
    return [*s.nodes, *s.pods, *s.daemonsets, *s.deployments, *s.clusterpolicies, *s.nvidiadrivers,
            *s.runtimeclasses, *state.objects]


def _containers(obj: Obj) -> list[Obj]:
    spec = obj.get("spec") or {}
    if "template" in spec:
        spec = spec["template"].get("spec") or {}
    return list(spec.get("initContainers") or []) + list(spec.get("containers") or [])


def _recompute_status(snap: ClusterSnapshot) -> None:
    # DaemonSet/Deployment status from the pods, as their controllers last wrote it.
    factory.refresh(snap)


def _rename_nodes(state: ClusterState, renames: dict[str, str]) -> None:
    snap = state.snapshot
    for n in snap.nodes:
        old = name_of(n)
        if old in renames:
            n["metadata"]["name"] = renames[old]
            labels_of(n)["kubernetes.io/hostname"] = renames[old]
    for p in snap.pods:
        if p["spec"].get("nodeName") in renames:
            p["spec"]["nodeName"] = renames[p["spec"]["nodeName"]]
    for e in snap.events:
        host = e.get("source", {}).get("host")
        if host in renames:
            e["source"]["host"] = renames[host]
    factory.refresh(snap)
