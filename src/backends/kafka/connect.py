"""Starting aiokafka clients, with a clear answer when the broker refuses our credentials.

aiokafka reports a SASL authentication failure during bootstrap only in its log and
raises a generic "Unable to bootstrap" error. When a start fails on a SASL listener we
open one connection ourselves, which surfaces the broker's actual answer, and raise
:class:`AuthenticationError` if that answer is "wrong credentials".
"""

from __future__ import annotations

import contextlib
from typing import Any

from aiokafka import errors as kafka_errors
from aiokafka.conn import create_conn

from msgstream.errors import AuthenticationError, BackendUnavailableError

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


async def start(component: Any, what: str, kwargs: dict[str, Any], deadline_s: float) -> None:
    """``await component.start()`` within ``deadline_s``, raising msgstream errors."""
    brokers = ",".join(kwargs["bootstrap_servers"])
    try:
        async with broker_call(what, brokers, deadline_s):
            await component.start()
    except BackendUnavailableError as exc:
        if str(kwargs.get("security_protocol", "")).startswith("SASL_"):
            refused = await _authentication_refused(kwargs, deadline_s)
            if refused is not None:
                raise AuthenticationError(
                    f"kafka at {brokers}: {what}: authentication failed for user "
                    f"{kwargs.get('sasl_plain_username')!r} "
                    f"(mechanism {kwargs.get('sasl_mechanism')}): {refused}"
                ) from exc
        raise


async def _authentication_refused(kwargs: dict[str, Any], deadline_s: float) -> str | None:
    """The broker's refusal when one connection to the first bootstrap server fails SASL."""
    host, _, port = kwargs["bootstrap_servers"][0].rpartition(":")
    options = {key: kwargs[key] for key in _CONN_KEYS if key in kwargs}
    try:
        async with broker_call("probing authentication", host, deadline_s):
            conn = await create_conn(host.strip("[]"), int(port), **options)
    except BackendUnavailableError as exc:
        cause = exc.__cause__
        return str(cause) if isinstance(cause, AUTH_ERRORS) else None
    except AUTH_ERRORS as exc:
        return str(exc)
    except (kafka_errors.KafkaError, OSError, ValueError):
        return None
    with contextlib.suppress(Exception):
        conn.close()
    return None
