"""One conformance run: connect (or boot the simulated cluster), read once, check, probe, report."""

from __future__ import annotations

import datetime as dt
import secrets
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from gpu_conformance import catalogue, heap
from gpu_conformance.check_input import CheckInput, check_input
from gpu_conformance.checks.common import operator_image
from gpu_conformance.cluster.connect import Connection, connect
from gpu_conformance.cluster.reader import read_snapshot
from gpu_conformance.cluster.snapshot import ClusterSnapshot, name_of
from gpu_conformance.errors import ClusterAccessError, OperatorNotInstalled
from gpu_conformance.facts import ClusterFacts
from gpu_conformance.model import LAYER_ORDER, Finding, Layer
from gpu_conformance.operands import CLUSTERPOLICY_CRD, POLICY_SWITCHES
from gpu_conformance.probe.api import ProbeApi
from gpu_conformance.probe.leftovers import list_leftovers
from gpu_conformance.probe.observations import Leftover, ProbeObservations, leftovers_dict
from gpu_conformance.probe.run import Probe, required_permissions, resolve_namespace
from gpu_conformance.resource_model import resource_model
from gpu_conformance.run_result import RunResult
from gpu_conformance.settings import Settings
from gpu_conformance.targets import Target, open_target
from gpu_conformance.verdict import CheckOutcome, Verdict, decide


def new_run_id() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y%m%d-%H%M%S") + "-" + secrets.token_hex(3)


def driver_config(facts: ClusterFacts) -> dict[str, str]:
    """How each GPU node gets its driver, as the report's header states it: the very DriverMode DRV-001 judges
    (the run's facts, computed once), so the header and the check cannot disagree."""
    return {node: mode.report_name for node, mode in facts.driver_modes.items()}


