"""The mechanism shared by the networked backends (Kafka, Pulsar) for turning a broker
library's failures into msgstream's typed errors.

Each backend keeps its own *table* (which library exception means what: a refused ACL,
failed authentication, an unreachable broker); this module holds what does not depend on
the library: the deadline around a broker call, translating on any failure, the message
shape ``"<backend> at <address>: <what>: ..."`` and the :class:`AuthorizationError` that
names the channel and the operation refused.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

from msgstream.errors import AuthorizationError, BackendUnavailableError, MsgStreamError


@dataclass(frozen=True, slots=True)
class Failure:
    """What a backend's table is told about one failure besides the exception itself."""

    backend: str
    where: str
    what: str
    channel: str | None
    operation: str | None
    during_call: bool
    """True inside :meth:`BrokerErrors.call` (the deadline-bounded form)."""

    @property
    def prefix(self) -> str:
        """``"<backend> at <address>: <what>"``: how every message of a failure starts."""
        return f"{self.backend} at {self.where}: {self.what}"

    def unavailable(self, detail: str) -> BackendUnavailableError:
        return BackendUnavailableError(f"{self.prefix}: {detail}")

    def refused(self, detail: str, *, default_channel: str) -> AuthorizationError:
        """The broker refused ``operation`` on ``channel`` (``default_channel`` when the
        call concerned no single channel)."""
        return AuthorizationError(
            self.channel or default_channel, self.operation or "use", f"{self.prefix}: {detail}"
        )


Table = Callable[[BaseException, Failure], MsgStreamError | None]
"""A backend's table: the error for a library exception, or None for "nothing special"
(it then becomes a :class:`BackendUnavailableError` naming the exception)."""


@dataclass(frozen=True, slots=True)
class BrokerErrors:
    """One backend's error mapping: its name, its library's exception types, its table."""

    backend: str
    library_errors: tuple[type[BaseException], ...]
    """What :meth:`call` translates (anything else passes through unchanged)."""
    table: Table
    timeout_keys: str
    """The settings a "no answer within N s" message names."""

    def translate(
        self,
        exc: BaseException,
        what: str,
        where: str,
        channel: str | None = None,
        operation: str | None = None,
        *,
        during_call: bool = False,
    ) -> MsgStreamError:
        """The msgstream error for ``exc``, raised while doing ``what`` against ``where``."""
        if isinstance(exc, MsgStreamError):
            return exc
        failure = Failure(self.backend, where, what, channel, operation, during_call)
        found = self.table(exc, failure)
        if found is not None:
            return found
        return failure.unavailable(f"{type(exc).__name__}: {exc}")

    @contextlib.asynccontextmanager
    async def call(
        self,
        what: str,
        where: str,
        deadline_s: float,
        channel: str | None = None,
        operation: str | None = None,
    ) -> AsyncIterator[None]:
        """Run the body within ``deadline_s``; raise a msgstream error on any failure of
        the broker library."""
        try:
            async with asyncio.timeout(deadline_s):
                yield
        except TimeoutError as exc:
            raise BackendUnavailableError(
                f"{self.backend} at {where}: {what}: no answer within {deadline_s:g} s "
                f"({self.timeout_keys})"
            ) from exc
        except self.library_errors as exc:
            raise self.translate(exc, what, where, channel, operation, during_call=True) from exc


class BrokerCalls:
    """A backend's error mapping bound to one connection's address and deadline: what a
    client hands its producers and consumers so they never need the client itself."""

    __slots__ = ("deadline_s", "errors", "where")

    def __init__(self, errors: BrokerErrors, where: str, deadline_s: float) -> None:
        self.errors = errors
        self.where = where
        self.deadline_s = deadline_s

    def call(self, what: str, channel: str | None = None, operation: str | None = None) -> Any:
        """An async context manager: see :meth:`BrokerErrors.call`."""
        return self.errors.call(what, self.where, self.deadline_s, channel, operation)

    def translate(
        self,
        exc: BaseException,
        what: str,
        channel: str | None = None,
        operation: str | None = None,
    ) -> MsgStreamError:
        return self.errors.translate(exc, what, self.where, channel, operation)
