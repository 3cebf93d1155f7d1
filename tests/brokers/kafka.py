"""A real Apache Kafka 4.x broker for the test suite, started without Docker if need be.

``provide(workdir)`` returns a :class:`KafkaEndpoint`, choosing in order:

1. ``MSGSTREAM_TEST_KAFKA=host:port``: a broker someone already runs (not restartable;
   SASL only when ``MSGSTREAM_TEST_KAFKA_SASL=host:port`` and
   ``MSGSTREAM_TEST_KAFKA_SASL_USERS=user:password[,user:password]`` are set too; TLS,
   SCRAM and ACLs only as :func:`security_from_environment` describes);
2. the official ``apache/kafka`` image through testcontainers, when a Docker daemon answers
   (no SASL listener, no TLS, no authorizer);
3. :class:`LocalKafka`: the broker's jars from Maven Central (see ``maven.py``) run as one
   local JVM in KRaft combined mode, with PLAINTEXT, SASL_PLAINTEXT (PLAIN and
   SCRAM-SHA-512), SSL, SASL_SSL and CONTROLLER listeners on free loopback ports, and
   KRaft's ``StandardAuthorizer`` (see :data:`SCRAM_USERS`). It can be stopped, killed and
   started again on the same data directory and ports, which a broker-restart test needs.

Every endpoint has a ``security`` attribute (:class:`KafkaSecurity`) saying which of the
TLS, SCRAM and ACL listeners and settings it offers; the security tests skip what is absent.
"""

from __future__ import annotations

import asyncio
import base64
import os
import re
import subprocess
import threading
import time
import uuid
from collections.abc import Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, TypeVar

from .jvm import JvmBroker, docker_available, first_available
from .maven import resolve_classpath
from .ports import free_port, wait_for_port
from .tls import BrokerCertificates, broker_certificates

KAFKA_VERSION = "4.3.1"
"""Newest 4.x whose artifacts are complete on Maven Central (4.4.0 lacks kafka-tools-api)."""

KAFKA_ARTIFACT = f"org.apache.kafka:kafka_2.13:{KAFKA_VERSION}"
KAFKA_IMAGE = f"apache/kafka:{KAFKA_VERSION}"

MESSAGE_MAX_BYTES = 1_048_588
"""The broker's ``message.max.bytes`` (Kafka's default): the largest record batch it accepts."""

SASL_USERS: Mapping[str, str] = {"alice": "alice-secret", "bob": "bob-secret"}
"""Users the local broker's SASL_PLAINTEXT listener accepts with mechanism PLAIN."""

SCRAM_USERS: Mapping[str, str] = {
    "carol": "carol-scram-secret",
    "nowrite": "nowrite-scram-secret",
    "noread": "noread-scram-secret",
    "nogroup": "nogroup-scram-secret",
}
"""SCRAM-SHA-512 users the local broker stores (created when its storage is formatted),
accepted on the SASL_PLAINTEXT and SASL_SSL listeners. ``nowrite``, ``noread`` and
``nogroup`` are for ACL tests, which deny them writing topics, reading topics and reading
consumer groups under a prefix of their choosing; ``carol`` is an ordinary user."""

AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"

SUPER_USER = "User:ANONYMOUS"
"""The principal of the PLAINTEXT, SSL (no client certificate) and CONTROLLER listeners: a
super user, so the broker's own traffic and every existing plaintext test pass the
authorizer untouched. Resources without any ACL stay open to everyone
(``allow.everyone.if.no.acl.found``); ACL tests add ALLOW and DENY rules under their own
prefix."""

LOG4J_CONFIG = Path(__file__).with_name("log4j2-kafka.xml")

BROKER_HEAP = "-Xmx512m"
TOOL_HEAP = "-Xmx256m"

JVM_OPTIONS = ("-Xms128m", "-Djava.awt.headless=true")
"""With :data:`~brokers.jvm.SHORT_LIVED_JVM_OPTIONS`, which every broker JVM gets."""

