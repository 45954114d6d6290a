"""The ClusterPolicy the operator's own Helm chart renders with its default values, without a helm binary.

The chart's templates/clusterpolicy.yaml uses a small subset of Go templates: `if` on a value (once `and`
of two), `end`, printing a value (plain, `quote`, `default X`), `toYaml V | nindent N`, and two `include`s of
label helpers. This module interprets exactly that subset and refuses anything else, so a chart that
needs more fails loudly instead of rendering wrong. Chart.yaml says `v1.0.0-devel` until NVIDIA's release
pipeline stamps it; like that pipeline, the version is set to the operator's release (v25.3.4) first.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import yaml

from gpu_conformance.errors import ConformanceError

Obj = dict[str, Any]
RELEASE = "gpu-operator"

_ACTION = re.compile(r"\{\{(-?)\s*(.*?)\s*(-?)\}\}", re.S)
_PATH = r"\.(?:Values|Chart)(?:\.[A-Za-z0-9_]+)+"


class ChartRenderError(ConformanceError):
    """The chart uses a template construct this renderer does not know."""


def _lookup(ctx: Obj, path: str) -> Any:
    cur: Any = ctx
    for part in path.lstrip(".").split("."):
        if not isinstance(cur, dict) or part not in cur:
            return None
        cur = cur[part]
    return cur


def _truthy(v: Any) -> bool:
    # Go templates: false, 0, nil and empty strings/collections are false.
    return v not in (None, False, 0, "") and not (isinstance(v, (dict, list)) and not v)


def _go_print(v: Any) -> str:
    if v is None:
        return "<no value>"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    if isinstance(v, (dict, list)):
        raise ChartRenderError(f"printing a collection directly is not supported: {v!r}")
    return str(v)


def _to_yaml(v: Any) -> str:
    # sigs.k8s.io/yaml: JSON round trip (sorted keys), block style; toYaml trims the final newline.
    return yaml.safe_dump(json.loads(json.dumps(v)), default_flow_style=False, sort_keys=True).rstrip("\n")


def _nindent(text: str, n: int) -> str:
    pad = " " * n
    return "\n" + "\n".join(pad + line if line else line for line in text.split("\n"))


def _quote(s: str) -> str:
    return json.dumps(s)


class Renderer:
    def __init__(self, values: Obj, chart: Obj, release: str = RELEASE) -> None:
        self.ctx = {"Values": values, "Chart": chart}
        self.release = release

    def _chart_label(self) -> str:
        chart = self.ctx["Chart"]
        return f"{chart['Name']}-{chart['Version']}".replace("+", "_")[:63].rstrip("-")

    def _include(self, name: str) -> str:
        chart, values = self.ctx["Chart"], self.ctx["Values"]
        app = (values.get("nameOverride") or chart["Name"])[:63].rstrip("-")
        if name == "gpu-operator.labels":
            lines = [f"app.kubernetes.io/name: {app}", f"helm.sh/chart: {self._chart_label()}",
                     f"app.kubernetes.io/instance: {self.release}"]
            if chart.get("AppVersion"):
                lines.append(f"app.kubernetes.io/version: {_quote(chart['AppVersion'])}")
            lines.append("app.kubernetes.io/managed-by: Helm")
            if _truthy((values.get("operator") or {}).get("labels")):
                lines.append(_to_yaml(values["operator"]["labels"]))
            return "\n".join(lines)
        if name == "gpu-operator.operand-labels":
            lines = [f"helm.sh/chart: {self._chart_label()}", f"app.kubernetes.io/managed-by: {app}"]
            if _truthy((values.get("daemonsets") or {}).get("labels")):
                lines.append(_to_yaml(values["daemonsets"]["labels"]))
            return "\n".join(lines)
        raise ChartRenderError(f"include {name!r} is not supported")

    def _value(self, expr: str) -> str:
        m = re.fullmatch(rf"toYaml ({_PATH}) \| nindent (\d+)", expr)
        if m:
            return _nindent(_to_yaml(_lookup(self.ctx, m[1])), int(m[2]))
        m = re.fullmatch(r'include "([^"]+)" \. \| nindent (\d+)', expr)
        if m:
            return _nindent(self._include(m[1]), int(m[2]))
        m = re.fullmatch(rf"({_PATH})((?:\s*\|\s*(?:quote|default (?:{_PATH}|\S+)))*)", expr)
        if not m:
            raise ChartRenderError(f"template action {{{{ {expr} }}}} is not supported")
        v = _lookup(self.ctx, m[1])
        for f in re.findall(r"\|\s*(quote|default (?:\S+))", m[2]):
            if f == "quote":
                v = _quote(_go_print(v) if v is not None else "")
            else:
                arg = f.removeprefix("default ").strip()
                if not _truthy(v):
                    v = _lookup(self.ctx, arg) if arg.startswith(".") else yaml.safe_load(arg)
        return _go_print(v)

    def _cond(self, expr: str) -> bool:
        m = re.fullmatch(rf"and \(({_PATH})\) \(({_PATH})\)", expr)
        if m:
            return _truthy(_lookup(self.ctx, m[1])) and _truthy(_lookup(self.ctx, m[2]))
        if re.fullmatch(_PATH, expr):
            return _truthy(_lookup(self.ctx, expr))
        raise ChartRenderError(f"condition {expr!r} is not supported")

    def render(self, template: str) -> str:
        out: list[str] = []
        # Stack of "is this branch emitting?" flags.
        emitting = [True]
        pos = 0
        for m in _ACTION.finditer(template):
            text = template[pos:m.start()]
            pos = m.end()
            if m[1]:  # "{{-" trims the whitespace (newlines too) at the end of the text right before it
                text = text.rstrip(" \t\n")
            if all(emitting):
                out.append(text)
            expr = m[2]
            if m[3]:
                raise ChartRenderError("trailing '-}}' is not supported")
            if expr.startswith("if "):
                emitting.append(self._cond(expr[3:].strip()))
            elif expr == "end":
                if len(emitting) == 1:
                    raise ChartRenderError("unbalanced {{ end }}")
                emitting.pop()
            elif all(emitting):
                out.append(self._value(expr))
        if len(emitting) != 1:
            raise ChartRenderError("unterminated {{ if }}")
        out.append(template[pos:])
        return "".join(out)


def render_clusterpolicy(chart_dir: Path, version: str) -> Obj:
    """ClusterPolicy from chart_dir/templates/clusterpolicy.yaml with the chart's default values."""
    meta = yaml.safe_load((chart_dir / "Chart.yaml").read_text())
    values = yaml.safe_load((chart_dir / "values.yaml").read_text())
    chart = {"Name": meta["name"], "Version": version, "AppVersion": version}
    text = Renderer(values, chart).render((chart_dir / "templates" / "clusterpolicy.yaml").read_text())
    try:
        obj = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ChartRenderError(f"rendered ClusterPolicy is not YAML: {exc}") from None
    if not isinstance(obj, dict) or obj.get("kind") != "ClusterPolicy":
        raise ChartRenderError("rendered template is not a ClusterPolicy")
    return obj


def clusterpolicy_from_module(version: str = "v25.3.4") -> Obj:
    from gpu_conformance.sim.builds.operator_module import chart_dir

    return render_clusterpolicy(chart_dir(), version)
