"""MsgStream: produce packs to channels, consume them back one message at a time."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Collection, Mapping, Sequence
from functools import partial
from typing import Literal, TypedDict, TypeVar, cast

from ..configuration.config import STREAM_DEFAULTS
from ..contract.backend import Client, ConsumedMessage, Consumer, MessageID, Producer
from ..contract.channels import validate_channel_name, validate_subscription_name
from ..errors import (
    AuthorizationError,
    CodecError,
    InvalidPositionError,
    MessageTooLargeError,
    StreamClosedError,
    StreamStateError,
    TopicNotFoundError,
)
from ..observability.logs import fields, get_logger
from ..observability.observe import (
    Instruments,
    OpRecord,
    PackProbe,
    ProduceProbe,
    TypeCounts,
    count_types,
    default_instruments,
)
from ..runtime.scope import AsyncScope
from ..wire.batch_encoder import encode_batch, encode_one
from ..wire.codec import MessageRegistry, default_registry
from ..wire.messages import DeleteMsg, InsertMsg, TsMsg
from ..wire.pack import MsgPack
from ..wire.position import MsgPosition, SubscriptionPosition
from .reader import BadMessageHandler, ChannelReader, ReaderSettings, ReadStats
from .routing import RepackFunc, default_repack, whole_bucket

log = get_logger(__name__)

ProduceResult = dict[str, Sequence[MessageID]]
_Job = tuple[int, list[bytes]]
"""One send of a produce or broadcast: the producer's index and its encoded payloads."""
_SendJob = Callable[[int, list[bytes]], Awaitable[Sequence[MessageID]]]
_Taken = TypeVar("_Taken")
_NO_SPAN = (2**64, -1)
"""The (least begin_ts, greatest end_ts) of no message: any message's range replaces it."""
MissingChannels = Literal["error", "wait", "create"]
"""What :meth:`MsgStream.as_consumer` does with a channel that does not exist yet."""
DefaultInstruments = Literal["default"]
"""``instruments="default"``: the process-wide instruments enabled when the stream is made
(:func:`msgstream.observability.metrics.enable`, :func:`msgstream.observability.tracing.enable`), if
any."""
CHANNEL_POLL_S = 0.2
"""How often ``as_consumer(..., missing="wait")`` asks whether a channel exists yet."""


def _dml_codes(codes: Collection[int]) -> frozenset[int]:
    """``unchecked_bodies`` as a set, refusing a type code that is not Insert or Delete."""
    allowed = {int(InsertMsg.MSG_TYPE), int(DeleteMsg.MSG_TYPE)}
    wrong = sorted(set(map(int, codes)) - allowed)
    if wrong:
        raise ValueError(
            f"unchecked_bodies takes the Insert and Delete type codes {sorted(allowed)}, "
            f"got {wrong}"
        )
    return frozenset(map(int, codes))


def check_buffer_sizes(**sizes: int) -> None:
    """Refuse a buffer limit below one (a stream could never hold a message), naming it."""
    for name, value in sizes.items():
        if value < 1:
            raise ValueError(f"{name} must be >= 1, got {value}")


class StreamOptions(TypedDict, total=False):
    """The keyword options of :class:`MsgStream` (and of ``new_msgstream(config, **options)``,
    where they override the configuration): a misspelt one is a type error, not a surprise
    at run time."""

    receive_buffer_size: int
    receive_buffer_bytes: int
    repack: RepackFunc | None
    registry: MessageRegistry
    max_message_bytes: int
    on_bad_message: BadMessageHandler | None
    owns_client: bool
    instruments: Instruments | DefaultInstruments | None
    unchecked_bodies: Collection[int]


