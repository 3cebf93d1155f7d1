"""Sending to one channel through the client's shared producer (either engine): size
limits, properties as headers, offsets as MessageIDs, the deadline and the errors."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence

from aiokafka import errors as kafka_errors

from msgstream.contract.backend import MessageID
from msgstream.contract.producer_base import ProducerBase
from msgstream.contract.tagged_id import tagged_ids
from msgstream.errors import MessageTooLargeError

from ..broker_errors import BrokerCalls
from .deadlines import SendDeadlines
from .engines import Headers, ProducerEngine
from .ids import KafkaMessageID

RECORD_OVERHEAD = 96
"""Bytes a one-record batch adds to its payload (batch header, record framing), rounded up:
what a payload may not use of the broker's ``max.message.bytes``."""


class KafkaProducer(ProducerBase):
    """A channel's producer. Sends go through the one producer its client shares."""

    def __init__(
        self,
        channel: str,
        limit: int,
        *,
        max_message_bytes: int,
        shared: ProducerEngine,
        deadlines: SendDeadlines,
        calls: BrokerCalls,
    ) -> None:
        super().__init__(channel, min(limit, max_message_bytes))
        self._shared = shared
        self._deadlines = deadlines
        self._calls = calls
        self._limit = limit
        """The largest record, in bytes, this channel accepts (client and topic limits)."""
        self._plain_limit = min(limit - RECORD_OVERHEAD, max_message_bytes)
        """The largest payload :meth:`_checked_headers` passes when sent without headers."""

    def _checked_headers(
        self, payloads: Sequence[bytes], properties: Mapping[str, str] | None
    ) -> Headers:
        """The properties as Kafka headers, after refusing a closed producer or a payload
        too large for this channel (the error names the largest payload's size: one
        look at the lengths, not a check per record)."""
        self._check_open()
        headers = [(k, v.encode()) for k, v in properties.items()] if properties else None
        biggest = self._check_sizes(payloads)
        if headers is None and biggest <= self._plain_limit:
            return None
        framed = biggest + RECORD_OVERHEAD + sum(len(k) + len(v) + 8 for k, v in headers or ())
        if framed > self._limit:
            raise MessageTooLargeError(self.channel, framed, self._limit)
        return headers

    async def send(self, payload: bytes, properties: Mapping[str, str] | None = None) -> MessageID:
        # The latency path: one record handed to the engine, nothing more.
        headers = None
        if self._closed or properties or len(payload) > self._plain_limit:
            headers = self._checked_headers((payload,), properties)
        deadlines = self._deadlines
        watch = deadlines.start(self.channel, 1)
        try:
            return KafkaMessageID(await self._shared.send(self.channel, payload, headers, watch))
        except asyncio.CancelledError:
            deadlines.raise_if_expired(watch)
            raise
        except (kafka_errors.KafkaError, OSError) as exc:
            raise self._failure(exc, (payload,)) from exc
        finally:
            watch.finished = True

    async def send_many(
        self, payloads: Sequence[bytes], properties: Mapping[str, str] | None = None
    ) -> Sequence[MessageID]:
        headers = self._checked_headers(payloads, properties)
        if not payloads:  # neither engine answers a batch of nothing: it would wait forever
            return []
        deadlines = self._deadlines
        watch = deadlines.start(self.channel, len(payloads))
        try:
            offsets = await self._shared.send_many(self.channel, payloads, headers, watch)
            return tagged_ids(KafkaMessageID, offsets)
        except asyncio.CancelledError:
            deadlines.raise_if_expired(watch)
            raise
        except (kafka_errors.KafkaError, OSError) as exc:
            raise self._failure(exc, payloads) from exc
        finally:
            watch.finished = True

    def _failure(self, exc: BaseException, payloads: Sequence[bytes]) -> Exception:
        """The msgstream error for the engine's ``exc`` while sending ``payloads``."""
        if self._shared.too_large(exc):
            return MessageTooLargeError(self.channel, max(map(len, payloads)), self._limit)
        what = f"sending to channel {self.channel!r}"
        return self._calls.translate(exc, what, self.channel, "write")
