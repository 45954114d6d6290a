"""Secrets never reach a report: unit cases for the masks, and whole written reports scanned for them."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
from report_data import (
    API_KEY,
    BEARER,
    CLIENT_KEY_DATA,
    PASSWORD,
    PEM,
    PEM_BODY,
    SA_TOKEN,
    SECRET_MARKERS,
    healthy_cluster,
    secret_cluster,
)

from gpu_conformance.report.diff import diff_runs, format_diff
from gpu_conformance.report.html import render_html, write_html
from gpu_conformance.report.json_report import write_json
from gpu_conformance.report.redact import REDACTED, is_credential_name, is_sensitive_key, redact, redact_text
from gpu_conformance.report.terminal import summary_lines
from gpu_conformance.report_format import load_json


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        (f"Authorization: Bearer {BEARER}", BEARER),
        ('curl -H "Authorization: Basic dXNlcjpodW50ZXIy" https://x', "dXNlcjpodW50ZXIy"),
        (f"sent bearer {BEARER} to the API", BEARER),
        (f"token from projected volume: {SA_TOKEN}", SA_TOKEN.split(".")[1]),
        (f"{PEM}\ntrailing", PEM_BODY),
        (PEM.replace("\n", "\\n"), PEM_BODY),  # a PEM inside a JSON string inside a log line
        (f"truncated log: -----BEGIN PRIVATE KEY-----\n{PEM_BODY}", PEM_BODY),
        (f"client-key-data: {CLIENT_KEY_DATA}", CLIENT_KEY_DATA[:30]),
        (f"docker login --password={PASSWORD} nvcr.io", PASSWORD),
        (f"password: {PASSWORD}", PASSWORD),
        (f'{{"password": "{PASSWORD} with spaces"}}', PASSWORD),
        (f'log line {{\\"client_secret\\": \\"{PASSWORD}\\"}}', PASSWORD),
        (f"NGC_API_KEY={API_KEY}", API_KEY),
        (f"token: {BEARER}", BEARER),
        (f"pulling from https://robot:{PASSWORD}@registry.example/v2/", PASSWORD),
    ],
)
def test_redact_text_masks(text: str, secret: str) -> None:
    out = redact_text(text)
    assert secret not in out
    assert REDACTED in out


@pytest.mark.parametrize(
    "text",
    [
        "kubectl -n gpu-operator get pods -l app=nvidia-operator-validator -o wide",
        "gpu-node-1 has feature.node.kubernetes.io/pci-10de.present=true",
        "token expired; secret \"ngc-secret\" not found",
        "tokenExpirationSeconds: 3600",
        "validator stuck in toolkit-validation for 12 min",
        "",
    ],
)
def test_redact_text_keeps_harmless_text(text: str) -> None:
    assert redact_text(text) == text


def test_redact_text_is_idempotent() -> None:
    once = redact_text(f"Authorization: Bearer {BEARER} password={PASSWORD} {PEM}")
    assert redact_text(once) == once


def test_redact_structures() -> None:
    data = {
        "env": [
            {"name": "NGC_API_KEY", "value": API_KEY},
            {"name": "aws_secret_access_key", "value": "abc"},
            {"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"},
            {"name": "DRIVER_SECRET_NAME", "value": "ngc-secret"},
        ],
        "kubeconfig": {"users": [{"name": "admin", "user": {"client-key-data": CLIENT_KEY_DATA,
                                                            "client-certificate-data": "Y2VydA==",
                                                            "token": BEARER, "password": None}}],
                       "clusters": [{"cluster": {"certificate-authority-data": "Y2E=", "server": "https://k"}}]},
        "headers": {"Authorization": f"Bearer {SA_TOKEN}"},
        "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
        "volume": {"secret": {"secretName": "ngc-secret"}},
        "credentials": {"user": "robot", "pass": PASSWORD, "extra": [PASSWORD]},
        "args": ["--v", "2", "--registry-token", BEARER, "--kubeconfig", "/etc/kubeconfig"],
        "tuple": ("a", f"password={PASSWORD}"),
        "count": 3,
        "enabled": True,
    }
    before = copy.deepcopy(data)
    out = redact(data)
    assert data == before, "redact must not modify its input"
    assert out["env"][0]["value"] == REDACTED
    assert out["env"][1]["value"] == REDACTED
    assert out["env"][2]["value"] == "all"
    assert out["env"][3]["value"] == "ngc-secret"  # a secret's name is useful and not a secret
    user = out["kubeconfig"]["users"][0]["user"]
    assert user["client-key-data"] == user["client-certificate-data"] == user["token"] == REDACTED
    assert user["password"] is None  # nothing to hide, and "no password" is information
    assert out["kubeconfig"]["clusters"][0]["cluster"]["certificate-authority-data"] == "Y2E="
    assert out["headers"]["Authorization"] == REDACTED
    assert out["tolerations"][0]["key"] == "nvidia.com/gpu"
    assert out["volume"]["secret"] == {"secretName": "ngc-secret"}
    assert out["args"] == ["--v", "2", "--registry-token", REDACTED, "--kubeconfig", "/etc/kubeconfig"]
    assert out["credentials"] == {"user": REDACTED, "pass": REDACTED, "extra": [REDACTED]}
    assert out["tuple"] == ["a", f"password={REDACTED}"]
    assert out["count"] == 3 and out["enabled"] is True


@pytest.mark.parametrize("key", ["token", "Authorization", "client-key-data", "clientKeyData", "password",
                                 "apiKey", "ngc_api_key", "client_secret", "privateKey", "credentials"])
def test_sensitive_keys(key: str) -> None:
    assert is_sensitive_key(key)


@pytest.mark.parametrize("key", ["key", "secretName", "secretKeyRef", "tokenExpirationSeconds", "node", "message",
                                 "certificate-authority-data", "imagePullSecrets", "monkey"])
def test_harmless_keys(key: str) -> None:
    assert not is_sensitive_key(key)


def test_credential_env_names() -> None:
    for name in ("GITHUB_TOKEN", "NGC_API_KEY", "DB_PASSWORD", "Registry_Credential", "OAUTH_CLIENT", "SECRET"):
        assert is_credential_name(name), name
    for name in ("NVIDIA_VISIBLE_DEVICES", "PATH", "NODE_NAME", "TOKEN_FILE"):
        assert not is_credential_name(name), name


def _assert_clean(text: str, where: str) -> None:
    for marker in SECRET_MARKERS:
        assert marker not in text, f"{where} leaks {marker[:12]}..."


def test_written_reports_hold_no_secret(tmp_path: Path) -> None:
    result = secret_cluster()
    # The raw data really does hold them, so the test proves masking, not absence.
    raw = repr(result.to_json_dict())
    assert all(m in raw for m in (SA_TOKEN, BEARER, PEM_BODY, PASSWORD, API_KEY))

    json_path = write_json(result, tmp_path)
    html_path = write_html(result, tmp_path)
    files = sorted(p for p in tmp_path.rglob("*") if p.is_file())
    assert {p.name for p in files} == {"conformance.json", "conformance.html"}
    for p in files:
        _assert_clean(p.read_text(encoding="utf-8"), p.name)
    _assert_clean("\n".join(summary_lines(result, [json_path, html_path])), "terminal summary")

    # What is masked is still recognisable as masked, where it was.
    data = load_json(json_path)
    assert data["settings"]["token"] == REDACTED
    assert data["settings"]["probe_env"][0]["value"] == REDACTED
    assert "<redacted>" in data["probe"]["pods"][2]["logs"]
    assert "&lt;redacted&gt;" in html_path.read_text(encoding="utf-8")


def test_diff_and_rerender_of_an_unredacted_file_hold_no_secret() -> None:
    # An old baseline written before redaction existed, or edited by hand.
    unredacted = secret_cluster().to_json_dict()
    _assert_clean(format_diff(diff_runs(healthy_cluster().to_json_dict(), unredacted)), "diff")
    _assert_clean(render_html(unredacted), "render_html")
