"""DESIGN §5: MsgStream scenarios, run on every backend (``batches()`` at the end)."""

from __future__ import annotations

import asyncio
import logging
import zlib
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import orjson
import pytest

from harness import BackendHarness
from msgstream import (
    DataType,
    DeleteMsg,
    FieldData,
    InsertMsg,
    MessageRegistry,
    MessageTooLargeError,
    MsgPack,
    MsgPosition,
    MsgStream,
    StreamClosedError,
    StreamStateError,
    SubscriptionPosition,
    TimeTickMsg,
    TopicNotFoundError,
    TsMsg,
    TtMsgStream,
    UnknownMessageTypeError,
    hash_primary_keys,
    positions_from_json,
    positions_to_json,
)
from msgstream.contract.backend import ConsumedMessage
from msgstream.errors import CodecError, DecodeError
from msgstream.wire import envelope
from msgstream.wire.codec import BUILTIN_TYPES, decode, encode
from msgstream.wire.messages import MsgType

TIMEOUT = 10.0
EARLIEST = SubscriptionPosition.EARLIEST


def stream(backend: BackendHarness, **options: object) -> MsgStream:
    return MsgStream(backend.client(), **options)  # type: ignore[arg-type]


def insert(msg_id: int, pks: list[int], ts: int = 100) -> InsertMsg:
    return InsertMsg(
        msg_id=msg_id,
        timestamp=ts,
        collection_name="books",
        row_ids=pks,
        fields=[
            FieldData("pk", DataType.INT64, pks),
            FieldData("vec", DataType.FLOAT_VECTOR, np.full((len(pks), 2), msg_id), dim=2),
        ],
        hash_keys=hash_primary_keys(pks),
    )


async def take(source: MsgStream, count: int) -> list[TsMsg]:
    out: list[TsMsg] = []
    while len(out) < count:
        pack = await asyncio.wait_for(anext(source), TIMEOUT)
        assert pack.start_positions == pack.end_positions == [pack.msgs[0].position]
        out.extend(pack.msgs)
    return out


async def test_produce_routes_rows_by_hash_to_their_channel(backend: BackendHarness) -> None:
    channels = backend.channels(4)
    pks = list(range(40))
    async with stream(backend) as producer, stream(backend) as consumer:
        await producer.as_producer(channels)
        result = await producer.produce(MsgPack.of(insert(1, pks)))
        buckets = {
            c: [pk for pk in pks if hash_primary_keys([pk])[0] % 4 == i]
            for i, c in enumerate(channels)
        }
        assert sorted(result) == sorted(c for c in channels if buckets[c])
        assert all(len(ids) == 1 for ids in result.values())
        await consumer.as_consumer(channels, "sub", EARLIEST)
        got = await take(consumer, len(result))
        by_channel = {}
        for msg in got:
            assert isinstance(msg, InsertMsg) and msg.position is not None
            by_channel[msg.position.channel] = msg.row_ids.tolist()
            assert msg.field("pk").values.tolist() == msg.row_ids.tolist()
        assert by_channel == {c: rows for c, rows in buckets.items() if rows}


async def test_messages_of_one_bucket_keep_their_order(backend: BackendHarness) -> None:
    channel = backend.channel()
    async with stream(backend) as producer, stream(backend) as consumer:
        await producer.as_producer([channel])
        msgs = [insert(i, [i]) for i in range(1, 30)]
        await producer.produce(MsgPack.of(*msgs))
        await consumer.as_consumer([channel], "sub", EARLIEST)
        got = await take(consumer, 29)
        assert [m.msg_id for m in got] == list(range(1, 30))
        assert got == msgs


async def test_chan_yields_the_packs_iteration_yields(backend: BackendHarness) -> None:
    """``chan()`` is the contract's name (DESIGN.md) for ``async for pack in stream``."""
    channel = backend.channel()
    async with stream(backend) as producer, stream(backend) as consumer:
        await producer.as_producer([channel])
        msgs = [insert(i, [i]) for i in range(1, 6)]
        await producer.produce(MsgPack.of(*msgs))
        await consumer.as_consumer([channel], "sub", EARLIEST)
        got: list[TsMsg] = []
        packs = consumer.chan()
        while len(got) < 5:
            pack = await asyncio.wait_for(anext(packs), TIMEOUT)
            assert pack.start_positions == pack.end_positions == [pack.msgs[0].position]
            got.extend(pack.msgs)
        await packs.aclose()
        assert got == msgs


