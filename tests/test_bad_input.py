"""Bad input ends a run with one clear line, no traceback, and an exit code distinct from 'not conformant'."""

from __future__ import annotations

import re
import socket
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from gpu_conformance.cluster.connect import connect
from gpu_conformance.errors import EXIT_CLUSTER_ACCESS, EXIT_USAGE, ClusterAccessError, UsageError
from gpu_conformance.plugin import parallel_workers
from gpu_conformance.settings import Settings, load_config_file

REPO = Path(__file__).resolve().parents[1]


def run_pytest(*args: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    if not any(a.startswith("--report-dir") for a in args):
        args = (*args, f"--report-dir={tmp_path / 'reports'}")
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args],
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


def test_cluster_refuses_parallel_workers(tmp_path: Path) -> None:
    pytest.importorskip("xdist")
    kc = kubeconfig(tmp_path, f"https://127.0.0.1:{free_port()}")
    proc = run_pytest("--cluster=current", f"--kubeconfig={kc}", "-n", "2", tmp_path=tmp_path)
    assert proc.returncode == EXIT_USAGE
    one_clear_line(proc, "--cluster runs the checks once, in one process: leave out -n/--dist")


def test_parallel_workers_are_those_xdist_distributes_to() -> None:
    def config(**options: object) -> Any:
        return SimpleNamespace(getoption=lambda name, default=None: options.get(name, default))

    assert parallel_workers(config(dist="loadgroup", tx=["popen", "popen"]))  # -n 2, -n auto
    assert not parallel_workers(config(dist="no", tx=[]))  # -n 0: no worker at all
    assert not parallel_workers(config(dist="load", tx=[]))  # --dist without -n: xdist runs nothing apart
    assert not parallel_workers(config())  # no pytest-xdist


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


# ---- issue 13 item 9: each of these ended in an INTERNALERROR traceback or the wrong exit code -----------------

def run_ok_shape(proc: subprocess.CompletedProcess[str], code: int, words: str) -> None:
    text = proc.stdout + proc.stderr
    assert proc.returncode == code, text[-3000:]
    assert "Traceback" not in text and "INTERNALERROR" not in text, text[-3000:]
    assert words in text, text[-3000:]


@pytest.mark.parametrize(("option", "code", "words"), [
    ("--kubeconfig", EXIT_CLUSTER_ACCESS, "is not readable: not UTF-8 text (byte 0xb3"),
    ("--conformance-config", EXIT_USAGE, "not a YAML text file"),
])
def test_binary_input_files(tmp_path: Path, option: str, code: int, words: str) -> None:
    binary = tmp_path / "binary"
    binary.write_bytes(b"apiVersion: v1\n\xb3\xff\x00\x89PNG")
    run_ok_shape(run_pytest("--cluster=current", f"{option}={binary}", tmp_path=tmp_path), code, words)


@pytest.mark.parametrize(("body", "words"), [
    ("contexts: 5\ncurrent-context: c\n", "'contexts' must be a list"),
    ("contexts: [{name: c, context: 7}]\ncurrent-context: c\n", "'contexts' must be a list"),
    ("users: {u: 1}\n", "'users' must be a list"),
    ("current-context: [a]\n", "'current-context' must be a name"),
    ("contexts: [{name: c, context: {cluster: nope, user: u}}]\ncurrent-context: c\n",
     "names cluster 'nope', which it does not define"),
])
def test_wrongly_typed_kubeconfig(tmp_path: Path, body: str, words: str) -> None:
    kc = tmp_path / "kc"
    kc.write_text(body)
    with pytest.raises(ClusterAccessError, match=re.escape(words)):
        connect(str(kc))


