"""Reading one channel for one subscription.

The partition is assigned explicitly (no group membership, so no rebalancing stalls); the
subscription name is the ``group_id`` under which acknowledgements are committed. A new
subscription commits its starting offset at once, so reopening it resumes there whatever
position the reopen asks for -- the same rule as the embedded backends.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka import errors as kafka_errors

from msgstream.backend import ConsumedMessage, MessageID
from msgstream.consumer_base import ClientHooks, ConsumerBase
from msgstream.cooperate import cooperate
from msgstream.errors import InvalidPositionError, StreamClosedError

from ..broker_errors import BrokerCalls
from . import connect
from .ids import KafkaMessageID

FETCH_BATCH = 512
_POLL_MS = 1000
_NO_PROPERTIES: Mapping[str, str] = MappingProxyType({})


def _properties(headers: Any) -> Mapping[str, str]:
    if not headers:
        return _NO_PROPERTIES
    return {key: value.decode("utf-8", "replace") for key, value in headers}


class KafkaConsumer(ConsumerBase):
    def __init__(
        self,
        channel: str,
        subname: str,
        inner: AIOKafkaConsumer,
        kwargs: dict[str, Any],
        *,
        hooks: ClientHooks,
        calls: BrokerCalls,
    ) -> None:
        super().__init__(channel, subname, hooks)
        self._calls = calls
        self._inner = inner
        self._kwargs = kwargs
        self._partition = TopicPartition(channel, 0)
        self._buffer: deque[ConsumedMessage] = deque()
        self._positioned = False
        self._committed: int | None = None
        self._skip_below = 0
        """After a seek past the end: records below this offset are not delivered."""

    def _call(self, what: str) -> Any:
        """A broker call of this consumer: an ACL refusal is one to read the channel (its
        topic, or its subscription's consumer group)."""
        return self._calls.call(
            f"{what} (channel {self.channel!r}, subscription {self.subname!r})",
            self.channel,
            "read",
        )

    async def start(self, start_at: str) -> None:
        """Position a new consumer: resume a committed offset, else ``start_at``."""
        inner, partition = self._inner, self._partition
        what = f"subscribing {self.subname!r} to {self.channel!r}"
        await connect.start(inner, what, self._kwargs, self._calls.deadline_s)
        async with self._call("subscribing"):
            inner.assign([partition])
            self._committed = await inner.committed(partition)
            if self._committed is not None:
                inner.seek(partition, self._committed)
                self._positioned = True
                return
            if start_at == "unknown":
                return
            if start_at == "earliest":
                offset = (await inner.beginning_offsets([partition]))[partition]
            else:
                offset = (await inner.end_offsets([partition]))[partition]
            inner.seek(partition, offset)
            self._positioned = True
            await self._commit(offset)

    async def _commit(self, offset: int) -> None:
        await self._inner.commit({self._partition: offset})
        self._committed = offset

    async def _fetch(self) -> None:
        """Wait until records arrive and buffer them (``_POLL_MS`` at most per poll)."""
        try:
            batches = await self._inner.getmany(
                self._partition, timeout_ms=_POLL_MS, max_records=FETCH_BATCH
            )
        except kafka_errors.ConsumerStoppedError:
            raise StreamClosedError(self._what()) from None
        channel, skip = self.channel, self._skip_below
        make = tuple.__new__  # ConsumedMessage without its Python-level __new__: hot path
        for records in batches.values():
            self._buffer.extend(
                make(
                    ConsumedMessage,
                    (channel, KafkaMessageID(r.offset), r.value, _properties(r.headers)),
                )
                for r in records
                if r.offset >= skip
            )

    async def receive(self) -> ConsumedMessage:
        while True:
            await cooperate()  # a buffered message is served inline: yield now and then
            self._check_open()
            if self._buffer:
                return self._buffer.popleft()
            self._check_positioned()
            try:
                await self._fetch()
            except (kafka_errors.KafkaError, OSError) as exc:
                what = f"reading channel {self.channel!r} (subscription {self.subname!r})"
                raise self._calls.translate(exc, what, self.channel, "read") from exc

    def receive_nowait(self, max_messages: int) -> list[ConsumedMessage]:
        self._check_open()
        count = min(max_messages, len(self._buffer))
        return [self._buffer.popleft() for _ in range(count)]

    async def seek(self, msg_id: MessageID, inclusive: bool) -> None:
        self._check_open()
        offset = KafkaMessageID.of(msg_id).offset
        await self._seek_offset(max(offset + (0 if inclusive else 1), 0), requested=offset)

    async def _seek_offset(self, target: int, requested: int | None = None) -> None:
        """Read from offset ``target`` next. A ``requested`` position (a user's seek) past
        the end is refused: the consumer would silently skip the next messages sent."""
        partition = self._partition
        async with self._call("seeking"):
            end = (await self._inner.end_offsets([partition]))[partition]
            if requested is not None and target > end:
                raise InvalidPositionError(
                    f"cannot seek channel {self.channel!r} to offset {requested}: past the "
                    f"channel's end (the next message will get offset {end})"
                )
            # Kafka cannot wait at an offset beyond the end: wait at the end and skip up to it.
            self._inner.seek(partition, min(target, end))
            self._skip_below = target
            self._buffer.clear()
            self._positioned = True
            if self._committed is None:
                await self._commit(target)

    async def seek_to_earliest(self) -> None:
        self._check_open()
        partition = self._partition
        async with self._call("seeking to the earliest message"):
            first = (await self._inner.beginning_offsets([partition]))[partition]
        await self._seek_offset(first)

    async def ack(self, msg: ConsumedMessage) -> None:
        """Acknowledge ``msg`` and everything before it; the committed offset never moves
        back (seek to replay older messages)."""
        self._check_open()
        self._check_ack_channel(msg)
        resume_at = KafkaMessageID.of(msg.msg_id).offset + 1
        if self._committed is None or resume_at > self._committed:
            async with self._call("acknowledging"):
                await self._commit(resume_at)

    async def close(self) -> None:
        if not self._begin_close():
            return
        self._buffer.clear()
        # Closing must not fail: the broker may be gone.
        with contextlib.suppress(TimeoutError, kafka_errors.KafkaError, OSError):
            await asyncio.wait_for(self._inner.stop(), self._calls.deadline_s)