async def test_broadcast_reaches_every_channel(backend: BackendHarness) -> None:
    channels = backend.channels(3)
    async with stream(backend) as producer, stream(backend) as consumer:
        await producer.as_producer(channels)
        result = await producer.broadcast(MsgPack.of(TimeTickMsg(msg_id=7, timestamp=50)))
        assert sorted(result) == sorted(channels)
        assert all(len(ids) == 1 for ids in result.values())
        await consumer.as_consumer(channels, "sub", EARLIEST)
        got = await take(consumer, 3)
        assert sorted(m.position.channel for m in got if m.position) == sorted(channels)
        assert all(isinstance(m, TimeTickMsg) and m.timestamp == 50 for m in got)
        for msg in got:
            assert msg.position is not None
            assert msg.position.msg_id == result[msg.position.channel][0].to_bytes()


async def test_seek_to_positions_inclusive_and_exclusive(backend: BackendHarness) -> None:
    channel = backend.channel()
    async with stream(backend) as producer:
        await producer.as_producer([channel])
        await producer.produce(MsgPack.of(*[insert(i, [i]) for i in range(1, 11)]))
    async with stream(backend) as reader:
        await reader.as_consumer([channel], "sub", EARLIEST)
        got = await take(reader, 5)
    fifth = got[4].position
    assert fifth is not None
    saved = positions_from_json(positions_to_json([fifth]))
    for inclusive, first in ((True, 5), (False, 6)):
        async with stream(backend) as resumed:
            await resumed.as_consumer(
                [channel], f"resume-{inclusive}", SubscriptionPosition.UNKNOWN
            )
            await resumed.seek(saved, include_current=inclusive)
            assert [m.msg_id for m in await take(resumed, 11 - first)] == list(range(first, 11))


async def test_bounded_reading_delivers_each_channel_up_to_its_stop_then_ends(
    backend: BackendHarness,
) -> None:
    channel = backend.channel()
    async with stream(backend) as producer:
        await producer.as_producer([channel])
        await producer.produce(MsgPack.of(*[insert(i, [i]) for i in range(1, 6)]))
        stops = {channel: await producer.get_latest_msg_id(channel)}
        await producer.produce(MsgPack.of(*[insert(i, [i]) for i in range(6, 9)]))

    async def drain(reader: MsgStream) -> list[int]:
        async def all_ids() -> list[int]:
            return [m.msg_id async for pack in reader for m in pack.msgs]

        return await asyncio.wait_for(all_ids(), TIMEOUT)

    async with stream(backend, receive_buffer_size=2) as reader:  # several receives
        await reader.as_consumer([channel], "sub", EARLIEST, stop_at=stops)
        assert await drain(reader) == [1, 2, 3, 4, 5]
    async with stream(backend) as reader:
        await reader.as_consumer([channel], "latest", SubscriptionPosition.LATEST, stop_at=stops)
        assert await drain(reader) == []
    async with stream(backend) as reader:
        await reader.as_consumer([channel], "early", SubscriptionPosition.UNKNOWN, stop_at=stops)
        first = await take_positions(backend, channel)
        await reader.seek([first[2]], include_current=False)  # after the third
        assert await drain(reader) == [4, 5]
        await reader.seek([first[4]], include_current=False)  # after the stop: nothing
        assert await drain(reader) == []
        await reader.seek([first[4]])  # at the stop: the stop itself
        assert await drain(reader) == [5]


async def take_positions(backend: BackendHarness, channel: str) -> list[MsgPosition]:
    """The positions of ``channel``'s first five messages."""
    async with stream(backend) as reader:
        await reader.as_consumer([channel], "positions", EARLIEST)
        return [m.position for m in await take(reader, 5) if m.position is not None]


