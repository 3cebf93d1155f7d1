"""A real Apache Pulsar 4.0 standalone for the test suite, started without Docker when need be.

``provide(workdir)`` returns a :class:`PulsarEndpoint`, choosing in order:

1. ``MSGSTREAM_TEST_PULSAR=pulsar://host:port``: a broker someone already runs (not
   restartable). Its admin REST URL is ``MSGSTREAM_TEST_PULSAR_ADMIN`` if set, else
   ``http://host:8080``; ``MSGSTREAM_TEST_PULSAR_TOKEN`` names a token it accepts, when it
   has token authentication (else the wrong-token test is skipped);
2. the official ``apachepulsar/pulsar`` image through testcontainers, when a Docker daemon
   answers (no authentication);
3. :class:`LocalPulsar`: ``pulsar-broker`` and everything it needs from Maven Central (see
   ``maven.py``) run as one JVM: ``PulsarStandaloneStarter`` with a RocksDB metadata store
   (no ZooKeeper), one in-process bookie, no functions worker, small caches, loopback ports.
   It accepts tokens signed with its own secret key *and* clients without credentials
   (``anonymousUserRole``), so one broker serves every test including the wrong-token one.
   Authorization is on, with the anonymous role and the valid token's role super-users (so
   tests that ignore security are unaffected); ``role_token(role)`` mints a token for any
   other role, which has only the permissions a test grants it. Besides plain ports it
   listens over TLS (``tls_service_url``, ``tls_admin_url``) with a certificate signed by a
   CA made at first start (``ca_cert``; see ``pulsar_tls.py``).
   It can be stopped and started again on the same data directory and ports.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import secrets
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol
from urllib.parse import urlsplit

from .jvm import JvmBroker, first_available
from .maven import resolve_classpath
from .ports import free_port, wait_for_port
from .pulsar_tls import CertificateError, TestCertificates, make_certificates

PULSAR_VERSION = "4.0.7"
"""Newest 4.0 LTS whose artifacts are complete on Maven Central (4.0.8 lacks
``jetcd-core-shaded``, which ``pulsar-metadata`` depends on)."""

LOG4J_VERSION = "2.24.3"
"""The log4j-core ``pulsar-broker`` 4.0.7 depends on; its SLF4J 2 binding must match."""

ARTIFACTS = (
    f"org.apache.pulsar:pulsar-broker:{PULSAR_VERSION}",
    # pulsar-broker logs through SLF4J 2 and ships no binding: without one it logs nothing.
    f"org.apache.logging.log4j:log4j-slf4j2-impl:{LOG4J_VERSION}",
    f"org.apache.logging.log4j:log4j-core:{LOG4J_VERSION}",
)
PULSAR_IMAGE = f"apachepulsar/pulsar:{PULSAR_VERSION}"
LOG4J_CONFIG = Path(__file__).with_name("log4j2-pulsar.xml")

MAX_MESSAGE_SIZE = 5 * 1024 * 1024
"""The broker's ``maxMessageSize`` (Pulsar's default)."""

JVM_OPTIONS = (
    "-Xms128m",
    "-Xmx640m",
    "-XX:MaxDirectMemorySize=256m",
    "-XX:+ExitOnOutOfMemoryError",
    "-Djava.awt.headless=true",
    "-Dio.netty.tryReflectionSetAccessible=true",
    "-Dpulsar.allocator.exit_on_oom=true",
    # The --add-opens set of Pulsar's own bin/pulsar script (Netty, metrics, LinuxInfoUtils).
    "--add-opens=java.base/java.io=ALL-UNNAMED",
    "--add-opens=java.base/java.util.zip=ALL-UNNAMED",
    "--add-opens=java.base/java.nio=ALL-UNNAMED",
    "--add-opens=java.base/jdk.internal.misc=ALL-UNNAMED",
    "--add-opens=java.base/sun.net=ALL-UNNAMED",
    "--add-opens=java.management/sun.management=ALL-UNNAMED",
    "--add-opens=jdk.management/com.sun.management.internal=ALL-UNNAMED",
    "--add-opens=java.base/jdk.internal.platform=ALL-UNNAMED",
)

ENV_SERVICE_URL = "MSGSTREAM_TEST_PULSAR"
ENV_ADMIN_URL = "MSGSTREAM_TEST_PULSAR_ADMIN"
ENV_TOKEN = "MSGSTREAM_TEST_PULSAR_TOKEN"

BOOT_TIMEOUT_S = 240.0


class PulsarBrokerError(RuntimeError):
    """A test Pulsar broker could not be provided, started or stopped."""


class PulsarEndpoint(Protocol):
    """What the ``pulsar_broker`` fixture hands to tests, whichever way the broker runs."""

    service_url: str
    admin_url: str
    restartable: bool
    valid_token: str | None
    max_message_size: int
    """The broker's ``maxMessageSize`` (an external broker is assumed at Pulsar's default)."""
    """A token the broker accepts (None: the broker has no token authentication)."""
    tls_service_url: str | None
    """``pulsar+ssl://`` address of the same broker (None: no TLS listener)."""
    tls_admin_url: str | None
    ca_cert: Path | None
    """The CA (PEM) that signed the broker's TLS certificate."""
    tls_problem: str | None
    """Why there is no TLS listener, when there is none."""

    def forged_token(self) -> str: ...

    def role_token(self, role: str) -> str | None:
        """A valid token for ``role``, which has no permission unless granted (None: this
        broker does not enforce authorization, or its key is unknown)."""
        ...

    def start(self, timeout_s: float = ...) -> None: ...

    def stop(self, timeout_s: float = ...) -> None: ...

    def close(self) -> None: ...


