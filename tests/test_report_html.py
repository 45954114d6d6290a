"""conformance.html: what a person sees, asserted on the rendered page."""

from __future__ import annotations

import html
import re
import time
from pathlib import Path

import pytest
from report_data import (
    DRIVER_FAIL_MESSAGE,
    DRIVER_FAIL_NODE,
    LARGE_DRIVER_FAILING,
    LARGE_PLUGIN_FAILING,
    OPERATOR_FAIL_MESSAGE,
    cluster_pass,
    driver_failure_cluster,
    finding,
    grid,
    healthy_cluster,
    large_cluster,
    make_result,
    node_pass,
    operator_failure_cluster,
    text_of,
)

from gpu_conformance import catalogue
from gpu_conformance.model import Layer, Status
from gpu_conformance.report.html import HTML_NAME, render_html, write_html
from gpu_conformance.report.json_report import write_json
from gpu_conformance.report_format import load_json

LAYERS = ["operator", "nfd", "deploy-labels", "driver-toolkit", "device-plugin", "probe"]


def statuses(row: list[tuple[str, str]]) -> list[str]:
    return [status for status, _ in row]


def test_healthy_cluster(tmp_path: Path) -> None:
    path = write_html(healthy_cluster(), tmp_path)
    assert path == tmp_path / HTML_NAME
    page = path.read_text(encoding="utf-8")
    assert "CONFORMANT" in page and "NOT CONFORMANT" not in page
    rows = grid(page)
    assert set(rows) == {"gpu-node-0", "gpu-node-1", "gpu-node-2"}
    for row in rows.values():
        assert statuses(row) == ["pass"] * 6
        # Each cell says its status in words, not only in colour.
        assert all(text.endswith("pass") for _, text in row)
    assert "Root cause per failing node" not in page
    assert "All 3 GPU nodes pass all six layers." in text_of(page)


def test_driver_failure_grid_and_root_cause(tmp_path: Path) -> None:
    page = write_html(driver_failure_cluster(), tmp_path).read_text(encoding="utf-8")
    text = text_of(page)
    assert "NOT CONFORMANT" in text
    rows = grid(page)
    assert statuses(rows[DRIVER_FAIL_NODE]) == ["pass", "pass", "pass", "fail", "blocked", "blocked"]
    assert [t for _, t in rows[DRIVER_FAIL_NODE]][3:] == ["\u2718 fail", "\u2298 blocked", "\u2298 blocked"]
    assert statuses(rows["gpu-node-0"]) == ["pass"] * 6
    # The failing node comes first: that is what the reader is looking for.
    assert list(rows)[0] == DRIVER_FAIL_NODE
    assert f"{DRIVER_FAIL_NODE}: driver-toolkit (DRV-004): {DRIVER_FAIL_MESSAGE}" in text


def test_header_facts(tmp_path: Path) -> None:
    text = text_of(write_html(driver_failure_cluster(), tmp_path).read_text(encoding="utf-8"))
    for expected in ("https://api.gpu-lab.example:6443", "v1.30.4", "gpu-lab", "v24.9.0", "gpu-operator",
                     "operator driver container on 3 nodes", "run-20260101-000000", "2026-01-01 00:00:00 UTC",
                     "1 min 14 s", "API requests 42", "driver: on", "CDI: off", "MIG strategy: single"):
        assert expected in text, expected


def test_check_details(tmp_path: Path) -> None:
    page = write_html(driver_failure_cluster(), tmp_path).read_text(encoding="utf-8")
    m = re.search(r'<details class="check" id="check-DRV-004" data-status="fail" open>(.*?)</details>\s*(?=<details '
                  r'class="check"|</section>)', page, re.S)
    assert m, "DRV-004 is shown, open, as failing"
    section = m.group(1)
    text = text_of(section)
    assert "Validator chain driver → toolkit → cuda completed" in text
    assert "failing: gpu-node-1" in text
    assert DRIVER_FAIL_MESSAGE in text
    assert catalogue.get("DRV-004").hint.split(":")[0] in text
    # The read-only command, with the failing node filled in, in a code block.
    assert f"<code>{html.escape(catalogue.get('DRV-004').render_kubectl('gpu-operator', 'gpu-node-1'))}</code>" \
        in section
    # Evidence as pretty JSON.
    assert "&#34;observed&#34;: &#34;waiting for 12m&#34;" in section
    # Later layers are shown as blocked by it, not as failures of their own.
    assert re.search(r'id="check-DPL-002" data-status="blocked"', page)
    assert "blocked by driver-toolkit" in text_of(page)


def test_operator_failure(tmp_path: Path) -> None:
    page = write_html(operator_failure_cluster(), tmp_path).read_text(encoding="utf-8")
    text = text_of(page)
    assert f"Cluster blocker: operator (OPR-003): {OPERATOR_FAIL_MESSAGE}" in text
    rows = grid(page)
    assert len(rows) == 3
    for row in rows.values():
        assert statuses(row) == ["fail"] + ["blocked"] * 5
    assert "Probe skipped: the operator layer failed cluster-wide" in text


def test_probe_section(tmp_path: Path) -> None:
    text = text_of(write_html(driver_failure_cluster(), tmp_path).read_text(encoding="utf-8"))
    assert "gpu-conformance-probe-gpu-node-1" in text
    assert "0/3 nodes are available: 1 Insufficient nvidia.com/gpu." in text
    assert "NVIDIA A100-SXM4-80GB" in text
    assert "3 probe pods, 1 not succeeded." in text