ENV_BOOTSTRAP = "MSGSTREAM_TEST_KAFKA"
ENV_SASL_BOOTSTRAP = "MSGSTREAM_TEST_KAFKA_SASL"
ENV_SASL_USERS = "MSGSTREAM_TEST_KAFKA_SASL_USERS"
ENV_SSL_BOOTSTRAP = "MSGSTREAM_TEST_KAFKA_SSL"
ENV_SASL_SSL_BOOTSTRAP = "MSGSTREAM_TEST_KAFKA_SASL_SSL"
ENV_CAFILE = "MSGSTREAM_TEST_KAFKA_CAFILE"
ENV_SCRAM_USERS = "MSGSTREAM_TEST_KAFKA_SCRAM_USERS"
ENV_ACLS = "MSGSTREAM_TEST_KAFKA_ACLS"


class KafkaBrokerError(RuntimeError):
    """A test Kafka broker could not be provided, started or stopped."""


@dataclass(frozen=True)
class KafkaSecurity:
    """The secured ways into a broker, for the security tests (absent parts are None/empty).

    ``ssl_bootstrap``: an SSL listener (server certificate only) whose certificate
    ``ca_file`` (PEM) verifies for the host in the address; ``sasl_ssl_bootstrap``: SASL over
    TLS with the same certificate; ``scram_bootstrap``: a SASL_PLAINTEXT listener accepting
    SCRAM-SHA-512 for ``scram_users`` (also accepted on ``sasl_ssl_bootstrap``); ``acls``:
    the broker runs ``StandardAuthorizer`` with ``allow.everyone.if.no.acl.found=true``,
    the plaintext principal is a super user (so it may create ACLs), and ``scram_users``
    includes the ACL test users of :data:`SCRAM_USERS`.
    """

    ssl_bootstrap: str | None = None
    sasl_ssl_bootstrap: str | None = None
    ca_file: str | None = None
    scram_bootstrap: str | None = None
    scram_users: Mapping[str, str] = field(default_factory=dict)
    acls: bool = False


class KafkaEndpoint(Protocol):
    """What the ``kafka_broker`` fixture hands to tests, whichever way the broker runs."""

    bootstrap: str
    sasl_bootstrap: str | None
    sasl_users: Mapping[str, str]
    message_max_bytes: int
    restartable: bool

    def start(self, timeout_s: float = ...) -> None: ...

    def stop(self, timeout_s: float = ...) -> None: ...

    def close(self) -> None: ...


# --------------------------------------------------------------------------- readiness probe

_T = TypeVar("_T")


def _run_in_fresh_loop(make: Callable[[], Coroutine[Any, Any, _T]], timeout_s: float) -> _T:
    """Run a coroutine on its own event loop in a helper thread.

    The launcher is called from synchronous fixtures and from async tests alike (a restart
    test calls ``start()`` while its own loop runs), so it never touches the caller's loop.
    """
    outcome: dict[str, Any] = {}

    def target() -> None:
        try:
            outcome["value"] = asyncio.run(make())
        except BaseException as exc:  # handed back to the calling thread below
            outcome["error"] = exc

    thread = threading.Thread(target=target, name="kafka-probe", daemon=True)
    thread.start()
    thread.join(timeout_s)
    if thread.is_alive():
        raise TimeoutError(f"no answer within {timeout_s:.1f}s")
    if "error" in outcome:
        raise outcome["error"]
    value: _T = outcome["value"]
    return value


async def _metadata_broker_count(bootstrap: str, request_timeout_ms: int) -> int:
    """Brokers listed in one metadata answer, over a bare connection (a client would log
    every refused attempt while the broker boots)."""
    from aiokafka.conn import create_conn
    from aiokafka.protocol.metadata import MetadataRequest

    host, _, port = bootstrap.rpartition(":")
    conn = await create_conn(host, int(port), request_timeout_ms=request_timeout_ms)
    try:
        response = await conn.send(MetadataRequest([]))
        return len(response.brokers)
    finally:
        await conn.close()


def answers_metadata(bootstrap: str, timeout_s: float = 5.0) -> bool:
    """True when the broker at ``bootstrap`` answers a metadata request listing a broker."""
    try:
        count = _run_in_fresh_loop(
            lambda: _metadata_broker_count(bootstrap, int(timeout_s * 1000)), timeout_s + 2.0
        )
    except Exception:
        return False
    return count > 0


