"""Kafka-only behaviour, on a real broker: restarts, bad input, security, disposal.

The broker-neutral contract is in tests/conformance/ (it runs on Kafka too); these tests
cover what only a networked broker has. Every test runs on both engines (``kafka.client``
aiokafka and confluent).
"""

from __future__ import annotations

import asyncio
import gc
import time
import traceback
from collections.abc import Iterator
from typing import Any

import pytest

from brokers.jvm import JvmBroker
from brokers.ports import free_port
from conftest import kafka_config
from msgstream import (
    AuthenticationError,
    BackendUnavailableError,
    ConfigError,
    InvalidChannelNameError,
    MessageTooLargeError,
    MsgPack,
    MsgStream,
    MsgStreamError,
    StreamStateError,
    SubscriptionPosition,
    TopicNotFoundError,
    config_from_dict,
    encode,
    new_client,
)
from msgstream.backends.kafka.producer import RECORD_OVERHEAD
from msgstream.backends.kafka.reader_access import READER_ACCESS
from msgstream.contract.backend import Client
from msgstream.wire.messages import DeleteMsg

pytestmark = pytest.mark.kafka

EARLIEST = SubscriptionPosition.EARLIEST
TIMEOUT = 60.0
"""How long what must happen may take (a deadline, never a pause): a loaded machine is slow."""
_names = iter(range(1_000_000))


def channel_name(prefix: str = "kt") -> str:
    return f"{prefix}-{time.monotonic_ns()}-{next(_names)}"


ENGINES = ["aiokafka", "confluent"]
_engine = {"client": "aiokafka"}


@pytest.fixture(autouse=True, params=ENGINES)
def engine(request: pytest.FixtureRequest) -> Iterator[str]:
    """The engine every client of the test uses (``client_for``); the default again after
    it, since other modules import ``client_for`` too."""
    _engine["client"] = request.param
    yield str(request.param)
    _engine["client"] = "aiokafka"


def client_for(bootstrap: str, **kafka: Any) -> Client:
    kafka.setdefault("client", _engine["client"])
    timeout = kafka.pop("operation_timeout_s", None)
    options = kafka_config(bootstrap, **kafka)
    if timeout is not None:
        options["msgstream"]["operation_timeout_s"] = timeout
    return new_client(config_from_dict(options, env={}))


async def test_one_producer_is_shared_by_every_channel(kafka_broker: Any) -> None:
    client = client_for(kafka_broker.bootstrap)
    first = await client.create_producer(channel_name())
    second = await client.create_producer(channel_name())
    await first.send(b"a")
    await second.send(b"b")
    shared = client._shared.producer  # type: ignore[attr-defined]
    assert shared is not None
    assert await first._shared.get() is shared  # type: ignore[attr-defined]
    assert await second._shared.get() is shared  # type: ignore[attr-defined]
    await client.close()


async def test_unreachable_bootstrap_fails_within_the_deadline() -> None:
    """At the 3 s deadline, not at aiokafka's own (40 s and more); the margin is for a
    loaded machine."""
    client = client_for(f"127.0.0.1:{free_port()}", operation_timeout_s=3.0)
    started = time.monotonic()
    with pytest.raises(BackendUnavailableError, match=r"kafka at 127\.0\.0\.1:\d+"):
        await client.create_producer("never-created")
    assert time.monotonic() - started < 3.0 + 20
    started = time.monotonic()
    with pytest.raises(BackendUnavailableError):
        await client.subscribe("never-created", "sub", EARLIEST)
    assert time.monotonic() - started < 3.0 + 20
    await client.close()


@pytest.mark.parametrize("name", ["a/b", "has space", "x" * 250, ""])
async def test_invalid_topic_names_fail_before_any_network_call(name: str) -> None:
    # The address is unreachable: any network call would fail with another error, once its
    # 3 s deadline had passed.
    client = client_for(f"127.0.0.1:{free_port()}", operation_timeout_s=3.0)
    started = time.monotonic()
    with pytest.raises(InvalidChannelNameError):
        await client.create_producer(name)
    with pytest.raises(InvalidChannelNameError):
        await client.subscribe(name, "sub", EARLIEST)
    with pytest.raises(InvalidChannelNameError):
        await client.check_topic_valid(name)
    assert time.monotonic() - started < 3.0
    await client.close()