# --------------------------------------------------------------------------------- tokens


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def mint_token(secret_key: bytes, subject: str) -> str:
    """An HS256 JWT ``{"sub": subject}`` signed with ``secret_key``: what Pulsar's
    ``AuthenticationProviderToken`` accepts with ``tokenSecretKey`` set to that key."""
    header = _b64url(json.dumps({"alg": "HS256"}, separators=(",", ":")).encode())
    payload = _b64url(json.dumps({"sub": subject}, separators=(",", ":")).encode())
    signing_input = f"{header}.{payload}".encode()
    signature = hmac.new(secret_key, signing_input, hashlib.sha256).digest()
    return f"{header}.{payload}.{_b64url(signature)}"


# ------------------------------------------------------------------------ readiness probe


def default_namespace_exists(admin_url: str, timeout_s: float = 3.0) -> bool:
    """True once the admin API lists ``public/default`` (the standalone's last boot step)."""
    try:
        with urllib.request.urlopen(
            f"{admin_url}/admin/v2/namespaces/public", timeout=timeout_s
        ) as response:
            return "public/default" in json.loads(response.read())
    except (OSError, ValueError):  # URLError and HTTPError are OSErrors
        return False


def wait_until_ready(
    admin_url: str, timeout_s: float, alive: Callable[[], bool] = lambda: True
) -> bool:
    """Poll until ``public/default`` exists (True), or the broker died or time ran out."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and alive():
        if default_namespace_exists(admin_url):
            return True
        time.sleep(0.5)
    return False


# --------------------------------------------------------------------- an existing broker


@dataclass
class ExternalPulsar:
    """A broker this process did not start (environment address or a container)."""

    service_url: str
    admin_url: str
    valid_token: str | None = None
    restartable: bool = False
    max_message_size: int = MAX_MESSAGE_SIZE
    on_close: Callable[[], None] = lambda: None
    tls_service_url: str | None = None
    tls_admin_url: str | None = None
    ca_cert: Path | None = None
    tls_problem: str | None = "a broker not started by the tests: its TLS setup is unknown"

    def forged_token(self) -> str:
        """A well-formed token signed with a random key: a token-checking broker refuses it."""
        return mint_token(secrets.token_bytes(32), "msgstream-test")

    def role_token(self, role: str) -> str | None:
        return None

    def start(self, timeout_s: float = 60.0) -> None:
        if not wait_until_ready(self.admin_url, timeout_s):
            raise PulsarBrokerError(
                f"Pulsar at {self.service_url} (admin {self.admin_url}) did not list "
                f"public/default within {timeout_s}s"
            )

    def stop(self, timeout_s: float = 30.0) -> None:
        raise PulsarBrokerError(
            f"Pulsar at {self.service_url} was not started by the tests and cannot be stopped"
        )

    def close(self) -> None:
        self.on_close()


def from_environment(environ: Mapping[str, str]) -> ExternalPulsar | None:
    """The broker named by ``MSGSTREAM_TEST_PULSAR`` (and its companions), if set."""
    service_url = environ.get(ENV_SERVICE_URL, "").strip()
    if not service_url:
        return None
    admin_url = environ.get(ENV_ADMIN_URL, "").strip()
    if not admin_url:
        host = urlsplit(service_url).hostname or "localhost"
        admin_url = f"http://{host}:8080"
    token = environ.get(ENV_TOKEN, "").strip() or None
    return ExternalPulsar(service_url, admin_url.rstrip("/"), valid_token=token)


# ----------------------------------------------------------------------------- Docker path


def start_container(timeout_s: float = BOOT_TIMEOUT_S) -> ExternalPulsar:
    """The official image's standalone (``bin/pulsar standalone``) via testcontainers.

    Host ports are chosen before the container starts: the broker advertises the address
    clients dial after a lookup, so it must know the host port in advance.
    """
    from testcontainers.core.container import DockerContainer

    broker_port, web_port = free_port(), free_port()
    container = DockerContainer(PULSAR_IMAGE)
    # The broker advertises the port clients dial after a lookup: the same number inside.
    container.with_bind_ports(broker_port, broker_port)
    container.with_bind_ports(8080, web_port)
    host = container.get_docker_client().host()
    container.with_envs(
        PULSAR_PREFIX_advertisedAddress=host,
        PULSAR_PREFIX_brokerServicePort=str(broker_port),
        PULSAR_MEM="-Xms256m -Xmx640m -XX:MaxDirectMemorySize=256m",
    )
    container.with_command(
        "sh -c 'bin/apply-config-from-env.py conf/standalone.conf && "
        "exec bin/pulsar standalone --no-functions-worker --no-stream-storage'"
    )
    container.start()
    endpoint = ExternalPulsar(
        f"pulsar://{host}:{broker_port}", f"http://{host}:{web_port}", on_close=container.stop
    )
    try:
        endpoint.start(timeout_s)
    except BaseException:
        container.stop()
        raise
    return endpoint


# ------------------------------------------------------------------------ local JVM path


def pulsar_classpath() -> list[Path]:
    """``pulsar-broker`` and its dependencies, with a log4j2 SLF4J binding."""
    return resolve_classpath("pulsar", list(ARTIFACTS))


class LocalPulsar(JvmBroker):
    """One ``PulsarStandaloneStarter`` JVM under ``workdir``.

    Layout: ``standalone.conf``, ``data/metadata`` (RocksDB metadata store),
    ``data/bookkeeper`` (the bookie's journal and ledgers), ``logs/pulsar.log`` (WARN+ from
    log4j2) and ``logs/stdout.log`` (anything the JVM itself prints). Ports are fixed at
    construction, so ``start()`` after ``stop()``/``kill()`` brings back the same broker on
    the same addresses and data.
    """

    restartable = True
    LOG_NAME = "pulsar.log"
    ADMIN_ROLE = "msgstream-test"
    SUPER_USER_ROLES = ("anonymous", ADMIN_ROLE)
    """Every client that presents no token, or ``valid_token``, may do anything."""

    def __init__(self, workdir: Path, *, java: str = "java", short_lived: bool = True) -> None:
        super().__init__(workdir, java=java, short_lived=short_lived)
        self.conf_path = workdir / "standalone.conf"
        self.broker_port = free_port()
        self.web_port = free_port()
        self.bookie_port = free_port()
        self.service_url = f"pulsar://127.0.0.1:{self.broker_port}"
        self.admin_url = f"http://127.0.0.1:{self.web_port}"
        self.secret_key = secrets.token_bytes(32)
        self.valid_token: str | None = mint_token(self.secret_key, self.ADMIN_ROLE)
        self.tls_broker_port = free_port()
        self.tls_web_port = free_port()
        self.tls_service_url: str | None = None
        self.tls_admin_url: str | None = None
        self.ca_cert: Path | None = None
        self.tls_problem: str | None = "not started yet"
        self._certificates: TestCertificates | None = None
        self.max_message_size = MAX_MESSAGE_SIZE
        self.boot_seconds: list[float] = []
        """How long each start took, first (cold) to last."""
        self._classpath: list[Path] | None = None

    def forged_token(self) -> str:
        """A well-formed token signed with a random key: the broker must refuse it."""
        return mint_token(secrets.token_bytes(32), "msgstream-test")

    def role_token(self, role: str) -> str | None:
        """A token this broker accepts for ``role`` (only super-users have permissions
        nobody granted)."""
        return mint_token(self.secret_key, role)

    def _prepare_tls(self) -> None:
        """Make the CA and the broker certificate once; without them, no TLS listener."""
        if self._certificates is not None:
            return
        try:
            self._certificates = make_certificates(self.workdir / "tls")
        except (CertificateError, OSError, subprocess.SubprocessError) as exc:
            self.tls_problem = f"no TLS certificates for the broker: {exc}"
            return
        self.tls_service_url = f"pulsar+ssl://127.0.0.1:{self.tls_broker_port}"
        self.tls_admin_url = f"https://127.0.0.1:{self.tls_web_port}"
        self.ca_cert = self._certificates.ca_cert
        self.tls_problem = None

    # ------------------------------------------------------------------------- lifecycle

    def start(self, timeout_s: float = BOOT_TIMEOUT_S) -> None:
        """Start the standalone and wait until ``public/default`` exists.

        Raises :class:`PulsarBrokerError` with the log tail if the JVM exits or the
        namespace does not appear within ``timeout_s``.
        """
        if self.running:
            return
        started = time.monotonic()
        self.logs_dir.mkdir(parents=True, exist_ok=True)
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self._prepare_tls()
        self.conf_path.write_text(self._standalone_conf())
        process = self._spawn()
        self._adopt(process)
        ready = wait_until_ready(self.admin_url, timeout_s, alive=lambda: self.running)
        if ready:
            ready = wait_for_port("127.0.0.1", self.broker_port, 10.0)
        if ready and self.tls_service_url is not None:
            ready = wait_for_port("127.0.0.1", self.tls_broker_port, 10.0)
        if not ready:
            code = process.poll()
            self.kill()
            what = f"exited with code {code}" if code is not None else f"timed out ({timeout_s}s)"
            raise PulsarBrokerError(
                f"Pulsar {PULSAR_VERSION} standalone at {self.service_url} (workdir "
                f"{self.workdir}) {what} before public/default existed\n{self.log_tail()}"
            )
        self.boot_seconds.append(time.monotonic() - started)

    # ----------------------------------------------------------------------- internals

    def _spawn(self) -> subprocess.Popen[bytes]:
        if self._classpath is None:
            self._classpath = pulsar_classpath()
        options = [
            *JVM_OPTIONS,
            f"-Dlog4j2.configurationFile={LOG4J_CONFIG}",
            f"-Dpulsar.log.dir={self.logs_dir}",
        ]
        args = [
            "--config",
            str(self.conf_path),
            "--metadata-url",
            f"rocksdb://{self.data_dir / 'metadata'}",
            "--bookkeeper-dir",
            str(self.data_dir / "bookkeeper"),
            "--bookkeeper-port",
            str(self.bookie_port),
            # Never created: its absence is what keeps the standalone off ZooKeeper.
            "--zookeeper-dir",
            str(self.data_dir / "zookeeper"),
            "--no-functions-worker",
            "--no-stream-storage",
        ]
        env = {k: v for k, v in os.environ.items() if k != "PULSAR_STANDALONE_USE_ZOOKEEPER"}
        try:
            return self._launch_java(
                self._classpath, options, "org.apache.pulsar.PulsarStandaloneStarter", args, env=env
            )
        except FileNotFoundError as exc:
            raise PulsarBrokerError(str(exc)) from exc

    def _standalone_conf(self) -> str:
        secret = base64.b64encode(self.secret_key).decode()
        settings: dict[str, str] = {
            "clusterName": "standalone",
            "bindAddress": "127.0.0.1",
            "advertisedAddress": "127.0.0.1",
            "brokerServicePort": str(self.broker_port),
            "webServicePort": str(self.web_port),
            "maxMessageSize": str(self.max_message_size),
            # Token authentication, and anonymous clients allowed as role "anonymous".
            "authenticationEnabled": "true",
            "authenticationProviders": (
                "org.apache.pulsar.broker.authentication.AuthenticationProviderToken"
            ),
            "tokenSecretKey": f"data:;base64,{secret}",
            "anonymousUserRole": "anonymous",
            # Authorization on; the anonymous and the valid token's roles are super-users.
            "authorizationEnabled": "true",
            "superUserRoles": ",".join(self.SUPER_USER_ROLES),
            # Topics: non-partitioned, created on first use, never deleted behind a test.
            "allowAutoTopicCreation": "true",
            "allowAutoTopicCreationType": "non-partitioned",
            "brokerDeleteInactiveTopicsEnabled": "false",
            "topicLevelPoliciesEnabled": "false",
            "systemTopicEnabled": "false",
            "transactionCoordinatorEnabled": "false",
            "loadBalancerSheddingEnabled": "false",
            # One bookie: one copy of everything.
            "managedLedgerDefaultEnsembleSize": "1",
            "managedLedgerDefaultWriteQuorum": "1",
            "managedLedgerDefaultAckQuorum": "1",
            # Small caches and few threads: two shared cores.
            "managedLedgerCacheSizeMB": "32",
            "numIOThreads": "2",
            "numHttpServerThreads": "4",
            "numOrderedExecutorThreads": "2",
            "numExecutorThreadPoolSize": "2",
            "bookkeeperNumberOfChannelsPerBookie": "1",
            # Bookie (the standalone reads its settings from this file too).
            "allowLoopback": "true",
            "httpServerEnabled": "false",
            "journalSyncData": "false",
            "dbStorage_writeCacheMaxSizeMb": "16",
            "dbStorage_readAheadCacheMaxSizeMb": "16",
            "dbStorage_rocksDB_blockCacheSize": "16777216",
            "numAddWorkerThreads": "1",
            "numReadWorkerThreads": "1",
            "numJournalCallbackThreads": "1",
            "journalMaxGroupWaitMSec": "1",
        }
        certs = self._certificates
        if certs is not None:
            # Both protocols over TLS too; clients need not present a certificate.
            settings |= {
                "brokerServicePortTls": str(self.tls_broker_port),
                "webServicePortTls": str(self.tls_web_port),
                "tlsCertificateFilePath": str(certs.server_cert),
                "tlsKeyFilePath": str(certs.server_key),
                "tlsTrustCertsFilePath": str(certs.ca_cert),
                "tlsRequireTrustedClientCertOnConnect": "false",
                "tlsAllowInsecureConnection": "false",
                # Jetty leases threads per connector: a second one does not start with 4.
                "numHttpServerThreads": "6",
            }
        return "".join(f"{key}={value}\n" for key, value in settings.items())


# ------------------------------------------------------------------------------- provide


def provide(workdir: Path, environ: Mapping[str, str] | None = None) -> PulsarEndpoint:
    """A running broker for the test session: environment, then Docker, then a local JVM."""
    env = os.environ if environ is None else environ

    def external() -> PulsarEndpoint | None:
        found = from_environment(env)
        if found is not None:
            found.start(timeout_s=60.0)
        return found

    endpoint: PulsarEndpoint = first_available(
        "Pulsar",
        external,
        start_container,
        lambda: LocalPulsar(workdir),
        f"set {ENV_SERVICE_URL}=pulsar://host:port to use your own",
        PulsarBrokerError,
    )
    return endpoint


__all__: Sequence[str] = [
    "PULSAR_IMAGE",
    "PULSAR_VERSION",
    "ExternalPulsar",
    "LocalPulsar",
    "PulsarBrokerError",
    "PulsarEndpoint",
    "default_namespace_exists",
    "from_environment",
    "mint_token",
    "provide",
    "pulsar_classpath",
]
