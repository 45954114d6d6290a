"""A fault as a trace: from the moment a node was broken on, which readiness milestones each GPU node loses, which
come back, and which events the fault leaves.

The recording is a bring-up recording's polls (bringup_trace.py's raw format) with a mark: the poller's
`mark("fault", node=...)` puts `"marks": [{"name": "fault", "t": ..., "node": <the broken node>}]` on the first
poll after it (optionally a later `mark("mend")`). `fault_trace_of` derives, per GPU node, relative to the fault
(t = seconds since the mark) and up to the next marked poll (the mend) or the last one:

* `kept M`  (t 0): held in the poll before the fault and in every poll after it;
* `lost M`: held before the fault, first seen missing at t;
* `back M`: lost, then held again since t up to the end (a lost M without a back: gone at the end);
* `new M`: not held before the fault, held since t up to the end;

the ClusterPolicy's as the pseudo-node CLUSTER (its ready, and its state as the milestone `state=S`: e.g.
`new state=notReady`), and the signatures (bringup_trace.event_signature) of the events that are new since the
fault or repeated (their count or last time moved on).

The comparison reuses bringup_order per role: `roles` splits a fault trace into the broken node's and the other GPU
nodes' traces (each a bringup_trace.Trace whose milestones are the changes above; the events go with the broken
node's), so `learn` tells what every reference agrees on (the same changes, the same order of changes, the same
events) and `differences` how a candidate differs.

A MEND mark's trace (`mark=MEND`) is the recovery's, read the same way.

    python -m gpu_conformance.sim.services.fault_trace derive OUT.json IN.jsonl [--mark mend]
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from gpu_conformance.sim.services import bringup_order as bo
from gpu_conformance.sim.services.bringup_trace import (
    CLUSTER,
    Trace,
    TraceError,
    event_signature,
    gpu_nodes,
    load_derived,
    milestones,
    write_derived,
)

Obj = dict[str, Any]
FAULT, MEND = "fault", "mend"
BROKEN, HEALTHY = "broken", "healthy"
KEPT, LOST, BACK, NEW, STATE = "kept", "lost", "back", "new", "state"


def mark_of(poll: Obj, name: str) -> Obj | None:
    """The mark `name` a poll carries, if any."""
    return next((m for m in poll.get("marks") or [] if isinstance(m, dict) and m.get("name") == name), None)


def _state(poll: Obj) -> str:
    states = [str((s or {}).get("state") or "") for s in poll.get("clusterpolicy") or []]
    return states[0] if states else ""


def _event_key(e: Obj) -> tuple[str, ...]:
    obj = e.get("object") or {}
    # With the container: kubelet's Created/Started of a pod's init and main containers differ only there.
    return (obj.get("kind") or "", obj.get("name") or "", obj.get("fieldPath") or "", e.get("reason") or "",
            e.get("message") or "")


def _event_seen(e: Obj) -> tuple[str, str]:
    return (str(e.get("count")), str(e.get("lastTimestamp")))


def changes(before: set[str], after: Sequence[tuple[float, set[str]]]) -> dict[str, float]:
    """`kept/lost/back/new M` -> t, from what was held before the fault and the (t, held) polls after it (pure)."""
    out: dict[str, float] = {}
    last = after[-1][1] if after else before
    for m in sorted(before | {m for _, held in after for m in held}):
        missing = [t for t, held in after if m not in held]
        if m in before:
            if not missing:
                out[f"{KEPT} {m}"] = 0.0
                continue
            out[f"{LOST} {m}"] = missing[0]
        if m in last:
            # Held since the poll after its last absence (or, never absent after the fault: since the first poll).
            since = next((t for t, held in after if t > missing[-1] and m in held), 0.0) if missing else after[0][0]
            out[f"{BACK if m in before else NEW} {m}"] = since
    return out


@dataclass
class FaultTrace:
    """One recorded fault: the broken node, and per GPU node (and CLUSTER) its changes (`changes`) since the
    fault; the event signatures new since the fault, with when first seen."""

    source: str = ""
    broken: str = ""
    nodes: dict[str, dict[str, float]] = field(default_factory=dict)
    events: dict[str, float] = field(default_factory=dict)
    interval: float = 0.0
    polls: int = 0
    end: float = 0.0

    def roles(self) -> dict[str, Trace]:
        """BROKEN: the broken node's changes with the cluster's and the events; HEALTHY: every other GPU node's
        with the cluster's (no events: they are the cluster's, counted once)."""
        cluster = self.nodes.get(CLUSTER, {})

        def trace(role: str, names: Iterable[str], events: dict[str, float]) -> Trace:
            return Trace(source=f"{self.source} ({role} node)", nodes={n: dict(self.nodes[n]) for n in names},
                         cluster=dict(cluster), events=dict(events), interval=self.interval, polls=self.polls,
                         end=self.end)

        others = [n for n in sorted(self.nodes) if n not in (CLUSTER, self.broken)]
        return {BROKEN: trace(BROKEN, [self.broken] if self.broken in self.nodes else [], self.events),
                HEALTHY: trace(HEALTHY, others, {})}

    def to_json(self) -> Obj:
        return {"source": self.source, "broken": self.broken, "polls": self.polls, "interval": self.interval,
                "end": self.end, "nodes": self.nodes, "events": self.events}

    @classmethod
    def from_json(cls, data: Obj) -> FaultTrace:
        try:
            return cls(source=str(data.get("source", "")), broken=str(data["broken"]), polls=int(data["polls"]),
                       interval=float(data["interval"]), end=float(data["end"]),
                       nodes={n: {c: float(t) for c, t in cs.items()} for n, cs in data["nodes"].items()},
                       events={s: float(t) for s, t in data["events"].items()})
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            raise TraceError(f"not a derived fault trace ({type(e).__name__}: {e})") from None


def _held(poll: Obj, gpu: Iterable[str]) -> dict[str, set[str]]:
    """GPU node (and CLUSTER) -> milestones held in the poll; CLUSTER also holds `state S`."""
    reached = milestones(poll)
    out = {n: reached.get(n, set()) for n in gpu}
    out[CLUSTER] = reached.get(CLUSTER, set()) | ({f"{STATE}={_state(poll)}"} if _state(poll) else set())
    return out


def fault_trace_of(polls: Sequence[Obj], source: str = "", mark: str = FAULT) -> FaultTrace:
    """The trace from the poll carrying `mark` (FAULT; MEND: the recovery after it) up to the next marked poll or
    the last one; the node the mark names is the broken one."""
    start = next((i for i, p in enumerate(polls) if mark_of(p, mark)), None)
    if start is None:
        raise TraceError(f"{source or 'the recording'}: no poll carries a '{mark}' mark")
    if start == 0:
        raise TraceError(f"{source or 'the recording'}: no poll before the '{mark}' mark (the state it changed)")
    fault = mark_of(polls[start], mark) or {}
    stop = next((i for i, p in enumerate(polls) if i > start and p.get("marks")), len(polls))
    before, during = polls[start - 1], polls[start:stop]
    t0 = float(fault.get("t", during[0]["t"]))
    gpu = sorted({n for p in (before, *during) for n in gpu_nodes(p)})
    held_before = _held(before, gpu)
    after = [(round(float(p["t"]) - t0, 2), _held(p, gpu)) for p in during]
    nodes = {n: changes(held_before[n], [(t, h[n]) for t, h in after]) for n in [*gpu, CLUSTER]}
    # Events: new since the fault, or an old one repeated (its count or last time moved on).
    seen = {(_event_key(e), _event_seen(e)) for e in before.get("events") or []}
    apps: dict[str, str] = {}
    node_names: set[str] = set()
    new: dict[tuple[str, ...], tuple[Obj, float]] = {}
    for p, (t, _) in zip(during, after, strict=True):
        apps.update({q["name"]: q["app"] for q in p.get("pods") or [] if q.get("name") and q.get("app")})
        node_names.update(n["name"] for n in p.get("nodes") or [] if n.get("name"))
        for e in p.get("events") or []:
            key = _event_key(e)
            if key not in new and (key, _event_seen(e)) not in seen:
                new[key] = (e, t)
    apps.update({q["name"]: q["app"] for q in before.get("pods") or [] if q.get("name") and q.get("app")})
    events: dict[str, float] = {}
    for e, t in new.values():
        sig = event_signature(e, apps, node_names)
        events[sig] = min(t, events.get(sig, t))
    ts = [float(p["t"]) for p in (before, *during)]
    return FaultTrace(source=source, broken=str(fault.get("node") or ""), nodes=nodes, events=events,
                      interval=max((round(b - a, 2) for a, b in zip(ts, ts[1:], strict=False)), default=0.0),
                      polls=len(during), end=after[-1][0])


def load_fault_trace(path: Path) -> FaultTrace:
    """A derived fault trace (.json) or a raw recording with a fault mark (.jsonl), by the file's suffix."""
    return load_derived(path, lambda polls, source: fault_trace_of(polls, source=source), FaultTrace.from_json,
                        "fault trace")