async def test_message_over_the_broker_limit_names_size_and_limit(kafka_broker: Any) -> None:
    # The client would accept 8 MiB: the limit that bites is the broker's.
    client = client_for(kafka_broker.bootstrap, max_request_size=8 * 1024 * 1024)
    client.max_message_bytes = 64 * 1024 * 1024  # type: ignore[attr-defined]
    channel = channel_name()
    producer = await client.create_producer(channel)
    size = 2 * 1024 * 1024
    with pytest.raises(MessageTooLargeError) as info:
        await producer.send(b"x" * size)
    assert info.value.channel == channel
    assert info.value.limit == kafka_broker.message_max_bytes
    assert info.value.size >= size
    assert str(kafka_broker.message_max_bytes) in str(info.value)
    # The producer is still usable afterwards.
    assert (await producer.send(b"small")).offset == 0  # type: ignore[attr-defined]
    await client.close()


async def test_headers_that_push_a_record_over_the_limit_fail_its_pack_before_sending(
    kafka_broker: Any,
) -> None:
    """A pack is checked at once, against its largest payload framed with its headers:
    a payload that fits alone but not with the pack's properties fails the whole pack,
    naming the framed size, and nothing of it is sent."""
    limit = 10_000
    client = client_for(kafka_broker.bootstrap, max_request_size=limit)
    channel = channel_name()
    producer = await client.create_producer(channel)
    fits_alone = b"x" * (limit - RECORD_OVERHEAD - 50)
    properties = {"k": "v" * 100}
    with pytest.raises(MessageTooLargeError) as info:
        await producer.send_many([b"small", fits_alone], properties)
    framed = len(fits_alone) + RECORD_OVERHEAD + len("k") + 100 + 8
    assert (info.value.channel, info.value.size, info.value.limit) == (channel, framed, limit)
    ids = await producer.send_many([b"small", fits_alone])  # without the headers it fits
    assert [i.offset for i in ids] == [0, 1]  # type: ignore[attr-defined]
    await client.close()


async def test_wrong_sasl_password_is_an_authentication_error(kafka_broker: Any) -> None:
    if kafka_broker.sasl_bootstrap is None:
        pytest.skip("this broker has no SASL/PLAIN listener")
    user, password = next(iter(kafka_broker.sasl_users.items()))
    good = client_for(
        kafka_broker.sasl_bootstrap,
        security_protocol="SASL_PLAINTEXT",
        sasl_username=user,
        sasl_password=password,
    )
    channel = channel_name()
    producer = await good.create_producer(channel)
    await producer.send(b"authenticated")
    await good.close()

    bad = client_for(
        kafka_broker.sasl_bootstrap,
        security_protocol="SASL_PLAINTEXT",
        sasl_username=user,
        sasl_password=password + "-wrong",
        operation_timeout_s=60.0,
    )
    started = time.monotonic()
    with pytest.raises(AuthenticationError, match="authentication failed"):
        await bad.create_producer(channel)
    assert time.monotonic() - started < 30.0  # the refusal is reported, not waited out
    await bad.close()


async def send_one(client: Client, channel: str) -> None:
    producer = await client.create_producer(channel)
    await producer.send(b"signed in through the pass-through map")


async def test_a_pass_through_password_reaches_the_broker_and_shows_nowhere(
    kafka_broker: Any, engine: str
) -> None:
    """Topics are made as the declared SASL user; the producer signs in as another with the
    name and password of its pass-through map (``kafka.producer`` for aiokafka,
    ``kafka.confluent`` for librdkafka), the password a secret by its name. The broker
    takes the real password (the mask would be refused); a wrong one is refused and no
    text shows either. (librdkafka reports the refusal only in its own log, so the
    confluent engine's send runs out of time; closing the client still lets go of its
    producer, whose threads would otherwise go on signing in for good.)"""
    if kafka_broker.sasl_bootstrap is None or len(kafka_broker.sasl_users) < 2:
        pytest.skip("this broker has no SASL/PLAIN listener with two users")
    (admin, admin_password), (user, password) = list(kafka_broker.sasl_users.items())[:2]
    names = ("sasl_plain_username", "sasl_plain_password")
    if engine == "confluent":
        names = ("sasl.username", "sasl.password")

    def signing_in(secret: str, timeout_s: float) -> Client:
        entries = dict(zip(names, (user, secret), strict=True))
        return client_for(
            kafka_broker.sasl_bootstrap,
            security_protocol="SASL_PLAINTEXT",
            sasl_username=admin,
            sasl_password=admin_password,
            operation_timeout_s=timeout_s,
            **{"confluent" if engine == "confluent" else "producer": entries},
        )

    channel = channel_name()
    good = signing_in(password, TIMEOUT)
    assert password not in repr(good.section)  # type: ignore[attr-defined]
    try:
        await send_one(good, channel)
    finally:
        await good.close()

    before = _live_librdkafka_producers()
    bad = signing_in(f"{password}-wrong-5c1e", 3.0)
    handle = None
    try:
        with pytest.raises(MsgStreamError) as exc:
            await send_one(bad, channel)
        handle = getattr(bad._shared, "producer", None)  # type: ignore[attr-defined]
    finally:
        await bad.close()
    if engine == "confluent":  # destroyed by the close, whoever still refers to it
        with pytest.raises(RuntimeError, match="closed"):
            handle.poll(0)
    del handle
    if engine == "confluent":
        assert isinstance(exc.value, BackendUnavailableError)
        assert "not acknowledged within 3 s" in str(exc.value)
    else:
        assert isinstance(exc.value, AuthenticationError)
        assert "authentication failed" in str(exc.value)
    assert password not in "".join(traceback.format_exception(exc.value))  # wrong one too
    del exc  # its traceback holds the frames of the send, and so the producer
    assert _live_librdkafka_producers() <= before