async def test_ack_then_reopen_resumes_after_the_ack(backend: BackendHarness) -> None:
    channel = backend.channel()
    async with stream(backend) as producer:
        await producer.as_producer([channel])
        await producer.produce(MsgPack.of(*[insert(i, [i]) for i in range(1, 9)]))
    async with stream(backend) as first:
        await first.as_consumer([channel], "sub", EARLIEST)
        got = await take(first, 3)
        assert got[2].position is not None
        await first.ack([got[2].position])
    async with stream(backend) as second:
        await second.as_consumer([channel], "sub", EARLIEST)
        assert [m.msg_id for m in await take(second, 5)] == [4, 5, 6, 7, 8]


async def test_corrupt_payload_is_skipped_counted_and_logged(
    backend: BackendHarness, caplog: pytest.LogCaptureFixture
) -> None:
    channel = backend.channel()
    client = backend.client()
    raw = await client.create_producer(channel)
    async with stream(backend) as producer, stream(backend) as consumer:
        await producer.as_producer([channel])
        await producer.produce(MsgPack.of(insert(1, [1])))
        bad_id = await raw.send(b"MS\x01garbage that is not a message")
        truncated = (await producer.produce(MsgPack.of(insert(2, [2]))))[channel]
        del truncated
        await raw.send(b"")
        await producer.produce(MsgPack.of(insert(3, [3])))
        await consumer.as_consumer([channel], "sub", EARLIEST)
        with caplog.at_level(logging.WARNING):
            got = await take(consumer, 3)
        assert [m.msg_id for m in got] == [1, 2, 3]
        assert consumer.read_stats.decode_errors == 2
        assert consumer.read_stats.received == 5
        messages = [r.getMessage() for r in caplog.records if "undecodable" in r.getMessage()]
        assert len(messages) == 2
        assert channel in messages[0] and repr(bad_id) in messages[0]


def text_insert(msg_id: int, texts: list[str]) -> InsertMsg:
    """An Insert with a varchar column (no cached decode plan: each body differs)."""
    pks = list(range(msg_id * 10, msg_id * 10 + len(texts)))
    return InsertMsg(
        msg_id=msg_id,
        timestamp=100 + msg_id,
        collection_name="books",
        row_ids=pks,
        fields=[FieldData("pk", DataType.INT64, pks), FieldData("title", DataType.VARCHAR, texts)],
        hash_keys=[0] * len(pks),  # one channel: every row to it
    )


def with_body(payload: bytes, change: Callable[[Any], Any]) -> bytes:
    """``payload`` with its JSON body replaced by ``change(body)``, checksum recomputed:
    what a faulty producer would send (the envelope is sound, the body is not)."""
    head = list(envelope.STRUCT.unpack_from(payload))
    json_len, crc = envelope.index("json_len"), envelope.index("crc")
    body_end = envelope.SIZE + head[json_len]
    body = orjson.dumps(change(orjson.loads(payload[envelope.SIZE : body_end])))
    head[json_len] = len(body)
    unsealed = envelope.STRUCT.pack(*head) + body + payload[body_end:]
    head[crc] = zlib.crc32(unsealed[envelope.SIZE :], zlib.crc32(unsealed[: envelope.CRC_OFFSET]))
    return envelope.STRUCT.pack(*head) + body + payload[body_end:]


def one_row_short(body: Any) -> Any:
    body["fields"][1]["rows"] -= 1
    return body


