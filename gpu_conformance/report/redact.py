"""Mask secrets before anything leaves the process: reports are attached to tickets and shared widely.

Two entry points:

* ``redact(obj)`` walks JSON-like data (dicts, lists, scalars) and returns a masked deep copy. It masks by
  *structure* (a value under a key named like a credential, an env entry ``{name: API_KEY, value: ...}``,
  the argument after ``--token``) and by *content* (every string goes through ``redact_text``).
* ``redact_text(s)`` masks free text: log lines, kubectl output, event messages, kubeconfig YAML.

Masking errs on the side of hiding too much: a report that hides a harmless value is a small annoyance,
one that leaks a cluster-admin token is an incident.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from functools import lru_cache
from typing import Any

from gpu_conformance.report.token_formats import mask_token_formats

REDACTED = "<redacted>"

# Substrings that make an env variable or CLI flag name look like a credential (matched case-insensitively).
# Env names are short and SHOUTY (NGC_API_KEY, AWS_SECRET_ACCESS_KEY), so a plain substring test is the
# reliable one; the rare false positive (a KEYBOARD variable) only costs a masked value.
_CREDENTIAL_NAME_PARTS = (
    "token", "secret", "password", "passwd", "passphrase", "pwd", "key", "credential", "auth",
    "cookie", "session", "private", "cert",
)

# Dict keys are more varied than env names: "key" alone is a taint/toleration/label-selector key, which the
# nfd and deploy-labels evidence needs to show. So dict keys are split into words and judged word by word.
_SENSITIVE_KEY_WORDS = {
    "token", "tokens", "secret", "password", "passwd", "passphrase", "pwd", "credential", "credentials",
    "authorization", "auth", "apikey", "cookie", "bearer", "privatekey", "secretkey", "accesskey",
}
# Compound names whose words are individually harmless ("client" + "key" + "data").
_SENSITIVE_KEY_PATTERNS = re.compile(
    r"(client|private|api|access|secret|ssh|signing|encryption|tls|service|master)-?key"
    r"|client-?cert(ificate)?(-?data)?"
    r"|key-?data|key-?file-?contents"
)
# A last word that turns a credential-looking key into a reference or metadata about it ("secretName",
# "tokenExpirationSeconds", "secretKeyRef"): such values are names and numbers, not secrets, and are useful.
_REFERENCE_LAST_WORDS = {
    "name", "names", "ref", "refs", "namespace", "path", "file", "seconds", "ttl", "type", "enabled",
    "expiration", "count", "present", "mount", "volume", "source", "audience", "audiences",
}

_WORD_SPLIT = re.compile(r"[^A-Za-z0-9]+|(?<=[a-z0-9])(?=[A-Z])")


def _key_words(key: str) -> list[str]:
    return [w.lower() for w in _WORD_SPLIT.split(key) if w]


@lru_cache(maxsize=4096)
def is_sensitive_key(key: str) -> bool:
    """True when a mapping key names a credential (token, password, client-key-data, Authorization, ...)."""
    words = _key_words(key)
    if not words or words[-1] in _REFERENCE_LAST_WORDS:
        return False
    if any(w in _SENSITIVE_KEY_WORDS for w in words):
        return True
    return bool(_SENSITIVE_KEY_PATTERNS.search("-".join(words)))


@lru_cache(maxsize=4096)
def is_credential_name(name: str) -> bool:
    """True when an env variable or command-line flag name looks like it carries a credential."""
    low = name.lower().lstrip("-")
    words = _key_words(name)
    if words and words[-1] in _REFERENCE_LAST_WORDS:
        # DRIVER_SECRET_NAME, TOKEN_TTL, KEY_FILE: a name, number or path about a secret, not the secret.
        return False
    return any(part in low for part in _CREDENTIAL_NAME_PARTS)


# --- free text -------------------------------------------------------------------------------------------

# AWS access key ids (long-term AKIA, temporary ASIA, ...): detect-secrets knows them only at their exact length
# of 20, so an id cut or padded in a log line slipped through. Half a credential, and it names the account.
_AWS_KEY_ID = re.compile(r"\b(?:AKIA|ASIA|ABIA|ACCA|AIDA|AROA)[A-Z0-9]{12,}\b")
# A complete PEM block (private keys, client certificates, CSRs). Escaped newlines (``\n`` as two characters,
# as in a JSON string inside a log line) are allowed between BEGIN and END.
_PEM_BLOCK = re.compile(r"-----BEGIN ([A-Z0-9 ]+)-----.*?-----END \1-----", re.DOTALL)
# A PEM block cut off before its END line (truncated logs): mask the base64 body that follows BEGIN.
_PEM_TRUNCATED = re.compile(r"-----BEGIN [A-Z0-9 ]+-----(?:[A-Za-z0-9+/=\s]|\\[nr])*")
# Base64 of "-----BEGIN", as in kubeconfig client-key-data / client-certificate-data.
_PEM_BASE64 = re.compile(r"LS0tLS1CRUdJT[A-Za-z0-9+/]*={0,2}")
# JSON Web Tokens (service-account tokens, OIDC id-tokens): base64url("{\"...") always starts with eyJ.
_JWT = re.compile(r"\beyJ[A-Za-z0-9_-]{8,}(?:\.[A-Za-z0-9_-]*){0,2}")
# The value of an Authorization header, whatever its scheme (Bearer, Basic, Token ...).
_AUTH_HEADER = re.compile(
    r"(?i)(\bauthorization[\"']?\s*[:=]\s*[\"']?)"
    r"((?:bearer|basic|token|digest|negotiate)\s+)?([^\s\"',;}]+)"
)
_BEARER = re.compile(r"(?i)\b(bearer\s+)([A-Za-z0-9\-._~+/]+=*)")
# user:password@ in URLs (registry mirrors, proxies).
_URL_CREDENTIALS = re.compile(r"(\b[a-zA-Z][a-zA-Z0-9+.-]*://[^\s:/@]+:)([^\s@/]+)(@)")
# key=value / key: value / "key": "value" where the key names a credential. The key part must end with one
# of the credential words so that prose like "token expired" (no separator) stays readable.
_KV_KEY = (
    r"[A-Za-z0-9_.-]*(?:password|passwd|passphrase|pwd|secret|token|api[_-]?key|access[_-]?key"
    r"|private[_-]?key|secret[_-]?key|access[_-]?key[_-]?id|client-key-data|client-certificate-data|credentials?)"
)
_KEY_VALUE = re.compile(
    r"(?i)(?<![A-Za-z0-9_.-])(" + _KV_KEY + r")"
    r"(\\?[\"']?\s*[:=]\s*)"
    r"(\\?\"(?:[^\"\\]|\\.)*?\\?\"|'[^']*'|[^\s\"',;&}\]]+)"
)


def _kv_replace(m: re.Match[str]) -> str:
    key, sep, value = m.group(1), m.group(2), m.group(3)
    if value in (REDACTED, f'"{REDACTED}"', f"'{REDACTED}'"):
        return m.group(0)
    # Keep the quoting so that redacted JSON or YAML embedded in a log line stays well-formed.
    if value.startswith('\\"'):
        return f'{key}{sep}\\"{REDACTED}\\"'
    if value[:1] in ('"', "'"):
        return f"{key}{sep}{value[0]}{REDACTED}{value[0]}"
    return f"{key}{sep}{REDACTED}"


# Words without which the key=value rule cannot match: a cheap test that spares most strings the regex.
_KV_WORDS = ("pass", "pwd", "secret", "token", "key", "credential")


def redact_text(s: str) -> str:
    """Mask Bearer tokens, Authorization values, JWTs, PEM blocks (plain and base64), secret=value pairs and
    known token formats (detect-secrets' plugins, NGC keys, passwords given as arguments)."""
    if not s:
        return s
    # Reports of big clusters hold tens of thousands of short strings; most cannot hold a secret, and the
    # substring tests below are much cheaper than running every pattern over each of them.
    if "-----BEGIN" in s:
        s = _PEM_BLOCK.sub(REDACTED, s)
        s = _PEM_TRUNCATED.sub(REDACTED, s)
    if "LS0tLS1CRUdJT" in s:
        s = _PEM_BASE64.sub(REDACTED, s)
    low = s.lower()
    if "authorization" in low:
        s = _AUTH_HEADER.sub(lambda m: f"{m.group(1)}{m.group(2) or ''}{REDACTED}", s)
    if "bearer" in low:
        s = _BEARER.sub(lambda m: f"{m.group(1)}{REDACTED}", s)
    if "eyJ" in s:
        s = _JWT.sub(REDACTED, s)
    if "A" in s:
        s = _AWS_KEY_ID.sub(REDACTED, s)
    if "://" in s:
        s = _URL_CREDENTIALS.sub(lambda m: f"{m.group(1)}{REDACTED}{m.group(3)}", s)
    if (":" in s or "=" in s) and any(w in low for w in _KV_WORDS):
        s = _KEY_VALUE.sub(_kv_replace, s)
    return mask_token_formats(s, REDACTED)


def redact_markup(s: str) -> str:
    """A last pass over already-rendered HTML: only the unambiguous shapes, with an HTML-safe placeholder.

    The data was redacted before rendering; this pass exists so that a secret that slipped in some other
    way (a template printing a raw value) still does not reach the file. key=value rules are left out on
    purpose: on markup they would also hit check titles and attribute text.
    """
    placeholder = "&lt;redacted&gt;"
    s = _PEM_BLOCK.sub(placeholder, s)
    s = _PEM_TRUNCATED.sub(placeholder, s)
    s = _PEM_BASE64.sub(placeholder, s)
    s = _BEARER.sub(lambda m: f"{m.group(1)}{placeholder}", s)
    s = _JWT.sub(placeholder, s)
    return mask_token_formats(s, placeholder)


# --- structured data -------------------------------------------------------------------------------------

def _is_reference_key(key: Any) -> bool:
    words = _key_words(key) if isinstance(key, str) else []
    return bool(words) and words[-1] in _REFERENCE_LAST_WORDS


def _mask_value(value: Any) -> Any:
    """Mask everything under a credential-named key, keeping its shape and the names it refers to."""
    # None, booleans and empty strings carry no secret and say something useful ("token": null = no token).
    if value is None or isinstance(value, bool) or value == "":
        return value
    if isinstance(value, Mapping):
        # A volume's {"secret": {"secretName": "ngc"}} is a reference: the name helps and is not secret.
        return {k: redact(v) if _is_reference_key(k) and not isinstance(v, Mapping | list | tuple)
                else _mask_value(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_mask_value(v) for v in value]
    return REDACTED


def _is_env_entry(d: Mapping[Any, Any]) -> bool:
    return isinstance(d.get("name"), str) and "value" in d and set(d) <= {"name", "value", "valueFrom"}


def redact(obj: Any) -> Any:
    """A deep copy of JSON-like ``obj`` with credentials masked as "<redacted>". The input is not modified."""
    if isinstance(obj, Mapping):
        out: dict[Any, Any] = {}
        env_secret = _is_env_entry(obj) and is_credential_name(obj["name"])
        for k, v in obj.items():
            if (env_secret and k == "value") or (isinstance(k, str) and is_sensitive_key(k)):
                out[k] = _mask_value(v)
            else:
                out[k] = redact(v)
        return out
    if isinstance(obj, list | tuple | set | frozenset):
        items = list(obj) if not isinstance(obj, set | frozenset) else sorted(obj, key=repr)
        masked: list[Any] = []
        mask_next = False
        for item in items:
            if mask_next and isinstance(item, str) and not item.startswith("-"):
                masked.append(REDACTED)
                mask_next = False
                continue
            mask_next = False
            if isinstance(item, str) and re.fullmatch(r"--?[A-Za-z][A-Za-z0-9_.-]*", item):
                # A bare flag ("--token") in an argv list: its value is the next item.
                mask_next = is_credential_name(item)
            masked.append(redact(item))
        return masked
    if isinstance(obj, str):
        return redact_text(obj)
    return obj
