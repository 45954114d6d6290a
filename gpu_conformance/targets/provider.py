"""What a cluster target is: a provider that starts a cluster (or finds one), says how to connect, and stops it.

A target's own options are a dataclass whose fields are declared with `option()`: each field becomes one
`--<target>-<flag>` pytest option (and, for `sim`, one `gpu-conformance sim up --<flag>` argument), so adding an
option to a target is adding one field.
"""

from __future__ import annotations

import dataclasses
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, ClassVar

from gpu_conformance.settings import Settings


def option(default: Any, help: str, *, flag: str = "", choices: tuple[str, ...] = ()) -> Any:
    """A dataclass field that is also a command-line option. A list default makes a repeatable option; an int
    default an integer one. `flag` names the option when the field's name does not read well (`fault` for the
    list `faults`)."""
    meta = {"help": help, "flag": flag, "choices": choices}
    if isinstance(default, list):
        return dataclasses.field(default_factory=lambda: list(default), metadata=meta)
    return dataclasses.field(default=default, metadata=meta)


@dataclass(frozen=True)
class OptionSpec:
    """One option field as argparse / pytest's parser want it."""

    field: str
    flag: str          # without the target's prefix and the dashes: "gpu-nodes"
    help: str
    default: Any
    choices: tuple[str, ...]

    def add_to(self, add: Any, prefix: str = "") -> None:
        """Add this option with `add` (pytest's `group.addoption` or argparse's `add_argument`)."""
        name = f"--{prefix}{self.flag}"
        kwargs: dict[str, Any] = {"default": self.default, "help": self.help}
        if isinstance(self.default, list):
            kwargs["action"] = "append"
        elif isinstance(self.default, int) and not isinstance(self.default, bool):
            kwargs["type"] = int
        if self.choices:
            kwargs["choices"] = self.choices
        add(name, **kwargs)

    def dest(self, prefix: str = "") -> str:
        return f"{prefix}{self.flag}".replace("-", "_")


def option_specs(options_type: type) -> Iterator[OptionSpec]:
    for f in dataclasses.fields(options_type):
        default = f.default_factory() if f.default is dataclasses.MISSING else f.default  # type: ignore[misc]
        yield OptionSpec(f.name, f.metadata.get("flag") or f.name.replace("_", "-"), f.metadata.get("help", ""),
                         default, tuple(f.metadata.get("choices", ())))


def options_from(options_type: type, get: Callable[[str], Any], prefix: str = "") -> Any:
    """The options dataclass filled from parsed options: `get` takes a dest (pytest's `config.getoption`, or
    `getattr` on argparse's namespace)."""
    return options_type(**{spec.field: get(spec.dest(prefix)) for spec in option_specs(options_type)})


@dataclass(frozen=True)
class NoOptions:
    """A target without options of its own."""


@dataclass(frozen=True)
class Endpoint:
    """Where the suite connects: a kubeconfig (None: the usual lookup) and a context in it."""

    kubeconfig: str | None
    context: str | None


class Target(ABC):
    """One `--cluster=NAME`: `start` brings the cluster up (or does nothing for an existing one), `connect` says
    where to read it, `stop` stops what `start` started (and is safe to call when `start` failed or never ran)."""

    name: ClassVar[str]
    # One phrase for the help texts, after the name: "built-in simulated GPU cluster".
    summary: ClassVar[str]
    # The dataclass of this target's options (`option()` fields).
    options_type: ClassVar[type] = NoOptions

    def __init__(self, settings: Settings, options: Any = None) -> None:
        self.settings = settings
        self.options = options if options is not None else self.options_type()

    @abstractmethod
    def start(self) -> None: ...

    @abstractmethod
    def connect(self) -> Endpoint: ...

    @abstractmethod
    def stop(self) -> None: ...


class BootedTarget(Target):
    """A target that brings up a cluster of its own: `start` sets `self.cluster` (anything with a `kubeconfig`
    path and `stop()`); the suite reads that cluster's own kubeconfig, whatever --kubeconfig said."""

    cluster: Any = None

    def connect(self) -> Endpoint:
        return Endpoint(str(self.cluster.kubeconfig), None)

    def stop(self) -> None:
        cluster, self.cluster = self.cluster, None
        if cluster is not None:
            cluster.stop()