async def test_unchecked_insert_bodies_fail_when_read_and_are_reported_by_the_consumer(
    backend: BackendHarness,
) -> None:
    """With ``unchecked_bodies``, an Insert whose body is bad (sound envelope and
    checksum) is delivered; reading its body raises decode's error, and ``report_bad``
    counts it and hands it to ``on_bad_message`` with its channel and MessageID."""
    channel = backend.channel()
    raw = await backend.client().create_producer(channel)
    bad = with_body(encode(text_insert(2, ["b", "c"])), one_row_short)
    with pytest.raises(DecodeError) as expected:
        decode(bad)
    reports: list[tuple[ConsumedMessage, CodecError]] = []
    unchecked = stream(
        backend,
        unchecked_bodies={MsgType.INSERT},
        on_bad_message=lambda raw, exc: reports.append((raw, exc)),
    )
    async with stream(backend) as producer, unchecked as consumer:
        await producer.as_producer([channel])
        await producer.produce(MsgPack.of(text_insert(1, ["a"])))
        bad_id = await raw.send(bad)
        await producer.produce(MsgPack.of(text_insert(3, ["d", "é"])))
        await consumer.as_consumer([channel], "sub", EARLIEST)
        got = await take(consumer, 3)
        assert [m.msg_id for m in got] == [1, 2, 3]
        assert consumer.read_stats.decode_errors == 0
        good = [m for m in got if m.msg_id != 2]
        assert [list(m.field("title").values) for m in good] == [["a"], ["d", "é"]]  # type: ignore[attr-defined]
        with pytest.raises(DecodeError) as caught:
            got[1].fields  # type: ignore[attr-defined]  # noqa: B018
        assert str(caught.value) == str(expected.value)
        consumer.report_bad(got[1], caught.value)
        assert consumer.read_stats.decode_errors == 1
        [(reported, error)] = reports
        assert (reported.channel, reported.msg_id, reported.payload) == (channel, bad_id, bad)
        assert error is caught.value


@dataclass(kw_only=True, eq=False, repr=False)
class AuditMsg(TsMsg):
    MSG_TYPE: ClassVar[int] = 4242
    note: str


async def test_unknown_message_type_is_skipped_and_counted(backend: BackendHarness) -> None:
    channel = backend.channel()
    producer_registry = MessageRegistry(BUILTIN_TYPES)
    producer_registry.register(AuditMsg)
    bad: list[tuple[bytes, str]] = []
    async with (
        stream(backend, registry=producer_registry) as producer,
        stream(
            backend, on_bad_message=lambda m, e: bad.append((m.payload[:2], type(e).__name__))
        ) as consumer,
    ):
        await producer.as_producer([channel])
        audit = AuditMsg(msg_id=2, timestamp=5, note="hi", hash_keys=[0])
        await producer.produce(MsgPack.of(insert(1, [1]), audit, insert(3, [3])))
        await consumer.as_consumer([channel], "sub", EARLIEST)
        assert [m.msg_id for m in await take(consumer, 2)] == [1, 3]
        assert consumer.read_stats.unknown_types == 1
        assert bad == [(b"MS", "UnknownTypeCodeError")]
        await consumer.as_producer([backend.channel()])
        with pytest.raises(UnknownMessageTypeError, match="AuditMsg"):
            await consumer.produce(MsgPack.of(audit))


async def test_mismatched_hash_keys_raise_value_error(backend: BackendHarness) -> None:
    async with stream(backend) as producer:
        await producer.as_producer(backend.channels(2))
        msg = insert(9, [1, 2, 3])
        msg.hash_keys = [1, 2]
        with pytest.raises(ValueError, match="msg_id=9"):
            await producer.produce(MsgPack.of(msg))
        delete = DeleteMsg(
            timestamp=1, msg_id=10, collection_name="books", primary_keys=[1, 2], hash_keys=[1]
        )
        with pytest.raises(ValueError, match="msg_id=10"):
            await producer.produce(MsgPack.of(delete))


async def test_operations_out_of_order_or_after_close(backend: BackendHarness) -> None:
    channel = backend.channel()
    s = stream(backend)
    with pytest.raises(StreamStateError, match="as_producer"):
        await s.produce(MsgPack.of(insert(1, [1])))
    with pytest.raises(StreamStateError, match="as_consumer"):
        await anext(s)
    await s.as_producer([channel])
    with pytest.raises(StreamStateError, match="already"):
        await s.as_producer([channel])
    await s.close()
    await s.close()
    for call in (
        lambda: s.produce(MsgPack.of(insert(1, [1]))),
        lambda: s.broadcast(MsgPack.of(insert(1, [1]))),
        lambda: s.as_consumer([channel], "sub"),
        lambda: s.seek([MsgPosition(channel, b"x")]),
        lambda: s.get_latest_msg_id(channel),
        lambda: anext(s),
    ):
        with pytest.raises(StreamClosedError, match="MsgStream is closed"):
            await call()