def _live_librdkafka_producers() -> set[int]:
    """The confluent-kafka producers this process still holds, after a full collection."""
    from confluent_kafka import Producer

    gc.collect()
    return {id(o) for o in gc.get_objects() if isinstance(o, Producer)}


async def test_dispose_subscription_and_channel(kafka_broker: Any) -> None:
    client = client_for(kafka_broker.bootstrap)
    channel = channel_name()
    producer = await client.create_producer(channel)
    await producer.send_many([b"a", b"b", b"c"])
    consumer = await client.subscribe(channel, "disposable", EARLIEST)
    first = await asyncio.wait_for(consumer.receive(), TIMEOUT)
    await consumer.ack(first)
    infos = await client.list_subscriptions(channel)  # type: ignore[attr-defined]
    assert [(i.name, i.lag) for i in infos if i.name == "disposable"] == [("disposable", 2)]
    await consumer.close()

    await client.delete_subscription(channel, "disposable")  # type: ignore[attr-defined]
    again = await client.subscribe(channel, "disposable", SubscriptionPosition.LATEST)
    await producer.send(b"d")
    assert (await asyncio.wait_for(again.receive(), TIMEOUT)).payload == b"d"
    await again.close()

    assert channel in await client.list_channels()  # type: ignore[attr-defined]
    await client.delete_channel(channel)  # type: ignore[attr-defined]
    with pytest.raises(TopicNotFoundError, match=channel):
        await client.check_topic_valid(channel)
    await client.close()


async def test_a_seek_reader_reads_where_it_seeks_and_leaves_no_consumer_group(
    kafka_broker: Any,
) -> None:
    """What a reader that keeps no position (the Spark bridge's planner and tasks, a schema
    lookup) gets from Kafka's reader access: it commits nothing, so no consumer group is
    made for it, nothing needs deleting after, and an acknowledgement is refused."""
    client = client_for(kafka_broker.bootstrap)
    channel = channel_name()
    producer = await client.create_producer(channel)
    ids = await producer.send_many([b"a", b"b", b"c"])
    name = f"seeker-{channel}"
    consumer = await READER_ACCESS.seek_reader(client, channel, name)
    assert consumer.subname == name
    await consumer.seek(ids[1], inclusive=True)
    got = await asyncio.wait_for(consumer.receive(), TIMEOUT)
    assert (got.msg_id, got.payload) == (ids[1], b"b")
    await consumer.seek_to_earliest()
    assert (await asyncio.wait_for(consumer.receive(), TIMEOUT)).payload == b"a"
    with pytest.raises(StreamStateError) as refused:
        await consumer.ack(got)
    assert str(refused.value) == (
        f"cannot acknowledge on channel {channel!r}: reader {name!r} keeps no position "
        "(it reads where it seeks)"
    )
    admin = client.admin  # type: ignore[attr-defined]
    assert name not in await admin.groups()
    assert await admin.committed(name, channel) is None
    await READER_ACCESS.close_seek_reader(client, consumer, name)
    assert await client.list_subscriptions(channel) == []  # type: ignore[attr-defined]
    await client.close()