class _NotKubernetes(BaseHTTPRequestHandler):
    body = b""
    content_type = "text/html"

    def _answer(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", self.content_type)
        self.send_header("Content-Length", str(len(self.body)))
        self.end_headers()
        self.wfile.write(self.body)

    do_GET = do_POST = _answer

    def log_message(self, *args: object) -> None:
        pass


@pytest.mark.parametrize(("content_type", "body"), [
    ("text/html", b"<html><body>Please log in</body></html>"),
    ("application/json", b'"just a string"'),
    ("application/json", b"[1, 2, 3]"),
    ("application/json", b'{"items": "nope", "status": "up"}'),
])
def test_server_that_is_not_kubernetes(tmp_path: Path, content_type: str, body: bytes) -> None:
    handler = type("H", (_NotKubernetes,), {"body": body, "content_type": content_type})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        kc = kubeconfig(tmp_path, f"http://127.0.0.1:{server.server_address[1]}")
        proc = run_pytest("--cluster=current", f"--kubeconfig={kc}", tmp_path=tmp_path)
    finally:
        server.shutdown()
    run_ok_shape(proc, EXIT_CLUSTER_ACCESS, "does not answer like a Kubernetes API server")


def test_report_dir_that_is_a_file_or_cannot_be_created(tmp_path: Path) -> None:
    afile = tmp_path / "afile"
    afile.write_text("x")
    proc = run_pytest("--cluster=current", f"--report-dir={afile}", tmp_path=tmp_path)
    run_ok_shape(proc, EXIT_USAGE, f"--report-dir {afile} is a file")
    proc = run_pytest("--cluster=current", "--report-dir=/proc/self/nope", tmp_path=tmp_path)
    run_ok_shape(proc, EXIT_USAGE, "--report-dir /proc/self/nope cannot be created")


@pytest.mark.parametrize(("value", "words"), [
    ("nan", "--probe-timeout must be a positive number of seconds, not nan"),
    ("inf", "--probe-timeout must be a positive number of seconds, not inf"),
])
def test_probe_timeout_must_be_finite(tmp_path: Path, value: str, words: str) -> None:
    run_ok_shape(run_pytest("--cluster=current", f"--probe-timeout={value}", tmp_path=tmp_path), EXIT_USAGE, words)


@pytest.mark.parametrize("ns", ["../../apis", "GPU-Operator", "a" * 64, "-x"])
def test_operator_namespace_must_be_a_namespace_name(ns: str) -> None:
    with pytest.raises(UsageError, match="is not a namespace name"):
        Settings(operator_namespace=ns).validate()


def _report_files(tmp_path: Path) -> dict[str, Path]:
    files = {"missing": tmp_path / "missing.json", "notjson": tmp_path / "notjson.json",
             "binary": tmp_path / "binary.json", "minimal": tmp_path / "minimal.json",
             "badshape": tmp_path / "badshape.json", "directory": tmp_path}
    files["notjson"].write_text("not json")
    files["binary"].write_bytes(b"\xb3\x00\xff")
    files["minimal"].write_text('{"schema_version": "1", "verdict": "CONFORMANT"}')
    files["badshape"].write_text('{"schema_version": "1", "verdict": "CONFORMANT", "checks": "x", "nodes": []}')
    return files


def test_baseline_of_the_wrong_shape_is_refused_before_the_run(tmp_path: Path) -> None:
    # An unreachable cluster: a baseline checked only after the run would end in exit 3, not 4.
    kc = kubeconfig(tmp_path, f"https://127.0.0.1:{free_port()}")
    files = _report_files(tmp_path)
    for name in ("missing", "binary", "badshape"):
        path = files[name]
        proc = run_pytest("--cluster=current", f"--kubeconfig={kc}", f"--baseline={path}", tmp_path=tmp_path)
        run_ok_shape(proc, EXIT_USAGE, str(path))
        assert "cannot reach the API server" not in proc.stdout + proc.stderr, name


def test_report_diff_exits_4_naming_the_bad_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from gpu_conformance.cli import main

    files = _report_files(tmp_path)
    good = tmp_path / "good.json"
    good.write_text('{"schema_version": "1", "verdict": "CONFORMANT", "run_id": "r", "checks": [], "nodes": []}')
    for name, path in files.items():
        assert main(["report", "diff", str(good), str(path)]) == EXIT_USAGE, name
        err = capsys.readouterr().err
        assert str(path) in err and "Traceback" not in err, (name, err)
    assert main(["report", "diff", str(good), str(good)]) == 0


@pytest.mark.parametrize("status", [401, 403, 404, 409, 500])
def test_api_errors_keep_their_http_status(status: int) -> None:
    """Callers decide on the status (404 = already gone), not on the wording of the message (issue 15 item 8)."""
    from types import SimpleNamespace

    from kubernetes.client.exceptions import ApiException

    from gpu_conformance.cluster.reader import ClusterReader

    reader = ClusterReader(SimpleNamespace(server="https://k", context="c", user="u"))  # type: ignore[arg-type]
    err = reader._api_error(ApiException(status=status, reason="Reason"), "delete namespace x")
    assert isinstance(err, ClusterAccessError) and err.status == status


def test_binary_builder_entry_points_fail_in_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    # Every `python -m gpu_conformance.sim...binaries` shares errors.cli_main: the error is one line, its exit code.
    from gpu_conformance.sim.builds import binaries
    monkeypatch.setenv(binaries.BIN_DIR_ENV, str(tmp_path))  # a prebuilt dir without the binaries
    assert binaries.main([]) == binaries.BinariesError.exit_code
    out, err = capsys.readouterr()
    assert out == "" and err.startswith("error: ") and err.count("\n") == 1 and str(tmp_path) in err


# ---- bounded input files (issue 26) -----------------------------------------------------------------------------
ALIAS_BOMB = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join(['*' + chr(97 + i)] * 9)}]\n" for i in range(8)) + \
    "expect-driver: *i\n"


