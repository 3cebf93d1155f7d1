"""The aiokafka engine (``kafka.client: aiokafka``, the default): everything on the loop."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka import errors as kafka_errors

from msgstream.errors import StreamClosedError

from ...broker_errors import BrokerCalls
from .. import connect
from ..deadlines import PendingSend
from ..settings import KafkaConfig, consumer_kwargs, producer_kwargs
from . import COORDINATOR_MOVING, Engine, Fetched, Headers, ProducerBase

_T = TypeVar("_T")

_POLL_MS = 1000


async def _send_in_batches(
    producer: Any,
    topic: str,
    payloads: Sequence[bytes],
    headers: list[tuple[str, bytes]],
    watch: PendingSend,
) -> list[int]:
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
    offsets: list[int] = []
    for future, records in pending:
        watch.future = future  # the deadline now fails the batch being waited for
        base = (await future).offset
        offsets.extend(range(base, base + records))
    return offsets


class SharedProducer(ProducerBase):
    """The one aiokafka producer every channel of a client sends through, started on first
    use. The client owns it and hands it to its channels' producers."""

    producer: AIOKafkaProducer | None = None
    """The producer once started (the sends' fast path), else None."""

    async def get(self) -> AIOKafkaProducer:
        """The shared producer, started now if it is not yet."""
        producer = self.producer
        if producer is not None:
            return producer
        async with self._lock:
            self._check_open()
            if self.producer is None:
                kwargs = producer_kwargs(self._section)
                producer = connect.construct(AIOKafkaProducer, kwargs, "producer")
                await connect.start_or_release(
                    producer, "connecting the producer", kwargs, self._deadline_s, producer.stop
                )
                self.producer = producer
            return self.producer

    async def send(self, topic: str, payload: bytes, headers: Headers, watch: PendingSend) -> int:
        # The latency path: one record through aiokafka's own batching, nothing more.
        producer = self.producer or await self.get()
        watch.future = await producer.send(topic, payload, partition=0, headers=headers)
        offset: int = (await watch.future).offset
        return offset

    async def send_many(
        self, topic: str, payloads: Sequence[bytes], headers: Headers, watch: PendingSend
    ) -> list[int]:
        producer = self.producer or await self.get()
        return await _send_in_batches(producer, topic, payloads, headers or [], watch)

    def too_large(self, exc: BaseException) -> bool:
        return isinstance(exc, kafka_errors.MessageSizeTooLargeError)

    async def close(self) -> None:
        producer, self.producer = self.producer, None
        if producer is not None:
            await asyncio.wait_for(producer.stop(), self._deadline_s)


class AiokafkaReader:
    """An :class:`AIOKafkaConsumer` with the partition assigned explicitly."""

    def __init__(
        self, section: KafkaConfig, channel: str, subname: str, calls: BrokerCalls, grouped: bool
    ):
        # Without a group_id, aiokafka runs no group coordinator (no FindCoordinator).
        self._kwargs = consumer_kwargs(section, subname if grouped else None)
        self._inner = connect.construct(AIOKafkaConsumer, self._kwargs, "consumer")
        self._partition = TopicPartition(channel, 0)
        self._calls = calls
        self._what = f"subscribing {subname!r} to {channel!r}"
        self._closed_what = f"consumer {subname!r} of channel {channel!r}"

    async def start(self) -> None:
        await connect.start(self._inner, self._what, self._kwargs, self._calls.deadline_s)
        self._inner.assign([self._partition])

    async def committed(self) -> int | None:
        found: int | None = await _while_coordinator_moves(
            lambda: self._inner.committed(self._partition)
        )
        return found

    async def first_offset(self) -> int:
        partition = self._partition
        found: int = (await self._inner.beginning_offsets([partition]))[partition]
        return found

    async def end_offset(self) -> int:
        partition = self._partition
        found: int = (await self._inner.end_offsets([partition]))[partition]
        return found

    def end_seen(self) -> int | None:
        found: int | None = self._inner.highwater(self._partition)
        return found

    async def position(self, offset: int) -> None:
        self._inner.seek(self._partition, offset)

    async def fetch(self, max_records: int) -> Fetched:
        try:
            batches = await self._inner.getmany(
                self._partition, timeout_ms=_POLL_MS, max_records=max_records
            )
        except kafka_errors.ConsumerStoppedError:
            raise StreamClosedError(self._closed_what) from None
        records = batches.get(self._partition) or []
        return Fetched(
            [r.offset for r in records], [r.value for r in records], [r.headers for r in records]
        )

    def ready(self) -> Fetched | None:
        return None

    async def commit(self, offset: int) -> None:
        await _while_coordinator_moves(lambda: self._inner.commit({self._partition: offset}))

    async def stop(self) -> None:
        await asyncio.wait_for(self._inner.stop(), self._calls.deadline_s)


RETRY_S = 0.1
"""Pause before asking again while a group's coordinator moves."""


async def _while_coordinator_moves(call: Callable[[], Awaitable[_T]]) -> _T:
    """``call()``, asked again every :data:`RETRY_S` while the group's coordinator is
    moving or loading (after a broker restart or a leader change: aiokafka gives up on
    the first such answer for committed offsets). The caller's deadline bounds it."""
    while True:
        try:
            return await call()
        except COORDINATOR_MOVING:
            await asyncio.sleep(RETRY_S)


ENGINE = Engine("aiokafka", SharedProducer, AiokafkaReader)
