"""Turn the Pulsar client's failures into msgstream's typed errors, naming what and where."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

from msgstream.errors import (
    AuthenticationError,
    BackendUnavailableError,
    MsgStreamError,
    TopicNotFound,
)

from .library import pulsar, pulsar_asyncio

_AUTH_RESULTS = frozenset(
    {
        pulsar.Result.AuthenticationError,
        pulsar.Result.AuthorizationError,
        pulsar.Result.ErrorGettingAuthenticationData,
    }
)


def result_of(exc: BaseException) -> pulsar.Result | None:
    """The library's result code carried by ``exc``, if it carries one."""
    if isinstance(exc, pulsar_asyncio.PulsarException):
        return exc.error()
    if isinstance(exc, pulsar.PulsarException):
        # The synchronous API raises one subclass per result, named after it.
        found: pulsar.Result | None = getattr(pulsar.Result, type(exc).__name__, None)
        return found
    return None


def translate(exc: BaseException, what: str, where: str) -> MsgStreamError:
    """The msgstream error for ``exc``, raised while doing ``what`` against ``where``."""
    if isinstance(exc, MsgStreamError):
        return exc
    result = result_of(exc)
    if result in _AUTH_RESULTS:
        return AuthenticationError(f"pulsar at {where}: {what}: authentication failed ({exc})")
    if result == pulsar.Result.Timeout or isinstance(exc, TimeoutError):
        return BackendUnavailableError(
            f"pulsar at {where}: {what}: timed out ({exc or 'no answer'})"
        )
    if result == pulsar.Result.ConnectError:
        return BackendUnavailableError(f"pulsar at {where}: {what}: cannot connect ({exc})")
    return BackendUnavailableError(f"pulsar at {where}: {what}: {type(exc).__name__}: {exc}")


@contextlib.asynccontextmanager
async def broker_call(what: str, where: str, deadline_s: float) -> AsyncIterator[None]:
    """Run the body within ``deadline_s``; raise a msgstream error on any broker failure."""
    try:
        async with asyncio.timeout(deadline_s):
            yield
    except TimeoutError as exc:
        raise BackendUnavailableError(
            f"pulsar at {where}: {what}: no answer within {deadline_s:g} s "
            "(msgstream.operation_timeout_s, pulsar.operation_timeout_s)"
        ) from exc
    except (pulsar_asyncio.PulsarException, pulsar.PulsarException, OSError) as exc:
        raise translate(exc, what, where) from exc


def topic_missing(channel: str) -> TopicNotFound:
    return TopicNotFound(channel, "pulsar")