async def test_a_bad_pass_through_argument_names_its_key(kafka_broker: Any, engine: str) -> None:
    if engine == "confluent":  # librdkafka judges its properties when the config loads
        with pytest.raises(ConfigError, match=r"kafka\.confluent\.no\.such\.option"):
            client_for(kafka_broker.bootstrap, confluent={"no.such.option": 1})
        return
    client = client_for(kafka_broker.bootstrap, producer={"no_such_option": 1})
    producer = await client.create_producer(channel_name())
    with pytest.raises(ConfigError, match=r"kafka\.producer.*no_such_option"):
        await producer.send(b"x")
    await client.close()


def delete_msg(i: int) -> DeleteMsg:
    return DeleteMsg(
        msg_id=i, timestamp=i + 1, collection_name="c", primary_keys=[i], hash_keys=[0]
    )


async def test_broker_restart_loses_nothing_acknowledged(kafka_broker: Any) -> None:
    if not kafka_broker.restartable:
        pytest.skip("this broker cannot be restarted by the tests")
    channel = channel_name("restart")
    acked: list[int] = []
    failed: list[str] = []
    async with (
        MsgStream(client_for(kafka_broker.bootstrap, operation_timeout_s=30.0)) as producer,
        MsgStream(client_for(kafka_broker.bootstrap, operation_timeout_s=30.0)) as consumer,
    ):
        await producer.as_producer([channel])
        await consumer.as_consumer([channel], "restart-sub", EARLIEST)
        for i in range(1, 51):
            await producer.produce(MsgPack.of(delete_msg(i)))
            acked.append(i)

        async def keep_sending() -> None:
            for i in range(51, 101):
                try:
                    await producer.produce(MsgPack.of(delete_msg(i)))
                    acked.append(i)
                except BackendUnavailableError as exc:  # a clear error within the deadline
                    failed.append(str(exc))

        kafka_broker.stop()
        sender = asyncio.create_task(keep_sending())
        await asyncio.sleep(2.0)
        await asyncio.to_thread(kafka_broker.start)
        started = time.monotonic()
        await asyncio.wait_for(sender, 90.0)
        assert time.monotonic() - started < 60.0
        assert all("kafka" in error for error in failed)

        received: list[int] = []
        # Until every acknowledged message is in (not until as many messages are: a send
        # that failed at its deadline may still have been written, and counts too).
        while not set(acked) <= set(received):
            pack = await asyncio.wait_for(anext(consumer), 60.0)
            received.extend(m.msg_id for m in pack.msgs)
        # Every acknowledged message is there, in order; retried sends may add a
        # duplicate of an unacknowledged one, never lose or reorder an acknowledged one.
        assert set(acked) <= set(received)
        positions = [received.index(i) for i in acked]
        assert positions == sorted(positions)


async def test_sends_a_frozen_broker_never_answers_fail_at_the_deadline(
    kafka_broker: Any,
) -> None:
    """A hung broker (SIGSTOP: connections open, nothing answered) fails each kind of send
    with a clear error at ``operation_timeout_s``, and the stream works once it is back."""
    if not isinstance(kafka_broker, JvmBroker):
        pytest.skip("only a broker the tests run themselves can be frozen")
    known, unknown = channel_name("frozen"), channel_name("frozen-new")
    deadline = 0.8  # three sends stay under the test broker's 4 s session timeout
    async with MsgStream(
        client_for(kafka_broker.bootstrap, operation_timeout_s=deadline)
    ) as stream:
        await stream.as_producer([known])
        await stream.produce(MsgPack.of(delete_msg(1)))  # connected, metadata known
        # A second client, connected, but created the topic after its producer started:
        # its send first waits for metadata, before aiokafka holds the record.
        fresh = MsgStream(client_for(kafka_broker.bootstrap, operation_timeout_s=deadline))
        warm_up = await fresh.client.create_producer(known)
        await warm_up.send(encode(delete_msg(0)))
        await fresh.as_producer([unknown])
        kafka_broker.pause()
        try:
            for sender, pack in (
                (stream, MsgPack.of(delete_msg(2))),  # one record: waits for its ack
                (stream, MsgPack(msgs=[delete_msg(3), delete_msg(4)])),  # a record batch
                (fresh, MsgPack.of(delete_msg(5))),  # still fetching metadata
            ):
                started = time.monotonic()
                with pytest.raises(
                    BackendUnavailableError, match=r"not acknowledged within 0\.8 s"
                ):
                    await sender.produce(pack)
                # at the deadline, not at aiokafka's own request timeout (40 s): the
                # margin is for a loaded machine
                assert deadline - 0.05 <= time.monotonic() - started < deadline + 10
        finally:
            await asyncio.to_thread(kafka_broker.resume)
        ids = await asyncio.wait_for(stream.produce(MsgPack.of(delete_msg(6))), TIMEOUT)
        assert list(ids) == [known] and len(ids[known]) == 1
        await fresh.close()


