"""The ``kafka`` configuration section, the aiokafka keyword arguments it means, and the
librdkafka properties it means for the confluent engine."""

from __future__ import annotations

import importlib.util
import re
from typing import Annotated, Any, ClassVar, Literal, Self

from pydantic import Field, SecretStr, model_validator

from msgstream.configuration.config_keys import Special, hidden, reveal, revealed, secrets_of
from msgstream.configuration.sections import Address, Count, PassThrough, Seconds, Section
from msgstream.errors import ConfigError

__all__ = [
    "KafkaConfig",
    "admin_kwargs",
    "connection_kwargs",
    "consumer_kwargs",
    "librdkafka_consumer",
    "librdkafka_producer",
    "librdkafka_refusal",
    "producer_kwargs",
    "topic_configs",
]

KafkaSecurityProtocol = Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"]
KafkaSaslMechanism = Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]
KafkaAcks = Literal["1", "all"]  # not "0": a send must return the offset the broker gave
KafkaCompression = Literal["none", "gzip", "snappy", "lz4", "zstd"]
KafkaEngine = Literal["aiokafka", "confluent"]

OWNED_PROPERTIES = frozenset(
    {"bootstrap.servers", "group.id", "enable.auto.commit", "enable.auto.offset.store"}
)
"""librdkafka properties msgstream sets itself: ``kafka.confluent`` may not change them."""


class KafkaConfig(Section):
    """The Apache Kafka backend."""

    SECTION: ClassVar[str] = "kafka"

    brokers: Annotated[str | None, Address("kafka.sasl_username and kafka.sasl_password")] = None
    """Comma-separated host:port bootstrap servers"""

    client: KafkaEngine = "aiokafka"
    """Client library that sends and reads: aiokafka (pure Python) or confluent
    (confluent-kafka on librdkafka, pip install 'msgstream[kafka-confluent]')"""

    client_id: str = "msgstream"
    """Client id reported to the brokers"""

    security_protocol: KafkaSecurityProtocol = "PLAINTEXT"
    """How clients talk to the brokers"""

    sasl_mechanism: KafkaSaslMechanism = "PLAIN"
    """SASL mechanism (security_protocol SASL_PLAINTEXT/SASL_SSL)"""

    sasl_username: str | None = None
    """SASL user name; needs kafka.sasl_password"""

    sasl_password: SecretStr | None = None
    """SASL password; needs kafka.sasl_username"""

    ssl_cafile: str | None = None
    """CA bundle (PEM) to verify the brokers; null uses the system CAs"""

    ssl_certfile: str | None = None
    """Client certificate (PEM) for mutual TLS"""

    ssl_keyfile: str | None = None
    """Private key (PEM) of kafka.ssl_certfile"""

    ssl_key_password: SecretStr | None = None
    """Password of kafka.ssl_keyfile, if it is encrypted"""

    ssl_check_hostname: bool = True
    """Check that the broker certificate matches its host name"""

    acks: KafkaAcks = "all"
    """Replicas that must have a message before a send is acknowledged ('all' never loses an
    acknowledged message to a single broker failure; '0' is not offered: a send returns
    the offset the broker assigned)"""

    linger_ms: Annotated[int, Field(ge=0)] = 0
    """Milliseconds a send waits to fill a batch; 0 favours latency"""

    compression: KafkaCompression = "none"
    """Compression of produced batches"""

    max_request_size: Count = 1048576
    """Largest produce request in bytes; a bigger message is refused before sending"""

    request_timeout_s: Seconds = 30.0
    """Seconds a broker request may take"""

    replication_factor: Annotated[int, Field(ge=1), Special(-1, "broker default")] = 1
    """Replication factor of the topics msgstream creates"""

    topic_config: PassThrough = Field(
        default_factory=dict,
        description="Topic configs for created topics, e.g. {retention.ms: 604800000}",
    )

    producer: PassThrough = Field(
        default_factory=dict,
        description=(
            "Extra aiokafka producer arguments, passed as is (e.g. {max_batch_size: 65536})"
        ),
    )

    consumer: PassThrough = Field(
        default_factory=dict,
        description=(
            "Extra aiokafka consumer arguments, passed as is (e.g. {fetch_max_bytes: 1048576})"
        ),
    )

    confluent: PassThrough = Field(
        default_factory=dict,
        description=(
            "Extra librdkafka properties for kafka.client confluent, producer and consumer "
            "(e.g. {batch.size: 1000000}); checked by librdkafka at load. A reader fetches "
            "at most 4 MiB a channel ahead unless queued.max.messages.kbytes says otherwise"
        ),
    )

    @model_validator(mode="after")
    def _check_together(self) -> Self:
        """Rules spanning several keys."""
        if self.client == "confluent" and importlib.util.find_spec("confluent_kafka") is None:
            raise ConfigError(
                "kafka.client",
                "confluent needs the confluent-kafka package: "
                "pip install 'msgstream[kafka-confluent]'",
            )
        if self.confluent:
            _check_librdkafka(revealed(self.confluent), secrets_of(self))
        if (self.sasl_username is None) != (self.sasl_password is None):
            given, missing = (
                ("sasl_username", "sasl_password")
                if self.sasl_password is None
                else ("sasl_password", "sasl_username")
            )
            raise ConfigError(
                "kafka.sasl_username, kafka.sasl_password",
                f"kafka.{given} is set but kafka.{missing} is not; set both or neither",
            )
        if self.security_protocol.startswith("SASL_") and self.sasl_username is None:
            raise ConfigError(
                "kafka.sasl_username, kafka.sasl_password",
                f"required when kafka.security_protocol is {self.security_protocol}",
            )
        if (self.ssl_certfile is None) != (self.ssl_keyfile is None):
            raise ConfigError(
                "kafka.ssl_certfile, kafka.ssl_keyfile",
                "a client certificate needs its key and the reverse; set both or neither",
            )
        return self


