"""Reading one channel for one subscription (a durable Pulsar subscription of that name).

Receiving bypasses ``pulsar_asyncio.Consumer.receive`` for two reasons: it costs an event
loop round trip per message even when the library already holds the next ones, and a
``receive()`` that is cancelled (a timeout, a stream stopping its reader) loses the message
the library hands to it later, because its callback finds the future cancelled and drops
the message. Here one ``receive_async`` callback is outstanding at most, owned by the
consumer and never cancelled, and messages the library already holds are taken
synchronously (its callback then runs inside the call).

Every message is checked against the last one delivered: after the library reconnects
(a broker restart), the broker redelivers from the last acknowledgement, and those
repeats are dropped, so a consumer never goes back unless it seeks. A seek sets the
same floor: inclusive at its target, or just past it when exclusive.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import threading
from collections import deque
from collections.abc import Awaitable, Callable
from types import MappingProxyType
from typing import Any

from msgstream.contract.backend import NO_PROPERTIES, ConsumedMessage, MessageID
from msgstream.contract.consumer_base import ClientHooks
from msgstream.errors import InvalidPositionError
from msgstream.runtime.cooperate import cooperate

from ..broker_client import BrokerConsumer
from ..broker_errors import BrokerCalls
from .ids import EARLIEST, PulsarMessageID
from .library import _pulsar, pulsar, pulsar_asyncio
from .pulsar_private import native_consumer

PREFETCH = 256
"""Messages taken from the library per refill (it prefetches pulsar.receiver_queue_size)."""
_OK = _pulsar.Result.Ok


OpenSubscription = Callable[[str, str, Any], Awaitable[pulsar_asyncio.Consumer]]
"""The client's ``open_subscription``: a library consumer on (channel, subname, position)."""


