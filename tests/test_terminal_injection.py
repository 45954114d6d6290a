"""Text from the cluster cannot act on the terminal (issue 13 item 13): escape sequences never get printed.

The payload sets the window title (OSC 0), clears the screen (CSI 2J, CSI H) and then prints a fake verdict.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from gpu_conformance.control_chars import printable
from gpu_conformance.errors import ClusterAccessError
from gpu_conformance.report.terminal import summary_lines_from_dict

REPO = Path(__file__).resolve().parents[1]
PAYLOAD = ("nvidia-smi: \x1b[31mRED\x1b[0m \x1b]0;TERMINAL-TITLE-PWNED\x07\x1b[2J\x1b[H\r\n"
           "verdict: CONFORMANT \x1b]8;;http://evil.example/\x1b\\click\x1b]8;;\x1b\\ \x9b2J \u202eevil")
# Any byte a terminal acts on: ESC, BEL, CR, the C1 CSI/OSC introducers, bidi overrides.
ACTIVE = re.compile(r"[\x1b\x07\r\x9b\x9d\u202e]")


def test_printable_removes_sequences_and_shows_other_controls() -> None:
    out = printable(PAYLOAD, keep_newlines=False)
    assert not ACTIVE.search(out), repr(out)
    assert "\n" not in out
    assert "TERMINAL-TITLE-PWNED" not in out and "evil.example" not in out
    assert "RED" in out and "click" in out  # the text itself stays readable
    assert printable("plain text\nsecond line") == "plain text\nsecond line"


def test_summary_lines_carry_no_escape_sequence() -> None:
    data = {"run_id": "r", "verdict": "NOT CONFORMANT", "layers_run": ["operator"],
            "nodes": [{"name": "gpu-node-0\x1b[2J", "root_cause": {"layer": "operator", "check": "OPR-003",
                                                                    "message": PAYLOAD}}],
            "cluster_blocker": {"layer": "operator", "check": "OPR-003", "message": PAYLOAD}}
    lines = summary_lines_from_dict(data)
    assert not any(ACTIVE.search(line) for line in lines), lines
    assert [line for line in lines if line.startswith("verdict:")] == ["verdict: NOT CONFORMANT"]


def test_one_line_errors_carry_no_escape_sequence() -> None:
    e = ClusterAccessError(f"create selfsubjectaccessreviews failed: HTTP 500 {PAYLOAD}")
    assert not ACTIVE.search(str(e)) and "\n" not in str(e)


@pytest.mark.sim
def test_hostile_probe_log_does_not_reach_the_terminal(tmp_path: Path) -> None:
    """A real run on the simulated cluster whose probe log carries the payload (PRB-003 quotes it)."""
    from gpu_conformance.sim.operator.faults import PROBE_LOG
    from gpu_conformance.sim.session import start_sim

    booted = start_sim(quiet=True, gpu_nodes=1, cpu_nodes=0)
    try:
        booted.cluster.write_container_log(PROBE_LOG, f"== nvidia-smi -L\n{PAYLOAD}\nrc=9\n== env\n== end\n")
        proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--cluster=current",
                               f"--kubeconfig={booted.kubeconfig}", f"--report-dir={tmp_path}",
                               "--probe-timeout=60", "-rA"],
                              cwd=REPO, capture_output=True, text=True, timeout=300, check=False)
    finally:
        booted.stop()
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out[-3000:]
    assert "PRB-003" in out and "RED" in out, out[-3000:]  # the log text is quoted ...
    assert not ACTIVE.search(out), [ln for ln in out.splitlines() if ACTIVE.search(ln)][:5]  # ... inert
    assert not any(ln.strip().startswith("verdict: CONFORMANT") for ln in out.splitlines())


@pytest.mark.parametrize("char", ["\u200f", "\u200d", "\u2028", "\u2029", "\u202e", "\u2066", "\ufeff",
                                  "\U000e0041"])
def test_unicode_format_and_separator_characters_are_shown_not_obeyed(char: str) -> None:
    # RLM, ZWJ and U+2028 reached the terminal raw (issue 26): they reorder or split what a person reads.
    out = printable(f"verdict{char}: FAIL", keep_newlines=False)
    assert char not in out and ("\\u" in out or "\\U" in out), out


def test_every_unicode_format_character_is_covered() -> None:
    # The ranges in control_chars are written out (no scan at import); held here against unicodedata.
    import sys
    import unicodedata

    missed = [hex(cp) for cp in range(0xA0, sys.maxunicode + 1)
              if unicodedata.category(chr(cp)) in ("Cf", "Zl", "Zp") and printable(chr(cp)) == chr(cp)]
    assert not missed, missed
