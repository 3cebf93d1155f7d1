"""The client, producer and consumer of a process attached to a shared store's owner.

They offer what :class:`~..log_client.client.LogClient` and its parts offer, with the
same semantics: each store-side step runs in the owner, through the very functions the
owner's own clients run (:mod:`..log_client.ops`), so subscriptions, seeks, acks and
retention mean the same in every process. Only the transport differs: every call that
needs the store is a request over the socket (:mod:`.link`), and nothing blocks the
event loop.

A consumer keeps one read outstanding at the owner while its buffer is below
:data:`PREFETCH_BYTES`: when it has read everything, that read waits in the owner and is
answered with the next records as soon as they are stored. ``receive_nowait`` and
``receive_batch_nowait`` hand out what has arrived (possibly nothing) and start the next
read. A producer numbers its sends (one at a time, in order) under an id of its own, so
a send retried after a hand-over is stored once (:mod:`.link`).
"""

from __future__ import annotations

import asyncio
import secrets
import struct
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from operator import itemgetter
from typing import Any

import orjson

from msgstream.contract.backend import (
    NO_PROPERTIES,
    TAGGED_ID_SIZE,
    ConsumedBatch,
    ConsumedMessage,
    MessageID,
    SubscriptionInfo,
)
from msgstream.contract.channels import validate_channel_name, validate_subscription_name
from msgstream.contract.consumer_base import ClientHooks, ClientState, ConsumerBase
from msgstream.contract.producer_base import ProducerBase
from msgstream.contract.tagged_id import MessageIdRange
from msgstream.errors import MessageTooLargeError, TopicNotFoundError
from msgstream.observability.observe import StoreProbe
from msgstream.runtime.cooperate import cooperate
from msgstream.wire.position import SubscriptionPosition

from ..log_client.client import RocksmqMessageID, subscription_infos
from ..log_client.store import FIRST_ID, StoredSubscription
from .frames import FRAME_SLACK, FrameError, Op
from .link import Connection, Link, Reply

PREFETCH_BYTES = 1024 * 1024
"""A consumer reads ahead until this many payload bytes wait in its buffer."""
READ_RECORDS = 4096
"""Most records one read asks for."""
FIRST_READ_RECORDS = 512
"""Records a consumer's first read asks for (then :data:`READ_RECORDS`). A stream
reading many channels from a backlog needs some of every channel before it can hand
anything out, and the owner serves their first reads one after another: full-size first
reads made the last channel wait for all the others."""
_ID = struct.Struct(f"{TAGGED_ID_SIZE}s")
"""One MessageID's bytes in a READ reply (cut without a slice object each)."""


class RemoteProducer(ProducerBase):
    def __init__(
        self, channel: str, connection: Connection, state: ClientState, max_bytes: int, sync: bool
    ) -> None:
        super().__init__(channel, max_bytes)
        self._max_bytes = max_bytes
        self._connection = connection
        self._state = state
        self._sync = sync
        self._producer = secrets.randbits(63)
        self._seq = 0
        self._lock = asyncio.Lock()

    async def send(self, payload: bytes, properties: Mapping[str, str] | None = None) -> MessageID:
        if properties or len(payload) + FRAME_SLACK >= self._connection.frame_limit:
            return (await self.send_many((payload,), properties))[0]
        self._check_open()
        self._state.check_open()
        if len(payload) > self._max_bytes:
            raise MessageTooLargeError(self.channel, len(payload), self._max_bytes)
        async with self._lock:  # the common case, one small message: no chunking
            self._seq += 1
            control = [self.channel, self._producer, self._seq, self._sync, None]
            (first,), _ = await self._connection.call(Op.APPEND, control, (payload,))
        return RocksmqMessageID(first)

    async def send_many(
        self, payloads: Sequence[bytes], properties: Mapping[str, str] | None = None
    ) -> Sequence[MessageID]:
        self._check_open()
        self._state.check_open()
        self._check_sizes(payloads)
        props = dict(properties) if properties else None
        runs: list[MessageIdRange] = []
        async with self._lock:
            for chunk in self._chunks(payloads, props):
                self._seq += 1
                control = [self.channel, self._producer, self._seq, self._sync, props]
                (first,), _ = await self._connection.call(Op.APPEND, control, chunk)
                runs.append(MessageIdRange(RocksmqMessageID, range(first, first + len(chunk))))
        if len(runs) == 1:  # the usual case: one chunk, one run of ids
            return runs[0]
        return [msg_id for run in runs for msg_id in run]  # other sends may sit between

    def _chunks(
        self, payloads: Sequence[bytes], properties: dict[str, str] | None
    ) -> list[Sequence[bytes]]:
        """``payloads`` in runs that fit the owner's frame limit (each run is stored in
        one write batch, the runs in order): a send of more than 64 MiB (or of more than
        ``msgstream.max_message_bytes``) from an attached process is not atomic."""
        budget = self._connection.frame_limit - FRAME_SLACK
        if properties:
            budget -= len(orjson.dumps(properties))
        if sum(map(len, payloads)) + 4 * len(payloads) <= budget:
            return [payloads]
        chunks: list[Sequence[bytes]] = []
        start, size = 0, 0
        for index, payload in enumerate(payloads):
            need = len(payload) + 4
            if need > budget:
                raise MessageTooLargeError(self.channel, len(payload), budget - 4)
            if size + need > budget:
                chunks.append(payloads[start:index])
                start, size = index, 0
            size += need
        chunks.append(payloads[start:])
        return chunks