async def test_send_many_spanning_several_record_batches_returns_every_offset(
    kafka_broker: Any,
) -> None:
    client = client_for(kafka_broker.bootstrap)
    channel = channel_name()
    producer = await client.create_producer(channel)
    await producer.send(b"first")
    payloads = [f"{i:04d}".encode() * 25 for i in range(2000)]  # 100 B each: ~13 batches
    ids = await producer.send_many(payloads, {"k": "v"})
    assert [i.offset for i in ids] == list(range(1, 2001))  # type: ignore[attr-defined]
    consumer = await client.subscribe(channel, "sub", EARLIEST)
    received = [await asyncio.wait_for(consumer.receive(), TIMEOUT) for _ in range(2001)]
    assert [m.payload for m in received] == [b"first", *payloads]
    assert [m.msg_id for m in received[1:]] == ids
    assert all(dict(m.properties) == {"k": "v"} for m in received[1:])
    await client.close()


async def test_a_message_id_from_one_engine_is_valid_on_the_other(kafka_broker: Any) -> None:
    """Same channel, same offset: an id written by either engine positions the other."""
    channel = channel_name("cross")
    writer = client_for(kafka_broker.bootstrap, client="aiokafka")
    other = client_for(kafka_broker.bootstrap, client="confluent")
    ids = await (await writer.create_producer(channel)).send_many([b"a", b"b", b"c"])
    more = await (await other.create_producer(channel)).send_many([b"d", b"e"])
    assert [i.offset for i in [*ids, *more]] == [0, 1, 2, 3, 4]  # type: ignore[attr-defined]
    for reader, start in ((other, ids[1]), (writer, more[0])):
        consumer = await reader.subscribe(channel, f"sub-{reader is other}", EARLIEST)
        await consumer.seek(reader.message_id_from_bytes(start.to_bytes()), inclusive=True)
        got = await asyncio.wait_for(consumer.receive(), TIMEOUT)
        assert got.msg_id == start and got.msg_id.to_bytes() == start.to_bytes()
        await consumer.ack(got)
        await consumer.close()
    await writer.close()
    await other.close()


async def test_a_seek_within_the_fetched_end_asks_the_broker_nothing(kafka_broker: Any) -> None:
    """A request for the end offset queues behind the fetch in flight on the consumer's
    connection (up to fetch_max_wait_ms): a seek to an offset the fetches have already
    shown to exist does without it. A seek beyond what they showed still asks and is
    still accepted when the offset exists."""
    client = client_for(kafka_broker.bootstrap)
    channel = channel_name()
    producer = await client.create_producer(channel)
    first = await producer.send_many([b"0", b"1", b"2"])
    consumer = await client.subscribe(channel, "sub", EARLIEST)
    assert [(await consumer.receive()).payload for _ in range(3)] == [b"0", b"1", b"2"]
    inner = consumer._inner  # type: ignore[attr-defined]
    asked: list[int] = []
    end_offset = inner.end_offset

    async def counted() -> int:
        asked.append(await end_offset())
        return asked[-1]

    inner.end_offset = counted
    await consumer.seek(first[1], inclusive=True)
    assert asked == []
    assert (await consumer.receive()).payload == b"1"
    later = await producer.send_many([b"3", b"4", b"5"])
    await consumer.seek(later[2], inclusive=True)
    assert asked in ([], [6])  # [] once a fetch has shown offsets 3-5
    assert (await consumer.receive()).payload == b"5"
    await client.close()


async def test_the_first_offsets_of_a_channel_wait_for_no_retry_backoff(
    kafka_broker: Any,
) -> None:
    """aiokafka answers an offsets request for a topic its metadata does not cover yet by
    sleeping ``retry_backoff_ms``; the client asks for the topic's metadata first. With
    the backoff made longer than the deadline, the call would otherwise time out."""
    client = client_for(kafka_broker.bootstrap, operation_timeout_s=5.0)
    channels = [channel_name(), channel_name()]
    for channel in channels:
        await (await client.create_producer(channel)).send(b"x")
    reader = await client._offsets_reader()  # type: ignore[attr-defined]
    reader._fetcher._retry_backoff = 60.0
    for channel in channels:
        assert (await client.get_latest_msg_id(channel)).offset == 0  # type: ignore[union-attr]
    await client.close()
