"""The failing-node report opened in a real (headless) Chromium: it paints, and its script runs.

Writes reports/browser-check/conformance.html (not reports/conformance.html, which a real run owns) and
reports/conformance-screenshot.png for a person to look at.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from report_data import DRIVER_FAIL_NODE, driver_failure_cluster, grid

from gpu_conformance.report.html import write_html

REPO = Path(__file__).resolve().parents[1]
REPORTS = REPO / "reports"


def _chromium() -> str | None:
    for name in ("chromium", "chromium-browser"):
        found = shutil.which(name)
        if found:
            return found
    return "/usr/bin/chromium" if Path("/usr/bin/chromium").exists() else None


CHROMIUM = _chromium()

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(CHROMIUM is None, reason="headless Chromium not installed (apt-get install -y chromium)"),
]


def _run_chromium(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    assert CHROMIUM is not None
    profile = tmp_path / f"profile-{len(list(tmp_path.glob('profile-*')))}"
    cmd = [
        CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync",
        f"--user-data-dir={profile}", *args,
    ]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)


@pytest.fixture(scope="module")
def page() -> Path:
    return write_html(driver_failure_cluster(), REPORTS / "browser-check")


def test_screenshot_is_not_blank(page: Path, tmp_path: Path) -> None:
    png = tmp_path / "shot.png"
    proc = _run_chromium(tmp_path, f"--screenshot={png}", "--window-size=1280,1600", page.as_uri())
    assert png.exists() and png.stat().st_size > 0, f"no screenshot; chromium said: {proc.stderr[-2000:]}"
    shutil.copyfile(png, REPORTS / "conformance-screenshot.png")
    try:
        from PIL import Image
    except ImportError:
        # Without Pillow: a blank page compresses to a few KB of repetitive bytes.
        data = png.read_bytes()
        assert len(data) > 20_000 and len(set(data)) > 200
        return
    with Image.open(png) as raw:
        img = raw.convert("RGB")
    assert img.size == (1280, 1600)
    # The grid painted: fail and pass cell backgrounds are there in quantity.
    assert_painted(img, passing=5000, failing=500)


def assert_painted(img: object, passing: int, failing: int) -> None:
    """A NOT CONFORMANT page's screenshot: many colours, the red banner at the top, at least this many pixels of
    passing and of failing cells (the history page uses it too)."""
    colors = {rgb: n for n, rgb in img.getcolors(maxcolors=1 << 20) or []}  # type: ignore[attr-defined]
    assert len(colors) > 50, "the screenshot is (nearly) one colour"
    r, g, b = img.getpixel((8, 20))  # type: ignore[attr-defined]
    assert r > 140 and g < 80 and b < 80, (r, g, b)
    assert colors.get((0xFD, 0xE0, 0xDE), 0) > failing, "no failing cell painted"
    assert colors.get((0xE3, 0xF4, 0xE6), 0) > passing, "no passing cells painted"


def test_grid_in_dom_after_scripts(page: Path, tmp_path: Path) -> None:
    proc = _run_chromium(tmp_path, "--dump-dom", page.as_uri())
    dom = proc.stdout
    assert "</html>" in dom, f"no DOM dumped; chromium said: {proc.stderr[-2000:]}"
    rows = grid(dom)
    assert set(rows) == {"gpu-node-0", "gpu-node-1", "gpu-node-2"}
    assert [s for s, _ in rows[DRIVER_FAIL_NODE]] == ["pass", "pass", "pass", "fail", "blocked", "blocked"]
    # The inline script ran: it marks the document and reveals the filters it drives.
    assert '<html lang="en" class="js">' in dom
    assert '<nav id="filters" aria-label="Filters">' in dom
    assert dom.count('class="copy"') >= 1


def test_failures_only_link(page: Path, tmp_path: Path) -> None:
    proc = _run_chromium(tmp_path, "--dump-dom", page.as_uri() + "#failures")
    assert '<body class="failures-only">' in proc.stdout, proc.stderr[-2000:]
