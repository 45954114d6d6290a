"""The real-case files themselves: each follows the schema and builds a cluster (no apiserver needed)."""

from __future__ import annotations

from pathlib import Path

import pytest
from real_case_apiserver import container_logs
from real_case_loader import CaseError, build, case_files, load_case

from gpu_conformance import versions
from gpu_conformance.cluster.snapshot import name_of

SOURCE_REPOS = ("NVIDIA/gpu-operator", "NVIDIA/nvidia-container-toolkit", "NVIDIA/k8s-device-plugin",
                "redhat-openshift-ecosystem/certified-operators")


@pytest.mark.parametrize("path", case_files(), ids=lambda p: p.stem)
def test_case_builds_and_names_its_nodes(path: Path) -> None:
    case = load_case(path)
    assert any(f"github.com/{repo}/" in case.source for repo in SOURCE_REPOS), case.source
    snap = build(case).snapshot
    names = {name_of(n) for n in snap.nodes}
    assert set(case.nodes) <= names, f"expectations name nodes the cluster does not have: {set(case.nodes) - names}"


def test_the_set_is_large_enough_and_has_healthy_cases() -> None:
    cases = [load_case(p) for p in case_files()]
    assert len(cases) >= 26
    healthy = [c for c in cases if c.verdict != "NOT CONFORMANT"]
    assert len(healthy) >= 5, [c.id for c in healthy]


def test_cases_replay_old_and_new_operator_releases() -> None:
    """Each case runs at its thread's release: the set covers the pre-conditions era and the v26 line."""
    ran = [versions.parse(str(load_case(p).cluster.get("version"))) for p in case_files()]
    assert sum(1 for v in ran if v and v < (23, 9, 0)) >= 2
    assert sum(1 for v in ran if v and v >= (26, 0, 0)) >= 2


@pytest.mark.parametrize("path", [p for p in case_files() if load_case(p).known_miss], ids=lambda p: p.stem)
def test_a_known_miss_records_what_the_suite_said(path: Path) -> None:
    """A strict xfail must say what the suite answers today, so the lead sees what the fix has to change."""
    case = load_case(path)
    assert case.suite_before and set(case.suite_before.get("nodes") or {}) == set(case.nodes)


def test_bad_case_file_is_one_clear_error(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("source: https://example.com/x\ntitle: t\noperator_version: v1\nsummary: s\ncluster: {}\n"
                   "expect: {verdict: CONFORMANT, nodes: {n: {layer: none}}}\n")
    with pytest.raises(CaseError, match="bad.yaml: source must be a GitHub issue"):
        load_case(bad)


DRIVER_PULL_FAILS = "  - pod: {app: nvidia-driver-daemonset, node: gpu-node-1, status: ImagePullBackOff}\n"


def _case(tmp_path: Path, overrides: str) -> Path:
    path = tmp_path / "case.yaml"
    path.write_text("source: https://github.com/NVIDIA/gpu-operator/issues/1\ntitle: t\noperator_version: v1\n"
                    "summary: s\ncluster: {version: v25.3.4, gpu_nodes: 1, cpu_nodes: 0}\n"
                    f"overrides:\n{overrides}\n"
                    "expect: {verdict: CONFORMANT, nodes: {gpu-node-1: {layer: none}}}\n")
    return path


def test_pod_states_are_written_the_way_kubelet_reports_them(tmp_path: Path) -> None:
    case = load_case(_case(tmp_path, DRIVER_PULL_FAILS +
                                      "  - pod: {app: nvidia-device-plugin-daemonset, node: gpu-node-1, "
                                      "status: SandboxFailed}\n"))
    snap = build(case).snapshot
    pods = {p["metadata"]["labels"].get("app"): p for p in snap.pods}
    driver = pods["nvidia-driver-daemonset"]["status"]
    assert driver["phase"] == "Pending"
    assert driver["containerStatuses"][0]["state"] == {"waiting": {"reason": "ImagePullBackOff"}}
    plugin = pods["nvidia-device-plugin-daemonset"]["status"]
    assert plugin["phase"] == "Pending"
    assert {cs["state"]["waiting"]["reason"] for cs in plugin["initContainerStatuses"] + plugin["containerStatuses"]} \
        == {"PodInitializing"}
    assert snap.daemonset("nvidia-device-plugin-daemonset")["status"]["numberUnavailable"] == 1


def test_logs_answer_like_a_kubelet(tmp_path: Path) -> None:
    case = load_case(_case(tmp_path, DRIVER_PULL_FAILS +
                                      "  - pod: {app: nvidia-device-plugin-daemonset, node: gpu-node-1, "
                                      "status: CrashLoopBackOff, log: boom}\n"))
    snap = build(case).snapshot
    logs = container_logs(snap.pods, snap.logs)
    by_container = {c: v for (_, c), v in logs.items()}
    assert by_container["nvidia-device-plugin"] == (200, "boom")
    code, text = by_container["nvidia-driver-ctr"]
    assert code == 400 and text.endswith("is waiting to start: trying and failing to pull image")
    assert by_container["k8s-driver-manager"] == (200, "")


def test_unknown_override_is_named(tmp_path: Path) -> None:
    with pytest.raises(CaseError, match="unknown override 'podd'"):
        build(load_case(_case(tmp_path, "  - podd: {}\n")))


def test_a_case_seen_mid_bring_up_is_replayed_at_that_moment() -> None:
    """read_at moves the case's timeline to now: the driver started minutes before the suite's read, as posted
    (without it the replay would read a 2-month-old bring-up, long past any startup window)."""
    import datetime as dt

    from real_case_loader import CASES_DIR, shift_times

    from gpu_conformance.cluster.timeline import container_started, parse_time

    case = load_case(CASES_DIR / "gpu-operator-707-driver-reload-after-reboot-in-progress.yaml")
    assert case.read_at
    snap = build(case).snapshot
    pod = next(p for p in snap.pods if p["metadata"]["name"].startswith("nvidia-driver-daemonset")
               and p["spec"].get("nodeName") == "gpu-node-1")
    ctr = next(c for c in pod["status"]["containerStatuses"] if c["name"] == "nvidia-driver-ctr")
    started, now = container_started(ctr), parse_time(snap.read_at)
    assert started is not None and now is not None
    assert dt.timedelta(minutes=1) <= now - started <= dt.timedelta(minutes=4), (started, now)
    assert shift_times({"a": ["2026-10-01T09:00:00Z", "x"]}, dt.timedelta(hours=1)) == \
        {"a": ["2026-10-01T10:00:00Z", "x"]}