class ConformanceRun:
    def __init__(self, settings: Settings, target: str = "current", target_options: Any = None) -> None:
        self.settings = settings
        self.target = target
        # The target's own options dataclass (SimOptions, ...); None: its defaults.
        self.target_options = target_options
        self.started_at = dt.datetime.now(dt.UTC)
        self._t0 = time.monotonic()
        if not settings.run_id:
            settings.run_id = new_run_id()
        # What --cluster started (the simulated cluster), stopped in close().
        self.target_handle: Target | None = None
        self.conn: Connection | None = None
        self.snapshot: ClusterSnapshot | None = None
        # What every check reads (snapshot, facts, probe observations, settings), built once after the read.
        self.input: CheckInput | None = None
        self.findings: list[Finding] = []
        self.probe_run: ProbeObservations | None = None
        self.probe_namespace: tuple[str, str] | None = None
        # Probe objects of earlier runs (kill -9): listed by every run, whatever layers it selects.
        self.leftovers: list[Leftover] = []
        # How the probe ended when it did not finish (interruption, lost API server): one line for the user.
        self.probe_cleanup = ""
        self._verdict: Verdict | None = None
        self.layers_selected: list[Layer] = list(LAYER_ORDER)

    # ---- lifecycle -------------------------------------------------------------------------
    def start(self) -> None:
        target = open_target(self.target, self.settings, self.target_options)
        self.target_handle = target  # before start(): close() stops what a failed start left
        target.start()
        endpoint = target.connect()
        self.settings.kubeconfig, self.settings.context = endpoint.kubeconfig, endpoint.context
        self.conn = connect(self.settings.kubeconfig, self.settings.context)
        with heap.collection_paused():
            snap = read_snapshot(self.conn, self.settings.operator_namespace, self.settings.gpu_node_selector)
        if CLUSTERPOLICY_CRD not in snap.crds and not snap.operator_pods and not snap.clusterpolicies:
            raise OperatorNotInstalled(
                f"the NVIDIA GPU Operator is not installed on {snap.server} (no {CLUSTERPOLICY_CRD} CRD, no pod "
                "labelled app=gpu-operator): install it first (helm install gpu-operator nvidia/gpu-operator)")
        if not self.settings.no_probe and Layer.PROBE in self.layers_selected:
            from gpu_conformance.cluster.reader import ClusterReader

            self.probe_namespace = ns, mode = resolve_namespace(ProbeApi(self.conn), self.settings)
            missing = ClusterReader(self.conn).missing_permissions(
                required_permissions(ns, mode, dra=resource_model(snap).dra))  # before the facts: fail fast
            if missing:
                raise ClusterAccessError("missing permissions for the probe: " + "; ".join(missing)
                                         + " (apply rbac.yaml, or pass --no-probe for a read-only run)")
        self.leftovers = list_leftovers(self.conn, self.settings.run_id)
        if not self.settings.operator_namespace:
            self.settings.operator_namespace = snap.operator_namespace or None
        self.judge_read(snap)
        heap.settle()

    def judge_read(self, snap: ClusterSnapshot) -> None:
        """Build the run's one check input from the read (the facts, once) and run every check on it; the probe
        layer's say nothing until run_probe adds the observations."""
        self.snapshot = snap
        self.input = inp = check_input(snap, self.settings)
        for check in catalogue.all_checks():
            if check.func is not None:
                self.findings.extend(check.run(inp))

    def close(self) -> None:
        heap.release()
        if self.conn:
            self.conn.close()
        if self.target_handle is not None:
            self.target_handle.stop()
            self.target_handle = None

    # ---- outcomes --------------------------------------------------------------------------
    def verdict(self) -> Verdict:
        assert self.snapshot is not None
        if self._verdict is None:
            self._verdict = decide(catalogue.all_checks(), self.findings, self.snapshot.gpu_node_names,
                                   self.layers_judged())
        return self._verdict

    def forget_verdict(self) -> None:
        """The observations changed after the verdict was taken (the probe was cut short): decide again."""
        self._verdict = None

    def layers_judged(self) -> list[Layer]:
        """The selected layers; with the probe, every earlier layer too: it chose the probe's nodes."""
        if Layer.PROBE in self.layers_selected:
            probed = self.probe_run is not None and not self.settings.no_probe
            return list(LAYER_ORDER) if probed else [layer for layer in LAYER_ORDER if layer != Layer.PROBE]
        return list(self.layers_selected)

    def outcome(self, check_id: str) -> CheckOutcome:
        check = catalogue.get(check_id)
        if check.layer == Layer.PROBE and self.probe_run is None:
            self.run_probe()
        return self.verdict().outcomes[check_id]

    def run_probe(self, nodes: list[str] | None = None) -> ProbeObservations:
        """Probe once per run, whatever happens: a second call returns the first one's observations.

        `nodes` probes exactly those nodes whatever the earlier layers said: where the probe itself is what is
        being proven (the kind tier's probe cases on one worker, bench.py).

        Raises what ended it early (ClusterAccessError, KeyboardInterrupt) after its findings are recorded.
        """
        assert self.snapshot is not None and self.conn is not None and self.input is not None
        if self.probe_run is not None:
            return self.probe_run
        probe = Probe(self.conn, self.settings, self.snapshot)
        self.probe_run = probe.obs
        self.input = self.input.with_probe(probe.obs)
        probe.obs.leftovers = self.leftovers
        try:
            if self.settings.no_probe:
                probe.obs.skipped = "probe disabled (--no-probe): strictly read-only run"
            else:
                pre = decide(catalogue.all_checks(), self.findings, self.snapshot.gpu_node_names,
                             [layer for layer in LAYER_ORDER if layer != Layer.PROBE])
                eligible = [n.node for n in pre.nodes if n.gpu_path_clear]
                probe.run(eligible if nodes is None else nodes, self.probe_namespace)
        finally:
            if probe.obs.aborted:
                self.probe_cleanup = probe.obs.aborted
            for c in catalogue.checks_for(Layer.PROBE):
                if c.func is not None:
                    self.findings.extend(c.run(self.input))
            self._verdict = None
        return self.probe_run

    # ---- the result ------------------------------------------------------------------------
    def result(self) -> RunResult:
        assert self.snapshot is not None and self.input is not None
        snap, facts = self.snapshot, self.input.facts
        policy = {label: snap.policy_spec(*path) for label, path in POLICY_SWITCHES.items()}
        settings = asdict(self.settings)
        return RunResult(
            run_id=self.settings.run_id,
            started_at=self.started_at.isoformat(timespec="seconds"),
            duration_seconds=time.monotonic() - self._t0,
            cluster={"server": snap.server, "context": snap.context, "kubernetes_version": snap.kubernetes_version,
                     "requests": snap.requests, "read_seconds": round(snap.read_seconds, 3),
                     "nodes": len(snap.nodes), "gpu_nodes": len(snap.gpu_nodes), "target": self.target},
            operator={"namespace": snap.operator_namespace, "version": facts.operator.tag,
                      "image": operator_image(snap), "policy": policy,
                      "clusterpolicy": name_of(snap.active_clusterpolicy or {}),
                      "resource_model": str(facts.resource_model)},
            driver_config=driver_config(facts),
            checks=catalogue.all_checks(),
            findings=self.findings,
            verdict=self.verdict(),
            probe=self.probe_run.to_dict() if self.probe_run else {
                "skipped": "probe layer not run", "pods": [], **leftovers_dict(self.leftovers)},
            settings=settings,
        )

    def write_reports(self, result: RunResult | None = None) -> dict[str, Path]:
        """Every reporter's file (report.reporters.REPORTERS) of `result` (default: the run's result now)."""
        from gpu_conformance.report.reporters import write_reports

        report_dir = Path(self.settings.report_dir)
        report_dir.mkdir(parents=True, exist_ok=True)
        return write_reports(result or self.result(), report_dir)
