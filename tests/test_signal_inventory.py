"""The signal inventory (gpu_conformance/data/signals.yaml): its shape, the operator's own assets, operands.py.

Three things are held here:
- every row is well formed and names checks that exist (or says why it is ignored);
- every DaemonSet in the assets of the operator's Go module (the release the suite downloads) is in the inventory
  with the same pod `app`/`name` label and the same init containers, in order, at that release;
- operands.py and versions.py say what the inventory says, except for the mismatches listed below.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from gpu_conformance import catalogue, inventory, operands, versions
from gpu_conformance.inventory import Signal
from gpu_conformance.sim.builds import operator_module

INV = inventory.load()
T = versions.text


def _versions_of(row: Signal) -> list[versions.Version]:
    return [v for v in INV.versions_read if row.present_in(v)]


# ---- (a) shape ------------------------------------------------------------------------------------------------
def test_header() -> None:
    assert INV.versions_read == tuple(sorted(INV.versions_read))
    assert INV.newest == INV.versions_read[-1]
    assert INV.versions_read[0] == versions.OLDEST_SUPPORTED


@pytest.mark.parametrize("row", INV.signals, ids=lambda s: f"{s.kind}:{s.daemonset + '/' if s.daemonset else ''}"
                         f"{s.name}")
def test_row_shape(row: Signal) -> None:
    assert row.kind in inventory.KINDS
    assert row.name and row.component
    assert row.first <= row.last, "first after last"
    assert row.first in INV.versions_read and row.last in INV.versions_read, "first/last must be tags read"
    assert bool(row.judged_by) != bool(row.ignored), "exactly one of judged_by / ignored"
    unknown = [c for c in row.judged_by if c not in catalogue.REGISTRY]
    assert not unknown, f"judged_by names no check: {unknown}"
    for span in row.values + row.init_containers + row.containers:
        assert row.first <= span.first <= span.last <= row.last, f"span {span} outside the row's versions"


def test_rows_are_unique() -> None:
    keys = [(s.kind, s.daemonset, s.name) for s in INV.signals]
    assert len(keys) == len(set(keys)), sorted(k for k in keys if keys.count(k) > 1)


def test_daemonset_histories_cover_their_versions() -> None:
    for ds in INV.of_kind("daemonset"):
        assert set(ds.pod_labels) & {"app", "name"}, f"{ds.name}: no app/name pod label"
        assert ds.node_selector, f"{ds.name}: no nodeSelector"
        for what, spans in (("init_containers", ds.init_containers), ("containers", ds.containers)):
            if what == "containers" and not spans:
                continue
            for v in _versions_of(ds):
                hits = [s for s in spans if s.covers(v)]
                assert len(hits) == 1, f"{ds.name}.{what}: {len(hits)} entries cover {T(v)}"


def test_init_container_rows_match_the_daemonset_histories() -> None:
    """One init-container row per (DaemonSet, name), spanning exactly the releases whose history lists it."""
    expected: dict[tuple[str, str], list[versions.Version]] = {}
    for ds in INV.of_kind("daemonset"):
        for v in _versions_of(ds):
            for name in ds.init_containers_at(v) or ():
                expected.setdefault((ds.name, name), []).append(v)
    rows = {(r.daemonset, r.name): r for r in INV.of_kind("init-container")}
    assert set(rows) == set(expected), (f"rows without history: {sorted(set(rows) - set(expected))}; "
                                        f"history without rows: {sorted(set(expected) - set(rows))}")
    for key, vs in expected.items():
        row = rows[key]
        assert (row.first, row.last) == (vs[0], vs[-1]), f"{key}: row {T(row.first)}..{T(row.last)}, history " \
                                                         f"{T(vs[0])}..{T(vs[-1])}"
        assert _versions_of(row) == vs, f"{key}: not present in every release between first and last"


# ---- (b) the operator's assets --------------------------------------------------------------------------------
def _assets() -> tuple[Path, versions.Version]:
    module = operator_module.cached_module_dir()
    if module is None:
        pytest.skip(f"the GPU Operator's Go module {operator_module.MODULE}@{operator_module.MODULE_VERSION} is not "
                    "in the Go module cache (fetch it with: python -m gpu_conformance.sim.builds.binaries)")
    version = versions.parse(operator_module.OPERATOR_VERSION)
    assert version is not None
    return module / "assets", version


def _asset_daemonsets(assets: Path) -> dict[str, tuple[Path, dict]]:
    """Every DaemonSet document under assets/, by metadata.name (the assets are plain YAML, no templates)."""
    found: dict[str, tuple[Path, dict]] = {}
    for path in sorted(assets.rglob("*.y*ml")):
        for doc in yaml.safe_load_all(path.read_text(encoding="utf-8")):
            if isinstance(doc, dict) and doc.get("kind") == "DaemonSet":
                found[doc["metadata"]["name"]] = (path.relative_to(assets.parent), doc)
    return found


def test_every_asset_daemonset_is_in_the_inventory() -> None:
    assets, version = _assets()
    assert list(assets.rglob("*daemonset*.yaml")), f"no assets/**/*daemonset*.yaml under {assets}"
    problems = []
    for name, (path, doc) in _asset_daemonsets(assets).items():
        template = doc["spec"]["template"]
        labels = template["metadata"].get("labels") or {}
        inits = tuple(c["name"] for c in template["spec"].get("initContainers") or ())
        row = INV.daemonset(name)
        if row is None:
            problems.append(f"{path}: DaemonSet {name} is not in the inventory")
            continue
        if not row.present_in(version):
            problems.append(f"{path}: DaemonSet {name} exists at {T(version)}, the inventory says "
                            f"{T(row.first)}..{T(row.last)}")
        for key in ("app", "name"):
            if labels.get(key) != row.pod_labels.get(key):
                problems.append(f"{path}: pod label {key}={labels.get(key)}, the inventory says "
                                f"{row.pod_labels.get(key)}")
        listed = row.init_containers_at(version)
        if listed != inits:
            problems.append(f"{path}: init containers {list(inits)}, the inventory says {listed} at {T(version)}")
        problems += [f"{path}: init container {n} has no init-container row"
                     for n in inits if INV.init_container(name, n) is None]
    assert not problems, "\n".join(problems)


def test_inventory_daemonsets_from_assets_exist_there() -> None:
    assets, version = _assets()
    in_assets = _asset_daemonsets(assets)
    claimed = [r.name for r in INV.of_kind("daemonset")
               if r.present_in(version) and r.raw.get("source", "").startswith("assets/")]
    assert claimed and not [n for n in claimed if n not in in_assets], \
        f"in the inventory at {T(version)} but not in the assets: {[n for n in claimed if n not in in_assets]}"


# ---- (c) operands.py and versions.py ----------------------------------------------------------------------------
# Where operands.py and the operator's source disagree today. Each entry is a finding, not a fix: the check logic
# is unchanged; the test fails when a new disagreement appears or a listed one goes away.
KNOWN_MISMATCHES = {
    "gpu-feature-discovery init v24.9.0..v24.9.2": "the GFD pod also runs gpu-feature-discovery-imex-init "
                                                   "(unconditional, v24.9.x only); operands.GFD lists only "
                                                   "toolkit-validation",
}


def _ranges(vs: list[versions.Version]) -> str:
    return f"{T(vs[0])}..{T(vs[-1])}" if vs else ""


def _mismatches() -> dict[str, str]:
    found: dict[str, str] = {}
    for o in operands.OPERANDS:
        row = INV.daemonset(o.daemonset)
        if row is None:
            found[f"{o.key} has no daemonset row"] = o.daemonset
            continue
        if row.pod_labels.get("app") != o.app:
            found[f"{o.key} app label"] = f"operands {o.app}, inventory {row.pod_labels.get('app')}"
        if o.deploy_label not in row.node_selector:
            found[f"{o.key} deploy label"] = f"operands {o.deploy_label}, inventory {row.node_selector}"
        if row.state != o.state:
            found[f"{o.key} state"] = f"operands {o.state}, inventory {row.state}"
        bad: dict[tuple[str, ...], list[versions.Version]] = {}
        for v in _versions_of(row):
            default = tuple(n for n in row.init_containers_at(v) or ()
                            if (r := INV.init_container(o.daemonset, n)) is None or r.in_default_install)
            if default != o.init_containers:
                bad.setdefault(default, []).append(v)
        for default, vs in bad.items():
            found[f"{o.daemonset} init {_ranges(vs)}"] = f"operands {list(o.init_containers)}, source {list(default)}"
    for ds in INV.of_kind("daemonset"):
        if ds.state and ds.judged_by and ds.state not in operands.BY_STATE:
            found[f"{ds.state} not in BY_STATE"] = ds.name
    return found


def test_operands_agree_with_the_inventory() -> None:
    found = _mismatches()
    new = {k: v for k, v in found.items() if k not in KNOWN_MISMATCHES}
    gone = [k for k in KNOWN_MISMATCHES if k not in found]
    assert not new, "operands.py disagrees with the operator's source:\n" + "\n".join(f"{k}: {v}"
                                                                                    for k, v in new.items())
    assert not gone, f"listed mismatches no longer found (remove them from KNOWN_MISMATCHES): {gone}"


def test_deploy_labels_agree_with_the_inventory() -> None:
    labels = {s.name: s for s in INV.of_kind("node-label")}
    for key in operands.BASE_DEPLOY_LABELS + (operands.MIG_DEPLOY_LABEL,):
        assert key in labels and labels[key].first == versions.OLDEST_SUPPORTED, key
        assert "LBL-001" in labels[key].judged_by, key
    client = labels[operands.CLIENT_DEPLOY_LABEL]
    assert client.first == versions.RULES[versions.CLIENT_DEPLOY_LABEL]


def test_version_rules_agree_with_the_inventory() -> None:
    """The releases versions.py names are where the inventory's rows start or end."""
    def row(kind: str, name: str, daemonset: str = "") -> Signal:
        return next(s for s in INV.of_kind(kind) if s.name == name and s.daemonset == daemonset)

    validator = operands.VALIDATOR.daemonset
    assert row("init-container", "gdrcopy-validation", validator).first == versions.RULES[versions.GDRCOPY_VALIDATION]
    fs_last = row("init-container", "nvidia-fs-validation", validator).last
    after = INV.versions_read[INV.versions_read.index(fs_last) + 1]
    assert after == versions.RULES[versions.FS_VALIDATION_IN_DRIVER_VALIDATION]
    assert row("clusterpolicy-condition", "Ready").first == versions.RULES[versions.STATUS_CONDITIONS]
    # Driver pods are found by ownership (facts.operand_pod); the factory drops the label before this release.
    component = row("pod-label", operands.DRIVER_COMPONENT_LABEL[0])
    span = next(s for s in component.values if s.value == operands.DRIVER_COMPONENT_LABEL[1])
    assert span.first == versions.RULES[versions.DRIVER_COMPONENT_LABEL]
    message = row("clusterpolicy-message", "states not ready")
    semicolon = next(s for s in message.values if str(s.value).startswith("ClusterPolicy is not ready; states"))
    assert semicolon.first == versions.RULES[versions.NOT_READY_SEMICOLON]
