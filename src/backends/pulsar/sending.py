"""Sends through the native producer under ``pulsar.asyncio``, one loop wake-up per window.

``pulsar.asyncio.Producer.send`` is one coroutine, one future and one
``call_soon_threadsafe`` per message: every acknowledgement wakes the event loop from the
client's I/O thread (a pipe write, a loop iteration, a GIL hand-over) and the id is then
copied into a new ``MessageId``. With a thousand sends in flight that wake-up traffic costs
more CPU than the broker's own work per message, and on a small machine it takes the CPU
the broker needs. Here records go to the ``_pulsar.Producer`` that ``pulsar.asyncio``
wraps (its ``_producer``; the C extension both pulsar-client APIs are built on), their
acknowledgements are counted on the client's thread, and the loop wakes once, when the
whole window is acknowledged or any send failed.

If a pulsar-client release stops exposing that producer,
:func:`~.pulsar_private.native_producer` returns None and callers use the public ``send``.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Mapping, Sequence
from functools import partial
from typing import Any

from .library import _pulsar, pulsar_asyncio

_OK = _pulsar.Result.Ok


def build_message(payload: bytes, properties: Mapping[str, str] | None) -> Any:
    builder = _pulsar.MessageBuilder()
    builder.content(payload)
    if properties:
        for key, value in properties.items():
            builder.property(key, value)
    return builder.build()


class _Window:
    """The acknowledgements of one window of sends, gathered on the client's threads."""

    __slots__ = ("_acked", "_loop", "done", "failure", "ids", "size")

    def __init__(self, loop: asyncio.AbstractEventLoop, size: int) -> None:
        self._loop = loop
        self._acked = itertools.count(1)  # next() is atomic: callbacks may run on two threads
        self.size = size
        self.ids: list[Any] = [None] * size
        self.failure: Any = None
        self.done: asyncio.Future[None] = loop.create_future()

    def acknowledge(self, index: int, result: Any, message_id: Any) -> None:
        """Called by pulsar-client, on its own thread, once per send."""
        if result == _OK:
            self.ids[index] = message_id
            if next(self._acked) == self.size:
                self._loop.call_soon_threadsafe(self._finish)
        elif self.failure is None:
            self.failure = result
            self._loop.call_soon_threadsafe(self._finish)

    def _finish(self) -> None:
        if not self.done.done():
            self.done.set_result(None)


async def send_window(
    native: Any, payloads: Sequence[bytes], properties: Mapping[str, str] | None
) -> list[Any]:
    """Send ``payloads`` in order and return their native ids once all are acknowledged.

    Raises ``pulsar.asyncio.PulsarException`` with the first failure's result as soon as a
    send fails; the others may still be written.
    """
    window = _Window(asyncio.get_running_loop(), len(payloads))
    acknowledge = window.acknowledge
    send_async = native.send_async
    for index, payload in enumerate(payloads):
        send_async(build_message(payload, properties), partial(acknowledge, index))
    await window.done
    if window.failure is not None:
        raise pulsar_asyncio.PulsarException(window.failure)
    return window.ids


async def send_one(native: Any, payload: bytes, properties: Mapping[str, str] | None) -> Any:
    """Send one record and return its native id once acknowledged (the latency path: no
    window, no id copy)."""
    loop = asyncio.get_running_loop()
    done: asyncio.Future[Any] = loop.create_future()
    native.send_async(build_message(payload, properties), partial(_settle, loop, done))
    return await done


def _settle(
    loop: asyncio.AbstractEventLoop, done: asyncio.Future[Any], result: Any, id_: Any
) -> None:
    loop.call_soon_threadsafe(_complete, done, result, id_)


def _complete(done: asyncio.Future[Any], result: Any, message_id: Any) -> None:
    if done.done():  # the sender was cancelled
        return
    if result == _OK:
        done.set_result(message_id)
    else:
        done.set_exception(pulsar_asyncio.PulsarException(result))