# ---- what every reference agrees on, and a candidate held to it ---------------------------------------------------
@dataclass(frozen=True)
class FaultOrder:
    """Per role (BROKEN, HEALTHY), bringup_order's Order over the changes."""

    roles: dict[str, bo.Order]

    def describe(self) -> list[str]:
        out = []
        for role, order in self.roles.items():
            out.append(f"{role} node: " + ", ".join(sorted(order.milestones)))
            out += [f"  {line}" for line in order.describe()]
        return out


def learn(references: Sequence[FaultTrace]) -> FaultOrder:
    """The changes, their order and the events every reference agrees on, per role."""
    split = [r.roles() for r in references]
    orders = {role: bo.learn([s[role] for s in split]) for role in (BROKEN, HEALTHY)}
    # A kept milestone is at 0 by definition: "after kept M" says nothing and would crowd every message.
    return FaultOrder({role: replace(o, before=frozenset((a, b) for a, b in o.before if not a.startswith(KEPT)))
                       for role, o in orders.items()})


def differences(order: FaultOrder, candidate: FaultTrace) -> list[str]:
    """Every way the candidate differs, one line each (bringup_order's lines; the node names the role)."""
    if not candidate.broken or candidate.broken not in candidate.nodes:
        return [f"no broken GPU node in the candidate trace (its fault mark names {candidate.broken or 'none'})"]
    split = candidate.roles()
    return [line for role, o in order.roles.items() for line in bo.differences(o, split[role])]


