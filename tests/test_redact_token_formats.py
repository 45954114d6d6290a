"""The secret shapes that reached reports verbatim in the adversarial run (issue 13 item 12), and more formats.

Test tokens are assembled at run time so that no token-shaped literal sits in the repository.
"""

from __future__ import annotations

import pytest

from gpu_conformance.report.html import render_html
from gpu_conformance.report.redact import REDACTED, redact, redact_markup, redact_text

A36 = "Ab1" * 12
NGC_KEY = "nvapi-" + "NGCSECRET2abcdefghijklmnop" + "Q1w2E3r4"
GHP = "ghp" + "_" + A36
AKIA = "AKIA" + "SECRET6EXAMPLE00"
DOCKER_AUTH = "JG9hdXRodG9rZW46bnZhcGktTkdDU0VDUkVUMw=="
CASES = [
    (f"docker login nvcr.io -u $oauthtoken -p {NGC_KEY}", NGC_KEY),
    (f"echo $KEY | helm registry login nvcr.io -u '$oauthtoken' -p {NGC_KEY[6:]}", NGC_KEY[6:]),
    ("podman login -p=hunter2SECRET4 nvcr.io", "hunter2SECRET4"),
    (f'{{"auths":{{"nvcr.io":{{"auth":"{DOCKER_AUTH}"}}}}}}', DOCKER_AUTH),
    (f'log: {{\\"auths\\":{{\\"nvcr.io\\":{{\\"auth\\":\\"{DOCKER_AUTH}\\"}}}}}}', DOCKER_AUTH),
    ("helm repo add x https://charts --password hunter2SECRET4", "hunter2SECRET4"),
    ("helm repo add x https://charts --password=hunter2SECRET4", "hunter2SECRET4"),
    (f"cloning with {GHP} now", GHP),
    (f"aws_access_key_id={AKIA}", AKIA),
    (f"key id {AKIA} in a sentence", AKIA),
    # The shape the adversarial run leaked (issue 26): an id of another length than detect-secrets' 20.
    ("aws_access_key_id=AKIASECRET6EXAMPLE", "AKIASECRET6EXAMPLE"),
    ("temporary id ASIASECRET6EXAMPLE7 in a log", "ASIASECRET6EXAMPLE7"),
    ("slack " + "xoxb-" + "123456789012-1234567890123-abcdefghijABCDEFGHIJklmn", "abcdefghijABCDEFGHIJklmn"),
    ("stripe " + "sk_live_" + "a1B2" * 6, "a1B2" * 6),
    ("gitlab " + "glpat-" + "x9Y8" * 5, "x9Y8" * 5),
    ("npm " + "//registry.npmjs.org/:_authToken=" + "npm_" + "Z1" * 18, "Z1" * 18),
    ("pypi " + "pypi-AgEIcHlwaS5vcmc" + "Q" * 70, "Q" * 70),
    ("mail " + "SG." + "a1" * 11 + "." + "b2" * 21 + "c", "b2" * 21),
]


@pytest.mark.parametrize(("text", "secret"), CASES, ids=[c[0][:24] for c in CASES])
def test_token_formats_are_masked_in_text(text: str, secret: str) -> None:
    out = redact_text(text)
    assert secret not in out, out
    assert REDACTED in out


@pytest.mark.parametrize(("text", "secret"), CASES[:10], ids=[c[0][:24] for c in CASES[:10]])
def test_token_formats_are_masked_in_rendered_markup(text: str, secret: str) -> None:
    assert secret not in redact_markup(f"<pre>{text}</pre>")


def test_probe_log_with_every_shape_leaves_no_secret_in_html_or_json() -> None:
    log = "\n".join(text for text, _ in CASES)
    data = redact({"schema_version": "1", "verdict": "NOT CONFORMANT", "probe": {"pods": [{"logs": log}]}})
    html = render_html(data)
    for _, secret in CASES:
        assert secret not in str(data)
        assert secret not in html


@pytest.mark.parametrize("text", [
    "node gpu-node-0 at 8.8.8.8 has 8 GPUs",  # public IPs are evidence, not secrets
    "mkdir -p /run/nvidia/validations && ls -p /dev/nvidia0",
    "nvcr.io/nvidia/k8s-device-plugin:v0.17.0@sha256:" + "ab" * 32,
    "GPU-5d5b3c2e-8d0f-3b5f-a2d4-0b4b1f0c7f9a uid 3f2a4b6c-1d2e-4f5a-8b9c-0d1e2f3a4b5c",
    "kubectl -n gpu-operator logs ds/nvidia-device-plugin-daemonset -c nvidia-device-plugin --tail=20",
    "authentication succeeded for gpu-node-1",
])
def test_harmless_text_is_kept(text: str) -> None:
    assert redact_text(text) == text
