"""Secrets recognised by their own shape (a GitHub token, an AWS key ID, an NGC API key), wherever they appear.

The token formats come from detect-secrets (Yelp's maintained detector, the regexes of its plugins run
in-process on strings): new formats arrive with its releases instead of growing a hand-written list here.
Two shapes it does not know are added: NGC API keys (``nvapi-…``, the typical secret of a GPU cluster)
and a password given as a command-line argument (``docker login -p X``, ``--password X``).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import lru_cache

from detect_secrets.core.plugins.util import get_mapping_from_secret_type_to_class
from detect_secrets.plugins.base import RegexBasedDetector

# detect-secrets plugins that are not token formats: a public IP address is evidence here (node addresses),
# not a secret; URL credentials, JWTs and PEM keys are masked by redact.py's own rules with their context.
_SKIPPED_PLUGINS = {"IPPublicDetector", "BasicAuthDetector", "JwtTokenDetector", "PrivateKeyDetector"}

# NGC API keys and legacy NGC keys are not in detect-secrets; they unlock nvcr.io and NGC org content.
_NGC_KEY = re.compile(r"\bnvapi-[A-Za-z0-9_-]{16,}")
# A password passed as an argument: `--password X`, `--password=X`, and `-p X` after a `login` (docker,
# podman, helm registry, nerdctl, crane). Elsewhere `-p` means a port or "parents", so it is left alone.
_PASSWORD_FLAG = re.compile(r"(?i)(--(?:password|passwd|pass|token|api-key|apikey|secret)(?:=|\s+))"
                            r"(?!<redacted>)([^\s\"']+)")
_LOGIN_SHORT_P = re.compile(r"(?i)(\blogin\b[^\n]*?\s-p(?:=|\s+))(?!<redacted>)([^\s\"']+)")
# The "auth" of a docker config (base64 of user:password), as JSON text inside a log line or a file.
_DOCKER_AUTH = re.compile(r"""(?i)(\\?["']auth\\?["']\s*:\s*\\?["'])(?!<redacted>)([A-Za-z0-9+/=_-]{4,})""")

# Strings shorter than this cannot hold any of the token formats (the shortest, an AWS key ID, has 20).
_MIN_TOKEN_LENGTH = 16
# Every token format holds a run of random letters and digits; prose, names and labels mostly do not. Running
# ~40 detector patterns only on strings with such a run keeps a 5,000-node report fast.
_RANDOM_RUN = re.compile(r"[A-Za-z0-9]{10,}")


@lru_cache(maxsize=1)
def _detector_patterns() -> tuple[re.Pattern[str], ...]:
    patterns: list[re.Pattern[str]] = []
    for cls in get_mapping_from_secret_type_to_class().values():
        if not issubclass(cls, RegexBasedDetector) or cls.__name__ in _SKIPPED_PLUGINS:
            continue
        patterns.extend(cls().denylist)
    return tuple(patterns)


def _may_hold_token(s: str) -> bool:
    return any(not run.isalpha() for run in _RANDOM_RUN.findall(s))


def _secret_span(m: re.Match[str]) -> tuple[int, int]:
    """What to mask of a detector match: its secret group when it has one, else the whole match.

    detect-secrets' assignment patterns capture the value (``aws_secret = "…"``); its token patterns capture
    only a short prefix (``(ghp|gho)_…``), where the whole match is the token.
    """
    best = (m.start(), m.end())
    groups = [i for i in range(1, (m.re.groups or 0) + 1) if m.group(i)]
    if groups:
        i = max(groups, key=lambda i: len(m.group(i)))
        if len(m.group(i)) >= 8:
            best = m.span(i)
    return best


def mask_token_formats(s: str, placeholder: str) -> str:
    """``s`` with every known token format, NGC key and command-line password replaced by ``placeholder``."""
    if len(s) < _MIN_TOKEN_LENGTH:
        return s
    if "nvapi-" in s:
        s = _NGC_KEY.sub(placeholder, s)
    low = s.lower()
    if "--" in s:
        s = _PASSWORD_FLAG.sub(_keep_group1(placeholder), s)
    if "login" in low and "-p" in s:
        s = _LOGIN_SHORT_P.sub(_keep_group1(placeholder), s)
    if "auth" in low:
        s = _DOCKER_AUTH.sub(_keep_group1(placeholder), s)
    if not _may_hold_token(s):
        return s
    spans: list[tuple[int, int]] = []
    for pattern in _detector_patterns():
        spans.extend(_secret_span(m) for m in pattern.finditer(s))
    for start, end in sorted(_merge(spans), reverse=True):
        s = s[:start] + placeholder + s[end:]
    return s


def _keep_group1(placeholder: str) -> Callable[[re.Match[str]], str]:
    return lambda m: m.group(1) + placeholder


def _merge(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for start, end in sorted(spans):
        if out and start <= out[-1][1]:
            out[-1] = (out[-1][0], max(end, out[-1][1]))
        else:
            out.append((start, end))
    return out
