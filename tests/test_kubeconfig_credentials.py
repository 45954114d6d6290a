"""Credentials from the kubeconfig stay in memory, and exec credential plugins are bounded and named.

Issue 13 item 2: SIGTERM or SIGKILL of a run left the kubeconfig's client private key in $TMPDIR.
Issue 13 item 8: a hanging exec plugin hung the run for ever; a missing one was reported as a 403 (RBAC).
"""

from __future__ import annotations

import base64
import json
import os
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from gpu_conformance.cluster.connect import connect
from gpu_conformance.errors import EXIT_CLUSTER_ACCESS, ClusterAccessError

REPO = Path(__file__).resolve().parents[1]
KEY = b"-----BEGIN PRIVATE KEY-----\nTUlJRXZRSUJBREFOQmdrcWhraUc5dzBCQVFF\n-----END PRIVATE KEY-----\n"
CERT = b"-----BEGIN CERTIFICATE-----\nMIIC\n-----END CERTIFICATE-----\n"


def write_kubeconfig(path: Path, user: dict, server: str = "https://127.0.0.1:1") -> Path:
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [{"name": "k", "cluster": {"server": server,
                                               "certificate-authority-data": base64.b64encode(CERT).decode()}}],
        "users": [{"name": "u", "user": user}],
        "contexts": [{"name": "c", "context": {"cluster": "k", "user": "u"}}]}))
    return path


def files_under(root: Path) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file()]


def test_client_key_and_certificates_are_never_written_to_tmpdir(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    monkeypatch.setattr("tempfile.tempdir", str(tmpdir))
    kc = write_kubeconfig(tmp_path / "kc", {"client-certificate-data": base64.b64encode(CERT).decode(),
                                            "client-key-data": base64.b64encode(KEY).decode()})
    conn = connect(str(kc))
    cfg = conn.api.configuration
    try:
        assert files_under(tmpdir) == []
        for path, content in ((cfg.key_file, KEY), (cfg.cert_file, CERT), (cfg.ssl_ca_cert, CERT)):
            assert Path(path).read_bytes() == content
            # An anonymous memory file: no name in any directory, gone with the process however it ends.
            assert os.readlink(path).startswith("/memfd:"), os.readlink(path)
    finally:
        conn.close()
    assert files_under(tmpdir) == []


def plugin(tmp_path: Path, body: str) -> Path:
    script = tmp_path / "plugin.sh"
    script.write_text("#!/bin/sh\n" + body + "\n")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return script


def exec_user(command: str, **extra: object) -> dict:
    return {"exec": {"apiVersion": "client.authentication.k8s.io/v1", "command": command, **extra}}


def test_exec_plugin_token_is_used(tmp_path: Path) -> None:
    cred = {"apiVersion": "client.authentication.k8s.io/v1", "kind": "ExecCredential",
            "status": {"token": "from-the-plugin", "expirationTimestamp": "2999-01-01T00:00:00Z"}}
    script = plugin(tmp_path, f"cat <<'EOF'\n{json.dumps(cred)}\nEOF")
    conn = connect(str(write_kubeconfig(tmp_path / "kc", exec_user(str(script)))))
    try:
        assert conn.api.configuration.get_api_key_with_prefix("BearerToken") == "Bearer from-the-plugin"
    finally:
        conn.close()


def test_exec_plugin_failure_names_the_plugin_and_its_error(tmp_path: Path) -> None:
    script = plugin(tmp_path, "echo 'error: SSO session expired, run aws sso login' >&2; exit 7")
    with pytest.raises(ClusterAccessError, match=r"credential plugin .*plugin.sh' of user 'u' .* failed with "
                                                 r"exit code 7: error: SSO session expired"):
        connect(str(write_kubeconfig(tmp_path / "kc", exec_user(str(script)))))


def run_pytest(kc: Path, tmp_path: Path, env: dict[str, str] | None = None, timeout: float = 120
               ) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--cluster=current",
                           f"--kubeconfig={kc}", f"--report-dir={tmp_path / 'reports'}"],
                          cwd=REPO, capture_output=True, text=True, timeout=timeout, check=False,
                          env={**os.environ, **(env or {})})


def test_missing_exec_plugin_is_named_not_blamed_on_rbac(tmp_path: Path) -> None:
    kc = write_kubeconfig(tmp_path / "kc", exec_user("/nonexistent/credential-plugin",
                                                     installHint="install it with: pip install the-cloud-cli"))
    proc = run_pytest(kc, tmp_path)
    # The paths pytest prints hold the run's numbered temp dir (`pytest-403/`, `popen-gw1/` under -n): not the words.
    out = (proc.stdout + proc.stderr).replace(str(tmp_path.parents[1]), "<tmp>")
    assert proc.returncode == EXIT_CLUSTER_ACCESS, out[-2000:]
    assert "Traceback" not in out and "rbac" not in out.lower() and "403" not in out
    assert ("credential plugin '/nonexistent/credential-plugin' of user 'u'" in out
            and "is not installed (not found): install it with: pip install the-cloud-cli" in out), out[-2000:]


