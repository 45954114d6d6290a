"""Pod diagnosis every layer shares: which operand pod a node has, why it is not Ready, and findings about it.

A pod that is not Ready is explained, in order, by what stops it earliest: the container runtime refusing to
create its sandbox or container (events FailedCreatePodSandBox, CreateContainerError, unresolvable CDI devices),
an image that cannot be pulled, an init container stuck, a main container crashing. The runtime and the image
come first because they make every later symptom (a validator "stuck" in driver-validation) meaningless — but
only events that explain the present count (event_history): a refusal seen before the pod last ran, or before
the node's toolkit wrote the nvidia runtime handler, is bring-up history.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from gpu_conformance import log_quote
from gpu_conformance import operands as ops
from gpu_conformance import upgrade_states as upg
from gpu_conformance.check_input import CheckInput
from gpu_conformance.checks.nvidia_hook import HINT_DRIVER_SIDE, driver_side_refusal
from gpu_conformance.cluster.podstate import (
    IMAGE_REASONS,
    RUNTIME_REASONS,
    failing_container,
    pod_ready,
    pod_status_text,
    restart_count,
    stuck_init_container,
)
from gpu_conformance.cluster.snapshot import ClusterSnapshot, labels_of, name_of
from gpu_conformance.cluster.timeline import (
    any_container_started,
    condition_since,
    container_started,
    event_last_seen,
    parse_time,
    pod_last_start,
    stamp,
)
from gpu_conformance.facts import operand_daemonsets
from gpu_conformance.model import Finding, Status
from gpu_conformance.settings import Settings

Obj = dict[str, Any]
RESTART_WARN = 1      # the operator's own e2e accepts at most one restart of driver/toolkit/plugin/GFD
LOG_LINES = 20

SANDBOX_EVENT = "FailedCreatePodSandBox"
HINT_RUNTIME = ("The container runtime on this node cannot run the pod. 'no runtime for \"nvidia\" is configured' "
                "(containerd) or 'RuntimeHandler \"nvidia\" not supported' (CRI-O) means the runtime config has no "
                "nvidia handler: the toolkit did not write it, or another config file overrides its drop-in "
                "(containerd 1.7 replaces a whole [plugins.\"io.containerd.grpc.v1.cri\"] section it merges). Check "
                "`containerd config dump | grep -A3 nvidia` on the node and the toolkit pod's log. 'unresolvable "
                "CDI devices' means the CDI spec under /var/run/cdi is missing.")
HINT_IMAGE = ("The node cannot pull the image: check the registry, pull secrets and, in air-gapped clusters, that "
              "the mirror holds this exact tag (driver images are tagged per kernel/OS: <version>-<os>).")


def namespace(snapshot: ClusterSnapshot, settings: Settings) -> str:
    return settings.operator_namespace or snapshot.operator_namespace or "gpu-operator"



def node_labels(snapshot: ClusterSnapshot, node: str) -> dict[str, str]:
    return labels_of(snapshot.node_by_name.get(node, {}))


def app_pod(snapshot: ClusterSnapshot, app: str, node: str) -> Obj | None:
    """A pod no DaemonSet owns (the validator's nvidia-cuda-validator-*), by its app label; operands: operand_pod."""
    return snapshot.labelled_pod_on_node({"app": app}, node)


def selector_text(snapshot: ClusterSnapshot, operand: ops.Operand) -> str:
    """A label selector for the operand's pods that holds at the cluster's operator version: its DaemonSet's own."""
    ds = next(iter(operand_daemonsets(snapshot, operand)), None)
    selector = ((ds or {}).get("spec", {}).get("selector") or {}).get("matchLabels") or {"app": operand.app}
    return ",".join(f"{k}={v}" for k, v in selector.items())


# One log line quoted in a finding at most this long: a finding is read by a person, in a terminal too.
LOG_LINE_CHARS = 500


def last_log(snapshot: ClusterSnapshot, pod: Obj, container: str) -> str:
    text = snapshot.logs.get((name_of(pod), container)) or ""
    return "\n".join(_clip(line) for line in text.rstrip().splitlines()[-LOG_LINES:])


def _clip(line: str) -> str:
    if len(line) <= LOG_LINE_CHARS:
        return line
    return f"{line[:LOG_LINE_CHARS]}… ({len(line) - LOG_LINE_CHARS} more characters)"


def plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


@dataclass
class PodProblem:
    """Why a pod is not Ready, in words and as evidence."""

    summary: str           # e.g. "stuck in init container k8s-driver-manager (Init:CrashLoopBackOff, 5 restarts)"
    container: str | None  # the container to read logs of
    stage: str | None      # the stuck init container, if that is the problem
    evidence: dict[str, Any]
    log: str = ""
    # The runtime or the registry stops the pod before its programs run (explains everything else).
    start: StartProblem | None = None
    # kubelet's own words on the failing container's startup/readiness/liveness probe, newest first.
    probe_failures: list[str] = field(default_factory=list)


def pod_problem(inp: CheckInput, pod: Obj) -> PodProblem:
    snapshot = inp.snapshot
    text = pod_status_text(pod)
    stuck = stuck_init_container(pod)
    ev: dict[str, Any] = {"pod": name_of(pod), "status": text, "phase": pod.get("status", {}).get("phase")}
    start = start_problem(inp, pod)
    if start is not None:
        ev.update({"reason": start.reason, "message": start.message, "state": "waiting"})
        if start.container:
            ev["container"] = start.container
        where = f"container {start.container} " if start.container else ""
        said = f': "{start.message}"' if start.message and start.message != start.reason else ""
        return PodProblem(f"cannot start ({text}, {where}{start.reason}){said}", start.container, None, ev,
                          start=start)
    if stuck is not None:
        detail = f"{text}, {plural(stuck['restarts'], 'restart')}"
        if stuck["exit_code"] not in (None, 0):
            detail += f", exit code {stuck['exit_code']}"
        ev.update({"stuck_init_container": stuck["name"], "state": stuck["state"], "reason": stuck["reason"],
                   "exit_code": stuck["exit_code"], "restarts": stuck["restarts"]})
        if stuck["message"]:
            ev["message"] = stuck["message"]
        log = last_log(snapshot, pod, stuck["name"])
        return PodProblem(f"stuck in init container {stuck['name']} ({detail})", stuck["name"], stuck["name"],
                          ev, log)
    bad = failing_container(pod)
    if bad is not None:
        detail = f"{bad['reason'] or bad['state']}, {plural(bad['restarts'], 'restart')}"
        if bad["exit_code"] not in (None, 0):
            detail += f", exit code {bad['exit_code']}"
        if bad["state"] == "running":
            detail = f"running but not Ready, {plural(bad['restarts'], 'restart')}"
        ev.update({"container": bad["name"], "state": bad["state"], "reason": bad["reason"],
                   "exit_code": bad["exit_code"], "restarts": bad["restarts"]})
        if bad["message"]:
            ev["message"] = bad["message"]
        probes = probe_failures(snapshot, pod, bad["name"])
        if probes:
            ev["probe_failures"] = probes
        return PodProblem(f"container {bad['name']} not ready ({detail}){quote_probe_failures(probes)}", bad["name"],
                          None, ev, last_log(snapshot, pod, bad["name"]), probe_failures=probes)
    return PodProblem(f"not Ready ({text})", None, None, ev)


# kubelet's prober records every failed probe as a Warning event about the container (involvedObject.fieldPath
# spec.containers{<name>}), reason Unhealthy, message "<Startup|Readiness|Liveness> probe failed: <output>" or
# "... probe errored: <error>" (pkg/kubelet/prober). The output is the probe's own: the driver's startup probe
# prints what nvidia-smi said ("No devices were found"), so it is the driver's diagnosis in the driver's words.
PROBE_EVENT_REASON = "Unhealthy"
PROBE_TYPES = ("Startup", "Readiness", "Liveness")
# At most this many different probe messages are quoted, each at most this long: the newest says what is wrong
# now, an older different one shows a change; more is noise in a one-line finding.
PROBE_QUOTES = 2
PROBE_QUOTE_CHARS = 300


def _event_time(e: Obj) -> str:
    """When kubelet last saw it: a repeated event's series or lastTimestamp, else its first report."""
    return ((e.get("series") or {}).get("lastObservedTime") or e.get("lastTimestamp") or e.get("eventTime")
            or e.get("metadata", {}).get("creationTimestamp") or "")


def probe_failures(snapshot: ClusterSnapshot, pod: Obj, container: str) -> list[str]:
    """kubelet's probe failure messages for one container of the pod, newest first, different ones only, clipped.

    An event without a fieldPath is about the pod as a whole and counts; one naming another container does not.
    Each is quoted as kubelet wrote it, with its count: kubelet aggregates identical probe failures into one event.
    """
    own = f"spec.containers{{{container}}}"
    found = []
    for e in snapshot.events_for("Pod", name_of(pod)):
        msg = (e.get("message") or "").strip()
        field_path = (e.get("involvedObject") or {}).get("fieldPath") or ""
        if e.get("reason") != PROBE_EVENT_REASON or (field_path and field_path != own):
            continue
        if not any(msg.startswith(f"{t} probe failed") or msg.startswith(f"{t} probe errored") for t in PROBE_TYPES):
            continue
        found.append(e)
    out: list[str] = []
    seen: set[str] = set()
    for e in sorted(found, key=_event_time, reverse=True):
        msg = " ".join((e.get("message") or "").split())
        if msg in seen:
            continue
        seen.add(msg)
        count = int((e.get("series") or {}).get("count") or e.get("count") or 1)
        shown = msg if len(msg) <= PROBE_QUOTE_CHARS else f"{msg[:PROBE_QUOTE_CHARS]}…"
        out.append(f'"{shown}"' + (f" ({count} times)" if count > 1 else ""))
        if len(out) == PROBE_QUOTES:
            break
    return out


def quote_probe_failures(probes: list[str]) -> str:
    """' — kubelet: "Startup probe failed: No devices were found" (41235 times)' (and an older, different one)."""
    if not probes:
        return ""
    return f" — kubelet: {probes[0]}" + (f"; before: {probes[1]}" if len(probes) > 1 else "")


def with_log(message: str, log: str) -> str:
    # The line that says what went wrong: the last one, or for the driver container the error above its cleanup.
    return log_quote.with_log(message, log)


def logs_cmd(ns: str, pod: Obj, container: str | None, previous: bool = False) -> str:
    if container is None:
        return f"kubectl -n {ns} describe pod {name_of(pod)}"
    return f"kubectl -n {ns} logs {name_of(pod)} -c {container}" + (" --previous" if previous else "")


def problem_finding(inp: CheckInput, ns: str, node: str, pod: Obj, what: str,
                    meaning: str, hint: str, expected: str = "Ready") -> Finding:
    """A FAIL for a pod that is not Ready: what it is stuck in, its logs, and the command to read them.

    A pod the container runtime refuses is DRV-006's finding (the runtime, not this operand, is broken): n/a here.
    """
    p = pod_problem(inp, pod)
    if p.start is not None and p.start.kind != "image":
        return Finding(Status.NA, f"{what} {name_of(pod)} on {node} is refused by the container runtime "
                       f"({p.start.reason}): judged by DRV-006", node=node,
                       evidence={"object": f"Pod/{name_of(pod)}", "reason": p.start.reason})
    ev = {"object": f"Pod/{name_of(pod)}", "field": "status", "observed": p.evidence["status"],
          "expected": expected, **p.evidence}
    if p.log:
        ev["log"] = p.log
    restarts = p.evidence.get("restarts", 0)
    msg = f"{what} {name_of(pod)} on {node} {p.summary}"
    if p.start is not None:
        # What the runtime or registry said outranks the layer's guess from the container it would have run.
        meaning, hint = p.start.meaning, p.start.hint
    if meaning:
        msg += f": {meaning}"
    return Finding(Status.FAIL, with_log(msg, p.log), node=node, evidence=ev, hint=hint,
                   kubectl=logs_cmd(ns, pod, p.container, previous=bool(restarts) and p.evidence.get("state")
                                    == "waiting"))


def restart_warn_or_pass(ns: str, node: str, pod: Obj, what: str, detail: str = "") -> Finding:
    restarts = restart_count(pod)
    ev = {"object": f"Pod/{name_of(pod)}", "field": "status.conditions[Ready]", "observed": "True",
          "expected": "True", "restarts": restarts}
    if restarts > RESTART_WARN:
        return Finding(Status.WARN,
                       f"{what} {name_of(pod)} on {node} is Ready but restarted {restarts} times "
                       f"(more than {RESTART_WARN}); read its previous logs", node=node, evidence=ev,
                       kubectl=f"kubectl -n {ns} describe pod {name_of(pod)}")
    return Finding(Status.PASS, f"{what} {name_of(pod)} Ready on {node}{detail}", node=node, evidence=ev,
                   kubectl=f"kubectl -n {ns} get pod {name_of(pod)} -o wide")


def label_gate(snapshot: ClusterSnapshot, node: str, operand: ops.Operand) -> Finding | None:
    """NA/WARN when the node's deploy label keeps the operand off the node on purpose (false, paused-*)."""
    value = node_labels(snapshot, node).get(operand.deploy_label)
    ev = {"object": f"Node/{node}", "field": f"metadata.labels[{operand.deploy_label}]", "observed": value,
          "expected": "true"}
    if value == "false":
        return Finding(Status.NA, f"{operand.key} opted out on {node} ({operand.deploy_label}=false)",
                       node=node, evidence=ev)
    if value and "paused-for" in value:
        return Finding(Status.WARN, f"{operand.key} paused on {node} ({operand.deploy_label}={value}): "
                       "transient during a driver upgrade or MIG change", node=node, evidence=ev)
    return None


def paused_label(snapshot: ClusterSnapshot, node: str, operand: ops.Operand) -> str | None:
    """The operand's deploy label value when k8s-driver-manager or the MIG manager paused it ('paused-for-*')."""
    value = node_labels(snapshot, node).get(operand.deploy_label)
    return value if value and "paused-for-" in value else None


def explained_by_pause(snapshot: ClusterSnapshot, node: str, operand: ops.Operand, finding: Finding) -> Finding:
    """A failure the operand's paused deploy label explains (its pod withdrawn on purpose) is a warning, not a break.

    Only what follows from the operand's absence: the pause itself is LBL-001's transient finding.
    """
    value = paused_label(snapshot, node, operand)
    if finding.status != Status.FAIL or value is None:
        return finding
    return replace(finding, status=Status.WARN,
                   message=f"{finding.message} — explained by the pause {operand.deploy_label}={value}: the "
                           f"{operand.key} is withdrawn while it lasts",
                   evidence={**finding.evidence, "paused": f"{operand.deploy_label}={value}"})


# ---- the driver still starting ------------------------------------------------------------------------------
# The driver container's startupProbe in the operator's state-driver DaemonSet: kubelet gives a driver that compiles
# its module this long before it kills the container. The DaemonSet carries the real one (ClusterPolicy
# spec.driver.startupProbe overrides the asset's); this fallback is the asset's default from v23.3.2 to v26.7.0
# (initialDelaySeconds 60, failureThreshold 120, periodSeconds 10; v22.9.x–v23.3.1 had 30 s and 60 or 120 × 10 s).
DRIVER_CONTAINER = "nvidia-driver-ctr"
DRIVER_STARTUP_SECONDS = 60 + 120 * 10


def startup_window(snapshot: ClusterSnapshot, pod: Obj) -> int:
    """Seconds kubelet lets the driver container start (startupProbe delay + threshold × period)."""
    owners = {o.get("uid") for o in pod.get("metadata", {}).get("ownerReferences") or []}
    for ds in snapshot.daemonsets:
        if ds.get("metadata", {}).get("uid") not in owners:
            continue
        for c in ds.get("spec", {}).get("template", {}).get("spec", {}).get("containers") or []:
            probe = c.get("startupProbe") if c.get("name") == DRIVER_CONTAINER else None
            if probe:
                # Kubernetes defaults: failureThreshold 3, periodSeconds 10, initialDelaySeconds 0.
                return (int(probe.get("initialDelaySeconds") or 0)
                        + int(probe.get("failureThreshold") or 3) * int(probe.get("periodSeconds") or 10))
    return DRIVER_STARTUP_SECONDS


def driver_starting(snapshot: ClusterSnapshot, pod: Obj) -> tuple[bool, str]:
    """(still within its startup, what it is doing) for a not-Ready operator driver pod.

    Starting: nothing restarted, no container waits in an image or runtime error, and the driver container (or,
    before it runs, the pod) started less than the startup window ago. A node's driver compiles for minutes on a
    fresh node; until kubelet's startup probe gives up it is work in progress, after that a failure. Without a
    read time or a start time the duration is unknown: in progress, and the message says it could not be timed.
    """
    st = pod.get("status") or {}
    statuses = (st.get("initContainerStatuses") or []) + (st.get("containerStatuses") or [])
    if any(int(cs.get("restartCount") or 0) > 0 for cs in statuses):
        return False, ""
    for cs in statuses:
        state = cs.get("state") or {}
        reason = (state.get("waiting") or {}).get("reason", "")
        if reason in IMAGE_REASONS or reason in RUNTIME_REASONS or reason == "CrashLoopBackOff":
            return False, ""
        term = state.get("terminated")
        if term is not None and term.get("exitCode", 0) != 0:
            return False, ""
    ctr = next((cs for cs in st.get("containerStatuses") or [] if cs.get("name") == DRIVER_CONTAINER), None)
    since = container_started(ctr) if ctr is not None else None
    what = f"{DRIVER_CONTAINER} starting (loading or compiling the driver)" if since is not None else \
        "preparing the node (init containers)"
    if since is None:
        since = parse_time(st.get("startTime"))
        if since is None and any_container_started(pod):
            what = "starting"
    window = startup_window(snapshot, pod)
    now = parse_time(snapshot.read_at)
    if now is None or since is None:
        return True, f"{what} since {stamp(since)} (the time of the read is {stamp(now)}: cannot tell how long)"
    age = int((now - since).total_seconds())
    if age > window:
        return False, f"{what} for {age // 60} min, longer than its startup probe allows ({window // 60} min)"
    return True, f"{what} for {age // 60} min of the {window // 60} min its startup probe allows"


def node_driver_starting(inp: CheckInput, node: str) -> str:
    """What the operator driver on `node` is doing while it is still starting ('' when it is not)."""
    snapshot = inp.snapshot
    mode = inp.driver_mode(node)
    if mode.kind != "operator" or mode.pod is None or pod_ready(mode.pod):
        return ""
    starting, what = driver_starting(snapshot, mode.pod)
    return f"driver pod {name_of(mode.pod)} {what}" if starting else ""


# Driver upgrade steps that bring the node's operands back: the upgrade controller itself ends them with
# upgrade-failed (a driver container restarted more than 10 times; the validator not done within 600 s).
UPGRADE_BRINGUP = (upg.POD_RESTART, upg.VALIDATION)


def _coming_up(inp: CheckInput, pod: Obj | None) -> bool:
    """A pod that is starting, not broken: absent (being created), or not Ready on a first attempt that neither
    the registry nor the runtime refused."""
    if pod is None:
        return True
    if pod_ready(pod) or start_problem(inp, pod) is not None:
        return False
    st = pod.get("status", {})
    return all(not (c.get("restartCount") or 0) for c in (st.get("initContainerStatuses") or [])
               + (st.get("containerStatuses") or []) if not c.get("ready"))


def bringup(inp: CheckInput, node: str) -> tuple[str, dict[str, Any]]:
    """(why the node's operands are legitimately still coming up, evidence) or ('', {}): a driver upgrade step
    that brings them back, or the node's driver still within its startup window (everything after it waits)."""
    snapshot = inp.snapshot
    state = upg.upgrade_state(node_labels(snapshot, node))
    if state in UPGRADE_BRINGUP:
        return (f"the driver upgrade step {state} is bringing the node's operands back (the upgrade controller marks "
                "the node upgrade-failed if it does not finish)", {upg.UPGRADE_STATE_LABEL: state})
    starting = node_driver_starting(inp, node)
    if starting:
        return f"{starting}; the operands after it wait for it", {"driver_starting": starting}
    return "", {}


def explained_by_upgrade(inp: CheckInput, node: str, pod: Obj | None, finding: Finding) -> Finding:
    """A failure of an operand the node is still bringing up (first attempt, nothing refused) is a pause: during a
    driver upgrade step that brings the operands back, or while the node's driver is still within its startup.

    Within those steps' own limits (the upgrade controller moves the node to upgrade-failed; kubelet's startup probe
    kills a driver that takes longer); a crash-looping, unpullable or refused pod is broken whatever the step, and
    stays a failure.
    """
    if finding.status != Status.FAIL or not _coming_up(inp, pod):
        return finding
    why, ev = bringup(inp, node)
    if not why:
        return finding
    return replace(finding, status=Status.WARN, message=f"transient: {finding.message} — {why}",
                   evidence={**finding.evidence, **ev, "transient": True})


def missing_pod_finding(snapshot: ClusterSnapshot, ns: str, node: str, operand: ops.Operand,
                        what: str) -> Finding:
    ds = next(iter(operand_daemonsets(snapshot, operand)), None)
    ds_name = name_of(ds) if ds is not None else operand.daemonset
    selector = selector_text(snapshot, operand)
    st = (ds or {}).get("status", {})
    label = node_labels(snapshot, node).get(operand.deploy_label)
    if ds is None:
        where = f"DaemonSet {operand.daemonset} does not exist"
    else:
        where = (f"DaemonSet {ds_name}: desired {st.get('desiredNumberScheduled', 0)}, "
                 f"ready {st.get('numberReady', 0)}")
    why = why_no_pod(snapshot, ds, node) if ds is not None else ""
    return Finding(Status.FAIL,
                   f"no {what} pod ({selector}) on {node}: {where}; node label {operand.deploy_label}={label}"
                   + (f" — {why}" if why else ""),
                   node=node,
                   evidence={"object": f"DaemonSet/{ds_name}", "field": "pods on node",
                             "observed": "none", "expected": "1 Ready pod", "daemonset_status": st,
                             "deploy_label": label, "why": why},
                   kubectl=f"kubectl -n {ns} get pods -o wide -l {selector} --field-selector spec.nodeName={node}")




def operand_pod_findings(inp: CheckInput, operand: ops.Operand,
                         what: str, missing_what: str, disabled: str | None, policy_field: str,
                         explain: Callable[[PodProblem], tuple[str, str]]) -> list[Finding]:
    """One finding per GPU node on an operand's pod: n/a when the policy disables it, the deploy label's say,
    missing, not ready (explained by the stage it is stuck in), or ready (a warning after restarts)."""
    snapshot, settings = inp.snapshot, inp.settings
    ns = namespace(snapshot, settings)
    out = []
    for node in snapshot.gpu_node_names:
        if disabled is not None:
            out.append(Finding(Status.NA, f"{disabled}", node=node,
                               evidence={"object": "ClusterPolicy", "field": policy_field, "observed": False,
                                         "expected": True}))
            continue
        gate = label_gate(snapshot, node, operand)
        if gate is not None:
            out.append(gate)
            continue
        pod = inp.operand_pod(operand, node)
        if pod is None:
            out.append(explained_by_upgrade(inp, node, None,
                                            missing_pod_finding(snapshot, ns, node, operand, missing_what)))
        elif not pod_ready(pod):
            meaning, hint = explain(pod_problem(inp, pod))
            out.append(explained_by_upgrade(inp, node, pod,
                                            problem_finding(inp, ns, node, pod, what, meaning, hint)))
        else:
            out.append(restart_warn_or_pass(ns, node, pod, what))
    return out




# ---- why a pod cannot start ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class StartProblem:
    """The runtime or the registry keeps a container from starting at all."""

    kind: str              # "sandbox" | "container" | "image"
    reason: str            # FailedCreatePodSandBox, CreateContainerError, ImagePullBackOff, ...
    container: str | None
    message: str           # the event's or kubelet's own words
    # When an event-based problem was last seen (RFC 3339 or "unknown"); "" for a current waiting reason.
    seen: str = ""

    @property
    def meaning(self) -> str:
        if self.kind == "image":
            return ("it cannot pull its image — an image/registry problem (air-gapped mirror, tag, pull secret), "
                    "not a failure of the program")
        if (driver_side := driver_side_refusal(self.message)) is not None:
            return driver_side
        if runtime_handler_missing(self.message):
            return ("the container runtime on this node has no nvidia handler (toolkit runtime config missing or "
                    "overridden)")
        if "cdi" in self.message.lower():
            return "the container runtime cannot resolve the CDI device (CDI spec missing on the node)"
        return "the container runtime on this node cannot create it"

    @property
    def hint(self) -> str:
        if self.kind == "image":
            return HINT_IMAGE
        return HINT_DRIVER_SIDE if driver_side_refusal(self.message) is not None else HINT_RUNTIME


def runtime_handler_missing(message: str) -> bool:
    low = message.lower()
    return ("no runtime for" in low or "runtimehandler" in low.replace(" ", "")
            or "runtime handler" in low) and "nvidia" in low


def _runtime_refusals(statuses: list[Obj]) -> list[tuple[str, str, str]]:
    """(container, reason, message) of containers the runtime refuses now, in every shape kubelet reports it.

    CreateContainerError / RunContainerError / CreateContainerConfigError are waiting reasons with kubelet's message.
    A container whose task the runtime created but could not start is reported by the CRI as terminated: containerd
    (pkg/cri/server/container_start.go, internal/cri in 2.x) with reason StartError and exit code 128, dockershim with
    ContainerCannotRun; kubelet then restarts it, and while it backs off the state is waiting CrashLoopBackOff with
    that refusal as lastState (kubectl describe: "Last State: Terminated, Reason: StartError"). A container running
    again has outlived its refusal and is not counted.
    """
    out = []
    for cs in statuses:
        state = cs.get("state") or {}
        waiting, term = state.get("waiting") or {}, state.get("terminated") or {}
        last = (cs.get("lastState") or {}).get("terminated") or {}
        name = cs.get("name", "")
        if waiting.get("reason") in RUNTIME_REASONS:
            out.append((name, waiting["reason"], waiting.get("message", "")))
        elif term.get("reason") in RUNTIME_REASONS:
            out.append((name, term["reason"], term.get("message", "")))
        elif waiting.get("reason") == "CrashLoopBackOff" and last.get("reason") in RUNTIME_REASONS:
            out.append((name, last["reason"], last.get("message", "")))
    return out


def _waiting(statuses: list[Obj]) -> list[tuple[str, str, str]]:
    out = []
    for cs in statuses:
        w = (cs.get("state") or {}).get("waiting") or {}
        if w.get("reason"):
            out.append((cs.get("name", ""), w["reason"], w.get("message", "")))
    return out


def _latest_event(snapshot: ClusterSnapshot, pod: Obj, match: Callable[[Obj], bool]) -> Obj | None:
    evs = [e for e in snapshot.events_for("Pod", name_of(pod)) if match(e)]
    if not evs:
        return None
    # Unknown times sort first: an event that cannot be placed never hides one that can.
    return sorted(evs, key=lambda e: event_last_seen(e) or _EPOCH)[-1]


_EPOCH = datetime.min.replace(tzinfo=UTC)


def _is_sandbox_event(e: Obj) -> bool:
    return e.get("reason") == SANDBOX_EVENT


def _is_cdi_event(e: Obj) -> bool:
    return e.get("type") == "Warning" and "unresolvable cdi devices" in (e.get("message") or "").lower()


def _handler_from_toolkit(snapshot: ClusterSnapshot, pod: Obj) -> bool:
    """Whether the pod's sandbox needs the runtime handler the operator's toolkit writes on this node.

    Operands with a runtimeClassName (validator, device plugin, GFD, DCGM, MIG manager: the operator's
    setRuntimeClass) run under the `nvidia` handler; the toolkit installer adds it only after its own
    driver-validation init container passed (WITH_WAIT) and removes it again when it exits. With the toolkit
    disabled (or opted out on the node) the host provides the handler from the start.
    """
    node = (pod.get("spec") or {}).get("nodeName") or ""
    return (bool((pod.get("spec") or {}).get("runtimeClassName"))
            and snapshot.policy_enabled("toolkit", True)
            and node_labels(snapshot, node).get(ops.TOOLKIT.deploy_label) != "false")


# Part of event_history's answer when the toolkit is not Ready: the pod cannot run before it is (awaits_toolkit).
AWAITS_TOOLKIT = "the nvidia runtime handler cannot exist yet"


def event_history(inp: CheckInput, pod: Obj, event: Obj) -> str:
    """Why a runtime event about `pod` does not explain the present ('' when it does).

    It does only if it was seen after the pod last ran (a container start, Ready) and, for a pod whose handler
    the toolkit writes, after that toolkit became Ready on the node: before that, the runtime refusing the
    pod is the expected bring-up state, and whatever keeps the driver or the toolkit from being ready is the
    cause. An event without any timestamp is judged by what can be known and the reason says so.
    """
    snapshot = inp.snapshot
    seen = event_last_seen(event)
    started = pod_last_start(pod)
    if started is not None and (seen is None or seen <= started):
        when = "at an unknown time" if seen is None else f"last at {stamp(seen)}"
        return f"{event.get('reason', 'event')} {when}, before the pod's containers last started ({stamp(started)})"
    if seen is None and any_container_started(pod):
        return f"{event.get('reason', 'event')} at an unknown time; the pod's containers have started since"
    if not _handler_from_toolkit(snapshot, pod):
        return ""
    node = (pod.get("spec") or {}).get("nodeName") or ""
    toolkit = inp.operand_pod(ops.TOOLKIT, node)
    if toolkit is None or not pod_ready(toolkit):
        what = "no toolkit pod" if toolkit is None else f"toolkit pod {name_of(toolkit)} not Ready"
        return (f"{event.get('reason', 'event')} while {AWAITS_TOOLKIT} ({what} on "
                f"{node}; it writes the handler once the driver is up)")
    ready = condition_since(toolkit, "Ready")
    if seen is not None and ready is not None and seen <= ready:
        return (f"{event.get('reason', 'event')} last at {stamp(seen)}, before toolkit pod {name_of(toolkit)} "
                f"became Ready ({stamp(ready)}): bring-up history")
    return ""


def dismissed_refusal(inp: CheckInput, pod: Obj) -> str:
    """Why the pod's latest sandbox/CDI refusal is not held against the runtime ('' when there is none or it is)."""
    snapshot = inp.snapshot
    for match in (_is_sandbox_event, _is_cdi_event):
        ev = _latest_event(snapshot, pod, match)
        if ev is not None:
            why = event_history(inp, pod, ev)
            if why:
                return why
    return ""


def awaits_toolkit(inp: CheckInput, pod: Obj) -> str:
    """The pod was refused only because the node's toolkit is not Ready (so has not written the handler)."""
    why = dismissed_refusal(inp, pod)
    return why if AWAITS_TOOLKIT in why else ""


def start_problem(inp: CheckInput, pod: Obj) -> StartProblem | None:
    """Why the pod's containers cannot start, from kubelet's waiting reasons and the pod's events.

    Waiting reasons are the present; an event is only when event_history finds nothing newer that outdates it.
    """
    snapshot = inp.snapshot
    st = pod.get("status") or {}
    statuses = (st.get("initContainerStatuses") or []) + (st.get("containerStatuses") or [])
    waiting = _waiting(statuses)
    refusal = next(iter(_runtime_refusals(statuses)), None)
    if refusal is not None:
        container, reason, message = refusal
        return StartProblem("container", reason, container, message or reason)
    if not pod_ready(pod) and st.get("phase") in (None, "Pending"):
        ev = _latest_event(snapshot, pod, _is_sandbox_event)
        if ev is not None and not event_history(inp, pod, ev):
            return StartProblem("sandbox", SANDBOX_EVENT, None, ev.get("message", ""),
                                seen=stamp(event_last_seen(ev)))
    cdi = _latest_event(snapshot, pod, _is_cdi_event)
    if cdi is not None and not pod_ready(pod) and not event_history(inp, pod, cdi):
        return StartProblem("container", cdi.get("reason", "Failed"), None, cdi.get("message", ""),
                            seen=stamp(event_last_seen(cdi)))
    for container, reason, message in waiting:
        if reason in IMAGE_REASONS:
            if not message:
                ev = _latest_event(snapshot, pod, lambda e: e.get("reason") == "Failed"
                                   and "pull" in (e.get("message") or "").lower())
                message = (ev or {}).get("message", "")
            image = next((c.get("image", "") for c in (pod.get("spec", {}).get("initContainers") or [])
                          + (pod.get("spec", {}).get("containers") or []) if c.get("name") == container), "")
            said = ": ".join(x for x in (f"image {image}" if image else "", message) if x)
            return StartProblem("image", reason, container, said or reason)
    return None


# ---- why a DaemonSet has no pod on a node ------------------------------------------------------------------
# Tolerations the DaemonSet controller adds to every DaemonSet pod by itself.
_AUTO_TOLERATED = ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable", "node.kubernetes.io/disk-pressure",
                   "node.kubernetes.io/memory-pressure", "node.kubernetes.io/pid-pressure",
                   "node.kubernetes.io/unschedulable", "node.kubernetes.io/network-unavailable")


