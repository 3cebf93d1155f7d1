"""Starting aiokafka clients, with a clear answer when the broker and client distrust each other.

aiokafka reports a SASL authentication failure or a failed TLS handshake during bootstrap
only in its log and raises a generic "Unable to bootstrap" error. When a start fails on a
SASL or TLS listener we open one connection ourselves, which surfaces the actual cause, and
raise :class:`AuthenticationError` if the broker refused our credentials or its
certificate is not one we trust, or :class:`BackendUnavailableError` naming any other TLS
handshake failure (such as a TLS client on a plaintext port).
"""

from __future__ import annotations

import contextlib
import ssl
from collections.abc import Awaitable, Callable
from typing import Any

from aiokafka import errors as kafka_errors
from aiokafka.conn import create_conn

from msgstream.errors import (
    AuthenticationError,
    BackendUnavailableError,
    ConfigError,
    MsgStreamError,
)

from .failures import AUTH_ERRORS, broker_call

_CONN_KEYS = (
    "client_id",
    "request_timeout_ms",
    "ssl_context",
    "security_protocol",
    "sasl_mechanism",
    "sasl_plain_username",
    "sasl_plain_password",
)


def construct(cls: Any, kwargs: dict[str, Any], section_key: str) -> Any:
    """``cls(**kwargs)``; a bad pass-through argument becomes an error naming its key."""
    try:
        return cls(**kwargs)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"kafka.{section_key}", f"rejected by aiokafka: {exc}") from exc


async def start(component: Any, what: str, kwargs: dict[str, Any], deadline_s: float) -> None:
    """``await component.start()`` within ``deadline_s``, raising msgstream errors."""
    brokers = ",".join(kwargs["bootstrap_servers"])
    try:
        async with broker_call(what, brokers, deadline_s):
            await component.start()
    except BackendUnavailableError as exc:
        protocol = str(kwargs.get("security_protocol", ""))
        if protocol.startswith("SASL_") or protocol == "SSL":
            cause = await _refusal(kwargs, deadline_s, f"kafka at {brokers}: {what}")
            if cause is not None:
                raise cause from exc
        raise


async def start_or_release(
    component: Any,
    what: str,
    kwargs: dict[str, Any],
    deadline_s: float,
    release: Callable[[], Awaitable[object]],
) -> None:
    """:func:`start`; on any failure (cancellation too) ``await release()`` frees the
    half-started component before the error propagates."""
    try:
        await start(component, what, kwargs, deadline_s)
    except BaseException:
        await release()
        raise


async def _refusal(kwargs: dict[str, Any], deadline_s: float, where: str) -> MsgStreamError | None:
    """Why one connection to the first bootstrap server fails its TLS handshake or SASL
    authentication; None when it connects, or fails for another reason."""
    host, _, port = kwargs["bootstrap_servers"][0].rpartition(":")
    options = {key: kwargs[key] for key in _CONN_KEYS if key in kwargs}
    try:
        async with broker_call("probing the connection", host, deadline_s):
            conn = await create_conn(host.strip("[]"), int(port), **options)
    except BackendUnavailableError as exc:
        return _explain(exc.__cause__, kwargs, where)
    except (kafka_errors.KafkaError, OSError, ValueError) as exc:
        return _explain(exc, kwargs, where)
    with contextlib.suppress(Exception):
        conn.close()
    return None


def _explain(
    cause: BaseException | None, kwargs: dict[str, Any], where: str
) -> MsgStreamError | None:
    if isinstance(cause, AUTH_ERRORS):
        return AuthenticationError(
            f"{where}: authentication failed for user {kwargs.get('sasl_plain_username')!r} "
            f"(mechanism {kwargs.get('sasl_mechanism')}): {cause}"
        )
    if isinstance(cause, ssl.SSLCertVerificationError):
        return AuthenticationError(
            f"{where}: the broker's TLS certificate failed verification: "
            f"{cause.verify_message} (kafka.ssl_cafile must name the CA that signed it; "
            "kafka.ssl_check_hostname checks the name it is issued for)"
        )
    tls = "ssl_context" in kwargs
    if isinstance(cause, ssl.SSLError) or (tls and isinstance(cause, ConnectionResetError)):
        # A plaintext listener reads the TLS greeting as a request far too large and hangs
        # up: the handshake ends in a reset, with no reason given.
        return BackendUnavailableError(
            f"{where}: TLS handshake failed ({type(cause).__name__}: {cause}); is this a "
            f"{kwargs.get('security_protocol')} listener?"
        )
    return None
