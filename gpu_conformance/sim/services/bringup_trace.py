"""A bring-up as a trace: when each node first reached each readiness milestone, and which events it left.

A recording is a list of polls of the gpu-operator namespace, taken every ~2 s from cluster creation until the
tier is ready, one JSON object per line (the same on the kind tier, recorded through kubectl, and on the simulated
cluster, recorded through the API client):

    {"t": seconds since start, "pods": [{"name", "app", "uid", "node", "deleting", "status": {"phase", "conditions",
     "initContainerStatuses", "containerStatuses"}}], "nodes": [{"name", "labels" (keys containing "nvidia"),
     "allocatable", "capacity"}], "clusterpolicy": [each ClusterPolicy's status], "events": [{"reason", "message",
     "type", "count", "firstTimestamp", "lastTimestamp", "source", "reportingComponent",
     "object": {"kind", "name", "fieldPath"}}], "marks" (optional: moments the recorder noted, Poller.mark, e.g. a
     fault played: [{"name", "t", ...}]; a bring-up trace ignores them, fault_trace.py starts from one)}

From one poll, `milestones` names what each GPU node has reached (pure); a `Trace` keeps the first poll each one was
seen in, and the normalised signature of every event (`event_signature`). The comparison of traces is
bringup_order.py.

    python -m gpu_conformance.sim.services.bringup_trace record OUT.jsonl --kubeconfig K [--kubectl PATH]
    python -m gpu_conformance.sim.services.bringup_trace derive OUT.json IN.jsonl
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

Obj = dict[str, Any]
# What the poller lists, by kubectl's resource names (the callable given to Poller answers these).
KINDS = ("pods", "nodes", "clusterpolicies", "events")
# The pseudo-node of cluster-wide milestones.
CLUSTER = "*"
CLUSTERPOLICY_READY = "clusterpolicy/ready"
GPU_ALLOCATABLE = "node/gpu-allocatable"
GPU_PRESENT_LABEL = "nvidia.com/gpu.present"
GPU_RESOURCE = "nvidia.com/gpu"
EVENT_KEYS = ("reason", "message", "type", "count", "firstTimestamp", "lastTimestamp", "source", "reportingComponent")
STATUS_KEYS = ("phase", "conditions", "initContainerStatuses", "containerStatuses")
# Names Kubernetes generates (k8s.io/apimachinery/pkg/util/rand's alphabet: no vowels, no 0/1/3): a pod's
# generateName suffix of 5, a ReplicaSet's pod-template-hash of 6-10. A name no poll listed still loses them.
_A = "[bcdfghjklmnpqrstvwxz2456789]"
_POD_SUFFIX = re.compile(rf"(?:-{_A}{{6,10}})?-{_A}{{5}}$")
_HASH_SUFFIX = re.compile(rf"-{_A}{{6,10}}$")
_GENERATED_POD = re.compile(rf"(?<![\w.<-])([a-z][a-z0-9-]*?)(?:-{_A}{{6,10}})?-{_A}{{5}}(?![A-Za-z0-9-])")
_GENERATED_RS = re.compile(rf"(?<![\w.<-])([a-z][a-z0-9-]*?)-{_A}{{6,10}}(?![A-Za-z0-9-])")
_SANDBOX = re.compile(r"\b[0-9a-f]{64}\b")  # a container or sandbox id
_UID = re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b")
_NUMBER = re.compile(r"\d+(?:\.\d+)?")
# Pods that are not a node's operands though they carry an `app` label: Helm's operator Deployment, which the
# scheduler places on any node (the kind tier's control plane, a simulated GPU node).
NOT_OPERANDS = frozenset({"gpu-operator"})


class TraceError(ValueError):
    """A recording that is not in the raw format (one line says where)."""


# ---- one poll ----------------------------------------------------------------------------------------------------
def raw_poll(t: float, pods: Iterable[Obj], nodes: Iterable[Obj], clusterpolicies: Iterable[Obj],
             events: Iterable[Obj]) -> Obj:
    """The raw record of one poll from the API's objects (what the kind tier's recorder writes)."""
    def pod(p: Obj) -> Obj:
        meta = p.get("metadata") or {}
        return {"name": meta.get("name"), "app": (meta.get("labels") or {}).get("app"), "uid": meta.get("uid"),
                "node": (p.get("spec") or {}).get("nodeName"), "deleting": bool(meta.get("deletionTimestamp")),
                "status": {k: (p.get("status") or {}).get(k) for k in STATUS_KEYS}}

    def node(n: Obj) -> Obj:
        meta, st = n.get("metadata") or {}, n.get("status") or {}
        return {"name": meta.get("name"),
                "labels": {k: v for k, v in (meta.get("labels") or {}).items() if "nvidia" in k},
                "allocatable": st.get("allocatable"), "capacity": st.get("capacity")}

    def event(e: Obj) -> Obj:
        inv = e.get("involvedObject") or {}
        return {**{k: e.get(k) for k in EVENT_KEYS}, "object": {k: inv.get(k) for k in ("kind", "name", "fieldPath")}}

    return {"t": round(t, 2), "pods": [pod(p) for p in pods], "nodes": [node(n) for n in nodes],
            "clusterpolicy": [c.get("status") for c in clusterpolicies], "events": [event(e) for e in events]}


def _true(conditions: Any, kind: str) -> bool:
    return any(c.get("type") == kind and c.get("status") == "True" for c in conditions or [] if isinstance(c, dict))


def _quantity(value: Any) -> float:
    try:
        return float(str(value))
    except ValueError:
        return 0.0


def gpu_nodes(poll: Obj) -> list[str]:
    """The nodes the operator found a GPU on (its gpu.present label; NFD's own labels are not recorded)."""
    return [n["name"] for n in poll.get("nodes") or [] if (n.get("labels") or {}).get(GPU_PRESENT_LABEL) == "true"]


def pod_milestones(pod: Obj) -> set[str]:
    """What one operand pod shows reached: each init container exited 0, the pod Ready, the pod Succeeded."""
    app = pod.get("app")
    status = pod.get("status") or {}
    out = {f"{app}/{cs.get('name')}" for cs in status.get("initContainerStatuses") or []
           if ((cs.get("state") or {}).get("terminated") or {}).get("exitCode") == 0}
    if not pod.get("deleting") and status.get("phase") == "Running" and _true(status.get("conditions"), "Ready"):
        out.add(f"{app}/ready")
    if status.get("phase") == "Succeeded":
        out.add(f"{app}/succeeded")
    return out


def milestones(poll: Obj) -> dict[str, set[str]]:
    """GPU node (and CLUSTER) -> the milestones this poll shows reached.

    Per node: every operand pod's (pods with an `app` label: the operator's DaemonSets and the cuda validator; NFD
    carries none, Helm's operator Deployment is NOT_OPERANDS) init containers, Ready and Succeeded; the node's
    allocatable nvidia.com/gpu above 0. Cluster-wide: a ClusterPolicy ready (clusterpolicy_ready).
    """
    gpus = gpu_nodes(poll)
    out: dict[str, set[str]] = {n: set() for n in gpus}
    for pod in poll.get("pods") or []:
        if pod.get("app") and pod.get("app") not in NOT_OPERANDS and pod.get("node") in out:
            out[pod["node"]] |= pod_milestones(pod)
    for n in poll.get("nodes") or []:
        if n["name"] in out and _quantity((n.get("allocatable") or {}).get(GPU_RESOURCE, 0)) > 0:
            out[n["name"]].add(GPU_ALLOCATABLE)
    out[CLUSTER] = {CLUSTERPOLICY_READY} if any(clusterpolicy_ready(s) for s in poll.get("clusterpolicy") or []) \
        else set()
    return out


def clusterpolicy_ready(status: Obj | None) -> bool:
    """state ready and the Ready condition True: what the kind tier waits for.

    The operator writes the state and the conditions in two writes; a state `ready` without Ready=True is one of
    them alone. Both can also be `ready` for an instant before the operands are: a reconcile that reads a new
    DaemonSet before the DaemonSet controller counted its nodes takes desiredNumberScheduled 0 for ready
    (controllers/object_controls.go isDaemonSetReady at v25.3.4) — seen on the simulated cluster's quick control
    plane. A Trace therefore times the cluster's milestones from the last time they were reached (it stayed so).
    """
    st = status or {}
    return st.get("state") == "ready" and _true(st.get("conditions"), "Ready")


def pod_app(name: str, apps: dict[str, str]) -> str:
    """A pod's app: from the polls that listed it, else its name without the generated parts."""
    return apps.get(name) or _POD_SUFFIX.sub("", name)


def event_signature(event: Obj, apps: dict[str, str], node_names: Iterable[str]) -> str:
    """`kind app: reason: message`, the names that differ from cluster to cluster masked: pod names -> <app>,
    node names -> <node>, uids -> <uid>, numbers (counts, durations, ports) -> <n>."""
    obj = event.get("object") or {}
    kind, name = obj.get("kind") or "", obj.get("name") or ""
    who = pod_app(name, apps) if kind == "Pod" else _HASH_SUFFIX.sub("", name) if kind == "ReplicaSet" else name
    message = event.get("message") or ""
    names = {n: f"<{pod_app(n, apps)}>" for n in {*apps, *([name] if kind == "Pod" else [])}}
    names |= {n: "<node>" for n in node_names}
    for n in sorted(names, key=len, reverse=True):  # a longer name first: one may be a prefix of another
        message = re.sub(rf"(?<![\w.-]){re.escape(n)}(?![A-Za-z0-9-])", names[n], message)
    message = _GENERATED_RS.sub(r"<\1>", _GENERATED_POD.sub(r"<\1>", message))
    if event.get("reason") == "LeaderElection":
        # The holder is the operator's host name and a random id (in a pod: the pod's name).
        message = re.sub(r"^\S+ became leader$", "<holder> became leader", message)
    message = _NUMBER.sub("<n>", _UID.sub("<uid>", _SANDBOX.sub("<id>", message)))
    return f"{kind} {who}: {event.get('reason') or ''}: {message}"


# ---- a whole recording -------------------------------------------------------------------------------------------
@dataclass
class Trace:
    """First-seen times over polls: node -> milestone -> t, and event signature -> t; the cluster's milestones
    (the ClusterPolicy's ready) since they were last reached, if they still are at the last poll."""

    source: str = ""
    nodes: dict[str, dict[str, float]] = field(default_factory=dict)
    cluster: dict[str, float] = field(default_factory=dict)
    events: dict[str, float] = field(default_factory=dict)
    interval: float = 0.0  # the longest gap between two polls: a pair closer than this may be either way
    polls: int = 0
    end: float = 0.0
    _apps: dict[str, str] = field(default_factory=dict, repr=False)
    _node_names: set[str] = field(default_factory=set, repr=False)
    _raw_events: dict[tuple[str, ...], tuple[Obj, float]] = field(default_factory=dict, repr=False)

    def add(self, poll: Obj) -> None:
        t = float(poll["t"])
        if self.polls:
            self.interval = max(self.interval, round(t - self.end, 2))
        self.polls += 1
        self.end = t
        self._apps.update({p["name"]: p["app"] for p in poll.get("pods") or [] if p.get("name") and p.get("app")})
        self._node_names.update(n["name"] for n in poll.get("nodes") or [] if n.get("name"))
        for node, reached in milestones(poll).items():
            if node == CLUSTER:
                # Ready since the last time it became so: the operator can report ready for an instant before its
                # operands are (clusterpolicy_ready), a bring-up is over when it stays ready.
                self.cluster = {m: self.cluster.get(m, t) for m in reached}
                continue
            seen = self.nodes.setdefault(node, {})
            for m in reached:
                seen.setdefault(m, t)
        for e in poll.get("events") or []:
            obj = e.get("object") or {}
            key = (obj.get("kind") or "", obj.get("name") or "", e.get("reason") or "", e.get("message") or "")
            self._raw_events.setdefault(key, (e, t))
        # Signed again with every pod name learnt so far: an event may name a pod before a poll listed it.
        self.events = {}
        for e, seen in self._raw_events.values():
            sig = event_signature(e, self._apps, self._node_names)
            self.events[sig] = min(seen, self.events.get(sig, seen))

    def node_view(self, node: str) -> dict[str, float]:
        """One GPU node's milestones with the cluster-wide ones (the ClusterPolicy's ready follows the node's)."""
        return {**self.nodes.get(node, {}), **self.cluster}

    def to_json(self) -> Obj:
        return {"source": self.source, "polls": self.polls, "interval": self.interval, "end": self.end,
                "nodes": self.nodes, "cluster": self.cluster, "events": self.events}

    @classmethod
    def from_json(cls, data: Obj) -> Trace:
        try:
            return cls(source=str(data.get("source", "")), polls=int(data["polls"]),
                       interval=float(data["interval"]), end=float(data["end"]),
                       nodes={n: {m: float(t) for m, t in ms.items()} for n, ms in data["nodes"].items()},
                       cluster={m: float(t) for m, t in data["cluster"].items()},
                       events={s: float(t) for s, t in data["events"].items()})
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            raise TraceError(f"not a derived bring-up trace ({type(e).__name__}: {e})") from None


def trace_of(polls: Iterable[Obj], source: str = "") -> Trace:
    trace = Trace(source=source)
    for poll in polls:
        trace.add(poll)
    return trace


def load_jsonl(path: Path) -> list[Obj]:
    """The polls of a raw recording; one clear line for a file that is not one."""
    polls: list[Obj] = []
    try:
        lines = path.read_text().splitlines()
    except OSError as e:
        raise TraceError(f"{path}: cannot read ({e.strerror or e})") from None
    for i, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            poll = json.loads(line)
        except json.JSONDecodeError as e:
            if i == len(lines):
                break  # the recorder was stopped mid-line: the polls before it stand
            raise TraceError(f"{path}:{i}: not JSON ({e.msg})") from None
        if not isinstance(poll, dict) or not isinstance(poll.get("t"), (int, float)) or not all(
                isinstance(poll.get(k, []), list) for k in ("pods", "nodes", "clusterpolicy", "events")):
            raise TraceError(f"{path}:{i}: not a poll of the raw format (want t, pods, nodes, clusterpolicy, events)")
        polls.append(poll)
    if not polls:
        raise TraceError(f"{path}: no polls")
    return polls


T = TypeVar("T")


def load_derived(path: Path, derive: Callable[[list[Obj], str], T], from_json: Callable[[Obj], T], what: str) -> T:
    """A derived trace (.json, read by `from_json`) or a raw recording (.jsonl, derived by `derive(polls, source)`),
    by the file's suffix; one clear line for a file that is neither."""
    if path.suffix == ".jsonl":
        return derive(load_jsonl(path), path.name)
    try:
        return from_json(json.loads(path.read_text()))
    except (OSError, json.JSONDecodeError) as e:
        raise TraceError(f"{path}: not a derived {what} ({e})") from None


def write_derived(out: Path, raw: Path, derive: Callable[[list[Obj], str], Any], prog: str) -> int:
    """The `derive` command: a raw recording's derived trace (its to_json) into `out`; 2 and one line on error."""
    try:
        trace = derive(load_jsonl(raw), raw.name)
        out.write_text(json.dumps(trace.to_json(), indent=1, sort_keys=True) + "\n")
    except TraceError as e:
        print(f"{prog}: {e}", file=sys.stderr)
        return 2
    except OSError as e:
        print(f"{prog}: {out}: cannot write ({e.strerror or e})", file=sys.stderr)
        return 2
    return 0


def load_trace(path: Path) -> Trace:
    """A derived trace (.json) or a raw recording (.jsonl), by the file's suffix."""
    return load_derived(path, lambda polls, source: trace_of(polls, source=source), Trace.from_json,
                        "bring-up trace")


# ---- recording -----------------------------------------------------------------------------------------------------
Lister = Callable[[str], "list[Obj] | None"]


class Poller:
    """Polls `list_objects(kind)` for KINDS every `interval` seconds in a thread of its own, until stop().

    `list_objects` answers kubectl's resource names with the API's objects (None or an exception: not there yet,
    e.g. the ClusterPolicy CRD before the operator's chart is installed; the poll records it empty)."""

    def __init__(self, list_objects: Lister, interval: float = 2.0,
                 sink: Callable[[Obj], None] | None = None) -> None:
        self.list_objects = list_objects
        self.interval = interval
        self.sink = sink
        self.polls: list[Obj] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._start = 0.0
        self._marks: list[Obj] = []
        self._marks_lock = threading.Lock()

    def mark(self, name: str, **data: Any) -> float:
        """Note a moment (a fault played, its mend): the next poll that starts after it carries
        `"marks": [{"name", "t", **data}]`, t on the polls' clock. Returns that t."""
        t = round(time.monotonic() - self._start, 2)
        with self._marks_lock:
            self._marks.append({"name": name, "t": t, **data})
        return t

    def _list(self, kind: str) -> list[Obj]:
        try:
            return self.list_objects(kind) or []
        except Exception:  # a component not up yet: this poll sees none, the next one retries
            return []

    def poll_once(self) -> Obj:
        begun = time.monotonic()
        with self._marks_lock:  # taken as the poll begins: a mark noted while it lists goes with the next one
            marks, self._marks = self._marks, []
        objs = {k: self._list(k) for k in KINDS}
        rec = raw_poll(begun - self._start, objs["pods"], objs["nodes"], objs["clusterpolicies"], objs["events"])
        if marks:
            rec["marks"] = marks
        self.polls.append(rec)
        if self.sink is not None:
            self.sink(rec)
        return rec

    def _run(self) -> None:
        while not self._stop.is_set():
            begun = time.monotonic()
            self.poll_once()
            self._stop.wait(max(0.0, self.interval - (time.monotonic() - begun)))

    def start(self) -> Poller:
        self._start = time.monotonic()
        self._thread = threading.Thread(target=self._run, name="bringup-poller", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> list[Obj]:
        """Stop after one last poll (what the moment of stopping shows is part of the bring-up)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self.poll_once()
        return self.polls


def kube_lister(kube: Any, namespace: str) -> Lister:
    """For a raw-JSON client (sim/services/kube_client.Kube): the namespace's pods and events, nodes, policies."""
    kinds = {"pods": ("Pod", namespace), "nodes": ("Node", None), "clusterpolicies": ("ClusterPolicy", None),
             "events": ("Event", namespace)}
    return lambda kind: kube.list(*kinds[kind])


def kubectl_lister(kubectl: str, kubeconfig: str, namespace: str = "gpu-operator") -> Lister:
    """Through kubectl (the kind tier): the same objects as kube_lister."""
    def list_objects(kind: str) -> list[Obj] | None:
        where = ["-n", namespace] if kind in ("pods", "events") else []
        p = subprocess.run([kubectl, "--kubeconfig", kubeconfig, "get", kind, *where, "-o", "json"],
                           capture_output=True, text=True, timeout=30, check=False)
        return json.loads(p.stdout).get("items") if p.returncode == 0 else None

    return list_objects


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m gpu_conformance.sim.services.bringup_trace",
                                 description="Record a bring-up as raw polls, or derive its milestone trace.")
    sub = ap.add_subparsers(dest="cmd", required=True)
    rec = sub.add_parser("record", help="poll every 2 s until OUT.stop exists")
    rec.add_argument("out")
    rec.add_argument("--kubeconfig", required=True)
    rec.add_argument("--kubectl", default="kubectl")
    rec.add_argument("--namespace", default="gpu-operator")
    der = sub.add_parser("derive", help="the milestone trace and event signatures of one raw recording")
    der.add_argument("out")
    der.add_argument("raw")
    a = ap.parse_args(argv)
    if a.cmd == "derive":
        return write_derived(Path(a.out), Path(a.raw), lambda polls, source: trace_of(polls, source=source),
                             "bringup_trace")
    out = Path(a.out)
    with out.open("a") as f:
        def write(poll: Obj) -> None:
            f.write(json.dumps(poll) + "\n")
            f.flush()

        poller = Poller(kubectl_lister(a.kubectl, a.kubeconfig, a.namespace), sink=write).start()
        stop = out.with_name(out.name + ".stop")
        while not stop.exists():
            time.sleep(0.5)
        poller.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