@pytest.mark.parametrize("batched", [False, True], ids=["one-by-one", "batches"])
async def test_close_wakes_a_waiting_iteration(backend: BackendHarness, batched: bool) -> None:
    s = stream(backend)
    await s.as_consumer([backend.channel()], "sub", EARLIEST, missing="create")
    packs: AsyncIterator[MsgPack] = s.batches() if batched else s
    waiting = asyncio.ensure_future(anext(packs))
    await asyncio.sleep(0.05)
    await s.close()
    with pytest.raises(StopAsyncIteration):
        await asyncio.wait_for(waiting, TIMEOUT)


async def test_consuming_a_channel_that_does_not_exist(backend: BackendHarness) -> None:
    """A missing channel is an error naming it (most often a typo), is waited for with
    ``missing="wait"``, and is created with ``missing="create"``; "error" creates nothing."""
    typo, later, created = backend.channel("typo"), backend.channel("later"), backend.channel()
    async with stream(backend) as s:
        with pytest.raises(TopicNotFoundError) as info:
            await s.as_consumer([typo], "sub", EARLIEST)
        assert info.value.channel == typo
        assert s.consumer_channels == []
        with pytest.raises(TopicNotFoundError):  # nothing was created by the refusal
            await s.check_topic_valid(typo)

    async with stream(backend) as consumer, stream(backend) as producer:
        waiting = asyncio.ensure_future(
            consumer.as_consumer([later], "sub", EARLIEST, missing="wait")
        )
        await asyncio.sleep(0.3)
        assert not waiting.done()
        await producer.as_producer([later])
        await producer.produce(MsgPack.of(insert(1, [7])))
        await asyncio.wait_for(waiting, TIMEOUT)
        pack = await asyncio.wait_for(anext(consumer), TIMEOUT)
        assert [m.msg_id for m in pack.msgs] == [1]

    async with stream(backend) as s:
        await s.as_consumer([created], "sub", EARLIEST, missing="create")
        await s.check_topic_valid(created)


async def test_a_missing_channel_names_the_closest_existing_ones(
    backend: BackendHarness,
) -> None:
    """The backend lists its channels where it finds one missing: the error suggests the
    closest names (a typo is the usual cause), on every path that looks a channel up."""
    real = backend.channel("orders")
    typo = real[:-1] + "x" + real[-1]  # one letter too many
    async with stream(backend) as s:
        await s.as_producer([real])
        await s.produce(MsgPack.of(insert(1, [1])))
        with pytest.raises(TopicNotFoundError) as subscribing:
            await s.as_consumer([typo], "sub", EARLIEST)
        with pytest.raises(TopicNotFoundError) as checking:
            await s.check_topic_valid(typo)
        with pytest.raises(TopicNotFoundError) as asking:
            await s.get_latest_msg_id(typo)
    for info in (subscribing, checking, asking):
        assert info.value.channel == typo
        assert info.value.suggestions[0] == real
        assert f"channel {typo!r} does not exist" in str(info.value)
        assert f"; did you mean {real!r}" in str(info.value)


async def test_latest_msg_id_and_topic_check_through_the_stream(backend: BackendHarness) -> None:
    channel = backend.channel()
    async with stream(backend) as s:
        with pytest.raises(TopicNotFoundError):
            await s.check_topic_valid(channel)
        await s.as_producer([channel])
        await s.check_topic_valid(channel)
        assert await s.get_latest_msg_id(channel) is None
        result = await s.produce(MsgPack.of(insert(1, [1]), insert(2, [2])))
        assert await s.get_latest_msg_id(channel) == result[channel][-1]


