"""aiokafka keyword arguments derived from the ``kafka`` configuration section."""

from __future__ import annotations

from typing import Any

from msgstream.config import Config, KafkaConfig
from msgstream.errors import ConfigError


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
        kwargs["sasl_plain_password"] = section.sasl_password
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
            password=section.ssl_key_password,
        )
    except (OSError, ValueError) as exc:  # ssl.SSLError is an OSError
        raise ConfigError(
            "kafka.ssl_cafile, kafka.ssl_certfile, kafka.ssl_keyfile",
            f"cannot load the TLS files: {exc}",
        ) from exc
    context.check_hostname = section.ssl_check_hostname
    return context


def producer_kwargs(config: Config) -> dict[str, Any]:
    section = config.kafka
    kwargs = connection_kwargs(section)
    kwargs.update(
        acks="all" if section.acks == "all" else int(section.acks),
        linger_ms=section.linger_ms,
        compression_type=None if section.compression == "none" else section.compression,
        max_request_size=section.max_request_size,
    )
    kwargs.update(section.producer)
    return kwargs


def consumer_kwargs(config: Config, group_id: str | None) -> dict[str, Any]:
    section = config.kafka
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
    kwargs.update(section.consumer)
    return kwargs


def admin_kwargs(config: Config) -> dict[str, Any]:
    return connection_kwargs(config.kafka)
