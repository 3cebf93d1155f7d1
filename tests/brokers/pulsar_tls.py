"""A throwaway certificate authority and one server certificate for a test broker.

Made with the ``openssl`` command (OpenSSL 3: ``req -x509 -CA`` signs in one step), offline,
in well under a second: EC P-256 keys, valid 30 days, the server certificate naming
``127.0.0.1`` and ``localhost`` so clients that validate host names accept it. The private
keys are PKCS#8 PEM, which both Netty (Pulsar, Kafka) and OpenSSL read.
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path


class CertificateError(RuntimeError):
    """The certificates could not be made (no ``openssl``, or it failed)."""


@dataclass(frozen=True)
class TestCertificates:
    ca_cert: Path
    """The CA certificate (PEM): what a client trusts."""
    server_cert: Path
    server_key: Path


def _openssl(*args: str) -> None:
    executable = shutil.which("openssl")
    if executable is None:
        raise CertificateError("the openssl command is not installed")
    done = subprocess.run(
        [executable, *args], capture_output=True, text=True, timeout=60, check=False
    )
    if done.returncode != 0:
        raise CertificateError(f"openssl {args[0]} failed ({done.returncode}): {done.stderr}")


def make_certificates(
    directory: Path, common_name: str = "msgstream test broker"
) -> TestCertificates:
    """Write ``ca.pem``/``ca.key`` and ``server.pem``/``server.key`` under ``directory``."""
    directory.mkdir(parents=True, exist_ok=True)
    certs = TestCertificates(
        directory / "ca.pem", directory / "server.pem", directory / "server.key"
    )
    ca_key = directory / "ca.key"
    key_options = ("-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-noenc")
    _openssl(
        "req", "-x509", *key_options, "-days", "30",
        "-keyout", str(ca_key), "-out", str(certs.ca_cert),
        "-subj", "/CN=msgstream test CA",
        "-addext", "basicConstraints=critical,CA:TRUE",
        "-addext", "keyUsage=critical,keyCertSign,cRLSign",
    )  # fmt: skip
    _openssl(
        "req", "-x509", *key_options, "-days", "30",
        "-CA", str(certs.ca_cert), "-CAkey", str(ca_key),
        "-keyout", str(certs.server_key), "-out", str(certs.server_cert),
        "-subj", f"/CN={common_name}",
        "-addext", "basicConstraints=critical,CA:FALSE",
        "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost",
        "-addext", "extendedKeyUsage=serverAuth",
    )  # fmt: skip
    return certs
