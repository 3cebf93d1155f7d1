"""Sending to one channel through the client's shared aiokafka producer."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from aiokafka import errors as kafka_errors

from msgstream.backend import MessageID
from msgstream.errors import BackendUnavailableError, MessageTooLargeError, StreamClosedError

from .failures import translate
from .ids import KafkaMessageID

if TYPE_CHECKING:
    from .client import KafkaClient

RECORD_OVERHEAD = 96
"""Bytes a one-record batch adds to its payload (batch header, record framing), rounded up:
what a payload may not use of the broker's ``max.message.bytes``."""


async def _send_in_batches(
    producer: Any, topic: str, payloads: Sequence[bytes], headers: list[tuple[str, bytes]]
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
        base = (await future).offset
        ids.extend(KafkaMessageID(base + i) for i in range(records))
    return ids


class KafkaProducer:
    """A channel's producer. Sends go through the one producer its client shares."""

    def __init__(self, client: KafkaClient, channel: str, limit: int) -> None:
        self.channel = channel
        self._client = client
        self._limit = limit
        """The largest record, in bytes, this channel accepts (client and topic limits)."""
        self._closed = False

    def _check_size(self, payload: bytes, headers: list[tuple[str, bytes]] | None) -> None:
        size = len(payload)
        limit = min(self._limit, self._client.max_message_bytes)
        if size > limit:
            raise MessageTooLargeError(self.channel, size, limit)
        framed = size + RECORD_OVERHEAD + sum(len(k) + len(v) + 8 for k, v in headers or ())
        if framed > self._limit:
            raise MessageTooLargeError(self.channel, framed, self._limit)

    async def send(self, payload: bytes, properties: Mapping[str, str] | None = None) -> MessageID:
        return (await self.send_many((payload,), properties))[0]

    async def send_many(
        self, payloads: Sequence[bytes], properties: Mapping[str, str] | None = None
    ) -> list[MessageID]:
        if self._closed:
            raise StreamClosedError(f"producer of channel {self.channel!r}")
        client = self._client
        headers = [(k, v.encode()) for k, v in properties.items()] if properties else None
        for payload in payloads:
            self._check_size(payload, headers)
        producer = await client.shared_producer()
        topic = self.channel
        deadline = client.deadline_s
        try:
            async with asyncio.timeout(deadline):
                if len(payloads) == 1:
                    future = await producer.send(topic, payloads[0], partition=0, headers=headers)
                    return [KafkaMessageID((await future).offset)]
                return await _send_in_batches(producer, topic, payloads, headers or [])
        except TimeoutError as exc:
            raise BackendUnavailableError(
                f"kafka at {client.brokers}: sending {len(payloads)} message(s) to channel "
                f"{topic!r}: not acknowledged within {deadline:g} s "
                "(msgstream.operation_timeout_s); they may still be written"
            ) from exc
        except kafka_errors.MessageSizeTooLargeError as exc:
            size = max(map(len, payloads))
            raise MessageTooLargeError(topic, size, self._limit) from exc
        except (kafka_errors.KafkaError, OSError) as exc:
            raise translate(exc, f"sending to channel {topic!r}", client.brokers) from exc

    async def close(self) -> None:
        self._closed = True
