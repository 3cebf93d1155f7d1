"""Sending to one channel through the client's shared aiokafka producer."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from aiokafka import AIOKafkaProducer
from aiokafka import errors as kafka_errors

from msgstream.backend import MessageID
from msgstream.errors import MessageTooLargeError
from msgstream.producer_base import ProducerBase

from ..broker_errors import BrokerCalls
from . import connect
from .deadlines import PendingSend, SendDeadlines
from .ids import KafkaMessageID

RECORD_OVERHEAD = 96
"""Bytes a one-record batch adds to its payload (batch header, record framing), rounded up:
what a payload may not use of the broker's ``max.message.bytes``."""


async def _send_in_batches(
    producer: Any,
    topic: str,
    payloads: Sequence[bytes],
    headers: list[tuple[str, bytes]],
    watch: PendingSend,
) -> list[MessageID]:
    """Send ``payloads`` as record batches we build ourselves, then wait for them all.

    Appending to a batch costs far less than a ``producer.send`` per record (no future,
    partition lookup or accumulator call per record). A batch's future gives its base
    offset; its records follow it in order.
    """
    pending: list[tuple[Any, int]] = []
    batch = producer.create_batch()
    count = 0
    for payload in payloads:
        if batch.append(timestamp=None, key=None, value=payload, headers=headers) is None:
            batch.close()
            pending.append((await producer.send_batch(batch, topic, partition=0), count))
            batch = producer.create_batch()
            count = 0
            batch.append(timestamp=None, key=None, value=payload, headers=headers)
        count += 1
    batch.close()
    pending.append((await producer.send_batch(batch, topic, partition=0), count))
    ids: list[MessageID] = []
    for future, records in pending:
        watch.future = future  # the deadline now fails the batch being waited for
        base = (await future).offset
        ids.extend(KafkaMessageID(base + i) for i in range(records))
    return ids


class SharedProducer:
    """The one aiokafka producer every channel of a client sends through, started on first
    use. The client owns it and hands it to its channels' producers."""

    __slots__ = ("_check_open", "_deadline_s", "_kwargs", "_lock", "producer")

    def __init__(
        self,
        kwargs: Callable[[], dict[str, Any]],
        deadline_s: float,
        lock: asyncio.Lock,
        check_open: Callable[[], None],
    ) -> None:
        self.producer: AIOKafkaProducer | None = None
        """The producer once started (the sends' fast path), else None."""
        self._kwargs = kwargs
        self._deadline_s = deadline_s
        self._lock = lock
        self._check_open = check_open

    async def get(self) -> AIOKafkaProducer:
        """The shared producer, started now if it is not yet."""
        producer = self.producer
        if producer is not None:
            return producer
        async with self._lock:
            self._check_open()
            if self.producer is None:
                kwargs = self._kwargs()
                producer = connect.construct(AIOKafkaProducer, kwargs, "producer")
                await connect.start_or_release(
                    producer, "connecting the producer", kwargs, self._deadline_s, producer.stop
                )
                self.producer = producer
            return self.producer

    def take(self) -> AIOKafkaProducer | None:
        """The started producer, if any, which is no longer shared (the client closes)."""
        producer, self.producer = self.producer, None
        return producer


class KafkaProducer(ProducerBase):
    """A channel's producer. Sends go through the one producer its client shares."""

    def __init__(
        self,
        channel: str,
        limit: int,
        *,
        max_message_bytes: int,
        shared: SharedProducer,
        deadlines: SendDeadlines,
        calls: BrokerCalls,
    ) -> None:
        super().__init__(channel)
        self._shared = shared
        self._deadlines = deadlines
        self._calls = calls
        self._max_message_bytes = max_message_bytes
        self._limit = limit
        """The largest record, in bytes, this channel accepts (client and topic limits)."""
        self._plain_limit = min(limit - RECORD_OVERHEAD, max_message_bytes)
        """The largest payload that passes :meth:`_check_size` when sent without headers."""

    def _check_size(self, payload: bytes, headers: list[tuple[str, bytes]] | None) -> None:
        size = len(payload)
        limit = min(self._limit, self._max_message_bytes)
        if size > limit:
            raise MessageTooLargeError(self.channel, size, limit)
        framed = size + RECORD_OVERHEAD + sum(len(k) + len(v) + 8 for k, v in headers or ())
        if framed > self._limit:
            raise MessageTooLargeError(self.channel, framed, self._limit)

    def _checked_headers(
        self, payloads: Sequence[bytes], properties: Mapping[str, str] | None
    ) -> list[tuple[str, bytes]] | None:
        """The properties as Kafka headers, after refusing a closed producer or a payload
        too large for this channel."""
        self._check_open()
        headers = [(k, v.encode()) for k, v in properties.items()] if properties else None
        for payload in payloads:
            self._check_size(payload, headers)
        return headers

    async def send(self, payload: bytes, properties: Mapping[str, str] | None = None) -> MessageID:
        # The latency path: one record through aiokafka's own batching, nothing more.
        headers = None
        if self._closed or properties or len(payload) > self._plain_limit:
            headers = self._checked_headers((payload,), properties)
        shared = self._shared
        producer = shared.producer or await shared.get()
        deadlines = self._deadlines
        watch = deadlines.start(self.channel, 1)
        try:
            watch.future = await producer.send(self.channel, payload, partition=0, headers=headers)
            return KafkaMessageID((await watch.future).offset)
        except asyncio.CancelledError:
            deadlines.raise_if_expired(watch)
            raise
        except (kafka_errors.KafkaError, OSError) as exc:
            raise self._failure(exc, (payload,)) from exc
        finally:
            watch.finished = True

    async def send_many(
        self, payloads: Sequence[bytes], properties: Mapping[str, str] | None = None
    ) -> list[MessageID]:
        headers = self._checked_headers(payloads, properties)
        shared = self._shared
        producer = shared.producer or await shared.get()
        deadlines = self._deadlines
        watch = deadlines.start(self.channel, len(payloads))
        try:
            return await _send_in_batches(producer, self.channel, payloads, headers or [], watch)
        except asyncio.CancelledError:
            deadlines.raise_if_expired(watch)
            raise
        except (kafka_errors.KafkaError, OSError) as exc:
            raise self._failure(exc, payloads) from exc
        finally:
            watch.finished = True

    def _failure(self, exc: BaseException, payloads: Sequence[bytes]) -> Exception:
        """The msgstream error for aiokafka's ``exc`` while sending ``payloads``."""
        if isinstance(exc, kafka_errors.MessageSizeTooLargeError):
            return MessageTooLargeError(self.channel, max(map(len, payloads)), self._limit)
        what = f"sending to channel {self.channel!r}"
        return self._calls.translate(exc, what, self.channel, "write")