def connection_kwargs(section: KafkaConfig) -> dict[str, Any]:
    """What every aiokafka client (producer, consumer, admin) shares: where and how."""
    if section.brokers is None:
        raise ConfigError("kafka.brokers", "required when mq.type is kafka")
    kwargs: dict[str, Any] = {
        "bootstrap_servers": [b.strip() for b in section.brokers.split(",") if b.strip()],
        "client_id": section.client_id,
        "request_timeout_ms": int(section.request_timeout_s * 1000),
        "security_protocol": section.security_protocol,
    }
    if section.security_protocol.startswith("SASL_"):
        kwargs["sasl_mechanism"] = section.sasl_mechanism
        kwargs["sasl_plain_username"] = section.sasl_username
        kwargs["sasl_plain_password"] = reveal(section.sasl_password)
    if section.security_protocol in ("SSL", "SASL_SSL"):
        kwargs["ssl_context"] = _ssl_context(section)
    return kwargs


def _ssl_context(section: KafkaConfig) -> Any:
    from aiokafka.helpers import create_ssl_context

    try:
        context = create_ssl_context(
            cafile=section.ssl_cafile,
            certfile=section.ssl_certfile,
            keyfile=section.ssl_keyfile,
            password=reveal(section.ssl_key_password),
        )
    except (OSError, ValueError) as exc:  # ssl.SSLError is an OSError
        raise ConfigError(
            "kafka.ssl_cafile, kafka.ssl_certfile, kafka.ssl_keyfile",
            f"cannot load the TLS files: {exc}",
        ) from exc
    context.check_hostname = section.ssl_check_hostname
    return context


def producer_kwargs(section: KafkaConfig) -> dict[str, Any]:
    kwargs = connection_kwargs(section)
    kwargs.update(
        acks="all" if section.acks == "all" else int(section.acks),
        linger_ms=section.linger_ms,
        compression_type=None if section.compression == "none" else section.compression,
        max_request_size=section.max_request_size,
    )
    kwargs.update(revealed(section.producer))
    return kwargs


def consumer_kwargs(section: KafkaConfig, group_id: str | None) -> dict[str, Any]:
    kwargs = connection_kwargs(section)
    kwargs.update(
        group_id=group_id,
        enable_auto_commit=False,
        # Only reached when a position fell out of the log (retention removed it).
        auto_offset_reset="earliest",
        fetch_max_wait_ms=100,
        max_partition_fetch_bytes=max(1048576, section.max_request_size),
        fetch_max_bytes=max(52428800, section.max_request_size),
    )
    kwargs.update(revealed(section.consumer))
    return kwargs


def admin_kwargs(section: KafkaConfig) -> dict[str, Any]:
    return connection_kwargs(section)


def topic_configs(section: KafkaConfig) -> dict[str, str]:
    """The configs of a topic msgstream creates (``kafka.topic_config``), as the admin API
    takes them: text."""
    return {name: str(value) for name, value in revealed(section.topic_config).items()}


def _check_librdkafka(properties: dict[str, Any], secrets: list[str]) -> None:
    """Let librdkafka judge ``kafka.confluent`` (names and values, ``secrets`` revealed) now,
    at load: an error names the key and shows no secret. Nothing connects: the check's
    producer has no bootstrap servers."""
    for key in properties:
        if key in OWNED_PROPERTIES:
            raise ConfigError(f"kafka.confluent.{key}", "set by msgstream; it cannot be changed")
    if importlib.util.find_spec("confluent_kafka") is None:
        raise ConfigError(
            "kafka.confluent",
            "librdkafka properties need the confluent-kafka package: "
            "pip install 'msgstream[kafka-confluent]'",
        )
    detail = _librdkafka_refusal(properties, secrets)
    if detail is None:
        return
    named = re.search(r'property "([^"]+)"|property: "?([^"\s]+)"?', detail)
    culprit = next((k for k in named.groups() if k), None) if named else None
    if culprit not in properties:  # librdkafka may name an alias (linger.ms: queue.buf...)
        culprit = next(
            (k for k in properties if _librdkafka_refusal({k: properties[k]}, secrets)), None
        )
    raise ConfigError(
        f"kafka.confluent.{culprit}" if culprit else "kafka.confluent",
        f"rejected by librdkafka: {detail}",
    )