class MsgStream(AsyncScope):
    """One stream over one backend client: a producer side, a consumer side, or both.

    Streams are async context managers; ``close`` closes producers, consumers and (when
    the stream owns it) the client.

    Each consumed channel is read ahead into a buffer of at most ``receive_buffer_size``
    messages and ``receive_buffer_bytes`` payload bytes (plus about one message); a full
    buffer stops reading that channel until messages are taken from it.

    ``instruments`` receive what the stream does (:mod:`msgstream.observability.observe`): by
    default the ones enabled process-wide when the stream is made; None records nothing.

    ``unchecked_bodies`` (Insert and/or Delete type codes) is for consumers that read
    payloads themselves: readers check those messages' envelopes and checksums only (no
    body is parsed; collection and partition are read with the rest of the body), and a
    bad body raises :class:`~msgstream.errors.DecodeError` when the message's body is
    first read instead of being skipped on arrival; the consumer then
    reports it with :meth:`report_bad` (see :class:`~msgstream.wire.plans.UncheckedDmlPlan`).
    """

    def __init__(
        self,
        client: Client,
        *,
        receive_buffer_size: int = STREAM_DEFAULTS.receive_buffer_size,
        receive_buffer_bytes: int = STREAM_DEFAULTS.receive_buffer_bytes,
        repack: RepackFunc | None = None,
        registry: MessageRegistry = default_registry,
        max_message_bytes: int = STREAM_DEFAULTS.max_message_bytes,
        on_bad_message: BadMessageHandler | None = None,
        owns_client: bool = True,
        instruments: Instruments | DefaultInstruments | None = "default",
        unchecked_bodies: Collection[int] = (),
    ) -> None:
        check_buffer_sizes(
            receive_buffer_size=receive_buffer_size, receive_buffer_bytes=receive_buffer_bytes
        )
        self.client = client
        self.registry = registry
        self.read_stats = ReadStats()
        self._repack = repack or default_repack
        self._receive_buffer_size = receive_buffer_size
        self._max_message_bytes = max_message_bytes
        self._owns_client = owns_client
        self._instruments = default_instruments() if instruments == "default" else instruments
        self._send_probes: list[ProduceProbe] = []
        self._pack_probe: ProduceProbe | None = None
        self._packs_probe: PackProbe | None = None
        self._producer_channels: list[str] = []
        self._producers: list[Producer] = []
        self._readers: list[ChannelReader] = []
        self._subname = ""
        self._arrived = asyncio.Event()
        self._reading = ReaderSettings(
            registry,
            receive_buffer_size,
            receive_buffer_bytes,
            max_message_bytes,
            on_bad_message,
            self._arrived,
            self.read_stats,
            client.backend_name,
            _dml_codes(unchecked_bodies),
        )
        self._next_reader = 0
        self._closed = False
        self._stopped = False

    # --- lifecycle ----------------------------------------------------------------------
    async def _exit(self, *, clean: bool) -> None:
        await self.close()

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def stopped(self) -> bool:
        """True once :meth:`stop` was called: iteration has ended for good."""
        return self._stopped

    def stop(self) -> None:
        """End iteration gracefully, from any task or a signal handler of the loop.

        The pack being handled is not affected: ack it and save its positions as usual. An
        ``async for`` waiting for the next pack ends at once, and no further pack is handed
        out. Unlike :meth:`close`, the stream stays open (acks, ``get_latest_msg_id`` and
        producing still work) until it is closed. :mod:`msgstream.runtime.shutdown` calls this on
        SIGINT and SIGTERM.
        """
        self._stopped = True
        self._arrived.set()

    def _check_open(self) -> None:
        if self._closed:
            raise StreamClosedError(type(self).__name__)

    async def close(self) -> None:
        """Stop reading and close consumers, producers and (if owned) the client. Every
        part is closed even if one fails; the first failure is raised afterwards."""
        if self._closed:
            return
        self._closed = True
        self._arrived.set()
        for reader in self._readers:
            await reader.stop()
        closers = [r.consumer.close for r in self._readers] + [p.close for p in self._producers]
        if self._owns_client:
            closers.append(self.client.close)
        failures: list[Exception] = []
        for close in closers:
            try:
                await close()
            except Exception as exc:  # close the rest, then report
                log.warning(
                    "closing %s failed: %s",
                    type(self).__name__,
                    exc,
                    extra=fields(self.client.backend_name, subscription=self._subname),
                )
                failures.append(exc)
        if failures:
            raise failures[0]

    # --- producing ------------------------------------------------------------------------
    @property
    def producer_channels(self) -> list[str]:
        return list(self._producer_channels)

    async def as_producer(self, channels: Sequence[str]) -> None:
        """Add producer channels; bucket ``i`` of the routing goes to ``channels[i]``."""
        self._check_open()
        for channel in channels:
            validate_channel_name(channel)
            if channel in self._producer_channels:
                raise StreamStateError(f"channel {channel!r} is already a producer channel")
            self._producers.append(await self.client.create_producer(channel))
            self._producer_channels.append(channel)
            if self._instruments is not None:
                backend = self.client.backend_name
                self._send_probes.append(self._instruments.producer(backend, channel))
                if self._pack_probe is None:
                    self._pack_probe = self._instruments.produce_pack(backend)

    def _require_producers(self) -> None:
        self._check_open()
        if not self._producers:
            raise StreamStateError("no producer channels: call as_producer() first")

    def _encode_for(self, channels: str, msgs: Sequence[TsMsg]) -> list[bytes]:
        """Encode, and refuse oversized messages before anything of the pack is sent (the
        error names the largest)."""
        payloads = encode_batch(msgs, self.registry)
        self._check_size(channels, max(map(len, payloads), default=0))
        return payloads

    def _encode_one(self, channels: str, msg: TsMsg) -> bytes:
        payload = encode_one(msg, self.registry)
        self._check_size(channels, len(payload))
        return payload

    def _check_size(self, channels: str, size: int) -> None:
        if size > self._max_message_bytes:
            raise MessageTooLargeError(channels, size, self._max_message_bytes)

    async def produce(self, pack: MsgPack) -> ProduceResult:
        """Route every message of ``pack`` to its bucket's channel and send it.

        Buckets are sent concurrently, messages within one bucket in order. Returns the
        acknowledged MessageIDs per channel.
        """
        if self._instruments is not None:
            return await self._observed(pack, broadcast=False)
        producers = self._producers
        if self._closed or not producers:
            self._require_producers()
        msgs = pack.msgs
        # A one-message pack routed by default_repack: its bucket, with no buckets built.
        index = (
            whole_bucket(msgs[0], len(producers))
            if len(msgs) == 1 and self._repack is default_repack
            else None
        )
        if index is None:
            buckets = self._repack(msgs, len(producers))
            if len(buckets) != 1:
                return await self._send(self._jobs(pack, buckets=buckets), self._send_many)
            ((index, msgs),) = buckets.items()
            # What _producer_of_bucket checks, without its call on the usual path (a
            # call is a measurable share of a one-message produce); it raises the error.
            if not 0 <= index < len(producers):
                self._producer_of_bucket(index)
        producer = producers[index]
        if len(msgs) == 1:  # the latency path: one message, one send, nothing gathered
            # _encode_one's steps, without its calls; _check_size raises the error.
            payload = encode_one(msgs[0], self.registry)
            if len(payload) > self._max_message_bytes:
                self._check_size(producer.channel, len(payload))
            return {producer.channel: [await producer.send(payload)]}
        payloads = self._encode_for(producer.channel, msgs)
        return {producer.channel: await producer.send_many(payloads)}

    def _producer_of_bucket(self, index: int) -> Producer:
        if not 0 <= index < len(self._producers):
            raise StreamStateError(
                f"repack function returned bucket {index}, but there are "
                f"{len(self._producers)} producer channels"
            )
        return self._producers[index]

    async def broadcast(self, pack: MsgPack) -> ProduceResult:
        """Send every message of ``pack`` to every producer channel."""
        self._require_producers()
        if self._instruments is not None:
            return await self._observed(pack, broadcast=True)
        return await self._send(self._jobs(pack), self._send_many)

    def _jobs(self, pack: MsgPack, buckets: dict[int, list[TsMsg]] | None = None) -> list[_Job]:
        """The sends of a ``produce`` (given its ``buckets``) or, without them, of a
        ``broadcast``: each producer's index and its encoded payloads."""
        if buckets is None:
            payloads = self._encode_for(", ".join(self._producer_channels), pack.msgs)
            return [(i, payloads) for i in range(len(self._producers))]
        return [
            (index, self._encode_for(self._producer_of_bucket(index).channel, msgs))
            for index, msgs in buckets.items()
        ]

    async def _send(self, jobs: list[_Job], send: _SendJob) -> ProduceResult:
        """``send`` every job: one after the other when the client's sends complete inline
        (or there is one), else concurrently."""
        if len(jobs) == 1 or self.client.inline_sends:
            results = [await send(index, payloads) for index, payloads in jobs]
        else:
            results = await asyncio.gather(*(send(index, payloads) for index, payloads in jobs))
        return {self._producers[i].channel: ids for (i, _), ids in zip(jobs, results, strict=True)}

    def _send_many(self, index: int, payloads: list[bytes]) -> Awaitable[Sequence[MessageID]]:
        return self._producers[index].send_many(payloads)

    async def _observed(self, pack: MsgPack, *, broadcast: bool) -> ProduceResult:
        """``produce``/``broadcast`` reporting to the instruments: each send timed and
        counted on its channel (by message type, counted once per bucket), the whole call
        timed once and told the channels it goes to, failures counted by type, and the call's
        message properties (a trace context) on every message."""
        self._require_producers()
        assert self._pack_probe is not None
        record = self._pack_probe.start()
        try:
            buckets = None if broadcast else self._repack(pack.msgs, len(self._producers))
            if buckets is not None and len(buckets) == 1:  # one channel: one send, no gathering
                ((index, msgs),) = buckets.items()
                channel = self._producer_of_bucket(index).channel
                record.routed((channel,))
                if len(msgs) == 1:
                    payloads = [self._encode_one(channel, msgs[0])]
                else:
                    payloads = self._encode_for(channel, msgs)
                nbytes = sum(map(len, payloads))
                ids = await self._observed_send(index, payloads, nbytes, record, count_types(msgs))
                result = {channel: ids}
            else:
                jobs = self._jobs(pack, buckets)
                sizes = {index: sum(map(len, payloads)) for index, payloads in jobs}
                nbytes = sum(sizes.values())
                record.routed([self._producers[index].channel for index, _ in jobs])
                if buckets is None:
                    types = count_types(pack.msgs)  # the same messages to every channel
                    by_bucket = dict.fromkeys(range(len(self._producers)), types)
                else:
                    by_bucket = {index: count_types(msgs) for index, msgs in buckets.items()}
                result = await self._send(
                    jobs,
                    lambda index, payloads: self._observed_send(
                        index, payloads, sizes[index], record, by_bucket[index]
                    ),
                )
        except BaseException as exc:
            record.failed(exc)
            raise
        record.done(sum(map(len, result.values())), nbytes)
        return result

    async def _observed_send(
        self,
        index: int,
        payloads: list[bytes],
        nbytes: int,
        pack_record: OpRecord,
        types: TypeCounts,
    ) -> Sequence[MessageID]:
        producer = self._producers[index]
        properties = pack_record.properties
        record = self._send_probes[index].start()
        try:
            ids: Sequence[MessageID]
            if len(payloads) == 1:
                ids = [await producer.send(payloads[0], properties)]
            else:
                ids = await producer.send_many(payloads, properties)
        except BaseException as exc:
            record.failed(exc)
            raise
        record.done(len(payloads), nbytes, types)
        return ids

    # --- consuming ------------------------------------------------------------------------
    @property
    def consumer_channels(self) -> list[str]:
        return [r.channel for r in self._readers]

    def report_bad(self, msg: TsMsg, exc: CodecError) -> None:
        """Report a consumed message found bad after delivery (an unchecked body that did
        not decode, see ``unchecked_bodies``) as the readers report one on arrival:
        counted in :attr:`read_stats`, logged with channel and MessageID, handed to
        ``on_bad_message``. The caller skips it."""
        position = msg.position
        lazy = msg.lazy_body
        reader = next(
            (r for r in self._readers if position is not None and r.channel == position.channel),
            None,
        )
        if reader is None or position is None or lazy is None:
            raise StreamStateError(f"{type(msg).__name__} was not consumed by this stream")
        msg_id = self.client.message_id_from_bytes(position.msg_id)
        reader.report_bad(ConsumedMessage(position.channel, msg_id, lazy[1]), exc)

    async def as_consumer(
        self,
        channels: Sequence[str],
        subname: str,
        position: SubscriptionPosition = SubscriptionPosition.EARLIEST,
        *,
        missing: MissingChannels = "error",
        stop_at: Mapping[str, MessageID | None] | None = None,
    ) -> None:
        """Subscribe to ``channels``. An existing subscription resumes after its last ack;
        with ``UNKNOWN`` nothing is read until :meth:`seek`.

        ``stop_at`` bounds the reading: each channel is read up to and including its
        MessageID there (None: not at all, as for a channel that was empty), and iterating
        ends (``StopAsyncIteration``) once every channel was read that far and everything
        read was delivered. Pass each channel's :meth:`get_latest_msg_id` to read what is
        there now and stop. A channel whose reading starts past its stop (after a
        :meth:`seek` there, or from ``LATEST``) has nothing to read; one that resumes a
        subscription acknowledged past its stop waits for a message past it, so seek such
        a subscription first.

        ``missing`` says what a channel that does not exist yet means: ``"error"`` (the
        default) raises :class:`TopicNotFoundError` naming it, since it is most often a
        typo that would otherwise wait for ever; ``"wait"`` waits until a producer creates
        it (checked every :data:`CHANNEL_POLL_S`; cancel it, or wrap it in a timeout, to
        give up); ``"create"`` subscribes at once, creating it (a consumer started before
        its producers).
        """
        self._check_open()
        validate_subscription_name(subname)
        if stop_at is not None:
            unknown = sorted(set(stop_at) - set(channels))
            missing_stops = [c for c in channels if c not in stop_at]
            if unknown or missing_stops:
                raise StreamStateError(
                    f"stop_at needs one stop per channel: missing {missing_stops}, "
                    f"not consumed {unknown}"
                )
        if self._subname and subname != self._subname:
            raise StreamStateError(
                f"stream already consumes as {self._subname!r}; one subscription per stream"
            )
        self._check_new_channels(channels)
        if missing != "create":
            await self._check_channels_exist(channels, wait=missing == "wait")
        consumers: list[Consumer] = []
        try:
            for channel in channels:
                consumers.append(await self.client.subscribe(channel, subname, position))
        except BaseException:
            for consumer in consumers:  # all or nothing
                await consumer.close()
            raise
        self._subname = subname
        if self._instruments is not None and self._packs_probe is None:
            self._packs_probe = self._instruments.packs(self.client.backend_name, subname)
        self._subscribed(channels)
        for consumer in consumers:
            reader = self._new_reader(consumer)
            if stop_at is not None:
                stop = stop_at[consumer.channel]
                reader.bound(
                    None if position is SubscriptionPosition.LATEST else stop,
                    self.client.message_id_from_bytes,
                )
            self._readers.append(reader)
            if position is not SubscriptionPosition.UNKNOWN:
                reader.start()

    def _subscribed(self, channels: Sequence[str]) -> None:
        """Called once ``channels`` are subscribed, before their readers start (a subclass
        sets up what it keeps per channel)."""

    async def _check_channels_exist(self, channels: Sequence[str], *, wait: bool) -> None:
        for channel in channels:
            while True:
                try:
                    await self.client.check_topic_valid(channel)
                    break
                except TopicNotFoundError:
                    if not wait:
                        raise
                except AuthorizationError:
                    # Looking a channel up can need a permission reading it does not (Pulsar's
                    # admin API): the subscription then decides, and names its own refusal.
                    break
                await asyncio.sleep(CHANNEL_POLL_S)

    def _check_new_channels(self, channels: Sequence[str]) -> None:
        if not channels:
            raise StreamStateError("as_consumer needs at least one channel")
        for channel in channels:
            validate_channel_name(channel)
            if channel in self.consumer_channels:
                raise StreamStateError(f"channel {channel!r} is already consumed by this stream")
        twice = sorted({c for c in channels if list(channels).count(c) > 1})
        if twice:
            raise StreamStateError(f"channels listed more than once: {twice}")

    def _new_reader(self, consumer: Consumer) -> ChannelReader:
        probe = None
        if self._instruments is not None:
            probe = self._instruments.consumer(
                self.client.backend_name, consumer.channel, consumer.subname
            )
        return ChannelReader(consumer, self._reading, probe)

    def _reader(self, channel: str) -> ChannelReader:
        for reader in self._readers:
            if reader.channel == channel:
                return reader
        raise InvalidPositionError(
            f"channel {channel!r} is not consumed by this stream "
            f"(consumed: {self.consumer_channels})"
        )

    async def seek(self, positions: Sequence[MsgPosition], include_current: bool = True) -> None:
        """Move each position's channel to its MessageID (inclusive by default)."""
        self._check_open()
        targets = [
            (self._reader(p.channel), self.client.message_id_from_bytes(p.msg_id))
            for p in positions
        ]  # every id checked before any reader stops
        channels = [p.channel for p in positions]
        if len(set(channels)) != len(channels):
            raise InvalidPositionError(f"more than one position for a channel in {channels}")
        for reader, _ in targets:
            await reader.stop()
            reader.clear()
        try:
            for reader, msg_id in targets:
                await reader.consumer.seek(msg_id, include_current)
                reader.resume_at(msg_id, include_current)
            self._after_seek(positions)
        finally:
            for reader, _ in targets:
                reader.start()

    def _after_seek(self, positions: Sequence[MsgPosition]) -> None:
        """Hook for subclasses that keep per-channel state."""

    async def ack(self, done: MsgPack | Sequence[MsgPosition]) -> None:
        """Acknowledge, per channel, a message and everything before it.

        Pass a consumed pack (its ``ack_positions`` are acknowledged: safe for every kind
        of stream) or positions of messages you are done with. Do not pass a TtMsgStream
        pack's ``end_positions``: they can point at a message not yet delivered.
        """
        self._check_open()
        positions = done.ack_positions if isinstance(done, MsgPack) else done
        for position in positions:
            reader = self._reader(position.channel)
            msg_id = self.client.message_id_from_bytes(position.msg_id)
            await reader.consumer.ack(ConsumedMessage(position.channel, msg_id, b""))
            if reader.probe is not None:
                reader.probe.acked()

    async def get_latest_msg_id(self, channel: str) -> MessageID | None:
        """The newest MessageID of ``channel`` (None when it is empty)."""
        self._check_open()
        return await self.client.get_latest_msg_id(channel)

    async def check_topic_valid(self, channel: str) -> None:
        """Raise ``TopicNotFoundError`` if ``channel`` does not exist."""
        self._check_open()
        await self.client.check_topic_valid(channel)

    async def _next_message(self) -> TsMsg:
        """The next decoded message of any channel (channels served in turn)."""
        return await self._next_buffered(self._buffered_message)

    async def _next_buffered(self, take: Callable[[], _Taken | None]) -> _Taken:
        """What ``take`` takes of the messages the readers hold, once it takes something;
        ``StopAsyncIteration`` when the stream is closed, stopped or read to its stops."""
        while True:
            if self._closed or self._stopped:
                raise StopAsyncIteration
            taken = take()
            if taken is not None:
                return taken
            self._raise_reader_errors()
            if self._read_to_stops():
                raise StopAsyncIteration
            self._arrived.clear()
            await self._arrived.wait()

    def _buffered_message(self) -> TsMsg | None:
        """The next message a reader holds (channels served in turn), or None: the step
        of :meth:`_next_message` that needs no wait, a plain call."""
        readers = self._readers
        count = len(readers)
        first = self._next_reader
        for step in range(count):
            reader = readers[(first + step) % count]
            if reader.buffer:
                self._next_reader = (first + step + 1) % count
                return reader.popleft()
        return None

    def _buffered_pack(self, limit: int) -> MsgPack | None:
        """Up to ``limit`` of the messages the readers hold, as one pack, or None when
        they hold none: each channel's in its order, the channels in turn (the next pack
        starts from the channel after the first one of this one)."""
        readers = self._readers
        count = len(readers)
        first = self._next_reader
        msgs: list[TsMsg] = []
        starts: list[MsgPosition] = []
        ends: list[MsgPosition] = []
        begin_ts, end_ts = _NO_SPAN
        for step in range(count):
            reader = readers[(first + step) % count]
            buffer = reader.buffer
            if not buffer:
                continue
            taken = len(msgs)
            while buffer and len(msgs) < limit:
                run, begin, end = reader.take(limit - len(msgs))
                msgs += run
                begin_ts, end_ts = min(begin_ts, begin), max(end_ts, end)
            starts.append(cast(MsgPosition, msgs[taken].position))
            ends.append(cast(MsgPosition, msgs[-1].position))
            if len(msgs) >= limit:
                break
        if not msgs:
            return None
        self._next_reader = (first + 1) % count
        return MsgPack(msgs, begin_ts, end_ts, starts, ends, list(ends))

    def _read_to_stops(self) -> bool:
        """Whether every channel is bounded (``as_consumer(stop_at=...)``) and was read up
        to its stop: nothing more will be buffered."""
        return bool(self._readers) and all(r.reached_stop for r in self._readers)

    def _raise_reader_errors(self) -> None:
        """Raise a reader's failure once; the next wait restarts that reader, so the
        stream tries again (e.g. after a deleted channel was created anew)."""
        for reader in self._readers:
            if reader.error is not None:
                error, reader.error = reader.error, None
                raise error
            reader.revive()

    def _require_consumers(self) -> None:
        self._check_open()
        if not self._readers:
            raise StreamStateError("no consumer channels: call as_consumer() first")

    def __aiter__(self) -> AsyncIterator[MsgPack]:
        return self

    async def __anext__(self) -> MsgPack:
        self._require_consumers()
        # A message already read is taken with a plain call, with no coroutine to await.
        msg = None if self._stopped else self._buffered_message()
        if msg is None:
            msg = await self._next_message()
        position = msg.position
        assert position is not None
        begin_ts, end_ts = msg.time_range()
        pack = MsgPack([msg], begin_ts, end_ts, [position], [position], [position])
        if self._packs_probe is not None:
            self._packs_probe.consumed(pack)
        return pack

    async def chan(self) -> AsyncIterator[MsgPack]:
        """Iterate packs (the same as ``async for pack in stream``)."""
        async for pack in self:
            yield pack

    def batches(self, max_messages: int = 256) -> AsyncIterator[MsgPack]:
        """Iterate packs of up to ``max_messages`` messages: what the readers hold when
        each pack is made, waiting only while they hold nothing.

        Every message is handed out once, in its channel's order, as ``async for pack in
        stream`` would hand it out, but many at a time, at a fraction of the cost a
        message: a channel's messages stand together in a pack, and the channels take
        turns. A pack's ``start_positions`` and ``end_positions`` hold each of its
        channels' first and last message's position; ``ack(pack)`` acknowledges its
        channels up to the last. Its ``begin_ts``/``end_ts`` are the least and greatest
        of its messages' time ranges. Iterating ends as ``async for`` does (the stream
        closed or stopped, or read to its ``stop_at``).
        """
        if isinstance(max_messages, bool) or not isinstance(max_messages, int):
            raise TypeError(f"max_messages must be an int, got {type(max_messages).__name__}")
        if max_messages < 1:
            raise ValueError(f"max_messages must be at least 1, got {max_messages}")
        self._require_consumers()
        return self._batches(partial(self._buffered_pack, max_messages))

    async def _batches(self, take: Callable[[], MsgPack | None]) -> AsyncIterator[MsgPack]:
        while True:
            self._require_consumers()
            try:
                pack = await self._next_buffered(take)
            except StopAsyncIteration:
                return
            if self._packs_probe is not None:
                self._packs_probe.consumed(pack)
            yield pack