def wait_until_answers(
    bootstrap: str, timeout_s: float, alive: Callable[[], bool] = lambda: True
) -> bool:
    """Poll until the broker answers metadata (True), or it died or time ran out (False)."""
    host, _, port = bootstrap.rpartition(":")
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and alive():
        # A closed port is cheap to detect; only then pay for a Kafka client round trip.
        if wait_for_port(host, int(port), min(1.0, max(0.1, deadline - time.monotonic()))):
            remaining = deadline - time.monotonic()
            if remaining > 0 and answers_metadata(bootstrap, min(5.0, max(1.0, remaining))):
                return True
            time.sleep(0.2)
    return False


# --------------------------------------------------------------------- an existing broker


@dataclass
class ExternalKafka:
    """A broker this process did not start (environment address or a container)."""

    bootstrap: str
    sasl_bootstrap: str | None = None
    sasl_users: Mapping[str, str] = field(default_factory=dict)
    message_max_bytes: int = MESSAGE_MAX_BYTES
    restartable: bool = False
    on_close: Callable[[], None] = lambda: None
    security: KafkaSecurity = field(default_factory=KafkaSecurity)

    def start(self, timeout_s: float = 60.0) -> None:
        if not wait_until_answers(self.bootstrap, timeout_s):
            raise KafkaBrokerError(
                f"Kafka at {self.bootstrap} did not answer a metadata request in {timeout_s}s"
            )

    def stop(self, timeout_s: float = 30.0) -> None:
        raise KafkaBrokerError(
            f"Kafka at {self.bootstrap} was not started by the tests and cannot be stopped"
        )

    def close(self) -> None:
        self.on_close()


def _parse_users(spec: str, variable: str = ENV_SASL_USERS) -> dict[str, str]:
    users: dict[str, str] = {}
    for entry in filter(None, (part.strip() for part in spec.split(","))):
        user, sep, password = entry.partition(":")
        if not sep or not user:
            raise KafkaBrokerError(f"{variable} entry {entry!r} is not of the form user:password")
        users[user] = password
    return users


def from_environment(environ: Mapping[str, str]) -> ExternalKafka | None:
    """The broker named by ``MSGSTREAM_TEST_KAFKA`` (and its SASL companions), if set."""
    bootstrap = environ.get(ENV_BOOTSTRAP, "").strip()
    if not bootstrap:
        return None
    sasl_bootstrap = environ.get(ENV_SASL_BOOTSTRAP, "").strip() or None
    users = _parse_users(environ.get(ENV_SASL_USERS, ""))
    if sasl_bootstrap is None or not users:
        sasl_bootstrap, users = None, {}
    return ExternalKafka(
        bootstrap=bootstrap,
        sasl_bootstrap=sasl_bootstrap,
        sasl_users=users,
        security=security_from_environment(environ),
    )


def security_from_environment(environ: Mapping[str, str]) -> KafkaSecurity:
    """What an external broker offers for the security tests, from the environment:

    - ``MSGSTREAM_TEST_KAFKA_SSL=host:port``: an SSL listener, and
      ``MSGSTREAM_TEST_KAFKA_CAFILE=path``: the PEM CA that verifies its certificate;
    - ``MSGSTREAM_TEST_KAFKA_SASL_SSL=host:port``: a SASL_SSL listener (same CA);
    - ``MSGSTREAM_TEST_KAFKA_SCRAM_USERS=user:password[,...]``: SCRAM-SHA-512 users accepted
      on ``MSGSTREAM_TEST_KAFKA_SASL`` and on the SASL_SSL listener;
    - ``MSGSTREAM_TEST_KAFKA_ACLS=1``: the broker runs ``StandardAuthorizer`` with
      ``allow.everyone.if.no.acl.found=true``, the plaintext listener's principal is a super
      user, and the SCRAM users include ``nowrite``, ``noread`` and ``nogroup``.

    TLS needs the CA file; anything not set is absent, and its tests skip.
    """
    ca_file = environ.get(ENV_CAFILE, "").strip() or None
    ssl_bootstrap = environ.get(ENV_SSL_BOOTSTRAP, "").strip() or None
    sasl_ssl_bootstrap = environ.get(ENV_SASL_SSL_BOOTSTRAP, "").strip() or None
    if ca_file is None:
        ssl_bootstrap = sasl_ssl_bootstrap = None
    scram_users = _parse_users(environ.get(ENV_SCRAM_USERS, ""), ENV_SCRAM_USERS)
    scram_bootstrap = environ.get(ENV_SASL_BOOTSTRAP, "").strip() or None
    acl_users = {"nowrite", "noread", "nogroup"}
    return KafkaSecurity(
        ssl_bootstrap=ssl_bootstrap,
        sasl_ssl_bootstrap=sasl_ssl_bootstrap,
        ca_file=ca_file,
        scram_bootstrap=scram_bootstrap if scram_users else None,
        scram_users=scram_users,
        acls=environ.get(ENV_ACLS, "").strip().lower() in {"1", "true", "yes"}
        and scram_bootstrap is not None
        and acl_users <= scram_users.keys(),
    )