async def test_receive_buffer_is_bounded(backend: BackendHarness) -> None:
    channel = backend.channel()
    async with stream(backend) as producer, stream(backend, receive_buffer_size=4) as consumer:
        await producer.as_producer([channel])
        await producer.produce(MsgPack.of(*[insert(i, [i]) for i in range(1, 101)]))
        await consumer.as_consumer([channel], "sub", EARLIEST)
        buffer = consumer._readers[0].buffer
        async with asyncio.timeout(10):  # a broker's first fetch may take a while under load
            while len(buffer) < 4:  # noqa: ASYNC110  (the buffer has no event to await)
                await asyncio.sleep(0.01)
        await asyncio.sleep(0.2)  # the reader had time to read more: it did not
        assert len(buffer) == 4
        assert [m.msg_id for m in await take(consumer, 100)] == list(range(1, 101))


async def test_oversized_message_fails_the_pack_before_anything_is_sent(
    backend: BackendHarness,
) -> None:
    channels = backend.channels(2)
    async with stream(backend, max_message_bytes=600) as producer:
        await producer.as_producer(channels)
        small = DeleteMsg(
            timestamp=1, msg_id=1, collection_name="c", primary_keys=[1], hash_keys=[0]
        )
        big = DeleteMsg(
            timestamp=1, msg_id=2, collection_name="c" * 1000, primary_keys=[2], hash_keys=[1]
        )
        with pytest.raises(MessageTooLargeError) as info:
            await producer.produce(MsgPack.of(small, big))
        assert info.value.channel == channels[1] and info.value.limit == 600
        assert [await producer.get_latest_msg_id(c) for c in channels] == [None, None]


# --------------------------------------------------------------------------- batches()


def delete_on(msg_id: int, channel: int) -> DeleteMsg:
    return DeleteMsg(
        msg_id=msg_id,
        timestamp=1000 + msg_id,
        collection_name="c",
        primary_keys=[msg_id],
        hash_keys=[channel],
    )


def workload(channels: int, count: int) -> list[TsMsg]:
    """``count`` Deletes dealt round the channels, with a tick on each channel after
    every tenth (so a channel's rows change plan now and then)."""
    msgs: list[TsMsg] = []
    for i in range(count):
        msgs.append(delete_on(i, i % channels))
        if i % 10 == 9:
            msgs.append(
                TimeTickMsg(msg_id=10_000 + i, timestamp=1000 + i, hash_keys=[i % channels])
            )
    return msgs


async def collect(packs: AsyncIterator[MsgPack], count: int) -> list[MsgPack]:
    """Packs from ``packs`` until they hold ``count`` messages."""
    got: list[MsgPack] = []
    async with asyncio.timeout(TIMEOUT):
        while sum(len(pack.msgs) for pack in got) < count:
            got.append(await anext(packs))
    return got


def by_channel(msgs: list[TsMsg]) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for msg in msgs:
        assert msg.position is not None
        out.setdefault(msg.position.channel, []).append(msg.msg_id)
    return out


async def test_batches_hand_out_every_message_once_in_its_channels_order(
    backend: BackendHarness,
) -> None:
    channels = backend.channels(3)
    sent = workload(3, 60)
    async with stream(backend) as producer, stream(backend) as consumer:
        await producer.as_producer(channels)
        await producer.produce(MsgPack(msgs=sent))
        await consumer.as_consumer(channels, "sub", EARLIEST)
        packs = await collect(consumer.batches(max_messages=7), len(sent))
    got = [msg for pack in packs for msg in pack.msgs]
    assert len(got) == len(sent)
    expected = {channels[c]: [m.msg_id for m in sent if m.hash_keys == [c]] for c in range(3)}
    assert by_channel(got) == expected
    for pack in packs:
        assert 1 <= len(pack.msgs) <= 7
        runs: dict[str, list[TsMsg]] = {}
        for msg in pack.msgs:
            assert msg.position is not None
            runs.setdefault(msg.position.channel, []).append(msg)
        # A channel's messages stand together in a pack.
        assert sum(len(run) for run in runs.values()) == len(pack.msgs)
        assert [m.position.channel for m in pack.msgs if m.position] == [
            channel for channel, run in runs.items() for _ in run
        ]
        assert pack.start_positions == [run[0].position for run in runs.values()]
        assert pack.end_positions == [run[-1].position for run in runs.values()]
        assert pack.ack_positions == pack.end_positions
        assert pack.begin_ts == min(m.begin_ts for m in pack.msgs)
        assert pack.end_ts == max(m.end_ts for m in pack.msgs)
    originals = {m.msg_id: m for m in sent}
    for msg in got:  # each whole, as sent
        original = originals[msg.msg_id]
        assert (type(msg), msg.timestamp, msg.time_range()) == (
            type(original),
            original.timestamp,
            original.time_range(),
        )
        if isinstance(msg, DeleteMsg):
            assert list(msg.primary_keys) == list(original.primary_keys)  # type: ignore[attr-defined]