class PulsarConsumer(BrokerConsumer):
    def __init__(
        self,
        channel: str,
        subname: str,
        inner: pulsar_asyncio.Consumer,
        *,
        positioned: bool,
        hooks: ClientHooks,
        open_subscription: OpenSubscription,
        calls: BrokerCalls,
    ) -> None:
        super().__init__(channel, subname, hooks, calls)
        self._open_subscription = open_subscription
        self._inner = inner
        self._native = native_consumer(inner)
        self._loop = asyncio.get_running_loop()
        self._loop_thread = threading.get_ident()
        self._buffer: deque[ConsumedMessage] = deque()
        self._positioned = positioned
        self._waiting = False
        """A ``receive_async`` callback is registered with the library and has not run."""
        self._incarnation = 0
        """Bumped whenever the library consumer is replaced: callbacks of an older one are
        ignored."""
        self._floor: tuple[int, int, int] = (-2, -2, -2)
        self._floor_inclusive = True
        """Messages below the floor (or at it, when not inclusive) are not delivered."""

    # ---------------------------------------------------------------------- receiving

    def _request(self) -> None:
        """Register one receive callback; it runs at once if a message is already there."""
        self._waiting = True
        callback = functools.partial(self._on_result, self._incarnation)
        self._native.receive_async(callback)

    def _on_result(self, incarnation: int, result: Any, message: Any) -> None:
        """Called by the library: inline from ``_request``, or on one of its threads."""
        if threading.get_ident() == self._loop_thread:
            self._deliver(incarnation, result, message, False)
            return
        with contextlib.suppress(RuntimeError):  # the loop is closed: nobody is listening
            self._loop.call_soon_threadsafe(self._deliver, incarnation, result, message, True)

    def _deliver(self, incarnation: int, result: Any, message: Any, woke_up: bool) -> None:
        """Take a message from the library. ``woke_up``: it had to be waited for, so the
        rest of its burst is probably there too; take it now (not inline: no recursion)."""
        if incarnation != self._incarnation or self._closed:
            return
        self._waiting = False
        if result == _OK:
            self._accept(message)
            if woke_up:
                self._refill(PREFETCH)
        else:
            what = f"reading channel {self.channel!r} (subscription {self.subname!r})"
            self._error = self._calls.translate(
                pulsar_asyncio.PulsarException(result), what, self.channel, "read"
            )
        self._wake()

    def _accept(self, message: Any) -> None:
        native = message.message_id()
        key = (native.ledger_id(), native.entry_id(), native.batch_index())
        if key < self._floor or (key == self._floor and not self._floor_inclusive):
            return  # redelivered after a reconnect, or before a seek's target
        self._floor, self._floor_inclusive = key, False
        properties = message.properties()
        msg_id = PulsarMessageID(key[0], key[1], key[2], native)
        self._buffer.append(
            ConsumedMessage(
                self.channel,
                msg_id,
                message.data(),
                MappingProxyType(properties) if properties else NO_PROPERTIES,
            )
        )

    def _refill(self, limit: int) -> None:
        """Take up to ``limit`` messages the library already holds, without waiting."""
        buffer = self._buffer
        while not self._waiting and len(buffer) < limit and self._error is None:
            self._request()

    async def receive(self) -> ConsumedMessage:
        while True:
            await cooperate()  # a buffered message is served inline: yield now and then
            self._check_open()
            self._check_positioned()
            if self._buffer:
                return self._buffer.popleft()
            self._raise_error()
            self._refill(PREFETCH)
            if self._buffer or self._error is not None:
                continue
            await self._await_arrival()

    def receive_nowait(self, max_messages: int) -> list[ConsumedMessage]:
        self._check_open()
        self._check_positioned()
        if len(self._buffer) < max_messages:
            self._refill(max(PREFETCH, max_messages))
        if not self._buffer:
            self._raise_error()
        buffer = self._buffer
        return [buffer.popleft() for _ in range(min(max_messages, len(buffer)))]

    # -------------------------------------------------------------------------- seeking

    async def seek(self, msg_id: MessageID, inclusive: bool) -> None:
        self._check_open()
        target = PulsarMessageID.of(msg_id)
        if self._waiting:
            # A registered receive cannot be withdrawn, and the library may hand it a message
            # read before the seek: start over with a fresh library consumer.
            await self._reopen()
        self._buffer.clear()
        self._error = None
        at_start = target.sort_key <= EARLIEST.sort_key
        if not at_start:
            await self._refuse_past_end(target, inclusive)
        async with self._call(f"seeking to {target}"):
            # Seeking to the earliest id is a real seek (never skipped, whatever the
            # subscription's position): the broker moves to the first message it still has.
            await self._inner.seek(
                pulsar.MessageId(-1, *(EARLIEST if at_start else target).sort_key)
            )
        self._floor = target.sort_key
        self._floor_inclusive = inclusive or at_start
        self._positioned = True

    async def _refuse_past_end(self, target: PulsarMessageID, inclusive: bool) -> None:
        """A position past the last message would silently skip the next messages sent.
        (Pulsar cannot name the id the next message will get, so an inclusive seek must
        name a stored message too.)"""
        last = await self.get_latest_msg_id()
        if last is None or target.sort_key > PulsarMessageID.of(last).sort_key:
            where = "it is empty" if last is None else f"its last message is {last}"
            raise InvalidPositionError(
                f"cannot seek channel {self.channel!r} to {target} "
                f"({'inclusive' if inclusive else 'exclusive'}): past the channel's end "
                f"({where})"
            )

    async def seek_to_earliest(self) -> None:
        await self.seek(EARLIEST, inclusive=True)

    async def _reopen(self) -> None:
        self._incarnation += 1
        self._waiting = False
        old = self._inner
        with contextlib.suppress(Exception):
            await asyncio.wait_for(old.close(), self._calls.deadline_s)
        self._inner = await self._open_subscription(
            self.channel, self.subname, pulsar.InitialPosition.Latest
        )
        self._native = native_consumer(self._inner)

    # ---------------------------------------------------------------------- acknowledging

    async def ack(self, msg: ConsumedMessage) -> None:
        """Acknowledge ``msg`` and everything before it. The broker's acknowledged position
        never moves back on an ack (a seek moves it, both ways)."""
        self._check_open()
        self._check_ack_channel(msg)
        target = PulsarMessageID.of(msg.msg_id)
        ledger, entry, batch = target.sort_key
        if batch >= 0:
            # Inside a batch: acknowledging the entry would acknowledge the batch's later
            # messages too. Acknowledge up to the previous entry; the batch may be read again.
            if entry <= 0:
                return
            entry -= 1
        async with self._call("acknowledging"):
            await self._inner.acknowledge_cumulative(pulsar.MessageId(-1, ledger, entry, -1))

    # --------------------------------------------------------------------------- queries

    async def get_latest_msg_id(self) -> MessageID | None:
        """Asked through this consumer's own library consumer (not the admin API)."""
        self._check_open()
        async with self._call("reading the last message id"):
            native = await self._inner.get_last_message_id()
        if native.ledger_id() < 0 or native.entry_id() < 0:
            return None
        return PulsarMessageID.from_native(native)

    # -------------------------------------------------------------------------- disposal

    async def unsubscribe(self) -> None:
        """Delete this subscription on the broker (its acknowledgements go), then close."""
        self._check_open()
        async with self._call("unsubscribing"):
            await self._inner.unsubscribe()
        await self.close()

    async def close(self) -> None:
        if not self._begin_close():
            return
        self._incarnation += 1
        self._buffer.clear()
        self._wake()  # the receive loop sees the consumer closed
        # Closing must not fail: the broker may be gone. Closing flushes pending acks.
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self._inner.close(), self._calls.deadline_s)
