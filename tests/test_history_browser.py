"""The history page opened in a real (headless) Chromium: it paints, its tables are there, it loads nothing.

Writes reports/history-check/history.html and reports/history-screenshot.png for a person to look at.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from report_data import driver_failure_cluster, healthy_cluster
from test_report_browser import CHROMIUM, REPORTS, _run_chromium, assert_painted
from test_report_history import night

from gpu_conformance.report.history import write_history

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(CHROMIUM is None, reason="headless Chromium not installed (apt-get install -y chromium)"),
]
# What Chromium logs (--enable-logging=stderr) when the page's Content-Security-Policy stops a load.
REFUSED = "violates the following Content Security Policy directive"


@pytest.fixture(scope="module")
def page(tmp_path_factory: pytest.TempPathFactory) -> Path:
    nights = tmp_path_factory.mktemp("nights")
    night(nights, 0, healthy_cluster(), html=True)
    night(nights, 1, healthy_cluster(), html=True)
    night(nights, 2, driver_failure_cluster(), html=True)
    path, _ = write_history(nights, REPORTS / "history-check" / "history.html")
    return path


def test_screenshot_is_not_blank(page: Path, tmp_path: Path) -> None:
    png = tmp_path / "shot.png"
    proc = _run_chromium(tmp_path, f"--screenshot={png}", "--window-size=1280,1000", page.as_uri())
    assert png.exists() and png.stat().st_size > 0, f"no screenshot; chromium said: {proc.stderr[-2000:]}"
    shutil.copyfile(png, REPORTS / "history-screenshot.png")
    from PIL import Image

    with Image.open(png) as raw:
        img = raw.convert("RGB")
    # The newest night is NOT CONFORMANT (the banner is red); the cell timeline painted: passing cells and the
    # failing cells of the last night.
    assert_painted(img, passing=1000, failing=300)


def test_tables_in_dom(page: Path, tmp_path: Path) -> None:
    proc = _run_chromium(tmp_path, "--dump-dom", page.as_uri())
    dom = proc.stdout
    assert "</html>" in dom, f"no DOM dumped; chromium said: {proc.stderr[-2000:]}"
    assert [v for v in ("run-2", "run-1", "run-0") if f'data-run="{v}"' in dom] == ["run-2", "run-1", "run-0"]
    assert dom.index('data-run="run-2"') < dom.index('data-run="run-0"')  # newest first
    assert dom.count('data-regressed="yes"') == 1
    assert '<tr data-check="DRV-004" data-since="run-2">' in dom
    assert dom.count("changed\" data-status") == 3  # driver-toolkit fail, device-plugin and probe blocked


def test_the_browser_loads_nothing(page: Path, tmp_path: Path) -> None:
    proc = _run_chromium(tmp_path, "--enable-logging=stderr", "--v=0", "--dump-dom", page.as_uri())
    assert "</html>" in proc.stdout
    assert REFUSED not in proc.stderr, proc.stderr[-2000:]
    # The check can see a refusal: the same page with an image on a (local, closed) port is refused by the CSP.
    tampered = tmp_path / "tampered.html"
    tampered.write_text(page.read_text().replace("<main>", '<main><img src="http://127.0.0.1:9/x.png" alt="">'))
    proc = _run_chromium(tmp_path, "--enable-logging=stderr", "--v=0", "--dump-dom", tampered.as_uri())
    assert REFUSED in proc.stderr, proc.stderr[-3000:]