class _Read:
    """The answer of a consumer's outstanding read (see :class:`.link.Answer`)."""

    __slots__ = ("consumer", "epoch", "finished")

    def __init__(self, consumer: RemoteConsumer, epoch: int) -> None:
        self.consumer = consumer
        self.epoch = epoch
        self.finished = False

    def done(self) -> bool:
        return self.finished

    def set_result(self, result: Reply, /) -> None:
        self._deliver(result, None)

    def set_exception(self, exception: BaseException, /) -> None:
        self._deliver(None, exception)

    def _deliver(self, result: Reply | None, exception: BaseException | None) -> None:
        self.finished = True
        try:
            self.consumer._read_done(result, exception, self.epoch)
        except Exception as exc:  # never into the connection's reading
            self.consumer._error = exc


class _Chunk:
    """Records that arrived in one read, handed out from ``at`` on."""

    __slots__ = ("at", "ids", "payloads", "properties")

    def __init__(self, ids: list[bytes], payloads: list[bytes], properties: list[bytes] | None):
        self.ids = ids
        """Each record's MessageID bytes (tag + 8 bytes)."""
        self.payloads = payloads
        self.properties = properties
        self.at = 0


class RemoteConsumer(ConsumerBase):
    """Reads one channel for one subscription through the owner. ``ack`` is cumulative
    and persisted by the owner."""

    def __init__(
        self,
        channel: str,
        subname: str,
        next_id: int | None,
        connection: Connection,
        hooks: ClientHooks,
    ) -> None:
        super().__init__(channel, subname, hooks)
        self._connection = connection
        self._handle = secrets.randbits(31)
        self._next_read = next_id
        """Where the next read starts (after what is buffered or being read)."""
        self._chunks: deque[_Chunk] = deque()
        self._buffered = 0
        self._reading: _Read | None = None
        self._ahead_soon = False
        """A read-ahead is scheduled for the next loop turn."""
        self._read_records = FIRST_READ_RECORDS
        self._epoch = 0
        """Bumped by a seek: a read started before it is stale."""
        self._wait_ms = max(int(connection.link.timeout_s * 500), 1)

    # --- reading ahead ------------------------------------------------------------------
    def _read_ahead(self) -> None:
        """Start the next read unless one is out or enough is buffered."""
        if self._reading is not None or self._buffered >= PREFETCH_BYTES or self._closed:
            return
        if self._next_read is None:
            raise self._unpositioned()
        control = [
            self._handle,
            self.channel,
            self._next_read,
            self._read_records,
            PREFETCH_BYTES,
            self._wait_ms,
        ]
        self._reading = _Read(self, self._epoch)
        self._connection.request(Op.READ, control, answer=self._reading)

    def _read_ahead_soon(self) -> None:
        """:meth:`_read_ahead` on the next turn of the event loop: records were just
        handed out, and writing the next request first would hold them up."""
        if self._reading is not None or self._ahead_soon or self._buffered >= PREFETCH_BYTES:
            return
        self._ahead_soon = True
        self._connection.loop.call_soon(self._read_ahead_later)

    def _read_ahead_later(self) -> None:
        self._ahead_soon = False
        try:
            self._read_ahead()
        except Exception as exc:  # raised by the next receive
            self._error = exc

    def _read_done(self, reply: Reply | None, error: BaseException | None, epoch: int) -> None:
        """A read's answer, handled as it comes in (not one loop turn later)."""
        if epoch != self._epoch or self._closed:
            return  # a seek moved on meanwhile
        self._reading = None
        if reply is not None:
            try:
                self._take(*reply)
            except FrameError as exc:
                error = exc
        if error is not None:
            self._error = error  # raised by the next receive, which reads again
        self._wake()  # the waiting receive runs first...
        if error is None and self._chunks:
            self._read_ahead_soon()  # ...then the next read goes out
        elif error is None:
            try:
                self._read_ahead()  # the wait ran out: wait again at the owner
            except Exception as exc:  # e.g. the client closed meanwhile
                self._error = exc  # raised by the next receive, which reads again

    def _take(self, control: list[Any], blobs: list[bytes]) -> None:
        next_read, with_properties = control
        raw_ids = blobs[0]
        count, odd = divmod(len(raw_ids), _ID.size)
        if odd or len(blobs) != 1 + count * (2 if with_properties else 1):
            raise FrameError(f"READ reply: {len(blobs)} blobs for {len(raw_ids)} id bytes")
        self._next_read = next_read
        if not count:
            return
        self._read_records = READ_RECORDS
        ids = list(map(itemgetter(0), _ID.iter_unpack(raw_ids)))
        payloads = blobs[1 : 1 + count]
        properties = blobs[1 + count :] if with_properties else None
        self._chunks.append(_Chunk(ids, payloads, properties))
        self._buffered += sum(map(len, payloads))

    # --- handing out ----------------------------------------------------------------------
    def _message(self, chunk: _Chunk, index: int) -> ConsumedMessage:
        props = chunk.properties[index] if chunk.properties else b""
        return ConsumedMessage(
            self.channel,
            RocksmqMessageID.parse(chunk.ids[index]),
            chunk.payloads[index],
            orjson.loads(props) if props else NO_PROPERTIES,
        )

    def _pop(self, most: int) -> tuple[_Chunk, int, int] | None:
        """Up to ``most`` records of the head chunk: (chunk, first index, end index)."""
        chunks = self._chunks
        while chunks:
            chunk = chunks[0]
            start = chunk.at
            end = min(start + most, len(chunk.ids))
            if end > start:
                chunk.at = end
                self._buffered -= sum(map(len, chunk.payloads[start:end]))
                if end == len(chunk.ids):
                    chunks.popleft()
                return chunk, start, end
            chunks.popleft()
        return None

    async def receive(self) -> ConsumedMessage:
        while True:
            await cooperate()
            self._check_open()
            taken = self._pop(1)
            if taken is not None:
                chunk, index, _ = taken
                self._read_ahead_soon()
                return self._message(chunk, index)
            self._raise_error()
            self._read_ahead()
            await self._await_arrival()

    def receive_nowait(self, max_messages: int) -> list[ConsumedMessage]:
        self._check_open()
        out: list[ConsumedMessage] = []
        while len(out) < max_messages:
            taken = self._pop(max_messages - len(out))
            if taken is None:
                break
            chunk, start, end = taken
            out.extend(self._message(chunk, i) for i in range(start, end))
        if not out:
            self._raise_error()
            self._read_ahead()
        else:
            self._read_ahead_soon()
        return out

    def receive_batch_nowait(self, max_messages: int) -> ConsumedBatch:
        """What ``receive_nowait`` returns, as one columnar batch."""
        self._check_open()
        taken = self._pop(max_messages)
        if taken is None:
            self._raise_error()
            self._read_ahead()
            return ConsumedBatch(self.channel, [], [], _no_message)
        self._read_ahead_soon()
        chunk, start, end = taken
        return ConsumedBatch(
            self.channel,
            chunk.payloads[start:end],
            chunk.ids[start:end],
            lambda index: self._message(chunk, start + index),
        )

    # --- positions ----------------------------------------------------------------------
    async def seek(self, msg_id: MessageID, inclusive: bool) -> None:
        """As :meth:`LogConsumer.seek <..log_client.client.LogConsumer.seek>`."""
        self._check_open()
        own = RocksmqMessageID.of(msg_id)
        control = [self.channel, self.subname, own.value, inclusive]
        (next_read,), _ = await self._connection.call(Op.SEEK, control)
        self._epoch += 1
        self._reading = None
        self._chunks.clear()
        self._buffered = 0
        self._error = None
        self._next_read = next_read
        self._wake()  # a receive waiting meanwhile reads from here

    async def seek_to_earliest(self) -> None:
        await self.seek(RocksmqMessageID(FIRST_ID - 1), inclusive=True)

    async def ack(self, msg: ConsumedMessage) -> None:
        self._check_open()
        self._check_ack_channel(msg)
        resume_at = RocksmqMessageID.of(msg.msg_id).value + 1
        await self._connection.call(Op.ACK, [self.channel, self.subname, resume_at])

    async def close(self) -> None:
        if self._begin_close():
            self._epoch += 1
            connection = self._connection
            key = (self.channel, self.subname)
            connection.consumers[key] -= 1
            if connection.consumers[key] <= 0:
                del connection.consumers[key]
            connection.tell(Op.CONSUMER_CLOSED, [self._handle, self.channel, self.subname])
            self._wake()


