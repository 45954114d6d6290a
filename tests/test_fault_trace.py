"""The simulator held to the kind tier under a fault: what a fault trace keeps, loses and gets back, the rules that
compare one with the kind recordings, and (slow) the simulated driver-gone fault with the real operator compared
with the kind tier's recordings of it."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from test_bringup_order import CUDA, DP, TK, VAL, event, node, pod

from gpu_conformance.sim.services import bringup_order as bo
from gpu_conformance.sim.services import bringup_trace as bt
from gpu_conformance.sim.services import fault_trace as ft

Obj = dict[str, Any]
DATA = Path(__file__).parent / "data" / "faults"


# ---- hand-made recordings ------------------------------------------------------------------------------------------
def healthy(n: str) -> list[Obj]:
    return [pod(TK, n, 1, ready=True, phase="Running"), pod(VAL, n, 4, ready=True, phase="Running"),
            pod(DP, n, 1, ready=True, phase="Running"), pod(CUDA, n, 1, phase="Succeeded")]


def broken(n: str) -> list[Obj]:
    """After the fault: the toolkit and the old cuda validator stay, the new validator and plugin pods wait."""
    return [pod(TK, n, 1, ready=True, phase="Running"), pod(VAL, n, 0, name=f"{VAL}-new{n[-1]}"),
            pod(DP, n, 0, name=f"{DP}-new{n[-1]}"), pod(CUDA, n, 1, phase="Succeeded")]


def fpoll(t: float, pods: list[Obj], gpus: dict[str, str], cp: str, events: list[Obj] | None = None,
          marks: list[Obj] | None = None) -> Obj:
    ready = [{"type": "Ready", "status": "True" if cp == "ready" else "False"}]
    p = {"t": t, "pods": pods, "nodes": [node(n, gpus=g) for n, g in gpus.items()] + [node("cp", gpu=False)],
         "clusterpolicy": [{"state": cp, "conditions": ready}], "events": events or []}
    return {**p, "marks": marks} if marks else p


OLD = event("Scheduled", "Pod", f"{VAL}-x1bcd", f"Successfully assigned gpu-operator/{VAL}-x1bcd to w1")
KILL = event("Killing", "Pod", f"{VAL}-x1bcd", f"Stopping container {VAL}")
CREATE = event("SuccessfulCreate", "DaemonSet", VAL, f"Created pod: {VAL}-new1")


def driver_gone(step: float = 2.0, cp_lost_poll: int = 3, dp_kept: bool = False, mend: bool = False,
                extra: tuple[Obj, ...] = (), source: str = "") -> ft.FaultTrace:
    return ft.fault_trace_of(driver_gone_polls(step, cp_lost_poll, dp_kept, mend, extra), source=source)


def driver_gone_polls(step: float = 2.0, cp_lost_poll: int = 3, dp_kept: bool = False, mend: bool = False,
                      extra: tuple[Obj, ...] = ()) -> list[Obj]:
    """w1 broken at step/2 (the mark on the poll at `step`): its validator and plugin restarted and waiting, its GPUs
    unallocatable; the ClusterPolicy notReady from poll `cp_lost_poll` on; w2 untouched."""
    before = fpoll(0, healthy("w1") + healthy("w2"), {"w1": "2", "w2": "2"}, "ready", [OLD])
    polls = [before]
    for i in range(1, 6):
        pods = (healthy("w1") if dp_kept else broken("w1")) + healthy("w2")
        if dp_kept:
            pods = [p if p["app"] != VAL else pod(VAL, "w1", 0, name=f"{VAL}-new1") for p in pods]
        bumped = {**OLD, "count": 1}  # the old event unchanged
        events = [bumped, KILL, CREATE, *extra] if i >= 2 else [bumped, KILL]
        polls.append(fpoll(i * step, pods, {"w1": "2" if dp_kept else "0", "w2": "2"},
                           "notReady" if i >= cp_lost_poll else "ready", events,
                           [{"name": ft.FAULT, "t": step / 2, "node": "w1"}] if i == 1 else None))
    if mend:
        polls.append(fpoll(6 * step, healthy("w1") + healthy("w2"), {"w1": "2", "w2": "2"}, "ready",
                           marks=[{"name": ft.MEND, "t": 6 * step - 1, "node": "w1"}]))
    return polls


# ---- what a fault trace holds --------------------------------------------------------------------------------------
@pytest.mark.fast
def test_changes_name_what_was_kept_lost_got_back_and_came_new() -> None:
    before = {"a", "b", "c", "d"}
    after = [(1.0, {"a", "c"}), (2.0, {"a", "b", "e"}), (3.0, {"a", "b", "d", "e"}), (4.0, {"a", "b", "d", "e"})]
    assert ft.changes(before, after) == {"kept a": 0.0, "lost b": 1.0, "back b": 2.0, "lost c": 2.0,
                                         "lost d": 1.0, "back d": 3.0, "new e": 2.0}
    # Gone again after coming back: lost, no back; held since the first poll after the fault: new at that poll.
    assert ft.changes({"a"}, [(1.0, {"b"}), (2.0, {"a", "b"}), (3.0, {"b"})]) == {"lost a": 1.0, "new b": 1.0}


@pytest.mark.fast
def test_a_fault_trace_from_the_mark_per_node_with_the_cluster_and_the_new_events() -> None:
    trace = driver_gone()
    assert trace.broken == "w1" and trace.polls == 5 and trace.interval == 2.0 and trace.end == 9.0
    w1, w2 = trace.nodes["w1"], trace.nodes["w2"]
    assert {c for c in w1 if c.startswith("kept")} == {
        f"kept {TK}/driver-validation", f"kept {TK}/ready", f"kept {CUDA}/cuda-validation", f"kept {CUDA}/succeeded"}
    assert w1[f"lost {VAL}/driver-validation"] == 1.0 and w1[f"lost {bt.GPU_ALLOCATABLE}"] == 1.0
    assert not any(c.startswith(("back", "new")) for c in w1)
    assert all(c.startswith("kept") for c in w2) and len(w2) == 12
    assert trace.nodes[bt.CLUSTER] == {f"lost {bt.CLUSTERPOLICY_READY}": 5.0, "lost state=ready": 5.0,
                                       "new state=notReady": 5.0}
    # Events: new since the fault (the old one unchanged is not), masked as bringup_trace signs them.
    assert trace.events == {f"Pod {VAL}: Killing: Stopping container {VAL}": 1.0,
                            f"DaemonSet {VAL}: SuccessfulCreate: Created pod: <{VAL}>": 3.0}
    # The mend mark ends the fault: what follows it is not part of it.
    assert driver_gone(mend=True).to_json() == trace.to_json()
    # From the mend mark on, the recovery reads the same way: what the broken node got back is new since then.
    mended = ft.fault_trace_of(driver_gone_polls(mend=True), mark=ft.MEND)
    assert mended.broken == "w1" and mended.polls == 1 and mended.end == 1.0
    assert mended.nodes["w1"][f"new {VAL}/ready"] == 1.0 and mended.nodes[bt.CLUSTER] == {
        f"new {bt.CLUSTERPOLICY_READY}": 1.0, "lost state=notReady": 1.0, "new state=ready": 1.0}
    assert ft.FaultTrace.from_json(json.loads(json.dumps(trace.to_json()))).to_json() == trace.to_json()


@pytest.mark.fast
def test_an_old_event_repeated_after_the_fault_is_one_of_its_events() -> None:
    again = {**OLD, "count": 2, "lastTimestamp": "later"}
    trace = driver_gone(extra=(again,))
    assert f"Pod {VAL}: Scheduled: Successfully assigned gpu-operator/<{VAL}> to <node>" in trace.events


@pytest.mark.fast
def test_recordings_without_a_usable_fault_mark_say_so_in_one_line(tmp_path: Path) -> None:
    p = fpoll(0, healthy("w1"), {"w1": "2"}, "ready")
    for polls, want in (([p, p], "no poll carries a 'fault' mark"),
                        ([{**p, "marks": [{"name": "fault", "t": 0}]}, p], "no poll before the 'fault' mark")):
        with pytest.raises(bt.TraceError, match=want):
            ft.fault_trace_of(polls)
    with pytest.raises(bt.TraceError, match="not a derived fault trace"):
        ft.FaultTrace.from_json({"nodes": 1})
    raw = tmp_path / "rec.jsonl"
    raw.write_text(json.dumps(p) + "\n")
    assert ft.main(["derive", str(tmp_path / "out.json"), str(raw)]) == 2
    raw.write_text("".join(json.dumps(x) + "\n" for x in [p, {**p, "t": 2, "marks": [{"name": "fault", "t": 1,
                                                                                        "node": "w1"}]}]))
    assert ft.main(["derive", str(tmp_path / "out.json"), str(raw)]) == 0
    assert ft.load_fault_trace(tmp_path / "out.json").broken == "w1"
    assert ft.load_fault_trace(raw).broken == "w1"


@pytest.mark.fast
def test_a_poller_mark_goes_with_the_next_poll() -> None:
    poller = bt.Poller(lambda kind: [], interval=0.02)
    first = poller.poll_once()
    t = poller.mark(ft.FAULT, node="w1")
    second, third = poller.poll_once(), poller.poll_once()
    assert "marks" not in first and second["marks"] == [{"name": ft.FAULT, "t": t, "node": "w1"}]
    assert "marks" not in third


@pytest.mark.fast
def test_settled_is_nothing_new_for_the_quiet_time() -> None:
    same = [fpoll(t, healthy("w1"), {"w1": "2"}, "notReady", [KILL]) for t in (0, 2, 4, 6)]
    assert ft.settled(same, 6) and not ft.settled(same, 7) and not ft.settled(same[:1], 0)
    changed = [*same[:3], fpoll(6, healthy("w1"), {"w1": "2"}, "notReady", [{**KILL, "count": 2}])]
    assert not ft.settled(changed, 4) and ft.settled([*changed, {**changed[-1], "t": 10}], 4)
    moved = [*same, fpoll(8, broken("w1"), {"w1": "2"}, "notReady", [KILL])]
    assert not ft.settled(moved, 2)


@pytest.mark.fast
def test_a_recording_waits_for_the_policy_state_and_nothing_new(monkeypatch: pytest.MonkeyPatch,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    from gpu_conformance.errors import ConformanceError
    from gpu_conformance.sim.kind import driver_gone as dg

    state = ["notReady"]
    objs = {"clusterpolicies": lambda: [{"status": {"state": state[0]}}]}
    poller = bt.Poller(lambda kind: objs[kind]() if kind in objs else [], interval=0.02).start()
    try:
        assert dg.wait_steady(poller, 0.0, 0.1, "notReady", timeout=5, period=0.02)
        assert not dg.wait_steady(poller, 0.0, 0.1, "ready", timeout=0.3, period=0.02)  # the wrong state
    finally:
        poller.stop()

    def no_kind(out: Path, **kw: Any) -> None:
        raise ConformanceError("another kind tier is running on this machine")

    monkeypatch.setattr(dg, "record_kind", no_kind)
    assert dg.main(["record", "x.jsonl"]) == 2
    assert capsys.readouterr().err == "driver_gone: another kind tier is running on this machine\n"


# ---- the comparison --------------------------------------------------------------------------------------------------
def refs() -> list[ft.FaultTrace]:
    return [driver_gone(source="kind-1"), driver_gone(step=3.0, source="kind-2")]


@pytest.mark.fast
def test_a_candidate_with_the_same_changes_holds_and_roles_split_the_nodes() -> None:
    order = ft.learn(refs())
    roles = refs()[0].roles()
    assert set(roles[ft.BROKEN].nodes) == {"w1"} and set(roles[ft.HEALTHY].nodes) == {"w2"}
    assert roles[ft.BROKEN].events and not roles[ft.HEALTHY].events
    assert (f"lost {VAL}/ready", f"lost {bt.CLUSTERPOLICY_READY}") in order.roles[ft.BROKEN].before
    assert ft.report(order, driver_gone(step=0.5, cp_lost_poll=3, source="sim")) == ""


@pytest.mark.fast
def test_a_change_missing_one_not_in_the_references_and_an_inversion_fail_in_one_message() -> None:
    order = ft.learn(refs())
    # The plugin kept on the broken node: its losses missing, its keeps not in the references.
    msg = ft.report(order, driver_gone(step=0.5, cp_lost_poll=3, dp_kept=True, source="sim"))
    assert msg.startswith("sim differs from 2 reference fault(s) in ")
    assert f"milestone missing on w1: lost {DP}/ready" in msg
    assert f"milestone not in the reference on w1: kept {DP}/ready" in msg
    assert "the references' changes since the fault, per role:" in msg
    # The ClusterPolicy notReady a whole poll before the validator was lost.
    early = driver_gone(step=0.5, cp_lost_poll=3)
    early.nodes[bt.CLUSTER] = {k: 0.2 for k in early.nodes[bt.CLUSTER]}
    assert any(line.startswith(f"order inverted on w1: lost {bt.CLUSTERPOLICY_READY} at 0.2 s before lost {VAL}/")
               for line in ft.differences(order, early))
    # Events: one missing, one no reference left; a difference allowed with its reason is accepted.
    other = driver_gone(step=0.5, cp_lost_poll=3, extra=(event("FailedCreate", "DaemonSet", DP, "x"),))
    del other.events[f"Pod {VAL}: Killing: Stopping container {VAL}"]
    lines = ft.differences(order, other)
    assert lines == [f"event missing: Pod {VAL}: Killing: Stopping container {VAL}",
                     f"event not in the reference: DaemonSet {DP}: FailedCreate: x"]
    assert ft.report(order, other, [bo.Allowed(r"^event (missing|not in the reference): ", "why")]) == ""
    assert ft.differences(order, ft.FaultTrace(broken="w9")) == [
        "no broken GPU node in the candidate trace (its fault mark names w9)"]


# ---- the committed kind traces and the sim side ----------------------------------------------------------------
def kind_fault_traces(mark: str = ft.FAULT) -> list[ft.FaultTrace]:
    """The kind recordings' traces from the fault (kind-cdi-driver-gone-runN.json) or from the mend (-mend)."""
    paths = sorted(DATA.glob("kind-cdi-driver-gone-run*.json"))
    return [ft.load_fault_trace(p) for p in paths if p.stem.endswith("-mend") == (mark == ft.MEND)]