def _librdkafka_refusal(properties: dict[str, Any], secrets: list[str]) -> str | None:
    """Why librdkafka refuses ``properties`` (a producer made with them, not started)."""
    from confluent_kafka import KafkaException, Producer

    try:
        Producer({**properties, "log_level": 0})
    except (KafkaException, TypeError, ValueError) as exc:
        return librdkafka_refusal(exc, secrets)
    return None


def librdkafka_refusal(exc: Exception, secrets: list[str]) -> str:
    """What librdkafka said refusing a client's properties, ``secrets`` (theirs: see
    :func:`~msgstream.configuration.config_keys.secrets_of`) masked wherever it echoes a value."""
    from confluent_kafka import KafkaException

    text = str(exc.args[0].str() if isinstance(exc, KafkaException) else exc).strip()
    return hidden(text, secrets)


def _librdkafka_connection(section: KafkaConfig) -> dict[str, Any]:
    """What the confluent engine's producer and consumers share: where and how, with the
    SASL and TLS keys under librdkafka's names."""
    if section.brokers is None:
        raise ConfigError("kafka.brokers", "required when mq.type is kafka")
    conf: dict[str, Any] = {
        "bootstrap.servers": ",".join(b.strip() for b in section.brokers.split(",") if b.strip()),
        "client.id": section.client_id,
        "socket.timeout.ms": int(section.request_timeout_s * 1000),
        "security.protocol": section.security_protocol.lower(),
    }
    if section.security_protocol.startswith("SASL_"):
        conf["sasl.mechanism"] = section.sasl_mechanism
        conf["sasl.username"] = section.sasl_username
        conf["sasl.password"] = reveal(section.sasl_password)
    if section.security_protocol in ("SSL", "SASL_SSL"):
        tls = {
            "ssl.ca.location": section.ssl_cafile,
            "ssl.certificate.location": section.ssl_certfile,
            "ssl.key.location": section.ssl_keyfile,
            "ssl.key.password": reveal(section.ssl_key_password),
        }
        conf.update((key, value) for key, value in tls.items() if value is not None)
        conf["ssl.endpoint.identification.algorithm"] = (
            "https" if section.ssl_check_hostname else "none"
        )
    return conf


def librdkafka_producer(section: KafkaConfig) -> dict[str, Any]:
    """The confluent engine's producer properties (``kafka.confluent`` last)."""
    conf = _librdkafka_connection(section)
    conf.update(
        {
            "acks": section.acks,
            "linger.ms": section.linger_ms,
            "compression.type": section.compression,
            "message.max.bytes": max(section.max_request_size, 1000),
            "request.timeout.ms": int(section.request_timeout_s * 1000),
        }
    )
    conf.update(revealed(section.confluent))
    return conf


PREFETCH_BYTES = 4 * 1024 * 1024
"""What a confluent-engine reader lets librdkafka fetch ahead of the stream (its
``queued.max.messages.kbytes``; at least one fetch), beside msgstream's own bounded
buffers. librdkafka's default, 64 MiB a channel, held that much in every reader of a
TtMsgStream that a silent channel holds back, whatever ``msgstream`` limits said; the
aiokafka engine holds about one fetch (1 MiB) a channel. Reading 16 channels, 4 MiB kept
up with 64 MiB where 1 MiB did not (docs/benchmarks/code-notes.md)."""


REFILL_PAUSE_MS = 10
"""How long librdkafka waits, once its queue for a channel is full, before it fetches
again (its ``fetch.queue.backoff.ms``). Its default, a second, made a reader that drains
the bounded queue above wait a whole second for each refill: reading a channel larger
than :data:`PREFETCH_BYTES` took 1-3 s where 0.2 s did, and how many refills a read hit
depended on timing, hence on the machine (docs/benchmarks/spark.md)."""


def librdkafka_consumer(section: KafkaConfig, group_id: str) -> dict[str, Any]:
    """The confluent engine's consumer properties for subscription ``group_id``: what it
    fetches ahead is bounded by :data:`PREFETCH_BYTES`, and refilled
    :data:`REFILL_PAUSE_MS` after it drains (``kafka.confluent`` last, so
    ``queued.max.messages.kbytes`` or ``fetch.queue.backoff.ms`` there overrides them)."""
    fetch_bytes = max(1048576, section.max_request_size)
    conf = _librdkafka_connection(section)
    conf.update(
        {
            "group.id": group_id,
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            # Only reached when a position fell out of the log (retention removed it).
            "auto.offset.reset": "earliest",
            "fetch.wait.max.ms": 100,
            "max.partition.fetch.bytes": fetch_bytes,
            "fetch.max.bytes": max(52428800, section.max_request_size),
            "queued.max.messages.kbytes": max(PREFETCH_BYTES, fetch_bytes) // 1024,
            "fetch.queue.backoff.ms": REFILL_PAUSE_MS,
        }
    )
    conf.update(revealed(section.confluent))
    return conf
