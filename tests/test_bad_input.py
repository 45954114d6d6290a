"""Bad input ends a run with one clear line, no traceback, and an exit code distinct from 'not conformant'."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest

from gpu_conformance.cluster.connect import connect
from gpu_conformance.errors import EXIT_CLUSTER_ACCESS, EXIT_USAGE, ClusterAccessError, UsageError
from gpu_conformance.settings import Settings, load_config_file

REPO = Path(__file__).resolve().parents[1]


def run_pytest(*args: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args,
                           f"--report-dir={tmp_path / 'reports'}"],
                          cwd=REPO, capture_output=True, text=True, timeout=120, check=False)


def kubeconfig(tmp_path: Path, server: str, contexts: tuple[str, ...] = ("c1",)) -> Path:
    p = tmp_path / "kubeconfig"
    ctx = "\n".join(f"- name: {c}\n  context: {{cluster: k, user: u}}" for c in contexts)
    p.write_text(f"""apiVersion: v1
kind: Config
clusters:
- name: k
  cluster: {{server: "{server}", insecure-skip-tls-verify: true}}
users:
- name: u
  user: {{token: not-a-real-token}}
contexts:
{ctx}
current-context: {contexts[0]}
""")
    return p


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def one_clear_line(proc: subprocess.CompletedProcess[str], words: str) -> None:
    text = proc.stdout + proc.stderr
    assert "Traceback" not in text, text
    assert words in text, text


def test_missing_kubeconfig(tmp_path: Path) -> None:
    proc = run_pytest("--cluster=current", f"--kubeconfig={tmp_path / 'nope'}", tmp_path=tmp_path)
    assert proc.returncode == EXIT_CLUSTER_ACCESS
    one_clear_line(proc, "not found")


def test_unknown_context(tmp_path: Path) -> None:
    kc = kubeconfig(tmp_path, "https://127.0.0.1:1", ("alpha", "beta"))
    with pytest.raises(ClusterAccessError, match=r"context 'gamma' not found .*available: alpha, beta"):
        connect(str(kc), "gamma")


def test_unreachable_api_server(tmp_path: Path) -> None:
    kc = kubeconfig(tmp_path, f"https://127.0.0.1:{free_port()}")
    proc = run_pytest("--cluster=current", f"--kubeconfig={kc}", tmp_path=tmp_path)
    assert proc.returncode == EXIT_CLUSTER_ACCESS
    one_clear_line(proc, "cannot reach the API server")


def test_bad_option_values(tmp_path: Path) -> None:
    proc = run_pytest("--cluster=current", "--expect-driver", "gpu", tmp_path=tmp_path)
    assert proc.returncode == EXIT_USAGE
    one_clear_line(proc, "--expect-driver must be one of auto, operator, host")
    proc = run_pytest("--cluster=mars", tmp_path=tmp_path)
    assert proc.returncode == EXIT_USAGE
    one_clear_line(proc, "unknown target 'mars'")


def test_without_cluster_conformance_is_skipped_with_one_line(tmp_path: Path) -> None:
    proc = run_pytest("tests_conformance", "-rs", tmp_path=tmp_path)
    assert proc.returncode == 0, proc.stdout
    assert "run `pytest --cluster`" in proc.stdout


def test_settings_validation_and_config_file(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="probe-timeout"):
        Settings(probe_timeout="soon").validate()
    with pytest.raises(UsageError, match="gpu-node-selector"):
        Settings(gpu_node_selector="a=b,=c").validate()
    cfg = tmp_path / "c.yaml"
    cfg.write_text("expect-cdi: yes-please\n")
    assert load_config_file(str(cfg)) == {"expect_cdi": "yes-please"}
    cfg.write_text("warp-drive: on\n")
    with pytest.raises(UsageError, match="unknown option 'warp-drive'"):
        load_config_file(str(cfg))