@pytest.mark.fast
def test_the_committed_kind_traces_show_what_a_gone_driver_takes_and_its_mend_gives_back() -> None:
    fault = ft.learn(kind_fault_traces())
    broken, healthy = fault.roles[ft.BROKEN].milestones, fault.roles[ft.HEALTHY].milestones
    # The broken node: the restarted validator waits in driver-validation, its plugin in toolkit-validation (the
    # validator's preStop removed toolkit-ready), kubelet makes the GPUs unallocatable; the toolkit and the old cuda
    # validator pod stay; the operator marks the ClusterPolicy notReady. Nothing comes back.
    assert {f"lost {VAL}/driver-validation", f"lost {VAL}/ready", f"lost {DP}/toolkit-validation", f"lost {DP}/ready",
            f"lost {bt.GPU_ALLOCATABLE}", f"kept {TK}/ready", f"kept {CUDA}/succeeded",
            f"lost {bt.CLUSTERPOLICY_READY}", "new state=notReady"} <= broken
    assert not any(c.startswith(("back ", "new nvidia", "new node")) for c in broken)
    # The other node keeps every milestone it had.
    own = [c for c in healthy if bt.CLUSTERPOLICY_READY not in c and f"{ft.STATE}=" not in c]
    assert len(own) == 12 and all(c.startswith("kept ") for c in own), own
    assert f"Pod {VAL}: Killing: Stopping container {VAL}" in fault.roles[ft.BROKEN].events_required
    mend = ft.learn(kind_fault_traces(ft.MEND)).roles[ft.BROKEN]
    assert {f"new {VAL}/ready", f"new {bt.GPU_ALLOCATABLE}", f"new {bt.CLUSTERPOLICY_READY}"} <= mend.milestones
    assert (f"new {VAL}/driver-validation", f"new {bt.CLUSTERPOLICY_READY}") in mend.before
    # The mended validator replaces the node's cuda validator pod: gone a while, then completed again.
    assert {f"lost {CUDA}/succeeded", f"back {CUDA}/succeeded"} <= mend.milestones
    assert f"Pod {CUDA}: Started: Container started" in mend.events_required


@pytest.mark.sim
@pytest.mark.realop
def test_the_simulated_driver_gone_fault_holds_to_the_kind_recordings(tmp_path: Path) -> None:
    from gpu_conformance.sim.kind.driver_gone import ALLOWED_DIFFERENCES, MEND_ALLOWED_DIFFERENCES, sim_driver_gone

    t0 = time.monotonic()
    polls = sim_driver_gone()
    (tmp_path / "sim.jsonl").write_text("".join(json.dumps(p) + "\n" for p in polls))
    print(f"simulated driver-gone fault and mend recorded in {time.monotonic() - t0:.0f} s: {tmp_path / 'sim.jsonl'}")
    msgs = []
    for mark, allowed in ((ft.FAULT, ALLOWED_DIFFERENCES), (ft.MEND, MEND_ALLOWED_DIFFERENCES)):
        sim = ft.fault_trace_of(polls, source=f"the simulated driver-gone fault, from its {mark}", mark=mark)
        msgs.append(ft.report(ft.learn(kind_fault_traces(mark)), sim, allowed))
    assert not any(msgs), "\n".join(m for m in msgs if m)
