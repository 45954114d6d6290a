"""Throw-away certificates for TLS tests, made with the openssl CLI (the venv has no `cryptography`).

`openssl ca` rather than `openssl x509 -req`: OpenSSL 3.0's x509 cannot date a certificate in the past, and
an expired certificate is one of the cases under test.
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

_CA_CONFIG = """[ca]
default_ca = ca_default
[ca_default]
database = {dir}/index.txt
new_certs_dir = {dir}
serial = {dir}/serial
default_md = sha256
policy = anything
copy_extensions = none
[anything]
commonName = supplied
"""


@dataclass(frozen=True)
class Leaf:
    cert: Path
    key: Path


def _openssl(*args: str, cwd: Path) -> None:
    exe = shutil.which("openssl")
    if exe is None:
        pytest.skip("the openssl CLI is needed to make test certificates")
    proc = subprocess.run([exe, *args], cwd=cwd, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, f"openssl {args[0]}: {proc.stderr.strip()[-500:]}"


def _key(path: Path) -> Path:
    _openssl("genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", str(path), cwd=path.parent)
    return path


class TestCa:
    """A CA in ``root`` that signs server certificates for the names and dates a test asks for."""

    __test__ = False  # not a pytest test class

    def __init__(self, root: Path, name: str = "test-ca") -> None:
        self.root = root
        root.mkdir(parents=True, exist_ok=True)
        self.key = _key(root / f"{name}.key")
        self.cert = root / f"{name}.crt"
        _openssl("req", "-x509", "-new", "-key", str(self.key), "-subj", f"/CN={name}", "-days", "30",
                 "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign",
                 "-out", str(self.cert), cwd=root)
        (root / "index.txt").write_text("")
        (root / "serial").write_text("1000\n")
        (root / "ca.cnf").write_text(_CA_CONFIG.format(dir=root))

    def leaf(self, name: str, sans: str, start: str = "", end: str = "") -> Leaf:
        """A server certificate; ``start``/``end`` as YYYYMMDDHHMMSSZ, else valid from now for 30 days."""
        key = _key(self.root / f"{name}.key")
        csr, ext, cert = self.root / f"{name}.csr", self.root / f"{name}.ext", self.root / f"{name}.crt"
        _openssl("req", "-new", "-key", str(key), "-subj", f"/CN={name}", "-out", str(csr), cwd=self.root)
        ext.write_text(f"basicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\nsubjectAltName={sans}\n")
        dates = ["-startdate", start, "-enddate", end] if start else ["-days", "30"]
        _openssl("ca", "-batch", "-config", str(self.root / "ca.cnf"), "-cert", str(self.cert), "-keyfile",
                 str(self.key), "-in", str(csr), "-out", str(cert), "-notext", "-extfile", str(ext), *dates,
                 cwd=self.root)
        return Leaf(cert, key)