# ----------------------------------------------------------------------------- Docker path


def start_container(timeout_s: float = 120.0) -> ExternalKafka:
    """The official ``apache/kafka`` image on a fixed free host port, via testcontainers.

    The host port is chosen before the container starts because Kafka must advertise the
    address clients will dial; a randomly mapped port would only be known afterwards.
    """
    from testcontainers.core.container import DockerContainer

    host_port = free_port()
    container = DockerContainer(KAFKA_IMAGE).with_bind_ports(9092, host_port)
    host = container.get_docker_client().host()
    container.with_envs(
        KAFKA_NODE_ID="1",
        KAFKA_PROCESS_ROLES="broker,controller",
        KAFKA_CONTROLLER_QUORUM_VOTERS="1@localhost:29093",
        KAFKA_LISTENERS="PLAINTEXT://:19092,HOST://:9092,CONTROLLER://:29093",
        KAFKA_ADVERTISED_LISTENERS=f"PLAINTEXT://localhost:19092,HOST://{host}:{host_port}",
        KAFKA_LISTENER_SECURITY_PROTOCOL_MAP=(
            "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,HOST:PLAINTEXT"
        ),
        KAFKA_INTER_BROKER_LISTENER_NAME="PLAINTEXT",
        KAFKA_CONTROLLER_LISTENER_NAMES="CONTROLLER",
        **{f"KAFKA_{_env_key(k)}": v for k, v in _TEST_SETTINGS.items()},
    )
    container.start()
    endpoint = ExternalKafka(bootstrap=f"{host}:{host_port}", on_close=container.stop)
    try:
        endpoint.start(timeout_s)
    except BaseException:
        container.stop()
        raise
    return endpoint


def _env_key(prop: str) -> str:
    """``apache/kafka`` image naming: ``.`` -> ``_``, ``_`` -> ``__``, ``-`` -> ``___``."""
    return prop.replace("_", "__").replace("-", "___").replace(".", "_").upper()


# ------------------------------------------------------------------------ local JVM path

_TEST_SETTINGS: dict[str, str] = {
    "auto.create.topics.enable": "false",
    "num.partitions": "1",
    "default.replication.factor": "1",
    "min.insync.replicas": "1",
    "message.max.bytes": str(MESSAGE_MAX_BYTES),
    "group.initial.rebalance.delay.ms": "0",
    # Internal topics: one replica (one broker), and one partition each so the first
    # consumer group or transaction does not wait for 50 partitions to be created.
    "offsets.topic.replication.factor": "1",
    "offsets.topic.num.partitions": "1",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
    "transaction.state.log.num.partitions": "1",
    "share.coordinator.state.topic.replication.factor": "1",
    "share.coordinator.state.topic.min.isr": "1",
    "share.coordinator.state.topic.num.partitions": "1",
    # After a crash (SIGKILL) the restarted node cannot register again until the old
    # incarnation's session expires (DUPLICATE_BROKER_REGISTRATION): 9 s by default.
    "broker.session.timeout.ms": "4000",
    "broker.heartbeat.interval.ms": "500",
    # Two shared cores: few threads, one recovery thread.
    "num.network.threads": "2",
    "num.io.threads": "2",
    "num.recovery.threads.per.data.dir": "1",
    "background.threads": "2",
}


