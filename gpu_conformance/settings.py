"""What the run expects of the cluster, from the command line and an optional YAML file."""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from gpu_conformance.errors import UsageError

DEFAULT_PROBE_IMAGE = "nvcr.io/nvidia/cuda:12.6.0-base-ubuntu22.04"
EXPECT_DRIVER_CHOICES = ("auto", "operator", "host")
EXPECT_CDI_CHOICES = ("auto", "yes", "no")
# A namespace name is a DNS-1123 label; anything else would end up in an API path (`../../apis`).
_NAMESPACE_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


@dataclass
class Settings:
    kubeconfig: str | None = None
    context: str | None = None
    # None means: discover from the operator pod or ClusterPolicy.status.namespace.
    operator_namespace: str | None = None
    gpu_node_selector: str | None = None
    expect_driver: str = "auto"
    expect_cdi: str = "auto"
    probe_image: str = DEFAULT_PROBE_IMAGE
    probe_timeout: float = 300.0
    probe_gpus: int = 1
    # Which eligible GPU nodes get a probe pod: all, a number (sampled), or a label selector.
    probe_nodes: str = "all"
    # An existing namespace for the probe pods (rbac.yaml's least-privilege mode); None: auto.
    probe_namespace: str | None = None
    no_probe: bool = False
    report_dir: str = "reports"
    baseline: str | None = None
    # Set by the runner, not by the user.
    run_id: str = ""

    def validate(self) -> Settings:
        if self.expect_driver not in EXPECT_DRIVER_CHOICES:
            raise UsageError(f"--expect-driver must be one of {', '.join(EXPECT_DRIVER_CHOICES)}, "
                             f"not {self.expect_driver!r}")
        if self.expect_cdi not in EXPECT_CDI_CHOICES:
            raise UsageError(f"--expect-cdi must be one of {', '.join(EXPECT_CDI_CHOICES)}, not {self.expect_cdi!r}")
        try:
            self.probe_timeout = float(self.probe_timeout)
        except (TypeError, ValueError):
            raise UsageError(f"--probe-timeout must be a number of seconds, not {self.probe_timeout!r}") from None
        if not math.isfinite(self.probe_timeout) or self.probe_timeout <= 0:
            raise UsageError(f"--probe-timeout must be a positive number of seconds, not {self.probe_timeout}")
        ns = self.operator_namespace
        if ns is not None and (not isinstance(ns, str) or len(ns) > 63 or not _NAMESPACE_NAME.match(ns)):
            raise UsageError(f"--operator-namespace {ns!r} is not a namespace name (lower-case letters, digits "
                             "and '-', at most 63)")
        if not self.probe_image:
            raise UsageError("--probe-image must not be empty")
        self.probe_nodes = str(self.probe_nodes if self.probe_nodes is not None else "all")
        from gpu_conformance.cluster.selectors import parse_probe_nodes

        parse_probe_nodes(self.probe_nodes)  # raises UsageError on nonsense
        pns = self.probe_namespace
        if pns is not None and (not isinstance(pns, str) or len(pns) > 63 or not _NAMESPACE_NAME.match(pns)):
            raise UsageError(f"--probe-namespace {pns!r} is not a namespace name (lower-case letters, digits "
                             "and '-', at most 63)")
        if self.gpu_node_selector is not None:
            from gpu_conformance.cluster.selectors import parse_selector

            parse_selector(self.gpu_node_selector)  # raises UsageError on nonsense
        self._validate_report_dir()
        if self.baseline:
            from gpu_conformance.report_format import ReportFileError, load_json

            try:
                load_json(self.baseline)  # before the run, not after it
            except ReportFileError as e:
                raise UsageError(f"--baseline {e}") from None
        return self

    def _validate_report_dir(self) -> None:
        """--report-dir must be a directory this run can write, checked before anything runs."""
        d = Path(str(self.report_dir)).expanduser()
        if d.exists() and not d.is_dir():
            raise UsageError(f"--report-dir {d} is a file, not a directory")
        try:
            d.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise UsageError(f"--report-dir {d} cannot be created: {e.strerror or e}") from None
        if not os.access(d, os.W_OK | os.X_OK):
            raise UsageError(f"--report-dir {d} is not writable")


def load_config_file(path: str) -> dict[str, Any]:
    """Read --conformance-config: keys are option names with '-' or '_'."""
    from gpu_conformance.input_files import CONFIG_LIMIT, InputFileError, read_text, safe_yaml

    try:
        data = safe_yaml(read_text(path, CONFIG_LIMIT, 'YAML'), path) or {}
    except InputFileError as e:
        raise UsageError(f"--conformance-config {e}") from None
    if not isinstance(data, dict):
        raise UsageError(f"--conformance-config {path}: expected a mapping of option: value")
    known = {f.name for f in fields(Settings)}
    out: dict[str, Any] = {}
    for key, value in data.items():
        name = str(key).replace("-", "_")
        if name not in known:
            raise UsageError(f"--conformance-config {path}: unknown option {key!r}")
        # YAML 1.1 reads a bare yes/no as a boolean; --expect-cdi means the words.
        if name == "expect_cdi" and isinstance(value, bool):
            value = "yes" if value else "no"
        expected = CONFIG_TYPES.get(name, (str,))
        # bool is an int in Python: `probe-timeout: yes` is not a number of seconds.
        if value is not None and (not isinstance(value, expected) or
                                  (isinstance(value, bool) and bool not in expected)):
            names = " or ".join(dict.fromkeys(TYPE_WORDS[t] for t in expected))
            raise UsageError(f"--conformance-config {path}: {key} must be {names}, not "
                             f"{TYPE_WORDS.get(type(value), type(value).__name__)} {_short(value)}")
        out[name] = value
    return out


# What each option may be in a config file (all others: a string). The command line gives strings only.
CONFIG_TYPES: dict[str, tuple[type, ...]] = {
    "probe_timeout": (int, float, str), "probe_gpus": (int,), "no_probe": (bool,), "probe_nodes": (str, int),
}
TYPE_WORDS = {str: "a string", int: "a number", float: "a number", bool: "true or false", dict: "a mapping",
              list: "a list", type(None): "empty"}


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
