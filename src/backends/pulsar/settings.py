"""The ``pulsar`` configuration section, and what it means for the client library and the
admin API (the library is imported only when a client is made)."""

from __future__ import annotations

import math
import ssl
from typing import Annotated, Any, ClassVar, Literal, Self
from urllib.parse import urlsplit

from pydantic import Field, SecretStr, model_validator

from msgstream.configuration.config import MsgStreamConfig
from msgstream.configuration.config_keys import reveal
from msgstream.configuration.sections import Address, Count, Seconds, Section
from msgstream.errors import ConfigError

__all__ = [
    "MAX_PENDING_SENDS",
    "PulsarConfig",
    "admin_token",
    "admin_url",
    "client_kwargs",
    "consumer_kwargs",
    "operation_timeout_s",
    "producer_kwargs",
    "service_url",
    "tls_context",
    "topic_name",
]

_CREDENTIALS = "pulsar.auth_token, or pulsar.auth_plugin with pulsar.auth_params"
"""Where Pulsar credentials go: never in a URL (the client takes none from it)."""

PulsarCompression = Literal["none", "lz4", "zlib", "zstd", "snappy"]
PulsarSubscriptionType = Literal["exclusive", "failover"]


class PulsarConfig(Section):
    """The Apache Pulsar backend."""

    SECTION: ClassVar[str] = "pulsar"

    address: Annotated[str | None, Address(_CREDENTIALS)] = None
    """Service URL, e.g. pulsar://localhost:6650 (pulsar+ssl:// for TLS), or a bare host
    name joined with pulsar.port"""

    port: Count = 6650
    """Broker port, used when pulsar.address is a bare host name"""

    admin_url: Annotated[str | None, Address(_CREDENTIALS)] = None
    """Admin REST URL (http[s]://host:port), used to check, list and delete channels and
    subscriptions; null means the service host on port 8080 (8443 for TLS)"""

    tenant: str = "public"
    """Pulsar tenant"""

    namespace: str = "default"
    """Pulsar namespace"""

    auth_token: SecretStr | None = None
    """Token (JWT) for token authentication; excludes pulsar.auth_plugin"""

    auth_plugin: str | None = None
    """Authentication plugin class, passed as is (e.g.
    org.apache.pulsar.client.impl.auth.AuthenticationTls); excludes pulsar.auth_token"""

    auth_params: SecretStr | None = None
    """Parameters of pulsar.auth_plugin, in the plugin's own format"""

    tls_trust_certs_file: str | None = None
    """CA bundle (PEM) to verify the broker over TLS; null uses the system CAs"""

    tls_allow_insecure_connection: bool = False
    """Accept a broker certificate that cannot be verified"""

    tls_validate_hostname: bool = True
    """Check that the broker certificate matches its host name"""

    connection_timeout_s: Seconds = 10.0
    """Seconds to open a connection to a broker"""

    operation_timeout_s: Seconds = 30.0
    """Seconds the Pulsar client retries one operation (lookup, create, seek) before giving
    up; msgstream.operation_timeout_s bounds each call as a whole"""

    max_message_size: Count = 5242880
    """Largest message in bytes (the broker's maxMessageSize, 5 MiB by default); a bigger
    one is refused before sending"""

    batching: bool = False
    """Batch produced messages (throughput) instead of one entry each (latency)"""

    batching_max_messages: Count = 1000
    """Max messages in one batch (pulsar.batching)"""

    batching_max_delay_ms: Annotated[int, Field(ge=0)] = 10
    """Milliseconds a batch waits to fill (pulsar.batching)"""

    compression: PulsarCompression = "none"
    """Compression of produced messages"""

    subscription_type: PulsarSubscriptionType = "exclusive"
    """Subscription type; both keep order and allow cumulative acknowledgement (failover
    lets a standby consumer take over)"""

    receiver_queue_size: Count = 1000
    """Messages a consumer prefetches from the broker, counted in messages (the Pulsar
    client has no byte limit for it): up to this many times the message size a channel,
    beside msgstream's byte limits; lower it for large messages"""

    @model_validator(mode="after")
    def _check_together(self) -> Self:
        """Rules spanning several keys."""
        if self.auth_token is not None and self.auth_plugin is not None:
            raise ConfigError(
                "pulsar.auth_token, pulsar.auth_plugin",
                "both are set; use a token or an authentication plugin, not both",
            )
        if self.auth_params is not None and self.auth_plugin is None:
            raise ConfigError(
                "pulsar.auth_params, pulsar.auth_plugin",
                "pulsar.auth_params is set but pulsar.auth_plugin is not",
            )
        return self


