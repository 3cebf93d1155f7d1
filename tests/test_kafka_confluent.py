"""The confluent engine's delivery reports, on a real broker: served on the event loop
when librdkafka can signal it (``engines/rdkafka_io.py``), else by a delivery thread;
the same sends and offsets either way. (Everything else the Kafka backend promises runs
on both engines in ``test_kafka_backend.py`` and the conformance suite.)"""

from __future__ import annotations

import asyncio
import ctypes
import threading
from typing import Any

import pytest

from conftest import kafka_config
from msgstream import StreamClosedError, SubscriptionPosition
from msgstream.contract.backend import Client
from test_kafka_backend import TIMEOUT, channel_name, client_for

pytestmark = pytest.mark.kafka

EARLIEST = SubscriptionPosition.EARLIEST


async def _sends_and_reads(client: Client) -> None:
    """One send, a pack, a pack with headers: offsets in order, every payload read back."""
    channel = channel_name("deliveries")
    producer = await client.create_producer(channel)
    first = await asyncio.wait_for(producer.send(b"one"), TIMEOUT)
    pack = await asyncio.wait_for(producer.send_many([b"two", b"three"]), TIMEOUT)
    tagged = await asyncio.wait_for(producer.send_many([b"four"], {"k": "v"}), TIMEOUT)
    offsets = [i.offset for i in [first, *pack, *tagged]]  # type: ignore[attr-defined]
    assert offsets == [0, 1, 2, 3]
    consumer = await client.subscribe(channel, "sub", EARLIEST)
    got = [await asyncio.wait_for(consumer.receive(), TIMEOUT) for _ in range(4)]
    assert [m.payload for m in got] == [b"one", b"two", b"three", b"four"]
    await client.close()


def _delivery_threads() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name == "msgstream-kafka-deliveries"]


async def test_confluent_reports_are_served_on_the_loop(kafka_broker: Any) -> None:
    """With the confluent-kafka this project installs, librdkafka signals the loop itself
    (no delivery thread); a change in the binding that disables it fails here, not only in
    the latency figures."""
    from msgstream.backends.kafka.engines import confluent

    client = client_for(kafka_broker.bootstrap, client="confluent")
    producer = await client.create_producer(channel_name("loop"))
    await asyncio.wait_for(producer.send(b"x"), TIMEOUT)
    assert isinstance(client._shared._pump, confluent._LoopDeliveries)  # type: ignore[attr-defined]
    assert _delivery_threads() == []
    await client.close()
    await _sends_and_reads(client_for(kafka_broker.bootstrap, client="confluent"))


async def test_confluent_queue_events_check_the_handle_they_find(kafka_broker: Any) -> None:
    """The handle read from the binding is used only when librdkafka names it as the
    producer it was built as."""
    from confluent_kafka import Producer

    from msgstream.backends.kafka.engines.rdkafka_io import QueueEvents, attach

    producer = Producer({"bootstrap.servers": kafka_broker.bootstrap, "client.id": "probe"})
    refused = attach(producer, "another")
    assert isinstance(refused, str) and "'probe#producer-" in refused
    events = attach(producer, "probe")
    assert isinstance(events, QueueEvents)
    events.close()


async def test_confluent_delivery_thread_when_the_loop_cannot_be_signalled(
    kafka_broker: Any, monkeypatch: pytest.MonkeyPatch, caplog: Any
) -> None:
    """Where librdkafka's queue events cannot be reached, a delivery thread serves the
    reports and fetch threads the records: same offsets, same reads, said at INFO (the
    producer's once, each reader's as it starts)."""
    from msgstream.backends.kafka.engines import confluent

    monkeypatch.setattr(confluent, "attach", lambda handle, client_id, role="producer": "not here")
    caplog.set_level("INFO", logger=confluent.__name__)
    client = client_for(kafka_broker.bootstrap, client="confluent")
    await _sends_and_reads(client)
    said = [r.getMessage() for r in caplog.records if r.name == confluent.__name__]
    delivery = "kafka confluent engine: delivery reports served by a thread: not here"
    assert said.count(delivery) == 1
    assert set(said) == {delivery, "kafka confluent engine: records fetched by a thread: not here"}
    assert _delivery_threads() == []  # stopped with the client


def test_a_moving_coordinator_is_asked_again_on_both_engines() -> None:
    """librdkafka reports NOT_COORDINATOR on ``committed()`` (a broker that just started
    moves its group coordinator) as not retriable; the confluent engine asks again, as the
    aiokafka engine does, and still fails at once on other broker errors."""
    from confluent_kafka import KafkaError

    from msgstream.backends.kafka.engines.confluent import _worth_retrying

    for code in (
        KafkaError.NOT_COORDINATOR,
        KafkaError.COORDINATOR_NOT_AVAILABLE,
        KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
    ):
        assert _worth_retrying(KafkaError(code))
    assert not _worth_retrying(KafkaError(KafkaError.GROUP_AUTHORIZATION_FAILED))
    assert not _worth_retrying(KafkaError(KafkaError.UNKNOWN_TOPIC_OR_PART))


