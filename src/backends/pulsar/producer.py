"""Sending to one channel: one Pulsar producer per channel, batching off unless configured."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from msgstream.contract.backend import MessageID
from msgstream.contract.consumer_base import ClientState
from msgstream.contract.producer_base import ProducerBase
from msgstream.errors import BackendUnavailableError, MessageTooLargeError, StreamClosedError

from ..broker_errors import BrokerCalls
from .ids import PulsarMessageID
from .library import pulsar, pulsar_asyncio
from .pulsar_private import native_producer
from .sending import send_one, send_window
from .settings import MAX_PENDING_SENDS


class PulsarProducer(ProducerBase):
    """A channel's producer. ``send`` returns once the broker has persisted the message."""

    def __init__(
        self,
        channel: str,
        inner: pulsar_asyncio.Producer,
        *,
        limits: tuple[int, int],
        operation_timeout_s: float,
        state: ClientState,
        forget: Callable[[PulsarProducer], None],
        calls: BrokerCalls,
    ) -> None:
        super().__init__(channel, *limits)  # msgstream's, then pulsar.max_message_size
        self._operation_timeout_s = operation_timeout_s
        self._client_state = state
        self._forget = forget
        self._calls = calls
        self._inner = inner
        self._native = native_producer(inner)
        """The C extension's producer under ``inner`` (see :mod:`.sending`), if exposed."""

    def _check(self, payloads: Sequence[bytes]) -> None:
        self._check_open()
        self._client_state.check_open()
        self._check_sizes(payloads)

    async def send(self, payload: bytes, properties: Mapping[str, str] | None = None) -> MessageID:
        self._check((payload,))
        try:
            if self._native is not None:
                sent = await send_one(self._native, payload, properties)
            else:
                sent = await self._inner.send(payload, dict(properties) if properties else None)
        except Exception as exc:
            raise self._failure(exc, (payload,)) from exc
        return PulsarMessageID.from_native(sent)

    async def send_many(
        self, payloads: Sequence[bytes], properties: Mapping[str, str] | None = None
    ) -> list[MessageID]:
        """Send in order, pipelined: windows of up to ``MAX_PENDING_SENDS`` in flight."""
        self._check(payloads)
        if len(payloads) == 1:  # the common case of MsgStream.produce: no window
            return [await self.send(payloads[0], properties)]
        ids: list[MessageID] = []
        for start in range(0, len(payloads), MAX_PENDING_SENDS):
            window = payloads[start : start + MAX_PENDING_SENDS]
            try:
                sent = await self._send_window(window, properties)
            except Exception as exc:
                raise self._failure(exc, window) from exc
            ids.extend(map(PulsarMessageID.from_native, sent))
        return ids

    async def _send_window(
        self, window: Sequence[bytes], properties: Mapping[str, str] | None
    ) -> list[Any]:
        if self._native is not None:
            return await send_window(self._native, window, properties)
        props = dict(properties) if properties else None
        send = self._inner.send
        # gather starts the sends in order, so the library queues them in order.
        return await asyncio.gather(*(send(p, props) for p in window))

    def _failure(self, exc: Exception, payloads: Sequence[bytes]) -> Exception:
        where = self._calls.where
        result = getattr(exc, "error", lambda: None)()
        if result == pulsar.Result.MessageTooBig:
            error = MessageTooLargeError(self.channel, max(map(len, payloads)), self._limit())
            error.add_note(
                "the broker refused it: its maxMessageSize is below pulsar.max_message_size"
            )
            return error
        if result == pulsar.Result.AlreadyClosed and self._client_state.closed:
            return StreamClosedError(f"producer of channel {self.channel!r}")
        if result == pulsar.Result.Timeout:
            return BackendUnavailableError(
                f"pulsar at {where}: sending {len(payloads)} message(s) to channel "
                f"{self.channel!r}: not acknowledged within "
                f"{self._operation_timeout_s:g} s "
                "(msgstream.operation_timeout_s); they may still be written"
            )
        return self._calls.translate(
            exc, f"sending to channel {self.channel!r}", self.channel, "write"
        )

    def _limit(self) -> int:
        return min(self._limits)

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._forget(self)
        # Closing must not fail: the broker may be gone.
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self._inner.close(), self._calls.deadline_s)
