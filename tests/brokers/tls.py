"""A test certificate authority and a broker certificate for 127.0.0.1, made with the JDK's
``keytool`` (the brokers need a JDK anyway, so this needs nothing else and no network).

The files are made once and cached under ``cache_root()/tls-<version>`` (keytool runs seven
JVMs, some seconds of CPU, which every test session would otherwise pay). They are written
to a scratch directory first and renamed into place, so sessions running side by side never
see half-made files. The CA and the key are test material for the loopback address only.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from .maven import cache_root

PASSWORD = "msgstream-test"
"""Password of both PKCS12 stores (and of the broker's key inside its store)."""

VALIDITY_DAYS = 3650
LAYOUT_VERSION = "v1"
"""Bumped whenever the files or their contents change, so a stale cache is not reused."""


class CertificateError(RuntimeError):
    """keytool could not make the test certificates."""


@dataclass(frozen=True)
class BrokerCertificates:
    """``ca_file``: the CA certificate (PEM) clients trust; ``keystore``: a PKCS12 store
    with the broker's key and its chain (broker certificate signed by the CA), for
    ``ssl.keystore.location``; both stores use :data:`PASSWORD`."""

    ca_file: Path
    keystore: Path
    password: str = PASSWORD


def keytool_for(java: str = "java") -> str:
    """The ``keytool`` next to ``java`` (same JDK), else the one on PATH."""
    found = shutil.which(java)
    if found is not None:
        sibling = Path(found).resolve().with_name("keytool")
        if sibling.exists():
            return str(sibling)
    keytool = shutil.which("keytool")
    if keytool is None:
        raise CertificateError(f"no keytool next to {java!r} nor on PATH; a JDK 17+ has one")
    return keytool


def broker_certificates(java: str = "java", directory: Path | None = None) -> BrokerCertificates:
    """The cached CA and broker keystore, made first if missing (see the module doc)."""
    target = directory or cache_root() / f"tls-{LAYOUT_VERSION}"
    found = BrokerCertificates(target / "ca.pem", target / "broker.p12")
    if found.ca_file.exists() and found.keystore.exists():
        return found
    target.parent.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=target.parent))
    try:
        _make(keytool_for(java), scratch)
        try:
            os.rename(scratch, target)
        except OSError:
            if not (found.ca_file.exists() and found.keystore.exists()):
                raise  # not a concurrent session that got there first
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return found


def _make(keytool: str, into: Path) -> None:
    """CA key pair, CA certificate (PEM), broker key pair, CA-signed broker certificate with
    the loopback names, and the chain installed in the broker's store."""
    store = ("-storetype", "PKCS12", "-storepass", PASSWORD)
    ca, broker = str(into / "ca.p12"), str(into / "broker.p12")
    ec = ("-keyalg", "EC", "-groupname", "secp256r1", "-validity", str(VALIDITY_DAYS))
    ca_pem, csr, signed = str(into / "ca.pem"), str(into / "broker.csr"), str(into / "broker.pem")
    steps: list[list[str]] = [
        [
            "-genkeypair",
            "-alias",
            "ca",
            *ec,
            "-dname",
            "CN=msgstream test CA",
            "-keystore",
            ca,
            "-ext",
            "bc:c",
            "-ext",
            "KeyUsage=keyCertSign,cRLSign",
        ],
        ["-exportcert", "-rfc", "-alias", "ca", "-keystore", ca, "-file", ca_pem],
        ["-genkeypair", "-alias", "broker", *ec, "-dname", "CN=localhost", "-keystore", broker],
        ["-certreq", "-alias", "broker", "-keystore", broker, "-file", csr],
        [
            "-gencert",
            "-alias",
            "ca",
            "-keystore",
            ca,
            "-rfc",
            "-validity",
            str(VALIDITY_DAYS),
            "-infile",
            csr,
            "-outfile",
            signed,
            "-ext",
            "SAN=IP:127.0.0.1,DNS:localhost",
            "-ext",
            "EKU=serverAuth",
        ],
        ["-importcert", "-noprompt", "-alias", "ca", "-file", ca_pem, "-keystore", broker],
        ["-importcert", "-alias", "broker", "-file", signed, "-keystore", broker],
    ]
    for step in steps:
        result = subprocess.run(
            [keytool, *step, *store],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        if result.returncode != 0:
            raise CertificateError(
                f"keytool {step[0]} failed (exit {result.returncode}): "
                f"{(result.stdout + result.stderr).strip()}"
            )