_SCHEMES = ("pulsar://", "pulsar+ssl://", "http://", "https://")
_COMPRESSION = {"none": "NONE", "lz4": "LZ4", "zlib": "ZLib", "zstd": "ZSTD", "snappy": "SNAPPY"}
"""``pulsar.compression`` -> the name of its ``pulsar.CompressionType``."""
_SUBSCRIPTION_TYPES = {"exclusive": "Exclusive", "failover": "Failover"}
"""``pulsar.subscription_type`` -> the name of its ``pulsar.ConsumerType``."""
MAX_PENDING_SENDS = 1000
"""Sends a producer keeps in flight; ``send_many`` waits for a window before the next."""


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


def operation_timeout_s(section: PulsarConfig, shared: MsgStreamConfig) -> float:
    """The deadline of one call: the tighter of the two configured timeouts."""
    return min(section.operation_timeout_s, shared.operation_timeout_s)


def authentication(section: PulsarConfig) -> Any:
    from .library import pulsar

    if section.auth_token is not None:
        return pulsar.AuthenticationToken(reveal(section.auth_token))
    if section.auth_plugin is not None:
        return pulsar.Authentication(section.auth_plugin, reveal(section.auth_params) or "")
    return None


def admin_token(section: PulsarConfig) -> str | None:
    """The bearer token for admin calls: ``auth_token``, or a token plugin's ``token:`` param."""
    if section.auth_token is not None:
        return reveal(section.auth_token)
    params = reveal(section.auth_params) or ""
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


def client_kwargs(section: PulsarConfig, shared: MsgStreamConfig) -> dict[str, Any]:
    """Arguments of ``pulsar_asyncio.Client`` (the service URL aside)."""
    from .library_log import library_logger

    kwargs: dict[str, Any] = {
        # The library retries lookups and connections until this; msgstream's own deadline
        # bounds each call as a whole (the library takes whole seconds).
        "operation_timeout_seconds": max(1, math.ceil(operation_timeout_s(section, shared))),
        "connection_timeout_ms": int(section.connection_timeout_s * 1000),
        "tls_allow_insecure_connection": section.tls_allow_insecure_connection,
        "tls_validate_hostname": section.tls_validate_hostname,
        "logger": library_logger(),
    }
    if section.tls_trust_certs_file is not None:
        kwargs["tls_trust_certs_file_path"] = section.tls_trust_certs_file
    auth = authentication(section)
    if auth is not None:
        kwargs["authentication"] = auth
    return kwargs


def producer_kwargs(section: PulsarConfig, shared: MsgStreamConfig) -> dict[str, Any]:
    """Arguments of ``pulsar_asyncio.Client.create_producer`` (the topic aside)."""
    from .library import pulsar

    return {
        "send_timeout_millis": int(shared.operation_timeout_s * 1000),
        "compression_type": getattr(pulsar.CompressionType, _COMPRESSION[section.compression]),
        "batching_enabled": section.batching,
        "batching_max_messages": section.batching_max_messages,
        "batching_max_publish_delay_ms": section.batching_max_delay_ms,
        "max_pending_messages": MAX_PENDING_SENDS,
        "block_if_queue_full": False,
    }


def consumer_kwargs(section: PulsarConfig) -> dict[str, Any]:
    """Arguments of ``pulsar_asyncio.Client.subscribe`` (topic, name and position aside)."""
    from .library import pulsar

    return {
        "consumer_type": getattr(
            pulsar.ConsumerType, _SUBSCRIPTION_TYPES[section.subscription_type]
        ),
        "receiver_queue_size": section.receiver_queue_size,
        # Explicit, never the library default (which differs between Pulsar clients and
        # versions): a seek to an id delivers that id; exclusive seeks skip it ourselves.
        "start_message_id_inclusive": True,
    }
