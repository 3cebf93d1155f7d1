"""Reading one channel for one subscription (either engine).

The partition is assigned explicitly (no group membership, so no rebalancing stalls); the
subscription name is the ``group_id`` under which acknowledgements are committed. A new
subscription commits its starting offset at once, so reopening it resumes there whatever
position the reopen asks for -- the same rule as the embedded backends. A *seek reader*
(``keeps_position=False``: what a reader that seeks where it likes gets, see
:mod:`..reader_access`) commits nothing and asks for no committed offset, so it leaves no
consumer group on the cluster and needs no group rights.

Fetched records stay in the columns the engine returned them in (:class:`Fetched`) until
they are handed out: one message at a time, or many at once as a columnar batch
(``receive_batch_nowait``) without an object per message.
"""

from __future__ import annotations

import contextlib
import struct
from bisect import bisect_left
from collections import deque
from collections.abc import Callable, Mapping
from typing import Any

from aiokafka import errors as kafka_errors

from msgstream.contract.backend import NO_PROPERTIES, ConsumedBatch, ConsumedMessage, MessageID
from msgstream.contract.consumer_base import ClientHooks
from msgstream.errors import InvalidPositionError, StreamStateError
from msgstream.runtime.cooperate import cooperate

from ..broker_client import BrokerConsumer
from ..broker_errors import BrokerCalls
from .engines import Fetched, ReaderEngine
from .ids import KafkaMessageID

FETCH_BATCH = 2048
_ID = struct.Struct(">cq").pack
_TAG = KafkaMessageID.tag


def _properties(headers: Any) -> Mapping[str, str]:
    if not headers:
        return NO_PROPERTIES
    return {key: value.decode("utf-8", "replace") for key, value in headers}