def tolerates(tolerations: list[Obj], taint: Obj) -> bool:
    """The scheduler's rule (k8s.io/api/core/v1 Toleration.ToleratesTaint)."""
    for t in tolerations:
        if t.get("effect") and t.get("effect") != taint.get("effect"):
            continue
        if t.get("operator") == "Exists":
            if not t.get("key") or t.get("key") == taint.get("key"):
                return True
        elif t.get("key") == taint.get("key") and (t.get("value") or "") == (taint.get("value") or ""):
            return True
    return False


def untolerated_taints(node: Obj, tolerations: list[Obj]) -> list[str]:
    """Taints of the node that keep a pod with these tolerations off it (NoSchedule/NoExecute)."""
    out = []
    for taint in node.get("spec", {}).get("taints") or []:
        if taint.get("effect") not in ("NoSchedule", "NoExecute") or taint.get("key") in _AUTO_TOLERATED:
            continue
        if not tolerates(tolerations, taint):
            value = f"={taint['value']}" if taint.get("value") else ""
            out.append(f"{taint.get('key')}{value}:{taint.get('effect')}")
    return out


def why_no_pod(snapshot: ClusterSnapshot, ds: Obj, node: str) -> str:
    """The DaemonSet's own words (FailedCreate events: quota, admission) or the node's untolerated taints."""
    tolerations = ds.get("spec", {}).get("template", {}).get("spec", {}).get("tolerations") or []
    taints = untolerated_taints(snapshot.node_by_name.get(node, {}), tolerations)
    if taints:
        return f"the node has taints the DaemonSet does not tolerate: {', '.join(taints)}"
    failed = [e for e in snapshot.events_for("DaemonSet", name_of(ds)) if e.get("reason") == "FailedCreate"]
    if failed:
        latest = sorted(failed, key=lambda e: event_last_seen(e) or _EPOCH)[-1]
        return f'the DaemonSet cannot create pods: "{latest.get("message", "")}"'
    return ""
