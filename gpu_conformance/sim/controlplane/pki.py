"""Throw-away PKI for the simulated cluster, made with the openssl CLI.

Shape follows kwokctl: one CA and one leaf certificate (CN=admin, O=system:masters, SANs loopback) that
serves as the API server's, kcm's, scheduler's and kwok's serving cert and as every client's cert; a
separate key pair signs service-account tokens. EC P-256 keys because generating them is instant,
and every component (Go TLS, Python ssl, service-account ES256 tokens) accepts them.

The openssl CLI, not the `cryptography` package, so the suite needs no extra Python dependency.
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from gpu_conformance.errors import ConformanceError

# Names in-cluster clients would use for the API server; harmless extras next to the loopback ones.
SERVER_SANS = (
    "DNS:localhost", "IP:127.0.0.1", "DNS:kubernetes", "DNS:kubernetes.default",
    "DNS:kubernetes.default.svc", "DNS:kubernetes.default.svc.cluster.local",
)
_DAYS = "3650"


class PkiError(ConformanceError):
    """openssl is missing or failed."""


@dataclass(frozen=True)
class Pki:
    ca_cert: Path
    ca_key: Path
    cert: Path        # admin/serving certificate signed by the CA
    key: Path
    sa_key: Path      # service-account signing key (private)
    sa_pub: Path      # and its public half, for token verification


def _openssl(*args: str, cwd: Path) -> None:
    exe = shutil.which("openssl")
    if exe is None:
        raise PkiError("openssl not found on PATH: the simulated cluster needs it to make its certificates "
                       "(apt-get install openssl)")
    proc = subprocess.run([exe, *args], cwd=cwd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        raise PkiError(f"openssl {args[0]} failed making the simulated cluster's PKI in {cwd}: {last}")


def _ec_key(path: Path, cwd: Path) -> None:
    _openssl("genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", str(path), cwd=cwd)
    path.chmod(0o600)


def make_pki(pki_dir: Path, sans: tuple[str, ...] = SERVER_SANS) -> Pki:
    """Create pki_dir/{ca.crt,ca.key,admin.crt,admin.key,sa.key,sa.pub}; overwrites existing files."""
    pki_dir.mkdir(parents=True, exist_ok=True)
    pki = Pki(ca_cert=pki_dir / "ca.crt", ca_key=pki_dir / "ca.key", cert=pki_dir / "admin.crt",
              key=pki_dir / "admin.key", sa_key=pki_dir / "sa.key", sa_pub=pki_dir / "sa.pub")

    _ec_key(pki.ca_key, pki_dir)
    _openssl("req", "-x509", "-new", "-key", str(pki.ca_key), "-subj", "/CN=gpu-sim-ca", "-days", _DAYS,
             "-addext", "basicConstraints=critical,CA:TRUE",
             "-addext", "keyUsage=critical,keyCertSign,cRLSign,digitalSignature",
             "-out", str(pki.ca_cert), cwd=pki_dir)

    _ec_key(pki.key, pki_dir)
    csr = pki_dir / "admin.csr"
    ext = pki_dir / "admin.ext"
    # O=system:masters makes the client cert cluster-admin without any RBAC binding.
    _openssl("req", "-new", "-key", str(pki.key), "-subj", "/O=system:masters/CN=admin", "-out", str(csr),
             cwd=pki_dir)
    ext.write_text(
        "basicConstraints=critical,CA:FALSE\n"
        "keyUsage=critical,digitalSignature,keyEncipherment\n"
        "extendedKeyUsage=serverAuth,clientAuth\n"
        f"subjectAltName={','.join(sans)}\n"
    )
    _openssl("x509", "-req", "-in", str(csr), "-CA", str(pki.ca_cert), "-CAkey", str(pki.ca_key),
             "-CAcreateserial", "-days", _DAYS, "-extfile", str(ext), "-out", str(pki.cert), cwd=pki_dir)
    csr.unlink()
    ext.unlink()
    (pki_dir / "ca.srl").unlink(missing_ok=True)

    _ec_key(pki.sa_key, pki_dir)
    _openssl("pkey", "-in", str(pki.sa_key), "-pubout", "-out", str(pki.sa_pub), cwd=pki_dir)
    return pki
