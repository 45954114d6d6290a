"""The target table: every help text and option comes from it; a provider starts, connects and stops."""

from __future__ import annotations

import dataclasses

import pytest

from gpu_conformance import cli, plugin
from gpu_conformance.errors import UsageError
from gpu_conformance.settings import Settings
from gpu_conformance.targets import TARGETS, Endpoint, cluster_help, how_to_run, open_target, target_option_specs
from gpu_conformance.targets.provider import option, option_specs, options_from
from gpu_conformance.targets.sim import SimOptions


def test_every_target_is_named_in_both_help_texts() -> None:
    for name, provider in TARGETS.items():
        assert f"{name} ({provider.summary}" in cluster_help()
        assert provider.summary in how_to_run()
    assert how_to_run() == plugin.HOW_TO_RUN


def test_the_current_target_connects_where_the_settings_point_and_starts_nothing() -> None:
    target = open_target("current", Settings(kubeconfig="/k", context="c"))
    target.start()
    assert target.connect() == Endpoint("/k", "c")
    target.stop()


def test_an_unknown_target_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match="unknown target"):
        open_target("mars", Settings())


def test_a_targets_options_default_to_its_dataclass() -> None:
    assert open_target("sim", Settings()).options == SimOptions()


def test_sim_options_are_the_pytest_options_and_the_sim_up_arguments() -> None:
    flags = [f"--{t.name}-{spec.flag}" for t, spec in target_option_specs()]
    assert flags == ["--sim-profile", "--sim-gpu-nodes", "--sim-cpu-nodes", "--sim-fault", "--sim-operator"]
    args = cli.build_parser().parse_args(["sim", "up", "--gpu-nodes", "2", "--fault", "a", "--fault", "b"])
    assert options_from(SimOptions, lambda dest: getattr(args, dest)) == SimOptions(gpu_nodes=2, faults=["a", "b"])


def test_one_field_is_one_option() -> None:
    @dataclasses.dataclass(frozen=True)
    class Opts:
        gpu_path: str = option("cdi", "how the GPU reaches the pod", choices=("cdi", "legacy"))

    added: list[tuple[str, dict]] = []
    for spec in option_specs(Opts):
        spec.add_to(lambda name, **kw: added.append((name, kw)), "kind-")
    assert added == [("--kind-gpu-path", {"default": "cdi", "help": "how the GPU reaches the pod",
                                          "choices": ("cdi", "legacy")})]
    assert options_from(Opts, {"kind_gpu_path": "legacy"}.__getitem__, "kind-") == Opts("legacy")
