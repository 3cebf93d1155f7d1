"""What every backend's consumer shares: its closed and position checks, the channel
check of an acknowledgement, and the channel queries it forwards to its client.

A consumer is handed what it needs from its client as small callables when the client
makes it (see :class:`ClientHooks`), never the client itself: no part reaches back into
its parent, and the backends' modules import no client.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any, Protocol

from ..errors import InvalidPositionError, StreamClosedError, StreamStateError
from ..runtime.cooperate import yielded
from .backend import ConsumedMessage, MessageID


class Closable(Protocol):
    async def close(self) -> None: ...


class ClientState:
    """Whether a client is open, shared by the client and the parts it makes.

    Parts read ``closed`` on every call: an attribute read costs less than calling back
    into the client (a stored bound method is a slow call in CPython 3.11)."""

    __slots__ = ("closed", "what")

    def __init__(self, what: str) -> None:
        self.closed = False
        self.what = what
        """What a ``StreamClosedError`` names, such as ``"kafka client"``."""

    def check_open(self) -> None:
        if self.closed:
            raise StreamClosedError(self.what)

    async def close_after(self, *part_sets: Iterable[Closable]) -> bool:
        """Close the client's parts, set by set, then mark the client closed; False (doing
        nothing) if it already was. Each set is copied first: a closing part leaves it."""
        if self.closed:
            return False
        for parts in part_sets:
            for part in list(parts):
                await part.close()
        self.closed = True
        return True


@dataclass(frozen=True, slots=True)
class ClientHooks:
    """What a consumer needs of the client that made it."""

    state: ClientState
    """The client's open/closed state."""
    latest_id: Callable[[str], Awaitable[MessageID | None]]
    """The client's ``get_latest_msg_id``."""
    check_topic: Callable[[str], Awaitable[None]]
    """The client's ``check_topic_valid``."""
    forget: Callable[[Any], None]
    """Called with the consumer when it closes: the client stops tracking it."""


class ConsumerBase:
    """The checks and delegations common to every backend's consumer."""

    def __init__(self, channel: str, subname: str, hooks: ClientHooks) -> None:
        self.channel = channel
        self.subname = subname
        self._hooks = hooks
        self._client_state = hooks.state  # read on every receive: one attribute, not two
        self._positioned = True
        self._closed = False
        self._error: BaseException | None = None
        """A failure of reading ahead, raised by the next receive (:meth:`_raise_error`)."""
        self._arrival: asyncio.Future[None] | None = None
        """What a receive waiting for a message awaits (None while none waits)."""

    def _raise_error(self) -> None:
        """Raise the failure reading ahead left for the next receive, once."""
        error, self._error = self._error, None
        if error is not None:
            raise error

    async def _await_arrival(self) -> None:
        """Wait until :meth:`_wake` is called: a message or a failure arrived, a seek
        moved the consumer or it closed."""
        arrival = self._arrival = asyncio.get_running_loop().create_future()
        try:
            await arrival
        finally:
            self._arrival = None
        yielded()  # the loop was given back: the next cooperate() counts from here

    def _wake(self) -> None:
        """Wake the receive waiting in :meth:`_await_arrival`, if one is."""
        arrival = self._arrival
        if arrival is not None and not arrival.done():
            arrival.set_result(None)

    def _begin_close(self) -> bool:
        """Mark the consumer closed and tell its client to stop tracking it; False (doing
        nothing) if it already was closed."""
        if self._closed:
            return False
        self._closed = True
        self._hooks.forget(self)
        return True

    def _what(self) -> str:
        return f"consumer {self.subname!r} of channel {self.channel!r}"

    def _check_open(self) -> None:
        """Runs on every receive: two attribute reads while all is well."""
        if self._closed or self._client_state.closed:
            raise StreamClosedError(self._what() if self._closed else self._client_state.what)

    def _unpositioned(self) -> StreamStateError:
        return StreamStateError(
            f"subscription {self.subname!r} on channel {self.channel!r} was opened at "
            "position UNKNOWN and has not been seeked"
        )

    def _check_positioned(self) -> None:
        if not self._positioned:
            raise self._unpositioned()

    def _check_ack_channel(self, msg: ConsumedMessage) -> None:
        """Refuse to acknowledge a message read from another channel."""
        if msg.channel != self.channel:
            raise InvalidPositionError(
                f"message of channel {msg.channel!r} acked on a consumer of {self.channel!r}"
            )

    async def get_latest_msg_id(self) -> MessageID | None:
        self._check_open()
        return await self._hooks.latest_id(self.channel)

    async def check_topic_valid(self) -> None:
        self._check_open()
        await self._hooks.check_topic(self.channel)
