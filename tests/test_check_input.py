"""Each fact once (issue 23, item 1): every check reads one explicit input, and the facts in it are worked out once
per run and are the ones the report header states."""

from __future__ import annotations

import dataclasses
import inspect

import pytest
from factory import healthy_snapshot, remove_pods, set_label

from gpu_conformance import catalogue, check_input
from gpu_conformance import operands as ops
from gpu_conformance.cluster.snapshot import ClusterSnapshot
from gpu_conformance.facts import ClusterFacts
from gpu_conformance.session import ConformanceRun
from gpu_conformance.settings import Settings


def test_every_check_takes_the_one_input() -> None:
    # The registry's and @per_gpu_node's wrappers keep __wrapped__: the signature is the check body's own.
    for check in catalogue.all_checks():
        assert check.func is not None, check.id
        first = next(iter(inspect.signature(check.func).parameters.values()))
        assert (first.name, first.annotation) == ("inp", "CheckInput"), check.id


def test_the_snapshot_holds_what_was_read_and_nothing_derived() -> None:
    fields = {f.name for f in dataclasses.fields(ClusterSnapshot)}
    assert "probe" not in fields and not hasattr(ClusterSnapshot, "derived")


@pytest.mark.parametrize("driver", ["operator", "host"])
def test_facts_are_built_once_per_run_and_the_header_reads_them(monkeypatch: pytest.MonkeyPatch,
                                                                driver: str) -> None:
    built: list[ClusterFacts] = []
    real = check_input.build_facts

    def counted(snap: ClusterSnapshot) -> ClusterFacts:
        built.append(real(snap))
        return built[-1]

    monkeypatch.setattr(check_input, "build_facts", counted)
    snap = healthy_snapshot(driver=driver)
    # A node whose driver is opted out without a driver pod: the header once said "unknown" where DRV-001 said host.
    remove_pods(snap, ops.DRIVER.daemonset, "gpu-node-2")
    set_label(snap, "gpu-node-2", ops.DRIVER.deploy_label, "false")
    run = ConformanceRun(Settings(run_id="t", no_probe=True))
    run.judge_read(snap)
    assert len(built) == 1 and run.input is not None and run.input.facts is built[0] and run.input.probe is None
    result = run.result()
    assert result.driver_config == {n: m.report_name for n, m in built[0].driver_modes.items()}
    assert result.driver_config["gpu-node-2"] == "host"
    drv001 = {f.node: f.evidence["observed"] for f in result.findings if f.check_id == "DRV-001"}
    assert drv001 == {n: m.kind for n, m in built[0].driver_modes.items()}
    assert result.operator["version"] == built[0].operator.tag
    assert result.operator["resource_model"] == str(built[0].resource_model)