def _no_message(index: int) -> ConsumedMessage:
    raise IndexError(f"message {index} of an empty batch")


class RemoteClient:
    """A client of a store another process owns (see the module doc)."""

    backend_name = "rocksmq"
    inline_sends = False
    id_type = RocksmqMessageID

    def __init__(
        self,
        link: Link,
        *,
        max_message_bytes: int,
        sync: bool,
        on_close: Callable[[], None] | None = None,
    ) -> None:
        self._link = link
        self.max_message_bytes = max_message_bytes
        self._sync = sync
        self._on_close = on_close
        self._state = ClientState("rocksmq client")
        self._consumers: set[RemoteConsumer] = set()
        self._hooks = ClientHooks(
            self._state, self.get_latest_msg_id, self.check_topic_valid, self.forget
        )

    def observe(self, probe: StoreProbe) -> None:
        """Nothing to report: the owner's maintenance reports the store."""

    def check_open(self) -> None:
        self._state.check_open()

    async def _call(self, op: Op, control: list[Any]) -> tuple[list[Any], list[bytes]]:
        self.check_open()
        return await self._link.connection().call(op, control)

    async def create_producer(self, channel: str) -> RemoteProducer:
        validate_channel_name(channel)
        await self._call(Op.ENSURE_CHANNEL, [channel])
        connection = self._link.connection()
        return RemoteProducer(channel, connection, self._state, self.max_message_bytes, self._sync)

    async def subscribe(
        self, channel: str, subname: str, position: SubscriptionPosition
    ) -> RemoteConsumer:
        validate_channel_name(channel)
        validate_subscription_name(subname)
        (start,), _ = await self._call(Op.SUBSCRIBE, [channel, subname, position.value])
        connection = self._link.connection()
        connection.consumers[(channel, subname)] += 1
        consumer = RemoteConsumer(channel, subname, start, connection, self._hooks)
        self._consumers.add(consumer)
        return consumer

    def forget(self, consumer: Any) -> None:
        self._consumers.discard(consumer)

    def earliest_message_id(self) -> RocksmqMessageID:
        return RocksmqMessageID(FIRST_ID - 1)

    def message_id_from_bytes(self, data: bytes) -> RocksmqMessageID:
        return RocksmqMessageID.parse(data)

    async def get_latest_msg_id(self, channel: str) -> RocksmqMessageID | None:
        validate_channel_name(channel)
        (last,), _ = await self._call(Op.LATEST, [channel])
        return None if last is None else RocksmqMessageID(last)

    async def check_topic_valid(self, channel: str) -> None:
        validate_channel_name(channel)
        (exists,), _ = await self._call(Op.HAS_CHANNEL, [channel])
        if not exists:
            raise TopicNotFoundError(channel, self.backend_name, await self.list_channels())

    async def list_channels(self) -> list[str]:
        (channels,), _ = await self._call(Op.LIST_CHANNELS, [])
        return [str(c) for c in channels]

    async def retained_messages(self, channel: str) -> tuple[RocksmqMessageID, int] | None:
        (first, count), _ = await self._call(Op.RETAINED, [channel])
        return None if first is None else (RocksmqMessageID(first), count)

    async def peek(self, channel: str, msg_id: MessageID) -> bytes | None:
        wanted = RocksmqMessageID.of(msg_id).value
        (found,), blobs = await self._call(Op.PEEK, [channel, wanted])
        return blobs[0] if found and blobs else None

    async def list_subscriptions(self, channel: str) -> list[SubscriptionInfo]:
        validate_channel_name(channel)
        (end, rows), _ = await self._call(Op.LIST_SUBSCRIPTIONS, [channel])
        subs = [StoredSubscription(str(n), int(i), int(a)) for n, i, a in rows]
        return subscription_infos(channel, RocksmqMessageID, end, subs)

    async def delete_channel(self, channel: str) -> None:
        validate_channel_name(channel)
        await self._call(Op.DELETE_CHANNEL, [channel])

    async def delete_subscription(self, channel: str, subname: str) -> None:
        await self._call(Op.DELETE_SUBSCRIPTION, [channel, subname])

    async def close(self) -> None:
        if not await self._state.close_after(self._consumers):
            return
        if self._on_close is not None:
            self._on_close()
