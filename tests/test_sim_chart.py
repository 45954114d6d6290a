"""The operator chart's ClusterPolicy, rendered in Python from the chart in the operator's Go module."""

from __future__ import annotations

import pytest

from gpu_conformance.sim.operator.chart import ChartRenderError, Renderer, clusterpolicy_from_module

CHART = {"Name": "gpu-operator", "Version": "v25.3.4", "AppVersion": "v25.3.4"}


def render(template: str, values: dict) -> str:
    return Renderer(values, CHART).render(template)


def test_if_end_and_whitespace_trimming_like_go_templates() -> None:
    t = ("a:\n  {{- if .Values.x }}\n  x: {{ .Values.x }}\n  {{- end }}\n"
         "  {{- if .Values.y }}\n  y: 1\n  {{- end }}\nb: 2\n")
    assert render(t, {"x": 5, "y": ""}) == "a:\n  x: 5\nb: 2\n"
    assert render(t, {"x": False, "y": "no"}) == "a:\n  y: 1\nb: 2\n"


def test_value_functions() -> None:
    values = {"v": "", "n": None, "b": False, "l": [{"k": "x"}], "f": 1.0, "s": "1"}
    assert render("{{ .Values.v | default .Chart.AppVersion | quote }}", values) == '"v25.3.4"'
    assert render("{{ .Values.b | default false }}", values) == "false"
    assert render('{{ .Values.n | default "25%" }}', values) == "25%"
    assert render("{{ .Values.s | quote }}", values) == '"1"'
    assert render("{{ .Values.f }}", values) == "1"
    assert render("x: {{ toYaml .Values.l | nindent 2 }}", values) == "x: \n  - k: x"
    assert render("{{- if and (.Values.l) (.Values.v) }}yes{{- end }}", values) == ""


def test_unknown_constructs_are_refused() -> None:
    with pytest.raises(ChartRenderError):
        render("{{ range .Values.l }}x{{ end }}", {"l": [1]})
    with pytest.raises(ChartRenderError):
        render("{{- if .Values.a }}", {"a": 1})


def test_module_chart_renders_the_helm_defaults() -> None:
    cp = clusterpolicy_from_module()
    assert cp["metadata"]["name"] == "cluster-policy"
    assert cp["metadata"]["labels"]["helm.sh/chart"] == "gpu-operator-v25.3.4"
    spec = cp["spec"]
    # Values of v25.3.4's values.yaml, as `helm template` renders them (research/real-operator.md §5).
    assert spec["validator"]["version"] == "v25.3.4"
    assert spec["cdi"] == {"enabled": False, "default": False}
    assert spec["daemonsets"]["labels"] == {"helm.sh/chart": "gpu-operator-v25.3.4",
                                            "app.kubernetes.io/managed-by": "gpu-operator"}
    assert spec["daemonsets"]["rollingUpdate"] == {"maxUnavailable": "1"}
    assert spec["migManager"]["config"] == {"name": None, "default": "all-disabled"}
    assert spec["dcgm"]["enabled"] is False and spec["dcgmExporter"]["enabled"] is True
    assert spec["driver"]["upgradePolicy"]["autoUpgrade"] is True
    assert spec["mig"] == {"strategy": "single"}
    assert "mode" not in spec["sandboxWorkloads"]
