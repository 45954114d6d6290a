"""What the run expects of the cluster, from the command line and an optional YAML file."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import yaml

from gpu_conformance.errors import UsageError

DEFAULT_PROBE_IMAGE = "nvcr.io/nvidia/cuda:12.6.0-base-ubuntu22.04"
EXPECT_DRIVER_CHOICES = ("auto", "operator", "host")
EXPECT_CDI_CHOICES = ("auto", "yes", "no")


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
    no_probe: bool = False
    report_dir: str = "reports"
    baseline: str | None = None
    # Set by the runner, not by the user.
    run_id: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

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
        if self.probe_timeout <= 0:
            raise UsageError(f"--probe-timeout must be positive, not {self.probe_timeout}")
        if not self.probe_image:
            raise UsageError("--probe-image must not be empty")
        if self.gpu_node_selector is not None:
            from gpu_conformance.cluster.selectors import parse_selector

            parse_selector(self.gpu_node_selector)  # raises UsageError on nonsense
        return self


def load_config_file(path: str) -> dict[str, Any]:
    """Read --conformance-config: keys are option names with '-' or '_'."""
    p = Path(path)
    if not p.is_file():
        raise UsageError(f"--conformance-config {path}: no such file")
    try:
        data = yaml.safe_load(p.read_text()) or {}
    except yaml.YAMLError as e:
        raise UsageError(f"--conformance-config {path}: not valid YAML ({str(e).splitlines()[0]})") from None
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
        out[name] = value
    return out