@pytest.mark.parametrize(("content", "words"), [
    (ALIAS_BOMB, "anchors and aliases"),
    ("x: " + "[" * 200 + "]" * 200 + "\n", "nested more than 64"),
    ("gpu-node-selector: 5\n", "gpu-node-selector must be a string, not a number 5"),
    ("probe-timeout: yes\n", "probe-timeout must be a number or a string, not true or false True"),
    ("no-probe: maybe\n", "no-probe must be true or false, not a string 'maybe'"),
    ("expect-driver: [host]\n", "expect-driver must be a string, not a list"),
])
def test_config_files_are_bounded_and_typed(tmp_path: Path, content: str, words: str) -> None:
    # A billion-laughs config grew to 2.8 GB; `gpu-node-selector: 5` ended in INTERNALERROR.
    cfg = tmp_path / "c.yaml"
    cfg.write_text(content)
    with pytest.raises(UsageError, match=re.escape(words)):
        load_config_file(str(cfg))


@pytest.mark.parametrize("option", ["--conformance-config", "--baseline"])
@pytest.mark.parametrize("kind", ["fifo", "device", "huge"])
def test_input_files_that_are_not_small_regular_files_are_refused_at_once(tmp_path: Path, option: str,
                                                                          kind: str) -> None:
    # `--baseline=/dev/zero` ended in MemoryError, a FIFO hung the run.
    import os

    if kind == "fifo":
        path, words = tmp_path / "fifo", "not a regular file"
        os.mkfifo(path)
    elif kind == "device":
        path, words = Path("/dev/zero"), "not a regular file"
    else:
        path, words = tmp_path / "huge", "more than the"
        with path.open("wb") as f:  # sparse: no disk used
            f.truncate(300 * 1024 * 1024)
    proc = run_pytest("--cluster=current", f"{option}={path}", tmp_path=tmp_path)
    assert proc.returncode == EXIT_USAGE, proc.stdout[-2000:] + proc.stderr[-2000:]
    one_clear_line(proc, words)
