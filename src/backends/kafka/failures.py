"""Turn aiokafka's exceptions into msgstream's typed errors, naming the channel and broker."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

from aiokafka import errors as kafka_errors

from msgstream.errors import (
    AuthenticationError,
    BackendUnavailableError,
    MsgStreamError,
    TopicNotFound,
)

AUTH_ERRORS: tuple[type[BaseException], ...] = (
    kafka_errors.SaslAuthenticationFailed,
    kafka_errors.AuthenticationFailedError,
    kafka_errors.AuthenticationMethodNotSupported,
    kafka_errors.UnsupportedSaslMechanismError,
    kafka_errors.IllegalSaslStateError,
)


def translate(exc: BaseException, what: str, brokers: str) -> MsgStreamError:
    """The msgstream error for ``exc`` raised while doing ``what``."""
    if isinstance(exc, MsgStreamError):
        return exc
    if isinstance(exc, AUTH_ERRORS) or "authentication" in str(exc).lower():
        return AuthenticationError(f"kafka at {brokers}: {what}: authentication failed: {exc}")
    if isinstance(exc, TimeoutError | kafka_errors.KafkaTimeoutError):
        return BackendUnavailableError(
            f"kafka at {brokers}: {what}: timed out ({exc or 'no answer'})"
        )
    return BackendUnavailableError(f"kafka at {brokers}: {what}: {type(exc).__name__}: {exc}")


@contextlib.asynccontextmanager
async def broker_call(what: str, brokers: str, deadline_s: float) -> AsyncIterator[None]:
    """Run the body within ``deadline_s``; raise a msgstream error on any broker failure."""
    try:
        async with asyncio.timeout(deadline_s):
            yield
    except TimeoutError as exc:
        raise BackendUnavailableError(
            f"kafka at {brokers}: {what}: no answer within {deadline_s:g} s "
            "(msgstream.operation_timeout_s)"
        ) from exc
    except kafka_errors.UnknownTopicOrPartitionError as exc:
        raise BackendUnavailableError(
            f"kafka at {brokers}: {what}: unknown topic or partition"
        ) from exc
    except (kafka_errors.KafkaError, OSError) as exc:
        raise translate(exc, what, brokers) from exc


def topic_missing(channel: str) -> TopicNotFound:
    return TopicNotFound(channel, "kafka")
