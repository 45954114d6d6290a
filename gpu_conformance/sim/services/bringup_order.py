"""What a bring-up must look like, learnt from recorded ones, and how another trace differs from it.

From one or more reference traces (the kind tier's, bringup_trace.py), per GPU node:
* the milestones reached: those every GPU node of every reference reached;
* the partial order: a before b when, on every GPU node of every reference, b was first seen more than that
  recording's poll interval after a (closer than one poll, they may have come either way);
* the events: those every reference left (required) and those any reference left (tolerated).

A candidate trace (the simulated cluster's) then must reach every required milestone on each of its GPU nodes, never
show b a whole poll before a for an ordered pair, leave every required event and no event outside the tolerated
ones. Each difference is one line; `Allowed` entries (a regular expression over the line, with the reason) name the
differences that are a reference's own artefact, not the simulation's.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from gpu_conformance.sim.services.bringup_trace import Trace


@dataclass(frozen=True)
class Allowed:
    """A difference the comparison accepts: `pattern` (re.search) over the difference's line, and why."""

    pattern: str
    reason: str

    def matches(self, line: str) -> bool:
        return re.search(self.pattern, line) is not None


@dataclass(frozen=True)
class Order:
    milestones: frozenset[str]
    before: frozenset[tuple[str, str]]  # (a, b): a strictly before b in every reference
    events_required: frozenset[str]
    events_tolerated: frozenset[str]
    references: int

    def describe(self) -> list[str]:
        """The order as readable lines: per milestone, what it always follows directly (transitive pairs left out)."""
        implied = {(a, c) for a, b in self.before for b2, c in self.before if b == b2}
        lines = []
        for b in sorted(self.milestones):
            after = sorted(a for a, b2 in self.before if b2 == b and (a, b) not in implied)
            if after:
                lines.append(f"{b} after {', '.join(after)}")
        return lines


class NoReferenceError(ValueError):
    """No reference trace with a GPU node."""


def _pairs(view: dict[str, float], interval: float) -> set[tuple[str, str]]:
    return {(a, b) for a, ta in view.items() for b, tb in view.items() if tb - ta > interval}


def learn(references: Sequence[Trace]) -> Order:
    """The milestones, order and events every reference (and every GPU node in it) agrees on."""
    views = [(t, t.node_view(n)) for t in references for n in sorted(t.nodes)]
    if not views:
        raise NoReferenceError("no reference trace has a GPU node")
    reached = frozenset.intersection(*(frozenset(v) for _, v in views))
    before: set[tuple[str, str]] | None = None
    for trace, view in views:
        pairs = _pairs({m: view[m] for m in reached}, trace.interval)
        before = pairs if before is None else before & pairs
    required = frozenset.intersection(*(frozenset(t.events) for t in references))
    tolerated = frozenset().union(*(t.events for t in references))
    return Order(reached, frozenset(before or ()), required, tolerated, len(references))


def differences(order: Order, candidate: Trace) -> list[str]:
    """Every way `candidate` differs from `order`, one line each (empty: it holds)."""
    out: list[str] = []
    if not candidate.nodes:
        return ["no GPU node in the candidate trace (no node labelled nvidia.com/gpu.present=true)"]
    for node in sorted(candidate.nodes):
        view = candidate.node_view(node)
        for m in sorted(order.milestones - set(view)):
            out.append(f"milestone missing on {node}: {m}")
        for m in sorted(set(view) - order.milestones):
            out.append(f"milestone not in the reference on {node}: {m}")
        for a, b in sorted(order.before):
            if a in view and b in view and view[a] - view[b] > 0:
                out.append(f"order inverted on {node}: {b} at {view[b]:.1f} s before {a} at {view[a]:.1f} s "
                           f"(the reference always has {a} first)")
    for sig in sorted(order.events_required - set(candidate.events)):
        out.append(f"event missing: {sig}")
    for sig in sorted(set(candidate.events) - order.events_tolerated):
        out.append(f"event not in the reference: {sig}")
    return out


def unexplained(lines: Iterable[str], allowed: Iterable[Allowed]) -> list[str]:
    allowed = list(allowed)
    return [line for line in lines if not any(a.matches(line) for a in allowed)]


def report(order: Order, candidate: Trace, allowed: Iterable[Allowed] = ()) -> str:
    """One readable message: the differences no `allowed` entry explains, then the reference order (empty: holds)."""
    bad = unexplained(differences(order, candidate), allowed)
    if not bad:
        return ""
    return "\n".join([f"{candidate.source or 'the candidate'} differs from {order.references} reference "
                      f"bring-up(s) in {len(bad)} way(s):", *(f"  - {line}" for line in bad),
                      "the reference order per GPU node:", *(f"  {line}" for line in order.describe())])