def kafka_classpath() -> list[Path]:
    """Kafka's jars plus the log4j2 binding for SLF4J 1.x that the artifact leaves out.

    Without a binding SLF4J falls back to a no-op logger and the broker logs nothing at all.
    The binding must match Kafka's log4j-core, so its version is read from the resolved jars.
    """
    jars = resolve_classpath("kafka", [KAFKA_ARTIFACT])
    core = next((j for j in jars if re.fullmatch(r"log4j-core-[\d.]+\.jar", j.name)), None)
    if core is None:
        raise KafkaBrokerError(f"{KAFKA_ARTIFACT} resolved without log4j-core: {jars}")
    log4j_version = core.name.removeprefix("log4j-core-").removesuffix(".jar")
    binding = resolve_classpath(
        "log4j-slf4j-impl",
        [f"org.apache.logging.log4j:log4j-slf4j-impl:{log4j_version}"],
        exclusions=[
            "org.apache.logging.log4j:log4j-api",
            "org.apache.logging.log4j:log4j-core",
            "org.slf4j:slf4j-api",
        ],
    )
    return [*jars, *binding]


def new_cluster_id() -> str:
    """A KRaft cluster id: a random UUID as 22 characters of unpadded URL-safe base64."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


def _distinct_free_ports(count: int) -> list[int]:
    ports: list[int] = []
    while len(ports) < count:
        port = free_port()
        if port not in ports:
            ports.append(port)
    return ports


class LocalKafka(JvmBroker):
    """One Apache Kafka JVM in KRaft combined mode (node 1) under ``workdir``.

    Layout: ``server.properties``, ``data/`` (log dirs and KRaft metadata, formatted on the
    first start only), ``logs/server.log`` (WARN+ from log4j2) and ``logs/stdout.log``
    (anything the JVM itself prints). Ports are fixed at construction, so ``start()`` after
    ``stop()``/``kill()`` brings back the same broker on the same addresses and data.
    """

    restartable = True

    def __init__(
        self,
        workdir: Path,
        *,
        sasl_users: Mapping[str, str] = SASL_USERS,
        scram_users: Mapping[str, str] = SCRAM_USERS,
        message_max_bytes: int = MESSAGE_MAX_BYTES,
        java: str = "java",
        short_lived: bool = True,
    ) -> None:
        super().__init__(workdir, java=java, short_lived=short_lived)
        self.properties_path = workdir / "server.properties"
        self.sasl_users: Mapping[str, str] = dict(sasl_users)
        self.scram_users: Mapping[str, str] = dict(scram_users)
        self.message_max_bytes = message_max_bytes
        (
            self.port,
            self.sasl_port,
            self.controller_port,
            self.ssl_port,
            self.sasl_ssl_port,
        ) = _distinct_free_ports(5)
        self.bootstrap = f"127.0.0.1:{self.port}"
        self.sasl_bootstrap: str | None = f"127.0.0.1:{self.sasl_port}"
        self.cluster_id = new_cluster_id()
        self._classpath: list[Path] | None = None
        self._certificates: BrokerCertificates | None = None

    @property
    def security(self) -> KafkaSecurity:
        """The SSL and SASL_SSL listeners (once started: the CA is made then), SCRAM on
        the SASL listeners, and the authorizer."""
        certificates = self._certificates
        return KafkaSecurity(
            ssl_bootstrap=f"127.0.0.1:{self.ssl_port}" if certificates else None,
            sasl_ssl_bootstrap=f"127.0.0.1:{self.sasl_ssl_port}" if certificates else None,
            ca_file=str(certificates.ca_file) if certificates else None,
            scram_bootstrap=self.sasl_bootstrap,
            scram_users=self.scram_users,
            acls=True,
        )

    # ------------------------------------------------------------------------- lifecycle

    def start(self, timeout_s: float = 120.0) -> None:
        """Start the broker (formatting storage first if new) and wait until it answers.

        Raises :class:`KafkaBrokerError` with the log tail if the JVM exits or the broker
        does not answer a metadata request within ``timeout_s``.
        """
        if self.running:
            return
        deadline = time.monotonic() + timeout_s
        self.logs_dir.mkdir(parents=True, exist_ok=True)
        if self._certificates is None:
            try:
                self._certificates = broker_certificates(self.java)
            except Exception as exc:
                raise KafkaBrokerError(f"no TLS certificate for the broker: {exc}") from exc
        self.properties_path.write_text(self._server_properties())
        if not (self.data_dir / "meta.properties").exists():
            self._format_storage(timeout_s)
        process = self._spawn(
            "kafka.Kafka", str(self.properties_path), heap=BROKER_HEAP, log="stdout.log"
        )
        self._adopt(process)
        if not wait_until_answers(
            self.bootstrap, max(0.0, deadline - time.monotonic()), alive=lambda: self.running
        ):
            code = process.poll()
            self.kill()
            what = f"exited with code {code}" if code is not None else f"timed out ({timeout_s}s)"
            raise KafkaBrokerError(
                f"Kafka {KAFKA_VERSION} at {self.bootstrap} (workdir {self.workdir}) {what} "
                f"before answering a metadata request\n{self.log_tail()}"
            )
        for name, port in (
            ("SASL", self.sasl_port),
            ("SSL", self.ssl_port),
            ("SASL_SSL", self.sasl_ssl_port),
        ):
            if not wait_for_port("127.0.0.1", port, max(1.0, deadline - time.monotonic())):
                self.kill()
                raise KafkaBrokerError(
                    f"Kafka's {name} listener 127.0.0.1:{port} never opened\n{self.log_tail()}"
                )

    def resume(self, timeout_s: float = 60.0) -> None:
        """Thaw a paused broker and wait until it serves again. A pause longer than
        ``broker.session.timeout.ms`` fences the node until its next heartbeats, so wait
        past a few of those before asking for metadata."""
        super().resume()
        time.sleep(3 * int(_TEST_SETTINGS["broker.heartbeat.interval.ms"]) / 1000)
        if not wait_until_answers(self.bootstrap, timeout_s, alive=lambda: self.running):
            raise KafkaBrokerError(
                f"Kafka at {self.bootstrap} did not serve again after a pause\n{self.log_tail()}"
            )

    def _format_storage(self, timeout_s: float) -> None:
        """``kafka-storage format --standalone``: this node alone is the KRaft voter set.
        The SCRAM users are created here, as the first metadata records of the cluster."""
        scram = [
            f"--add-scram=SCRAM-SHA-512=[name={user},password={password}]"
            for user, password in self.scram_users.items()
        ]
        process = self._spawn(
            "kafka.tools.StorageTool",
            "format",
            # One argument: an id may start with "-", which argparse takes for an option.
            f"--cluster-id={self.cluster_id}",
            "--config",
            str(self.properties_path),
            "--standalone",
            *scram,
            heap=TOOL_HEAP,
            log="format.log",
        )
        try:
            code = process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
            code = None
        if code != 0:
            output = (self.logs_dir / "format.log").read_text(errors="replace")[-4000:]
            raise KafkaBrokerError(
                f"formatting Kafka storage in {self.data_dir} failed (exit {code}):\n{output}"
            )

    def _spawn(self, main_class: str, *args: str, heap: str, log: str) -> subprocess.Popen[bytes]:
        if self._classpath is None:
            self._classpath = kafka_classpath()
        options = [
            *JVM_OPTIONS,
            heap,
            f"-Dlog4j2.configurationFile={LOG4J_CONFIG}",
            f"-Dkafka.logs.dir={self.logs_dir}",
        ]
        try:
            return self._launch_java(self._classpath, options, main_class, args, log=log)
        except FileNotFoundError as exc:
            raise KafkaBrokerError(str(exc)) from exc

    def _server_properties(self) -> str:
        settings: dict[str, str] = {
            "process.roles": "broker,controller",
            "node.id": "1",
            "controller.quorum.bootstrap.servers": f"127.0.0.1:{self.controller_port}",
            "listeners": (
                f"PLAINTEXT://127.0.0.1:{self.port},"
                f"SASL_PLAINTEXT://127.0.0.1:{self.sasl_port},"
                f"SSL://127.0.0.1:{self.ssl_port},"
                f"SASL_SSL://127.0.0.1:{self.sasl_ssl_port},"
                f"CONTROLLER://127.0.0.1:{self.controller_port}"
            ),
            "advertised.listeners": (
                f"PLAINTEXT://127.0.0.1:{self.port},SASL_PLAINTEXT://127.0.0.1:{self.sasl_port},"
                f"SSL://127.0.0.1:{self.ssl_port},SASL_SSL://127.0.0.1:{self.sasl_ssl_port}"
            ),
            "listener.security.protocol.map": (
                "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,SSL:SSL,SASL_SSL:SASL_SSL,"
                "CONTROLLER:PLAINTEXT"
            ),
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            **self._security_settings(),
            "log.dirs": str(self.data_dir),
            **_TEST_SETTINGS,
            "message.max.bytes": str(self.message_max_bytes),
        }
        return "".join(f"{key}={_escape_property(value)}\n" for key, value in settings.items())

    def _security_settings(self) -> dict[str, str]:
        """SASL (PLAIN and SCRAM-SHA-512) on both SASL listeners, the TLS keystore for both
        TLS listeners, and the authorizer (see :data:`SUPER_USER`)."""
        plain = " ".join(
            [
                "org.apache.kafka.common.security.plain.PlainLoginModule required",
                *(f'user_{user}="{password}"' for user, password in self.sasl_users.items()),
            ]
        )
        scram = "org.apache.kafka.common.security.scram.ScramLoginModule required;"
        mechanisms = "PLAIN,SCRAM-SHA-512"
        settings = {"sasl.enabled.mechanisms": mechanisms}
        for listener in ("sasl_plaintext", "sasl_ssl"):
            settings[f"listener.name.{listener}.sasl.enabled.mechanisms"] = mechanisms
            settings[f"listener.name.{listener}.plain.sasl.jaas.config"] = f"{plain};"
            settings[f"listener.name.{listener}.scram-sha-512.sasl.jaas.config"] = scram
        certificates = self._certificates
        if certificates is not None:
            settings.update(
                {
                    "ssl.keystore.type": "PKCS12",
                    "ssl.keystore.location": str(certificates.keystore),
                    "ssl.keystore.password": certificates.password,
                    "ssl.key.password": certificates.password,
                    "ssl.client.auth": "none",
                }
            )
        settings.update(
            {
                "authorizer.class.name": AUTHORIZER,
                "allow.everyone.if.no.acl.found": "true",
                "super.users": SUPER_USER,
            }
        )
        return settings


def _escape_property(value: str) -> str:
    """Java ``.properties`` escaping for values (backslashes; keys here need none)."""
    return value.replace("\\", "\\\\")


# ------------------------------------------------------------------------------- provide


def provide(workdir: Path, environ: Mapping[str, str] | None = None) -> KafkaEndpoint:
    """A running broker for the test session: environment, then Docker, then a local JVM."""
    env = os.environ if environ is None else environ

    def external() -> KafkaEndpoint | None:
        found = from_environment(env)
        if found is not None:
            found.start(timeout_s=30.0)
        return found

    endpoint: KafkaEndpoint = first_available(
        "Kafka",
        external,
        start_container,
        lambda: LocalKafka(workdir),
        f"set {ENV_BOOTSTRAP}=host:port to use your own",
        KafkaBrokerError,
    )
    return endpoint


__all__: Sequence[str] = [
    "KAFKA_IMAGE",
    "KAFKA_VERSION",
    "MESSAGE_MAX_BYTES",
    "SASL_USERS",
    "SCRAM_USERS",
    "ExternalKafka",
    "KafkaBrokerError",
    "KafkaEndpoint",
    "KafkaSecurity",
    "LocalKafka",
    "answers_metadata",
    "docker_available",
    "from_environment",
    "kafka_classpath",
    "provide",
    "security_from_environment",
]
