"""What `--cluster=TARGET` names: one table of target providers (testinfra's backends pattern).

Each provider is one module (`current`, `sim`, `kind`) with a `Target` subclass and its options dataclass; the
`--cluster` help, the line that says how to run the conformance checks and the `--<target>-*` options are generated
from this table. A new target is a new module and one entry below. Only the provider modules may import
`gpu_conformance.sim`.
"""

from __future__ import annotations

from typing import Any

from gpu_conformance.errors import UsageError
from gpu_conformance.settings import Settings
from gpu_conformance.targets.current import CurrentTarget
from gpu_conformance.targets.kind import KindTarget
from gpu_conformance.targets.provider import Endpoint, OptionSpec, Target, option_specs, options_from
from gpu_conformance.targets.sim import SimTarget

__all__ = ["DEFAULT_TARGET", "TARGETS", "Endpoint", "OptionSpec", "Target", "cluster_help", "how_to_run", "open_target",
           "options_from", "target_option_specs"]

TARGETS: dict[str, type[Target]] = {t.name: t for t in (CurrentTarget, SimTarget, KindTarget)}


def target_option_specs() -> list[tuple[type[Target], OptionSpec]]:
    """Every target's options, in table order: `--<target>-<flag>`."""
    return [(t, spec) for t in TARGETS.values() for spec in option_specs(t.options_type)]


DEFAULT_TARGET = "current"  # what a bare `--cluster` means


def cluster_help() -> str:
    """The help of `--cluster`: every target of the table, the default first."""
    names = [f"{n} ({t.summary}{', default' if n == DEFAULT_TARGET else ''})" for n, t in TARGETS.items()]
    return (f"run the conformance checks; TARGET: {', '.join(names[:-1])} or {names[-1]}. "
            "Use --cluster=TARGET before test paths.")


def how_to_run() -> str:
    """The line a conformance test skips with when no --cluster was given."""
    ways = [f"`pytest --cluster{'' if n == DEFAULT_TARGET else '=' + n}` ({t.summary})" for n, t in TARGETS.items()]
    return "conformance checks need a cluster: run " + " or ".join(ways)


def open_target(name: str, settings: Settings, options: Any = None) -> Target:
    """The provider of `--cluster=name`, not started yet; `options` default to the target's defaults."""
    try:
        provider = TARGETS[name]
    except KeyError:
        raise UsageError(f"--cluster={name}: unknown target (choose one of {', '.join(TARGETS)})") from None
    return provider(settings, options)