class KafkaConsumer(BrokerConsumer):
    def __init__(
        self,
        channel: str,
        subname: str,
        inner: ReaderEngine,
        *,
        hooks: ClientHooks,
        calls: BrokerCalls,
        keeps_position: bool = True,
    ) -> None:
        super().__init__(channel, subname, hooks, calls)
        self._inner = inner
        self.keeps_position = keeps_position
        """False: a seek reader, which commits nothing (see the module doc)."""
        self._chunks: deque[Fetched] = deque()
        self._head = 0
        """Records of ``_chunks[0]`` before this index were handed out."""
        self._positioned = False
        self._committed: int | None = None
        self._skip_below = 0
        """After a seek past the end: records below this offset are not delivered."""

    async def start(self, start_at: str) -> None:
        """Position a new consumer: resume a committed offset, else ``start_at``. A seek
        reader starts nowhere: a seek follows."""
        inner = self._inner
        await inner.start()
        if not self.keeps_position:
            return
        async with self._call("subscribing"):
            self._committed = await inner.committed()
            if self._committed is not None:
                await inner.position(self._committed)
                self._positioned = True
                return
            if start_at == "unknown":
                return
            if start_at == "earliest":
                offset = await inner.first_offset()
            else:
                offset = await inner.end_offset()
            await inner.position(offset)
            self._positioned = True
            await self._commit(offset)

    async def _commit(self, offset: int) -> None:
        await self._inner.commit(offset)
        self._committed = offset

    def _keep(self, fetched: Fetched | None) -> None:
        """Buffer what a fetch returned, less anything below a seek's target."""
        if fetched is None or not fetched.offsets:
            return
        skip = self._skip_below
        if fetched.offsets[0] < skip:
            cut = bisect_left(fetched.offsets, skip)
            if cut == len(fetched.offsets):
                return
            fetched = Fetched(fetched.offsets[cut:], fetched.payloads[cut:], fetched.headers[cut:])
        self._chunks.append(fetched)

    def _buffered(self) -> bool:
        if self._chunks:
            return True
        self._keep(self._inner.ready())
        return bool(self._chunks)

    def _take(self, count: int) -> Fetched:
        """Up to ``count`` buffered records (from one chunk), which leave the buffer."""
        chunk, head = self._chunks[0], self._head
        end = min(head + count, len(chunk.offsets))
        if head == 0 and end == len(chunk.offsets):
            taken = chunk
        else:
            taken = Fetched(
                chunk.offsets[head:end], chunk.payloads[head:end], chunk.headers[head:end]
            )
        if end == len(chunk.offsets):
            self._chunks.popleft()
            self._head = 0
        else:
            self._head = end
        return taken

    def _message(self, taken: Fetched, index: int) -> ConsumedMessage:
        return tuple.__new__(  # ConsumedMessage without its Python-level __new__: hot path
            ConsumedMessage,
            (
                self.channel,
                KafkaMessageID(taken.offsets[index]),
                taken.payloads[index],
                _properties(taken.headers[index]),
            ),
        )

    async def receive(self) -> ConsumedMessage:
        while True:
            await cooperate()  # a buffered message is served inline: yield now and then
            self._check_open()
            if self._buffered():
                return self._message(self._take(1), 0)
            self._check_positioned()
            try:
                self._keep(await self._inner.fetch(FETCH_BATCH))
            except (kafka_errors.KafkaError, OSError) as exc:
                what = f"reading channel {self.channel!r} (subscription {self.subname!r})"
                raise self._calls.translate(exc, what, self.channel, "read") from exc

    def receive_nowait(self, max_messages: int) -> list[ConsumedMessage]:
        self._check_open()
        found: list[ConsumedMessage] = []
        while len(found) < max_messages and self._buffered():
            taken = self._take(max_messages - len(found))
            found.extend(self._message(taken, i) for i in range(len(taken.offsets)))
        return found

    def receive_batch_nowait(self, max_messages: int) -> ConsumedBatch:
        """What ``receive_nowait`` would return, as one columnar batch (see
        :class:`msgstream.contract.backend.BatchConsumer`): at most one fetch's records."""
        self._check_open()
        if max_messages <= 0 or not self._buffered():
            return ConsumedBatch(self.channel, [], [], self._no_message)
        taken = self._take(max_messages)
        ids = [_ID(_TAG, offset) for offset in taken.offsets]
        return ConsumedBatch(self.channel, taken.payloads, ids, self._rebuild(taken))

    def _rebuild(self, taken: Fetched) -> Callable[[int], ConsumedMessage]:
        return lambda index: self._message(taken, index)

    @staticmethod
    def _no_message(index: int) -> ConsumedMessage:
        raise IndexError(index)

    async def seek(self, msg_id: MessageID, inclusive: bool) -> None:
        self._check_open()
        offset = KafkaMessageID.of(msg_id).offset
        await self._seek_offset(max(offset + (0 if inclusive else 1), 0), requested=offset)

    async def _seek_offset(self, target: int, requested: int | None = None) -> None:
        """Read from offset ``target`` next. A ``requested`` position (a user's seek) past
        the end is refused: the consumer would silently skip the next messages sent."""
        async with self._call("seeking"):
            # The end a fetch reported spares a request that would queue behind the fetch
            # in flight on the same connection (up to fetch_max_wait_ms).
            end = self._inner.end_seen()
            if end is None or target > end:
                end = await self._inner.end_offset()
            if requested is not None and target > end:
                raise InvalidPositionError(
                    f"cannot seek channel {self.channel!r} to offset {requested}: past the "
                    f"channel's end (the next message will get offset {end})"
                )
            # Kafka cannot wait at an offset beyond the end: wait at the end and skip up to it.
            await self._inner.position(min(target, end))
            self._skip_below = target
            self._chunks.clear()
            self._head = 0
            self._positioned = True
            if self._committed is None and self.keeps_position:
                await self._commit(target)

    async def seek_to_earliest(self) -> None:
        self._check_open()
        async with self._call("seeking to the earliest message"):
            first = await self._inner.first_offset()
        await self._seek_offset(first)

    async def ack(self, msg: ConsumedMessage) -> None:
        """Acknowledge ``msg`` and everything before it; the committed offset never moves
        back (seek to replay older messages)."""
        self._check_open()
        self._check_ack_channel(msg)
        if not self.keeps_position:
            raise StreamStateError(
                f"cannot acknowledge on channel {self.channel!r}: reader {self.subname!r} "
                "keeps no position (it reads where it seeks)"
            )
        resume_at = KafkaMessageID.of(msg.msg_id).offset + 1
        if self._committed is None or resume_at > self._committed:
            async with self._call("acknowledging"):
                await self._commit(resume_at)

    async def close(self) -> None:
        if not self._begin_close():
            return
        self._chunks.clear()
        # Closing must not fail: the broker may be gone.
        with contextlib.suppress(TimeoutError, kafka_errors.KafkaError, OSError):
            await self._inner.stop()