async def test_one_at_a_time_then_batches_continue_where_it_stopped(
    backend: BackendHarness,
) -> None:
    channel = backend.channel()
    sent = workload(1, 80)
    async with stream(backend) as producer, stream(backend) as consumer:
        await producer.as_producer([channel])
        await producer.produce(MsgPack(msgs=sent))
        await consumer.as_consumer([channel], "sub", EARLIEST)
        first = [(await asyncio.wait_for(anext(consumer), TIMEOUT)).msgs[0] for _ in range(3)]
        rest = await collect(consumer.batches(max_messages=50), len(sent) - 3)
    ids = [m.msg_id for m in first] + [m.msg_id for pack in rest for m in pack.msgs]
    assert ids == [m.msg_id for m in sent]


async def test_acking_a_batch_resumes_after_its_last_message(backend: BackendHarness) -> None:
    channel = backend.channel()
    sent = [delete_on(i, 0) for i in range(12)]
    async with stream(backend) as producer:
        await producer.as_producer([channel])
        await producer.produce(MsgPack(msgs=sent))
    async with stream(backend) as first:
        await first.as_consumer([channel], "sub", EARLIEST)
        packs = await collect(first.batches(max_messages=5), 5)  # what the reader holds
        taken = [m.msg_id for pack in packs for m in pack.msgs]
        assert taken == list(range(len(taken)))
        await first.ack(packs[-1])
    async with stream(backend) as second:
        await second.as_consumer([channel], "sub", EARLIEST)
        rest = await collect(second.batches(), 12 - len(taken))
        assert [m.msg_id for pack in rest for m in pack.msgs] == list(range(len(taken), 12))


async def test_batches_end_at_the_stops(backend: BackendHarness) -> None:
    channel = backend.channel()
    async with stream(backend) as producer:
        await producer.as_producer([channel])
        await producer.produce(MsgPack(msgs=[delete_on(i, 0) for i in range(9)]))
        stops = {channel: await producer.get_latest_msg_id(channel)}
        await producer.produce(MsgPack(msgs=[delete_on(i, 0) for i in range(9, 12)]))
    async with stream(backend, receive_buffer_size=2) as reader:  # several receives
        await reader.as_consumer([channel], "sub", EARLIEST, stop_at=stops)

        async def drain() -> list[int]:
            return [m.msg_id async for pack in reader.batches(4) for m in pack.msgs]

        assert await asyncio.wait_for(drain(), TIMEOUT) == list(range(9))


async def test_batches_refuse_bad_sizes_and_the_wrong_state(backend: BackendHarness) -> None:
    s = stream(backend)
    with pytest.raises(StreamStateError, match="as_consumer"):
        s.batches()
    await s.as_consumer([backend.channel()], "sub", EARLIEST, missing="create")
    with pytest.raises(ValueError, match="max_messages must be at least 1, got 0"):
        s.batches(0)
    for bad in (True, 2.5, "8"):
        with pytest.raises(TypeError, match="max_messages must be an int"):
            s.batches(bad)  # type: ignore[arg-type]
    await s.close()
    with pytest.raises(StreamClosedError, match="MsgStream is closed"):
        s.batches()
    tt = TtMsgStream(backend.client())
    try:
        with pytest.raises(StreamStateError, match="cut at time ticks"):
            tt.batches()
    finally:
        await tt.close()