def test_hanging_exec_plugin_ends_the_run_in_one_line(tmp_path: Path) -> None:
    kc = write_kubeconfig(tmp_path / "kc", exec_user("sleep", args=["3600"]))
    t0 = time.monotonic()
    proc = run_pytest(kc, tmp_path, env={"GPU_CONFORMANCE_EXEC_TIMEOUT": "2"}, timeout=60)
    out = proc.stdout + proc.stderr
    assert proc.returncode == EXIT_CLUSTER_ACCESS, out[-2000:]
    assert "credential plugin 'sleep' of user 'u'" in out and "did not answer within 2 s" in out, out[-2000:]
    assert "Traceback" not in out
    assert time.monotonic() - t0 < 30


@pytest.mark.sim
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL])
def test_no_key_left_in_tmpdir_when_a_run_is_killed(sig: signal.Signals, tmp_path: Path) -> None:
    """A real run against the simulated cluster (cert kubeconfig), killed while the probe waits."""
    from gpu_conformance.sim.services.kube_client import Kube
    from gpu_conformance.sim.session import start_sim

    tmpdir = tmp_path / "private-tmpdir"
    tmpdir.mkdir()
    booted = start_sim(quiet=True, gpu_nodes=1, cpu_nodes=0)
    kwok = json.loads((booted.cluster.state_dir / "pids.json").read_text())["processes"]["kwok"]["pid"]
    proc = None
    try:
        kube = Kube(booted.cluster.api_client())
        os.kill(kwok, signal.SIGSTOP)  # probe pods get bound but never start: the run waits in the probe
        proc = subprocess.Popen([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--cluster=current",
                                 f"--kubeconfig={booted.kubeconfig}", f"--report-dir={tmp_path / 'r'}",
                                 "--probe-timeout=120"], cwd=REPO, env={**os.environ, "TMPDIR": str(tmpdir)},
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 90
        while not kube.list("Namespace", label_selector="gpu-conformance.nvidia.com/run-id"):
            assert proc.poll() is None and time.monotonic() < deadline, "the run never reached the probe"
            time.sleep(0.5)
        time.sleep(1)
        proc.send_signal(sig)
        proc.wait(timeout=60)
    finally:
        if proc is not None and proc.poll() is None:
            proc.kill()
        os.kill(kwok, signal.SIGCONT)
        booted.stop()
    leaked = [p for p in files_under(tmpdir) if b"-----BEGIN" in p.read_bytes()]
    assert leaked == [], leaked


def test_without_memfd_credentials_live_in_a_private_dir_removed_on_close(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    from gpu_conformance.cluster.credentials import FALLBACK_PREFIX, remove_stale_dirs

    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    monkeypatch.setattr("tempfile.tempdir", str(tmpdir))
    monkeypatch.delattr(os, "memfd_create")
    stale = tmpdir / f"{FALLBACK_PREFIX}{2 ** 22 + 1}-abc"  # a SIGKILLed run's (pid above pid_max: gone)
    stale.mkdir()
    (stale / "client-key").write_bytes(KEY)
    kc = write_kubeconfig(tmp_path / "kc", {"client-key-data": base64.b64encode(KEY).decode(),
                                            "client-certificate-data": base64.b64encode(CERT).decode()})
    conn = connect(str(kc))
    key = Path(conn.api.configuration.key_file)
    assert not stale.exists()  # removed by this run
    assert key.parent.name.startswith(f"{FALLBACK_PREFIX}{os.getpid()}-")
    assert stat.S_IMODE(key.parent.stat().st_mode) == 0o700 and stat.S_IMODE(key.stat().st_mode) == 0o600
    conn.close()
    assert files_under(tmpdir) == [] and remove_stale_dirs(str(tmpdir)) == []


@pytest.mark.sim
def test_sigkilled_sim_run_is_reaped_by_the_next_one(tmp_path: Path) -> None:
    """SIGKILL cannot be caught: a --cluster=sim run leaves its temporary state dir (the sim's keys) and its
    processes. The next simulated cluster started from the same $TMPDIR stops and removes them."""
    from gpu_conformance.sim.controlplane.cluster import PIDS_FILE, reap_orphaned_temp_dirs

    tmpdir = tmp_path / "private-tmpdir"
    tmpdir.mkdir()
    proc = subprocess.Popen([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--cluster=sim",
                             "--sim-gpu-nodes=1", "--sim-cpu-nodes=0", f"--report-dir={tmp_path / 'r'}"],
                            cwd=REPO, env={**os.environ, "TMPDIR": str(tmpdir)},
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while not list(tmpdir.glob("gpu-sim-*/kubeconfig")):
            assert proc.poll() is None and time.monotonic() < deadline, "the sim never came up"
            time.sleep(0.2)
        time.sleep(1)
        state = next(tmpdir.glob("gpu-sim-*"))
        pids = [p["pid"] for p in json.loads((state / PIDS_FILE).read_text())["processes"].values()]
    finally:
        proc.kill()
        proc.wait()
    assert all(_running(pid) for pid in pids)  # orphaned, in their own sessions
    assert reap_orphaned_temp_dirs(str(tmpdir)) == [state]
    assert not state.exists() and not any(_running(pid) for pid in pids)
    assert [p for p in files_under(tmpdir) if b"-----BEGIN" in p.read_bytes()] == []


def _running(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[1][0] != "Z"
    except (OSError, IndexError):
        return False