def report(order: FaultOrder, candidate: FaultTrace, allowed: Iterable[bo.Allowed] = ()) -> str:
    """One readable message of the differences no `allowed` entry explains, with the references' changes."""
    bad = bo.unexplained(differences(order, candidate), allowed)
    if not bad:
        return ""
    refs = next(iter(order.roles.values())).references
    return "\n".join([f"{candidate.source or 'the candidate'} differs from {refs} reference fault(s) in "
                      f"{len(bad)} way(s):", *(f"  - {line}" for line in bad),
                      "the references' changes since the fault, per role:", *(f"  {x}" for x in order.describe())])


# ---- recording: when a fault's state is steady --------------------------------------------------------------------
def settled(polls: Sequence[Obj], quiet: float) -> bool:
    """Whether the last `quiet` seconds of polls (at least two) show the same milestones, ClusterPolicy state and
    events (by key and count): nothing new for a while, what a recording waits for before it stops (pure)."""
    if len(polls) < 2 or float(polls[-1]["t"]) - float(polls[0]["t"]) < quiet:
        return False

    def view(p: Obj) -> tuple[Any, ...]:
        held = {n: frozenset(ms) for n, ms in milestones(p).items()}
        return (held, _state(p), frozenset((_event_key(e), str(e.get("count"))) for e in p.get("events") or []))

    last = view(polls[-1])
    recent = [p for p in polls if float(p["t"]) >= float(polls[-1]["t"]) - quiet]
    return len(recent) >= 2 and all(view(p) == last for p in recent)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m gpu_conformance.sim.services.fault_trace",
                                 description="Derive the fault trace of a raw recording with a fault mark.")
    sub = ap.add_subparsers(dest="cmd", required=True)
    der = sub.add_parser("derive", help="the changes since the fault and the events it left")
    der.add_argument("out")
    der.add_argument("raw")
    der.add_argument("--mark", default=FAULT, help=f"from which mark ({FAULT}, or {MEND}: the recovery)")
    a = ap.parse_args(argv)
    return write_derived(Path(a.out), Path(a.raw),
                         lambda polls, source: fault_trace_of(polls, source=source, mark=a.mark), "fault_trace")


if __name__ == "__main__":
    sys.exit(main())
