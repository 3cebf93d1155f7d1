"""What the ``pulsar`` configuration section means for the client library and the admin API."""

from __future__ import annotations

import logging
import math
import ssl
from typing import Any
from urllib.parse import urlsplit

from msgstream.config import Config, PulsarConfig
from msgstream.errors import ConfigError

from .library import pulsar

_SCHEMES = ("pulsar://", "pulsar+ssl://", "http://", "https://")
_COMPRESSION = {
    "none": pulsar.CompressionType.NONE,
    "lz4": pulsar.CompressionType.LZ4,
    "zlib": pulsar.CompressionType.ZLib,
    "zstd": pulsar.CompressionType.ZSTD,
    "snappy": pulsar.CompressionType.SNAPPY,
}
_SUBSCRIPTION_TYPES = {
    "exclusive": pulsar.ConsumerType.Exclusive,
    "failover": pulsar.ConsumerType.Failover,
}
MAX_PENDING_SENDS = 1000
"""Sends a producer keeps in flight; ``send_many`` waits for a window before the next."""

library_log = logging.getLogger("msgstream.backends.pulsar.library")
"""Where the Pulsar C++ client's own log lines go. ERROR and above unless configured: the
library logs every reconnection attempt, and msgstream reports failures as typed errors."""
if library_log.level == logging.NOTSET:
    library_log.setLevel(logging.ERROR)


def service_url(section: PulsarConfig) -> str:
    """``pulsar.address`` as a service URL: a full URL as is, a bare host with ``pulsar.port``."""
    address = section.address
    if address is None:
        raise ConfigError("pulsar.address", "required when mq.type is pulsar")
    address = address.strip()
    if "://" in address:
        if not address.startswith(_SCHEMES):
            raise ConfigError(
                "pulsar.address", f"{address!r}: the scheme must be one of {', '.join(_SCHEMES)}"
            )
        return address.rstrip("/")
    return f"pulsar://{address}:{section.port}"


def admin_url(section: PulsarConfig) -> str:
    """``pulsar.admin_url``, else the service's first host on the web port Pulsar uses by
    default (8080, or 8443 over TLS)."""
    if section.admin_url is not None:
        url = section.admin_url.strip().rstrip("/")
        if not url.startswith(("http://", "https://")):
            raise ConfigError("pulsar.admin_url", f"{url!r} must start with http:// or https://")
        return url
    service = service_url(section)
    if service.startswith(("http://", "https://")):
        return service
    first_host = service.split("://", 1)[1].split(",")[0]
    host = urlsplit(f"//{first_host}").hostname or "localhost"
    if ":" in host:  # an IPv6 literal
        host = f"[{host}]"
    tls = service.startswith("pulsar+ssl://")
    return f"https://{host}:8443" if tls else f"http://{host}:8080"


def topic_name(section: PulsarConfig, channel: str) -> str:
    """The persistent topic a channel lives in."""
    return f"persistent://{section.tenant}/{section.namespace}/{channel}"


def operation_timeout_s(config: Config) -> float:
    """The deadline of one call: the tighter of the two configured timeouts."""
    return min(config.pulsar.operation_timeout_s, config.msgstream.operation_timeout_s)


def authentication(section: PulsarConfig) -> Any:
    if section.auth_token is not None:
        return pulsar.AuthenticationToken(section.auth_token)
    if section.auth_plugin is not None:
        return pulsar.Authentication(section.auth_plugin, section.auth_params or "")
    return None


def admin_token(section: PulsarConfig) -> str | None:
    """The bearer token for admin calls: ``auth_token``, or a token plugin's ``token:`` param."""
    if section.auth_token is not None:
        return section.auth_token
    params = section.auth_params or ""
    plugin = (section.auth_plugin or "").lower()
    if "token" in plugin and params.startswith("token:"):
        return params.removeprefix("token:")
    return None


def tls_context(section: PulsarConfig) -> ssl.SSLContext:
    """How to verify the broker over TLS (admin calls, the credentials check)."""
    context = ssl.create_default_context(cafile=section.tls_trust_certs_file)
    if section.tls_allow_insecure_connection:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    else:
        context.check_hostname = section.tls_validate_hostname
    return context


def client_kwargs(config: Config) -> dict[str, Any]:
    """Arguments of ``pulsar_asyncio.Client`` (the service URL aside)."""
    section = config.pulsar
    kwargs: dict[str, Any] = {
        # The library retries lookups and connections until this; msgstream's own deadline
        # bounds each call as a whole (the library takes whole seconds).
        "operation_timeout_seconds": max(1, math.ceil(operation_timeout_s(config))),
        "connection_timeout_ms": int(section.connection_timeout_s * 1000),
        "tls_allow_insecure_connection": section.tls_allow_insecure_connection,
        "tls_validate_hostname": section.tls_validate_hostname,
        "logger": library_log,
    }
    if section.tls_trust_certs_file is not None:
        kwargs["tls_trust_certs_file_path"] = section.tls_trust_certs_file
    auth = authentication(section)
    if auth is not None:
        kwargs["authentication"] = auth
    return kwargs


def producer_kwargs(config: Config) -> dict[str, Any]:
    """Arguments of ``pulsar_asyncio.Client.create_producer`` (the topic aside)."""
    section = config.pulsar
    return {
        "send_timeout_millis": int(config.msgstream.operation_timeout_s * 1000),
        "compression_type": _COMPRESSION[section.compression],
        "batching_enabled": section.batching,
        "batching_max_messages": section.batching_max_messages,
        "batching_max_publish_delay_ms": section.batching_max_delay_ms,
        "max_pending_messages": MAX_PENDING_SENDS,
        "block_if_queue_full": False,
    }


def consumer_kwargs(config: Config) -> dict[str, Any]:
    """Arguments of ``pulsar_asyncio.Client.subscribe`` (topic, name and position aside)."""
    section = config.pulsar
    return {
        "consumer_type": _SUBSCRIPTION_TYPES[section.subscription_type],
        "receiver_queue_size": section.receiver_queue_size,
        # Explicit, never the library default (which differs between Pulsar clients and
        # versions): a seek to an id delivers that id; exclusive seeks skip it ourselves.
        "start_message_id_inclusive": True,
    }