async def test_a_confluent_reader_seeks_and_closes_while_a_receive_waits(
    kafka_broker: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The confluent reader waits for records on librdkafka's queue signal, with no fetch
    thread blocked in ``poll()``: a seek or a close during a long wait happens at once
    (with a thread, both wait for its poll to come back; both waits are made 120 s here,
    twice the deadline that a seek or a close is given here)."""
    from msgstream.backends.kafka.engines import confluent

    monkeypatch.setattr(confluent, "FETCH_WAIT_S", 120.0)
    monkeypatch.setattr(confluent, "POLL_S", 120.0)
    client = client_for(kafka_broker.bootstrap, client="confluent")
    channel = channel_name()
    producer = await client.create_producer(channel)
    ids = await producer.send_many([b"0", b"1"])
    consumer = await client.subscribe(channel, "sub", SubscriptionPosition.EARLIEST)
    assert [(await consumer.receive()).payload for _ in range(2)] == [b"0", b"1"]
    waiting = asyncio.ensure_future(consumer.receive())
    await asyncio.sleep(0.2)  # the receive now waits for a record that is not there
    await asyncio.wait_for(consumer.seek(ids[1], inclusive=True), TIMEOUT)
    assert (await asyncio.wait_for(waiting, TIMEOUT)).payload == b"1"
    for value in (b"2", b"3", b"4"):  # each record sent while a receive waits wakes it
        waiting = asyncio.ensure_future(consumer.receive())
        await asyncio.sleep(0.1)
        await producer.send(value)
        assert (await asyncio.wait_for(waiting, TIMEOUT)).payload == value
    waiting = asyncio.ensure_future(consumer.receive())
    await asyncio.sleep(0.2)
    await asyncio.wait_for(consumer.close(), TIMEOUT)
    with pytest.raises(StreamClosedError):
        await asyncio.wait_for(waiting, TIMEOUT)
    await client.close()


async def test_a_confluent_reader_without_queue_signals_reads_through_a_thread(
    kafka_broker: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where librdkafka's queue signal cannot be attached (an unknown confluent-kafka
    layout), records come through a fetch thread: same records, seeks and close."""
    from msgstream.backends.kafka.engines import confluent

    monkeypatch.setattr(confluent, "attach", lambda *args: "not attached in this test")
    client = client_for(kafka_broker.bootstrap, client="confluent")
    channel = channel_name()
    producer = await client.create_producer(channel)
    ids = await producer.send_many([b"0", b"1", b"2"])
    consumer = await client.subscribe(channel, "sub", SubscriptionPosition.EARLIEST)
    assert consumer._inner._events is None  # type: ignore[attr-defined]
    assert [(await consumer.receive()).payload for _ in range(3)] == [b"0", b"1", b"2"]
    await consumer.seek(ids[0], inclusive=False)
    assert [(await consumer.receive()).payload for _ in range(2)] == [b"1", b"2"]
    await producer.send(b"3")
    assert (await consumer.receive()).payload == b"3"
    await consumer.close()
    await client.close()


def _queued(consumer: Any) -> int:
    """Records librdkafka holds in ``consumer``'s queue, fetched ahead of the reader (its
    own count, through the library :mod:`.rdkafka_io` reaches)."""
    from msgstream.backends.kafka.engines.rdkafka_io import _library

    lib = _library()
    lib.rd_kafka_queue_length.restype = ctypes.c_size_t
    lib.rd_kafka_queue_length.argtypes = [ctypes.c_void_p]
    rk = ctypes.c_void_p.from_address(id(consumer) + object.__basicsize__).value
    queue = lib.rd_kafka_queue_get_consumer(rk)
    try:
        return int(lib.rd_kafka_queue_length(queue))
    finally:
        lib.rd_kafka_queue_destroy(queue)


async def test_a_confluent_reader_fetches_a_bounded_amount_ahead(kafka_broker: Any) -> None:
    """librdkafka fetches ahead into its own queue, outside msgstream's byte limits; the
    engine's consumer properties bound that to PREFETCH_BYTES (at least one fetch), not
    librdkafka's 64 MiB a channel. A channel holds 24 MB nobody reads: librdkafka stops
    near the bound, and a ``kafka.confluent`` override moves it."""
    from confluent_kafka import Consumer, TopicPartition

    from msgstream import config_from_dict
    from msgstream.backends.kafka.settings import PREFETCH_BYTES, KafkaConfig, librdkafka_consumer

    client = client_for(kafka_broker.bootstrap, client="confluent")
    channel = channel_name("prefetch")
    producer = await client.create_producer(channel)
    record = 4000
    for _ in range(6):
        await asyncio.wait_for(producer.send_many([b"x" * record] * 1000), TIMEOUT)
    await client.close()

    async def settled(extra: dict[str, Any], expected: int | None = None) -> int:
        """What librdkafka's queue holds once it stopped fetching: two looks half a second
        apart agree, or, given ``expected``, it holds that many (60 s at most). A loaded
        machine can pause the fetching for longer than half a second: a count that must
        reach a known number waits for it."""
        options = kafka_config(kafka_broker.bootstrap, client="confluent", confluent=extra)
        conf = librdkafka_consumer(config_from_dict(options, env={}).section(KafkaConfig), "pf")
        consumer = Consumer(conf)
        try:
            consumer.assign([TopicPartition(channel, 0, 0)])
            counts = [-1]
            for _ in range(120):
                await asyncio.sleep(0.5)
                counts.append(_queued(consumer))
                if expected is not None and counts[-1] >= expected:
                    break
                if expected is None and counts[-1] > 0 and counts[-1] == counts[-2]:
                    break
            return counts[-1]
        finally:
            await asyncio.to_thread(consumer.close)

    fetch = 1024 * 1024  # max.partition.fetch.bytes: what librdkafka may overshoot by
    bounded = await settled({})
    # At least one fetch came in; librdkafka stops asking once its queue nears the bound
    # (it may stop a little short of it, or pass it by up to one fetch).
    assert fetch // record <= bounded <= (PREFETCH_BYTES + fetch) // record + 1
    everything = await settled({"queued.max.messages.kbytes": 65536}, expected=6000)
    assert everything >= 6000