def test_large_cluster_groups_rows(tmp_path: Path) -> None:
    result = large_cluster()
    start = time.perf_counter()
    path = write_html(result, tmp_path)
    elapsed = time.perf_counter() - start
    assert elapsed < 5, f"rendering 1,000 nodes took {elapsed:.1f} s"
    size = path.stat().st_size
    assert size < 2_000_000, f"{size} bytes"
    page = path.read_text(encoding="utf-8")
    rows = grid(page)
    assert {label: statuses(row) for label, row in rows.items()} == {
        "gpu-node-[990-996] \u2014 7 nodes": ["pass", "pass", "pass", "fail", "blocked", "blocked"],
        "gpu-node-[997-999] \u2014 3 nodes": ["pass", "pass", "pass", "pass", "fail", "blocked"],
        "gpu-node-[0-989] \u2014 990 nodes": ["pass"] * 6,
    }
    assert [t for _, t in rows["gpu-node-[997-999] \u2014 3 nodes"]][4] == "\u2718 fail"
    text = text_of(page)
    assert "10 of 1000 GPU nodes fail: driver-toolkit on 7 nodes, device-plugin on 3 nodes." in text
    # Messages that named their node are grouped as one problem.
    assert ("gpu-node-[990-996] \u2014 7 nodes: driver-toolkit (DRV-004): validator on <node> stuck in "
            "toolkit-validation") in text
    assert f"{len(LARGE_DRIVER_FAILING) + len(LARGE_PLUGIN_FAILING)} not succeeded" in text
    # Healthy nodes are summarised, not listed one by one.
    assert "gpu-node-500" not in page
    # Passing nodes arrive grouped from conformance.json: one line for all of them, no per-node list.


def test_many_unnumbered_nodes_fall_back_to_examples(tmp_path: Path) -> None:
    nodes = [f"ip-10-0-{i}-{(i * 7) % 250}.ec2.internal" for i in range(60)]
    findings = cluster_pass() + [f for n in nodes for f in node_pass(n)]
    page = write_html(make_result(nodes, findings), tmp_path).read_text(encoding="utf-8")
    rows = grid(page)
    assert len(rows) == 1
    label = next(iter(rows))
    assert label.endswith("and 57 more \u2014 60 nodes"), label
    # The full list is still there, folded away.
    assert "all 60 names" in page and all(n in page for n in nodes)


def test_incomplete_and_warn(tmp_path: Path) -> None:
    nodes = ["gpu-node-0", "gpu-node-1"]
    findings = cluster_pass() + [f for n in nodes for f in node_pass(n, [Layer.NFD, Layer.DEPLOY_LABELS,
                                                                         Layer.DRIVER_TOOLKIT])]
    findings.append(finding("DPL-002", Status.WARN, "driver upgrade in progress", "gpu-node-1"))
    findings.append(finding("DPL-002", Status.PASS, "advertises 8", "gpu-node-0"))
    result = make_result(nodes, findings, layers_run=LAYERS_WITHOUT_PROBE, probe={"skipped": "--no-probe"})
    page = write_html(result, tmp_path).read_text(encoding="utf-8")
    text = text_of(page)
    assert "INCOMPLETE" in text
    assert "Layers not run: probe" in text
    rows = grid(page)
    assert statuses(rows["gpu-node-1"]) == ["pass", "pass", "pass", "pass", "warn", "n/a"]
    assert rows["gpu-node-1"][4][1] == "! warn"
    assert "Probe skipped: --no-probe" in text


LAYERS_WITHOUT_PROBE = [layer for layer in Layer if layer != Layer.PROBE]


def test_self_contained_and_escaped(tmp_path: Path) -> None:
    nodes = ["gpu-node-0"]
    findings = cluster_pass() + node_pass("gpu-node-0", [Layer.NFD, Layer.DEPLOY_LABELS])
    findings.append(finding("DRV-002", Status.FAIL, '<script>alert("x")</script> & <b>bold</b>', "gpu-node-0",
                            evidence={"html": "<img src=x onerror=alert(1)>"}))
    page = write_html(make_result(nodes, findings), tmp_path).read_text(encoding="utf-8")
    assert page.count("<script") == 1 and "<script>alert" not in page
    assert "&lt;script&gt;alert" in page and "<img src=x" not in page
    # Nothing is loaded from anywhere: no external scripts, styles, fonts or images.
    for pattern in (r"<script[^>]+src=", r"<link\b", r"<img\b", r"@import", r"url\(", r"https?://(?!api\.gpu-lab)"):
        assert not re.search(pattern, page), pattern


def test_filters_are_there_and_hidden_without_script(tmp_path: Path) -> None:
    page = write_html(driver_failure_cluster(), tmp_path).read_text(encoding="utf-8")
    assert '<nav id="filters" aria-label="Filters" hidden>' in page
    assert 'id="failures-only"' in page
    for layer in LAYERS:
        assert f'data-layer-toggle value="{layer}"' in page
        assert f'<section class="layer" data-layer="{layer}"' in page


def test_render_from_saved_json_matches(tmp_path: Path) -> None:
    result = driver_failure_cluster()
    html_path = write_html(result, tmp_path)
    data = load_json(write_json(result, tmp_path))
    assert render_html(data) == html_path.read_text(encoding="utf-8")


@pytest.mark.parametrize("builder", [healthy_cluster, driver_failure_cluster, operator_failure_cluster])
def test_rendering_is_deterministic(builder, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    a = write_html(builder(), tmp_path / "a").read_text(encoding="utf-8")
    b = write_html(builder(), tmp_path / "b").read_text(encoding="utf-8")
    assert a == b
